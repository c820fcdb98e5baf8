"""The worker's timing loop (InductorMeasurer._timed_runs) against a fake torch that logs
what would be enqueued on the GPU: no torch needed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from matmul_toolkit_inductor import measure


class FakeTorch:
    """Each enqueued operation is logged; an event pair's elapsed time is the kernel time
    of the calls between its two records."""

    def __init__(self, kernel_ms: float) -> None:
        self.kernel_ms = kernel_ms
        self.log: list[str] = []
        self.int32 = "int32"
        log = self.log
        torch = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.at = -1

            def record(self) -> None:
                self.at = len(log)
                log.append("record")

            def elapsed_time(self, end: Any) -> float:
                return torch.kernel_ms * log[self.at:end.at].count("call")

        class Buffer:
            def zero_(self) -> None:
                log.append("flush")

        self.cuda = SimpleNamespace(
            Event=Event,
            _sleep=lambda cycles: log.append(f"spin {cycles}"),
            synchronize=lambda device=None: log.append("sync"),
            get_device_properties=lambda device: SimpleNamespace(L2_cache_size=50 << 20))
        self._buffer = Buffer

    def empty(self, n: int, dtype: Any, device: Any) -> Any:
        self.log.append(f"buffer {n * 4}")
        return self._buffer()


def measurer(kernel_ms: float, repeat: int) -> tuple[Any, FakeTorch]:
    fake = FakeTorch(kernel_ms)
    m = object.__new__(measure.InductorMeasurer)
    m.torch, m.device, m._repeat, m._flush_buffer = fake, "cuda:0", repeat, None
    return m, fake


def test_every_timed_run_is_flushed_then_covered_then_timed() -> None:
    m, fake = measurer(kernel_ms=0.01, repeat=100)
    samples = m._timed_runs(lambda: fake.log.append("call"))
    assert samples == [0.01] * 100
    # twice the L2 cache, allocated once; a loading run; the sizing run; the timed runs
    assert fake.log[:3] == [f"buffer {100 << 20}", "call", "sync"]
    one_run = ["flush", f"spin {measure.LAUNCH_COVER_CYCLES}", "record", "call", "record"]
    assert fake.log[3:8] == one_run
    assert fake.log[9:14] == one_run and fake.log.count("call") == 1 + 1 + 100


def test_slow_kernels_get_about_25_ms_of_timed_runs() -> None:
    m, fake = measurer(kernel_ms=2.0, repeat=100)
    assert len(m._timed_runs(lambda: fake.log.append("call"))) == 12  # 25 ms / 2 ms
    m, fake = measurer(kernel_ms=40.0, repeat=100)
    assert len(m._timed_runs(lambda: fake.log.append("call"))) == 1
    m, fake = measurer(kernel_ms=0.001, repeat=7)
    assert len(m._timed_runs(lambda: fake.log.append("call"))) == 7
