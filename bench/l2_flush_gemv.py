#!/usr/bin/env python3
"""Does the way a benchmark flushes L2 change what a cuBLAS GEMV seems to cost? (GPU machine.)

    python3 bench/l2_flush_gemv.py [--reps 50] [--out DIR]

Inductor times each choice after zeroing an L2-sized buffer: the cache is then full of dirty
lines, which must be written back while the timed kernel streams its operands. For each
decode GEMV of the transformer shapeset (bf16, M = 1) and one compute-bound GEMM, torch.mm
(out=, as Inductor's ATen choice calls it) is timed with CUDA events four ways:
  steady     back-to-back calls, no flush (what a CUDA-graph replay in lut_e2e.py sees)
  zeroed     after zeroing the buffer (dirty lines: Inductor's flush)
  read       after reading the buffer (clean lines: a flush that writes nothing back)
  zero+read  after zeroing, then reading it (the dirty lines written back before the start)
  worker     as the collection worker times (measure.py): zeroing twice the L2 size, then
             the GPU spin that hides the host's launch
Prints the median microseconds per call and writes DIR/l2_flush_gemv.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

SHAPES = [(1, 4096, 11008), (1, 4096, 14336), (1, 12288, 4096), (1, 57344, 8192), (4096, 4096, 4096)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=50, help="timed calls per way (median taken)")
    parser.add_argument("--out", default=os.environ.get("OUT") or "out", help="folder of the JSON")
    args = parser.parse_args()

    import torch

    from matmul_toolkit_inductor.measure import LAUNCH_COVER_CYCLES

    props = torch.cuda.get_device_properties(0)
    # Inductor's flush buffer: the L2 size in int32 elements.
    buffer = torch.empty(props.L2_cache_size // 4, dtype=torch.int32, device="cuda")
    twice = torch.empty(2 * props.L2_cache_size // 4, dtype=torch.int32, device="cuda")
    flushes = {"zeroed": lambda: buffer.zero_(), "read": lambda: buffer.sum(),
               "zero+read": lambda: (buffer.zero_(), buffer.sum()),
               "worker": lambda: (twice.zero_(), torch.cuda._sleep(LAUNCH_COVER_CYCLES))}
    rows = []
    for m, n, k in SHAPES:
        a = torch.rand(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.rand(k, n, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)

        def call() -> None:
            torch.mm(a, b, out=out)

        for _ in range(10):
            call()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.reps):
            call()
        end.record()
        torch.cuda.synchronize()
        row = {"M": m, "N": n, "K": k, "steady_us": start.elapsed_time(end) * 1e3 / args.reps}
        for name, flush in flushes.items():
            times = []
            for _ in range(args.reps):
                flush()
                start.record()
                call()
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end) * 1e3)
            row[f"{name}_us"] = statistics.median(times)
        rows.append(row)
        print(f"mm {m}x{n}x{k} bf16: " + ", ".join(f"{key[:-3]} {value:.1f} us" for key, value in row.items()
                                                   if key.endswith("_us")), flush=True)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "l2_bytes": props.L2_cache_size, "reps": args.reps, "rows": rows}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "l2_flush_gemv.json"), "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
