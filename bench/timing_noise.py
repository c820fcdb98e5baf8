#!/usr/bin/env python3
"""Do the Inductor worker's times of small GEMMs hold from run to run? (GPU machine.)

    python3 bench/timing_noise.py [--rounds 2] [--out DIR]

Measures a few microsecond GEMMs (DEFAULT configs) with the worker's own measurer
(python/matmul_toolkit_inductor/measure.py), --rounds times each way: with the launch
cover (a GPU spin between the L2 flush and each timed run's start event, so the host's
launch is not timed) and without it, first on idle cores, then with every core running a
busy loop (as while a collection compiles). Prints each measurement's fastest config and
the minimum, median and maximum config time in microseconds; writes DIR/timing_noise.json
with every config's time.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

PROBLEMS = [
    {"op": "mm", "B": 1, "M": 4096, "N": 361, "K": 32, "dtype": "float16"},
    {"op": "mm", "B": 1, "M": 1822, "N": 32, "K": 518, "dtype": "bfloat16"},
    {"op": "bmm", "B": 2, "M": 4096, "N": 32, "K": 81, "dtype": "float16"},
    {"op": "addmm", "B": 1, "M": 1038, "N": 1936, "K": 374, "dtype": "bfloat16"},
]


def busy_loop(stop: Any) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10000))


def config_name(config: Any) -> str:
    if config is None:
        return "aten"
    return f"{config['block_m']}x{config['block_n']}x{config['block_k']} s{config['num_stages']} w{config['num_warps']}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="measurements per problem, load and cover (default 2)")
    parser.add_argument("--out", default=os.environ.get("OUT") or "out", help="folder of timing_noise.json")
    args = parser.parse_args()
    try:
        from matmul_toolkit_inductor import measure
        measurer = measure.InductorMeasurer(0)
    except (ImportError, RuntimeError) as e:
        print(f"error: torch with CUDA and Triton is needed: {e}", file=sys.stderr)
        return 2
    cover = measure.LAUNCH_COVER_CYCLES
    results: list[dict[str, Any]] = []
    for load in ("idle", "busy"):
        stop = multiprocessing.Event()
        loops = [multiprocessing.Process(target=busy_loop, args=(stop,))
                 for _ in range((os.cpu_count() or 1) if load == "busy" else 0)]
        for loop in loops:
            loop.start()
        try:
            for _ in range(args.rounds):
                for covered in (False, True):
                    measure.LAUNCH_COVER_CYCLES = cover if covered else 0
                    for problem in PROBLEMS:
                        request = {"problem": dict(problem, layout="nn", alpha=1.0, beta=1.0),
                                   "search_space": "DEFAULT", "seed": 0, "repeat": 100}
                        times = {config_name(e.get("config")): e["time_ms"] * 1000
                                 for e in measurer.measure(request)["entries"] if "time_ms" in e}
                        name = f"{problem['op']} {problem['B']}x{problem['M']}x{problem['N']}x{problem['K']} {problem['dtype']}"
                        results.append({"load": load, "launch_cover": covered, "problem": name, "times_us": times})
                        ordered = sorted(times.values())
                        print(f"{load:4s} {'cover' if covered else 'no cover':8s} {name:34s} fastest "
                              f"{min(times, key=times.__getitem__):18s} us: min {ordered[0]:6.2f} "
                              f"median {ordered[len(ordered) // 2]:6.2f} max {ordered[-1]:6.2f}", flush=True)
        finally:
            stop.set()
            for loop in loops:
                loop.join()
            measure.LAUNCH_COVER_CYCLES = cover
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "timing_noise.json"), "w") as f:
        json.dump({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
