"""The worker's protocol loop (worker.serve) with a fake measurer: no torch needed."""

from __future__ import annotations

import io
import json
from typing import Any

from matmul_toolkit_inductor import protocol, worker


class FakeMeasurer:
    def __init__(self, device_index: int) -> None:
        self.device_index = device_index

    def hello(self) -> dict[str, Any]:
        return {"hardware": "Fake GPU", "sm_count": 4, "versions": {"torch": "0"}}

    def measure(self, request: dict[str, Any]) -> dict[str, Any]:
        if request["problem"]["M"] == 13:
            raise RuntimeError("the compile broke\nsecond line")
        return {"entries": [{"template": "aten", "config": None, "time_ms": 1.5, "samples_ms": [1.5]}],
                "compile_seconds": 0.0, "benchmark_seconds": 0.0, "autotuned_shape": None}

    def profile(self, request: dict[str, Any]) -> dict[str, Any]:
        return {"traces": [f"h_{request['active']}.pt.trace.json"], "time_ms": 0.5, "kernel": "aten::mm"}


def problem(m: int = 64) -> dict[str, Any]:
    return {"op": "mm", "layout": "nn", "B": 1, "M": m, "N": 64, "K": 64, "dtype": "bfloat16"}


def run(messages: list[dict[str, Any]], factory: Any = FakeMeasurer) -> tuple[int, list[dict[str, Any]]]:
    requests = io.StringIO("".join(json.dumps(m) + "\n" for m in messages))
    replies = io.StringIO()
    code = worker.serve(requests, replies, factory)
    return code, [json.loads(line) for line in replies.getvalue().splitlines()]


def test_hello_then_one_reply_per_request_with_its_id() -> None:
    code, replies = run([{"type": "hello", "protocol": protocol.PROTOCOL_VERSION, "device_index": 2},
                         {"type": "measure", "id": 5, "problem": problem()},
                         {"type": "measure", "id": 6, "problem": problem()}])
    assert code == 0
    assert replies[0] == {"type": "hello", "protocol": 1, "hardware": "Fake GPU", "sm_count": 4,
                          "versions": {"torch": "0"}}
    assert [r["id"] for r in replies[1:]] == [5, 6]
    assert replies[1]["entries"][0]["time_ms"] == 1.5


def test_a_failing_problem_is_answered_with_its_first_error_line_and_the_worker_goes_on() -> None:
    code, replies = run([{"type": "hello", "protocol": 1},
                         {"type": "measure", "id": 1, "problem": problem(13)},
                         {"type": "measure", "id": 2, "problem": problem()}])
    assert code == 0
    assert replies[1] == {"type": "error", "id": 1, "error": "RuntimeError: the compile broke"}
    assert replies[2]["type"] == "measure"


def test_bad_requests_are_refused_one_by_one() -> None:
    bad_problem = dict(problem(), op="conv")
    int8_addmm = dict(problem(), op="addmm", dtype="int8")
    bad_config = {"block_m": 0, "block_n": 64, "block_k": 32, "group_m": 8, "num_stages": 2, "num_warps": 4}
    code, replies = run([{"type": "hello", "protocol": 1},
                         {"type": "measure", "id": 1, "problem": bad_problem},
                         {"type": "measure", "id": 2, "problem": problem(), "configs": [bad_config]},
                         {"type": "explode", "id": 3},
                         {"type": "measure", "id": 4, "problem": int8_addmm}])
    assert code == 0
    assert replies[1]["error"] == "bad request: unknown op 'conv'"
    assert replies[2]["error"].startswith("bad request: config field block_m")
    assert replies[3] == {"type": "error", "id": 3, "error": "unknown request type 'explode'"}
    assert replies[4]["error"] == "bad request: int8 is torch._int_mm: mm only, got addmm"


def test_profile_requests_are_checked_and_answered_as_profile() -> None:
    hello = {"type": "hello", "protocol": protocol.PROTOCOL_VERSION}
    steps = {"out_dir": "/tmp/x", "wait": 1, "warmup": 0, "active": 2, "repeat": 1}
    code, replies = run([hello, {"type": "profile", "id": 1, "problem": problem(), **steps},
                         {"type": "profile", "id": 2, "problem": problem(), **dict(steps, active=0)},
                         {"type": "profile", "id": 3, "problem": problem(), **dict(steps, out_dir="")}])
    assert code == 0
    assert replies[1] == {"type": "profile", "id": 1, "traces": ["h_2.pt.trace.json"], "time_ms": 0.5,
                          "kernel": "aten::mm"}
    assert replies[2]["error"] == "bad request: active must be an integer >= 1, got 0"
    assert replies[3]["error"] == "bad request: a profile request needs out_dir, a folder"


def test_another_protocol_or_no_hello_is_refused() -> None:
    code, replies = run([{"type": "hello", "protocol": 2}])
    assert code == 2 and "protocol 2" in replies[0]["error"]
    code, replies = run([{"type": "measure", "id": 1, "problem": problem()}])
    assert code == 2 and replies[0]["error"] == "the first message must be hello"


def test_a_measurer_that_cannot_start_answers_the_hello_with_its_error() -> None:
    def no_torch(device_index: int) -> Any:
        raise ModuleNotFoundError("No module named 'torch'")

    code, replies = run([{"type": "hello", "protocol": 1}], factory=no_torch)
    assert code == worker.EXIT_NO_TORCH
    assert replies == [{"type": "error", "error": "ModuleNotFoundError: No module named 'torch'"}]


def test_benchmark_lock_is_one_gpu_turn_at_a_time(tmp_path: Any, monkeypatch: Any) -> None:
    import fcntl
    import os

    from matmul_toolkit_inductor.measure import BenchmarkLock, benchmark_lock_path

    monkeypatch.delenv("MMT_INDUCTOR_BENCHMARK_LOCK", raising=False)
    assert benchmark_lock_path(0) is None
    monkeypatch.setenv("MMT_INDUCTOR_BENCHMARK_LOCK", str(tmp_path / "bench"))
    path = benchmark_lock_path(1)
    assert path == str(tmp_path / "bench.gpu1")

    lock = BenchmarkLock(path)
    lock.acquire()
    lock.acquire()  # re-entrant within one problem
    assert lock.held
    other = os.open(path, os.O_RDWR)
    try:
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            taken = True
        except BlockingIOError:
            taken = False
        assert not taken, "a second worker took the GPU while the first benchmarked"
        lock.release()
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free after release
    finally:
        os.close(other)
    BenchmarkLock(None).acquire()  # no path: a no-op
