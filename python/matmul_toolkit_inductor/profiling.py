"""One `profile` request: a problem's eager PyTorch op under torch.profiler.

The operands are built as for `measure` (seeded; int8 is torch._int_mm). The op runs once
per profiler step, (wait + warmup + active) x repeat steps under torch.profiler's schedule;
each finished cycle is exported as a Kineto trace (`<host>_<step>.pt.trace.json`, opens in
Perfetto), and an ExecutionTraceObserver writes the Chakra execution trace `CPU_trace.json`
for the whole run. The reply names the files and gives the op's mean device time over the
traced steps (from the profiler's events, in ms).
"""

from __future__ import annotations

import os
import socket
from typing import Any

EXECUTION_TRACE = "CPU_trace.json"


def _device_time_us(event: Any) -> float:
    # torch >= 2.4 names it device_time_total; older releases cuda_time_total.
    for name in ("device_time_total", "cuda_time_total"):
        value = getattr(event, name, None)
        if value is not None:
            return float(value)
    return 0.0


def profile_problem(measurer: Any, request: dict[str, Any]) -> dict[str, Any]:
    torch = measurer.torch
    problem = request["problem"]
    out_dir = request["out_dir"]
    wait, warmup = int(request.get("wait", 1)), int(request.get("warmup", 1))
    active, repeat = int(request.get("active", 3)), int(request.get("repeat", 1))
    if problem["dtype"] == "bfloat16" and not torch.cuda.is_bf16_supported():
        return {"skipped": f"bfloat16: {torch.cuda.get_device_name(measurer.device)} has no bfloat16 support"}
    os.makedirs(out_dir, exist_ok=True)

    operands = measurer._operands(problem, int(request.get("seed", 0)))
    function = measurer._function(problem)
    host = socket.gethostname().replace(os.sep, "_") or "host"
    traces: list[str] = []

    def export(prof: Any) -> None:
        name = f"{host}_{prof.step_num}.pt.trace.json"
        prof.export_chrome_trace(os.path.join(out_dir, name))
        traces.append(name)

    from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile, schedule

    execution_trace = os.path.join(out_dir, EXECUTION_TRACE)
    observer = ExecutionTraceObserver().register_callback(execution_trace)
    steps = (wait + warmup + active) * repeat
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=repeat),
                 on_trace_ready=export, record_shapes=True, execution_trace_observer=observer) as prof:
        for _ in range(steps):
            function(*operands)
            torch.cuda.synchronize(measurer.device)
            prof.step()

    # The op's own event (aten::mm, aten::bmm, aten::_int_mm): its device time per call.
    op_names = {"mm": "aten::mm", "bmm": "aten::bmm", "addmm": "aten::addmm"}
    wanted = "aten::_int_mm" if problem["dtype"] == "int8" else op_names[problem["op"]]
    time_ms = None
    for event in prof.key_averages():
        if event.key == wanted and event.count > 0:
            time_ms = _device_time_us(event) / event.count / 1e3
    reply: dict[str, Any] = {"traces": traces, "time_ms": time_ms, "kernel": wanted, "steps": steps}
    if os.path.isfile(execution_trace):
        reply["execution_trace"] = EXECUTION_TRACE
    else:
        reply["execution_trace_note"] = "torch.profiler's ExecutionTraceObserver wrote no file"
    return reply
