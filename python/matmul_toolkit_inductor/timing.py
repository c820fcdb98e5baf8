"""Timing a GPU call the way a kernel runs inside a CUDA graph: without the host's launch.

Inductor's benchmarker records a CUDA event, launches the call and records another, one run
at a time, so the GPU waits for the host's launch inside every timed span. A kernel of a few
microseconds is then timed as that launch. On a host busy compiling, cuBLAS calls, whose host
path is longer, were timed at 4 times their in-graph time (docs/experiments/2026-12-01-whole-models.md).
GatedTimer enqueues a group of timed runs behind a GPU spin that outlasts the host's
enqueueing, keeps Inductor's L2 flush before each run and its budget of about 25 ms of runs,
and times again a group that ran under a low SM clock.

    timer = GatedTimer(torch, torch.device("cuda", 0))
    samples_ms = timer.timed_runs(lambda: torch.mm(a, b))
    with gated_benchmarks():            # Inductor's autotuning times its choices this way
        torch.compile(model, mode="max-autotune")(x)
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any, Callable, Iterator, Optional

# Timed runs are enqueued in groups behind a GPU spin (the gate) that outlasts the host's
# enqueueing of the whole group, so no run waits for the host: a run that did would time
# the host's launch too (tens of microseconds for a Triton kernel, more on busy cores:
# mm 4096x361x32 fp16 took 11.1 us that way against 5.6, bench/timing_noise.py).
GATED_RUNS = 25
# The gate lasts this many times the host's last measured enqueueing time of a group, and
# at least GATE_MIN_MS; a gate that opened too soon is retried, longer, up to GATE_ATTEMPTS
# times.
GATE_MARGIN = 2.0
GATE_MIN_MS = 0.2
GATE_ATTEMPTS = 5
# Host milliseconds to enqueue one run, assumed until the first group is measured.
FIRST_ENQUEUE_MS = 0.1
# Spin cycles per millisecond: the H100's and H200's top SM clock (1.98 GHz) rounded up, so
# a gate lasts at least as long as asked.
SPIN_CYCLES_PER_MS = 2_000_000
# The SM clock while a group runs, read from short spins' own times (cycles over elapsed
# time) before and after it: the GPU idles at 345 MHz while a problem compiles, and another
# worker's context taking its turn on the GPU reads as a clock far below that. A group read
# under CLOCK_FLOOR of the top clock (the device's, or the highest read) is timed again after
# the GPU has spun for the next of CLOCK_WAITS_MS; still slow after the last: an error.
CLOCK_FLOOR = 0.75
CLOCK_WAITS_MS = (5.0, 20.0, 80.0, 320.0)
# The spins before and after a group that read the clock: about 20 us each at 1.98 GHz.
CLOCK_PROBE_CYCLES = 40_000
# Timed runs per choice stop after about this many milliseconds of kernel time, as
# Inductor's benchmarker does (its max_benchmark_duration).
TIMED_BUDGET_MS = 25.0


class SlowClockError(RuntimeError):
    """The SM clock stayed under CLOCK_FLOOR of its top through every wait: the times would
    be another context's or a throttled GPU's, not the kernel's."""


class GatedTimer:
    """Timed runs of calls on one GPU (see the module doc); counts what it had to redo."""

    def __init__(self, torch: Any, device: Any, repeat: int = 100) -> None:
        self.torch = torch
        self.device = device
        self.repeat = repeat  # timed runs per call at most
        self.flush_buffer: Optional[Any] = None
        self.enqueue_ms_per_run = FIRST_ENQUEUE_MS
        # Groups of timed runs enqueued again because the host was slower than their gate.
        self.gates_reopened = 0
        # The highest SM clock known (the device's top clock where torch reports it, kHz),
        # and the groups timed again under a slow clock, the slowest seen.
        self.top_clock_mhz = float(getattr(torch.cuda.get_device_properties(device), "clock_rate", 0)) / 1000
        self.slow_clock_groups = 0
        self.slowest_clock_mhz = math.inf

    def timed_runs(self, call: Callable[[], Any]) -> list[float]:
        """Milliseconds of up to `self.repeat` timed runs of `call` (about 25 ms of them),
        after one untimed run that loads the kernel and one that sizes the rest. They are
        taken as Inductor's benchmarker takes them (L2 flushed before each run, CUDA events
        around the call), except that the host enqueues them all before the GPU starts the
        first (gated_runs). Inductor's benchmarker lets the GPU wait for the host's launch
        of each call inside the timed span: a microsecond kernel is then timed as that gap,
        and on a host busy compiling every config of a problem is timed tens of
        microseconds slow."""
        torch = self.torch
        if self.flush_buffer is None:  # twice the L2 cache (the H100's and H200's: 50 MB)
            l2_bytes = int(getattr(torch.cuda.get_device_properties(self.device), "L2_cache_size", 0)) or 64 << 20
            self.flush_buffer = torch.empty(2 * l2_bytes // 4, dtype=torch.int32, device=self.device)
        call()
        torch.cuda.synchronize(self.device)
        estimate = self.clocked_runs(call, 1)[0]
        # Inductor's budget: about 25 ms of timed runs, at most `repeat` of them.
        runs = max(1, min(self.repeat, int(TIMED_BUDGET_MS / max(estimate, 1e-6))))
        samples: list[float] = []
        while len(samples) < runs:
            samples += self.clocked_runs(call, min(GATED_RUNS, runs - len(samples)))
        return samples

    def clocked_runs(self, call: Callable[[], Any], runs: int) -> list[float]:
        """gated_runs, again after a wait while the SM clock read around them is under
        CLOCK_FLOOR of the top clock."""
        for wait_ms in (*CLOCK_WAITS_MS, None):
            samples, clock_mhz = self.gated_runs(call, runs)
            self.top_clock_mhz = max(self.top_clock_mhz, clock_mhz)
            if clock_mhz >= CLOCK_FLOOR * self.top_clock_mhz:
                return samples
            self.slow_clock_groups += 1
            self.slowest_clock_mhz = min(self.slowest_clock_mhz, clock_mhz)
            if wait_ms is not None:
                self.torch.cuda._sleep(int(wait_ms * SPIN_CYCLES_PER_MS))
        raise SlowClockError(f"timing: the GPU's SM clock stayed at {clock_mhz:.0f} MHz, under "
                             f"{CLOCK_FLOOR:.0%} of its top {self.top_clock_mhz:.0f} MHz")

    def gated_runs(self, call: Callable[[], Any], runs: int) -> tuple[list[float], float]:
        """`runs` timed runs enqueued behind a GPU spin (the gate), and the lower of the SM
        clocks (MHz) read from short spins before and after them. The times are kept once the
        host has enqueued the runs and the short spins before the gate opened (an event
        recorded after it had not completed then), else they are enqueued again behind a
        longer gate."""
        torch = self.torch
        flush_buffer = self.flush_buffer
        assert flush_buffer is not None, "timed_runs allocates the flush buffer first"

        def timing_event() -> Any:
            return torch.cuda.Event(enable_timing=True)

        for _ in range(GATE_ATTEMPTS):
            gate_ms = max(GATE_MIN_MS, GATE_MARGIN * runs * self.enqueue_ms_per_run)
            gate_cycles = int(gate_ms * SPIN_CYCLES_PER_MS)
            starts = [timing_event() for _ in range(runs)]
            ends = [timing_event() for _ in range(runs)]
            probes = [(timing_event(), timing_event()) for _ in range(2)]
            opened = torch.cuda.Event()

            def probe(events: tuple[Any, Any]) -> None:
                events[0].record()
                torch.cuda._sleep(CLOCK_PROBE_CYCLES)
                events[1].record()

            torch.cuda._sleep(gate_cycles)
            opened.record()
            begin = time.perf_counter()
            probe(probes[0])
            for start, end in zip(starts, ends):
                flush_buffer.zero_()
                start.record()
                call()
                end.record()
            probe(probes[1])
            enqueue_ms = (time.perf_counter() - begin) * 1000
            covered = not opened.query()
            torch.cuda.synchronize(self.device)
            self.enqueue_ms_per_run = enqueue_ms / runs
            if covered:  # the probes too were enqueued before the gate opened: GPU time only
                clock_mhz = min(CLOCK_PROBE_CYCLES / (1000 * max(a.elapsed_time(b), 1e-9)) for a, b in probes)
                return [float(start.elapsed_time(end)) for start, end in zip(starts, ends)], clock_mhz
            self.gates_reopened += 1
        raise RuntimeError(f"timing: the host took longer to enqueue {runs} timed runs than a "
                           f"{gate_ms:.1f} ms GPU spin, {GATE_ATTEMPTS} times")


@contextlib.contextmanager
def gated_benchmarks(device_index: Optional[int] = None) -> Iterator[GatedTimer]:
    """Inductor's benchmarker times every call it is asked the minimum time of (its
    autotuning of choices) with a GatedTimer while the block runs; other calls, and every
    call after the block, keep Inductor's own timing."""
    import torch
    from torch._inductor.runtime import benchmarking

    device = torch.device("cuda", torch.cuda.current_device() if device_index is None else device_index)
    timer = GatedTimer(torch, device)
    bench = benchmarking.benchmarker
    original = bench.benchmark_gpu

    def benchmark_gpu(_callable: Callable[[], Any], **kwargs: Any) -> Any:
        if kwargs.get("return_mode", "min") != "min":
            return original(_callable, **kwargs)
        return min(timer.timed_runs(_callable))

    bench.benchmark_gpu = benchmark_gpu
    try:
        yield timer
    finally:
        bench.benchmark_gpu = original
