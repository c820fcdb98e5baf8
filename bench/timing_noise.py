#!/usr/bin/env python3
"""Do the Inductor worker's times of GEMMs hold when the host is busy? (GPU machine.)

    python3 bench/timing_noise.py [--rounds 1] [--out DIR]

Measures a few GEMMs (DEFAULT configs) with the worker's own measurer
(python/matmul_toolkit_inductor/measure.py), --rounds times with each way of taking the
timed runs: `worker` (the worker's: groups of runs enqueued behind a GPU spin that outlasts
the host's enqueueing, timed again while the SM clock read from the spins is slow), `spin`
(the previous version: a 100,000-cycle spin between each run's L2 flush and its start
event) and `plain` (Inductor's benchmarker: each run as the host launches it); first on
idle cores, then with two busy-loop processes per core (as while another worker compiles).
Prints each measurement's fastest config, the minimum, median and maximum config time in
microseconds, the host's milliseconds to enqueue one run and the lowest SM clock read
around a group of runs (for `worker`: of the groups kept, and how many were timed again);
writes DIR/timing_noise.json with every config's time.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

PROBLEMS = [
    {"op": "mm", "B": 1, "M": 4096, "N": 361, "K": 32, "dtype": "float16"},
    {"op": "mm", "B": 1, "M": 1822, "N": 32, "K": 518, "dtype": "bfloat16"},
    {"op": "bmm", "B": 2, "M": 4096, "N": 32, "K": 81, "dtype": "float16"},
    {"op": "addmm", "B": 1, "M": 1038, "N": 1936, "K": 374, "dtype": "bfloat16"},
    # timed padded in one collection and as given in another while pad_mm was on (2-5x apart)
    {"op": "mm", "B": 1, "M": 2608, "N": 537, "K": 4096, "dtype": "bfloat16"},
    {"op": "bmm", "B": 2, "M": 3262, "N": 592, "K": 1677, "dtype": "bfloat16"},
    {"op": "mm", "B": 1, "M": 860, "N": 1609, "K": 836, "dtype": "float16"},
]
PREVIOUS_SPIN_CYCLES = 100_000


def busy_loop(stop: Any) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10000))


def config_name(config: Any) -> str:
    if config is None:
        return "aten"
    return f"{config['block_m']}x{config['block_n']}x{config['block_k']} s{config['num_stages']} w{config['num_warps']}"


def host_paced_runs(spin_cycles: int) -> Callable[[Any, Callable[[], Any], int], list[float]]:
    """A replacement for GatedTimer.clocked_runs that lets the GPU wait for the
    host: `spin` (spin_cycles > 0) and `plain`. The SM clock is read as the worker reads
    it (timing.CLOCK_PROBE_CYCLES spun before and after the runs) but not acted on."""
    from matmul_toolkit_inductor import timing

    def runs_of(measurer: Any, call: Callable[[], Any], runs: int) -> list[float]:
        torch = measurer.torch
        events = [torch.cuda.Event(enable_timing=True) for _ in range(2 * runs + 4)]
        events[0].record()
        torch.cuda._sleep(timing.CLOCK_PROBE_CYCLES)
        events[1].record()
        begin = time.perf_counter()
        for i in range(runs):
            measurer.flush_buffer.zero_()
            if spin_cycles:
                torch.cuda._sleep(spin_cycles)
            events[2 + 2 * i].record()
            call()
            events[3 + 2 * i].record()
        measurer.enqueue_ms_per_run = (time.perf_counter() - begin) * 1000 / runs
        events[-2].record()
        torch.cuda._sleep(timing.CLOCK_PROBE_CYCLES)
        events[-1].record()
        torch.cuda.synchronize(measurer.device)
        clock = min(timing.CLOCK_PROBE_CYCLES / (1000 * events[0].elapsed_time(events[1])),
                    timing.CLOCK_PROBE_CYCLES / (1000 * events[-2].elapsed_time(events[-1])))
        measurer.slowest_clock_mhz = min(measurer.slowest_clock_mhz, clock)
        return [float(events[2 + 2 * i].elapsed_time(events[3 + 2 * i])) for i in range(runs)]

    return runs_of


def recording(gated_runs: Callable[..., Any], clocks: list[float]) -> Callable[..., Any]:
    """The worker's gated_runs, noting the SM clock read around each group."""

    def runs_of(measurer: Any, call: Callable[[], Any], runs: int) -> Any:
        samples, clock = gated_runs(measurer, call, runs)
        clocks.append(clock)
        return samples, clock

    return runs_of


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="measurements per problem, load and method (default 1)")
    parser.add_argument("--out", default=os.environ.get("OUT") or "out", help="folder of timing_noise.json")
    args = parser.parse_args()
    try:
        from matmul_toolkit_inductor import measure, timing
        worker_measurer = measure.InductorMeasurer(0)
    except (ImportError, RuntimeError) as e:
        print(f"error: torch with CUDA and Triton is needed: {e}", file=sys.stderr)
        return 2
    measurer = worker_measurer.timer  # the timing loop's state: clocks, counts, host time
    worker = (timing.GatedTimer.clocked_runs, timing.GatedTimer.gated_runs)
    clocks: list[float] = []
    methods = {"worker": (worker[0], recording(worker[1], clocks)),
               "spin": (host_paced_runs(PREVIOUS_SPIN_CYCLES), worker[1]),
               "plain": (host_paced_runs(0), worker[1])}
    results: list[dict[str, Any]] = []
    for load in ("idle", "busy"):
        stop = multiprocessing.Event()
        loops = [multiprocessing.Process(target=busy_loop, args=(stop,))
                 for _ in range(2 * (os.cpu_count() or 1) if load == "busy" else 0)]
        for loop in loops:
            loop.start()
        try:
            for _ in range(args.rounds):
                for method, (clocked_runs, gated_runs) in methods.items():
                    timing.GatedTimer.clocked_runs = clocked_runs  # type: ignore[method-assign]
                    timing.GatedTimer.gated_runs = gated_runs  # type: ignore[method-assign]
                    for problem in PROBLEMS:
                        request = {"problem": dict(problem, layout="nn", alpha=1.0, beta=1.0),
                                   "search_space": "DEFAULT", "seed": 0, "repeat": 100}
                        slow_before = measurer.slow_clock_groups
                        clocks.clear()
                        measurer.slowest_clock_mhz = math.inf
                        times = {config_name(e.get("config")): e["time_ms"] * 1000
                                 for e in worker_measurer.measure(request)["entries"] if "time_ms" in e}
                        name = f"{problem['op']} {problem['B']}x{problem['M']}x{problem['N']}x{problem['K']} {problem['dtype']}"
                        floor = timing.CLOCK_FLOOR * measurer.top_clock_mhz
                        clock = (min([c for c in clocks if c >= floor], default=math.nan) if method == "worker"
                                 else measurer.slowest_clock_mhz)
                        retimed = measurer.slow_clock_groups - slow_before
                        results.append({"load": load, "method": method, "problem": name, "times_us": times,
                                        "enqueue_ms_per_run": measurer.enqueue_ms_per_run,
                                        "lowest_clock_mhz": clock, "groups_timed_again": retimed})
                        ordered = sorted(times.values())
                        print(f"{load:4s} {method:6s} {name:34s} fastest {min(times, key=times.__getitem__):18s} "
                              f"us: min {ordered[0]:7.2f} median {ordered[len(ordered) // 2]:7.2f} "
                              f"max {ordered[-1]:7.2f}; host {measurer.enqueue_ms_per_run:.3f} ms/run; "
                              f"clock {clock:5.0f} MHz" + (f", {retimed} groups timed again" if retimed else ""),
                              flush=True)
        finally:
            stop.set()
            for loop in loops:
                loop.join()
            timing.GatedTimer.clocked_runs, timing.GatedTimer.gated_runs = worker  # type: ignore[method-assign]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "timing_noise.json"), "w") as f:
        json.dump({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
