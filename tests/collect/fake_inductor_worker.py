#!/usr/bin/env python3
"""A stand-in for `python3 -m matmul_toolkit_inductor.worker` (protocol 1, stdlib only).

It measures nothing: times are made up from the problem and the tile, deterministically,
so the C++ tests can check what the parent does with a worker's answers. Its own DEFAULT
list differs from the binary's static one. Misbehaviour on request (environment):
  FAKE_FAIL_CONFIG=bm:bn:bk   that config's entry fails with "compile failed: fake"
  FAKE_CRASH_ON_M=<M>         exits abruptly on a problem with that M
  FAKE_HANG_ON_M=<M>          never answers a problem with that M
  FAKE_ERROR_ON_M=<M>         answers a problem with that M with an error message
  FAKE_HELLO_ERROR=1          answers hello with an error and exits 3
  FAKE_PROTOCOL=<n>           claims protocol n in its hello
  FAKE_LOG=<file>             appends "op M N K search_space pid lock" per measure request
                              (lock: MMT_INDUCTOR_BENCHMARK_LOCK, or -)
  FAKE_NO_BF16=1              answers bfloat16 profile requests with a skip
A `profile` request writes a small Kineto-shaped trace and an execution trace into out_dir.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from typing import Any

# Inductor's own choices as this fake pretends to make them (block_m, block_n, block_k, stages, warps).
OWN_CONFIGS = {
    "DEFAULT": [(32, 32, 16, 1, 2), (128, 64, 32, 3, 4), (64, 128, 64, 4, 8)],
    "EXHAUSTIVE": [(16, 16, 16, 1, 2), (32, 32, 16, 1, 2), (64, 64, 32, 2, 4),
                   (128, 64, 32, 3, 4), (64, 128, 64, 4, 8), (128, 128, 64, 3, 8)],
}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def env_int(name: str) -> int | None:
    value = os.environ.get(name)
    return int(value) if value else None


def own_config(tile: tuple[int, int, int, int, int], problem: dict[str, Any], allow_tf32: bool) -> dict[str, Any]:
    bm, bn, bk, stages, warps = tile
    return {"block_m": bm, "block_n": bn, "block_k": bk, "group_m": 8, "num_stages": stages,
            "num_warps": warps, "even_k": problem["K"] % bk == 0,
            "allow_tf32": allow_tf32 and problem["dtype"] == "float32", "use_fast_accum": False,
            "acc_type": "tl.float32"}


def fake_time(problem: dict[str, Any], config: dict[str, Any] | None) -> float:
    work = problem["B"] * problem["M"] * problem["N"] * problem["K"] / 1e9
    if config is None:
        return round(0.002 + work, 6)
    tiles = config["block_m"] * config["block_n"]
    return round(0.001 + work * (1.0 + 1024.0 / tiles) + config["num_stages"] * 1e-4, 6)


def timed(template: str, config: dict[str, Any] | None, problem: dict[str, Any]) -> dict[str, Any]:
    t = fake_time(problem, config)
    return {"template": template, "config": config, "time_ms": t,
            "samples_ms": [round(t * 1.02, 6), t, round(t * 1.05, 6)]}


def measure(request: dict[str, Any]) -> dict[str, Any]:
    problem = request["problem"]
    m = problem["M"]
    if log := os.environ.get("FAKE_LOG"):
        with open(log, "a") as f:
            lock = os.environ.get("MMT_INDUCTOR_BENCHMARK_LOCK", "-")
            f.write(f"{problem['op']} {m} {problem['N']} {problem['K']} {request['search_space']} "
                    f"{os.getpid()} {lock}\n")
    if env_int("FAKE_CRASH_ON_M") == m:
        os._exit(17)
    if env_int("FAKE_HANG_ON_M") == m:
        while True:
            time.sleep(3600)
    if env_int("FAKE_ERROR_ON_M") == m:
        return {"type": "error", "id": request["id"], "error": "cannot allocate the operands: fake"}
    space = request["search_space"]
    template = "bmm" if problem["op"] == "bmm" else "mm"
    if space is None:
        configs = [(template, c) for c in request["configs"]]
    else:
        configs = [(template, own_config(t, problem, request["allow_tf32"])) for t in OWN_CONFIGS[space]]
        if problem["op"] == "mm":
            configs.append(("persistent_tma", own_config((128, 128, 64, 3, 8), problem, request["allow_tf32"])))
    fail = os.environ.get("FAKE_FAIL_CONFIG", "")
    entries = []
    for name, config in configs:
        tile = f"{config['block_m']}:{config['block_n']}:{config['block_k']}"
        if tile == fail:
            entries.append({"template": name, "config": config, "error": "compile failed: fake"})
        else:
            entries.append(timed(name, config, problem))
    if request["reference"]:
        entries.append(timed("aten", None, problem))
    return {"type": "measure", "id": request["id"], "entries": entries, "compile_seconds": 0.0,
            "benchmark_seconds": 0.0, "autotuned_shape": [problem["B"], m, problem["N"], problem["K"]]}


def profile(request: dict[str, Any]) -> dict[str, Any]:
    problem = request["problem"]
    if problem["dtype"] == "bfloat16" and os.environ.get("FAKE_NO_BF16") == "1":
        return {"type": "profile", "id": request["id"], "skipped": "bfloat16: the fake device has none"}
    steps = (request["wait"] + request["warmup"] + request["active"]) * request["repeat"]
    t = fake_time(problem, None)
    events = [{"name": "aten::mm", "ph": "X", "ts": i * 10.0, "dur": t * 1e3, "pid": 0, "tid": 0}
              for i in range(request["active"] * request["repeat"])]
    with open(os.path.join(request["out_dir"], "fake_host.pt.trace.json"), "w") as f:
        json.dump({"traceEvents": events, "steps": steps}, f)
    with open(os.path.join(request["out_dir"], "CPU_trace.json"), "w") as f:
        json.dump({"schema": "fake", "nodes": []}, f)
    return {"type": "profile", "id": request["id"], "traces": ["fake_host.pt.trace.json"],
            "execution_trace": "CPU_trace.json", "time_ms": t, "kernel": "aten::mm"}


def main() -> int:
    hello = json.loads(sys.stdin.readline() or "{}")
    if os.environ.get("FAKE_HELLO_ERROR") == "1":
        send({"type": "error", "error": "torch is not importable: fake"})
        return 3
    if hello.get("type") != "hello" or hello.get("protocol") != 1:
        send({"type": "error", "error": f"protocol {hello.get('protocol')} is not spoken here (1 is)"})
        return 3
    send({"type": "hello", "protocol": env_int("FAKE_PROTOCOL") or 1,
          "hardware": f"Fake GPU {hello.get('device_index', 0)}", "sm_count": 4,
          "versions": {"python": platform.python_version(), "torch": "2.11.0+fake", "triton": "3.6.0+fake",
                       "timing": os.environ.get("FAKE_TIMING", "fake events")}})
    print("fake inductor worker ready", file=sys.stderr)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("type") == "profile":
            send(profile(request))
            continue
        if request.get("type") != "measure":
            send({"type": "error", "id": request.get("id"), "error": f"unknown request {request.get('type')}"})
            continue
        send(measure(request))
    return 0


if __name__ == "__main__":
    sys.exit(main())
