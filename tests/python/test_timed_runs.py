"""The worker's timing loop (timing.GatedTimer, InductorMeasurer's) against a fake torch that logs
what would be enqueued on the GPU and runs a spin as a span of host time at a given SM
clock: no torch needed. The host's clock is a fake too, so that a loaded machine (CI's
sanitizer stage) cannot open a gate early: every enqueued operation takes the host
HOST_OP_S, and a slow host is one that calls clock.sleep."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from matmul_toolkit_inductor import timing


HOST_OP_S = 1e-6


class HostClock:
    """The host's time, advanced only by the fake's operations and sleep()."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


clock = HostClock()


@pytest.fixture(autouse=True)
def fake_host_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    clock.now = 0.0
    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=clock.perf_counter))


class FakeLog(list[str]):
    """The log of enqueued operations; each one takes the host HOST_OP_S."""

    def append(self, item: str) -> None:
        clock.sleep(HOST_OP_S)
        super().append(item)


class FakeTorch:
    """Each enqueued operation is logged. The GPU is idle but for spins: a spin runs from
    its enqueueing for its cycles at the SM clock (clock_mhz, or slow_spins' clock for the
    spins of those indices), and an event recorded after it completes when the spin ends
    (or at once, with gpu_never_waits). An event pair's elapsed time is the kernel time of
    the calls between its two records plus the spins between them."""

    def __init__(self, kernel_ms: float) -> None:
        self.kernel_ms = kernel_ms
        self.log: list[str] = FakeLog()
        self.spins_ms: list[float] = []
        self.spin_ms_at: dict[int, float] = {}
        self.clock_mhz = 1980.0
        self.slow_spins: dict[int, float] = {}
        self.spin_end = 0.0
        self.gpu_never_waits = False
        self.int32 = "int32"
        log = self.log
        torch = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.at = -1
                self.done_at = 0.0

            def record(self) -> None:
                self.at = len(log)
                self.done_at = torch.spin_end
                log.append("record")

            def query(self) -> bool:
                return torch.gpu_never_waits or clock.perf_counter() >= self.done_at

            def elapsed_time(self, end: Any) -> float:
                spins = sum(ms for at, ms in torch.spin_ms_at.items() if self.at < at < end.at)
                return torch.kernel_ms * log[self.at:end.at].count("call") + spins

        class Buffer:
            def zero_(self) -> None:
                log.append("flush")

        def spin(cycles: int) -> None:
            sm_clock_mhz = self.slow_spins.get(len(self.spins_ms), self.clock_mhz)
            ms = cycles / (sm_clock_mhz * 1000)
            self.spins_ms.append(ms)
            self.spin_ms_at[len(log)] = ms
            self.spin_end = clock.perf_counter() + ms / 1000
            log.append("spin")

        self.cuda = SimpleNamespace(
            Event=Event, _sleep=spin,
            synchronize=lambda device=None: log.append("sync"),
            get_device_properties=lambda device: SimpleNamespace(L2_cache_size=50 << 20))
        self._buffer = Buffer

    def empty(self, n: int, dtype: Any, device: Any) -> Any:
        self.log.append(f"buffer {n * 4}")
        return self._buffer()


def measurer(kernel_ms: float, repeat: int) -> tuple[Any, FakeTorch]:
    fake = FakeTorch(kernel_ms)
    return timing.GatedTimer(fake, "cuda:0", repeat), fake


def group(runs: int) -> list[str]:
    """What one group of timed runs enqueues: the gate and the event after it, a clock
    probe between two events, every run flushed and timed, another clock probe, the wait
    for all of it."""
    probe = ["record", "spin", "record"]
    return ["spin", "record", *probe, *["flush", "record", "call", "record"] * runs, *probe, "sync"]


def test_timed_runs_are_enqueued_in_groups_behind_a_spin() -> None:
    m, fake = measurer(kernel_ms=0.01, repeat=100)
    samples = m.timed_runs(lambda: fake.log.append("call"))
    assert samples == [0.01] * 100
    # twice the L2 cache, allocated once; a loading run; the sizing run behind its own gate
    assert fake.log[:3] == [f"buffer {100 << 20}", "call", "sync"]
    assert fake.log[3:3 + len(group(1))] == group(1)
    # then the 100 timed runs, 25 behind each gate
    assert fake.log[3 + len(group(1)):] == group(timing.GATED_RUNS) * 4
    assert m.gates_reopened == 0 and m.slow_clock_groups == 0
    assert m.top_clock_mhz == pytest.approx(1980, rel=1e-6)


def test_a_gate_that_opened_too_soon_is_enqueued_again_behind_twice_the_hosts_time() -> None:
    m, fake = measurer(kernel_ms=0.01, repeat=10)

    def slow_call() -> None:  # a host that takes 2 ms to launch each call
        clock.sleep(0.002)
        fake.log.append("call")

    samples = m.timed_runs(slow_call)
    assert samples == [0.01] * 10
    gates = fake.spins_ms[0::3]  # each group's gate, then its two clock probes
    # the sizing run's first gate (0.2 ms) opened before its call was enqueued; the next
    # lasts twice the 2+ ms the host took
    assert m.gates_reopened >= 1
    assert gates[0] == pytest.approx(timing.GATE_MIN_MS * timing.SPIN_CYCLES_PER_MS / 1980e3)
    assert gates[1] >= 2 * 2.0
    # the ten timed runs' gate: twice the last measured 2+ ms per run, all ten
    assert gates[-1] >= 2 * 10 * 2.0
    assert fake.log[-len(group(10)):] == group(10)


def test_a_group_timed_under_a_slow_clock_is_timed_again_after_a_wait() -> None:
    m, fake = measurer(kernel_ms=0.01, repeat=10)
    fake.slow_spins = {4: 345.0, 5: 345.0}  # the ten runs' clock probes: the idle clock
    samples = m.timed_runs(lambda: fake.log.append("call"))
    assert samples == [0.01] * 10
    assert m.slow_clock_groups == 1 and m.slowest_clock_mhz == pytest.approx(345, rel=1e-6)
    wait = timing.CLOCK_WAITS_MS[0] * timing.SPIN_CYCLES_PER_MS / 1980e3
    sizing = 3 + len(group(1))
    assert fake.log[sizing:] == group(10) + ["spin"] + group(10)
    assert fake.spins_ms[6] == pytest.approx(wait)
    # a clock a little under the top is no reason to time again
    m, fake = measurer(kernel_ms=0.01, repeat=10)
    fake.slow_spins = {5: 1700.0}
    m.timed_runs(lambda: fake.log.append("call"))
    assert m.slow_clock_groups == 0


def test_a_clock_that_stays_slow_is_an_error() -> None:
    m, fake = measurer(kernel_ms=0.01, repeat=10)
    fake.slow_spins = {i: 900.0 for i in range(3, 100)}
    with pytest.raises(timing.SlowClockError, match="SM clock stayed at 900 MHz, under 75% of its top 1980 MHz"):
        m.timed_runs(lambda: fake.log.append("call"))
    assert m.slow_clock_groups == len(timing.CLOCK_WAITS_MS) + 1


def test_a_host_that_never_gets_ahead_of_the_gpu_is_an_error() -> None:
    m, fake = measurer(kernel_ms=0.01, repeat=10)
    fake.gpu_never_waits = True
    with pytest.raises(RuntimeError, match="host took longer to enqueue 1 timed runs"):
        m.timed_runs(lambda: fake.log.append("call"))
    assert m.gates_reopened == timing.GATE_ATTEMPTS


def test_slow_kernels_get_about_25_ms_of_timed_runs() -> None:
    m, fake = measurer(kernel_ms=2.0, repeat=100)
    assert len(m.timed_runs(lambda: fake.log.append("call"))) == 12  # 25 ms / 2 ms
    m, fake = measurer(kernel_ms=40.0, repeat=100)
    assert len(m.timed_runs(lambda: fake.log.append("call"))) == 1
    m, fake = measurer(kernel_ms=0.001, repeat=7)
    assert len(m.timed_runs(lambda: fake.log.append("call"))) == 7


def test_gated_benchmarks_time_inductors_min_benchmarks_and_put_its_benchmarker_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    fake = FakeTorch(kernel_ms=0.005)
    fake.cuda.current_device = lambda: 0
    fake.device = lambda kind, index: f"{kind}:{index}"  # type: ignore[attr-defined]
    calls: list[str] = []

    def inductors_own(_callable: Any, **kwargs: Any) -> float:
        calls.append(kwargs.get("return_mode", "min"))
        return 1.0

    benchmarker = types.SimpleNamespace(benchmark_gpu=inductors_own)
    benchmarking = types.SimpleNamespace(benchmarker=benchmarker)
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setitem(sys.modules, "torch._inductor", types.ModuleType("torch._inductor"))
    monkeypatch.setitem(sys.modules, "torch._inductor.runtime", types.SimpleNamespace(benchmarking=benchmarking))
    monkeypatch.setitem(sys.modules, "torch._inductor.runtime.benchmarking", benchmarking)
    with timing.gated_benchmarks() as timer:
        # a call of 5 us whose launch the host takes 1 ms for: timed as the kernel alone
        assert benchmarker.benchmark_gpu(lambda: (clock.sleep(0.001), fake.log.append("call"))) == 0.005
        assert benchmarker.benchmark_gpu(lambda: None, return_mode="all") == 1.0
        assert timer.device == "cuda:0"
    assert calls == ["all"] and benchmarker.benchmark_gpu is inductors_own
