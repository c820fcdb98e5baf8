#!/usr/bin/env python3
"""Seconds per GEMM of plain torch.compile max-autotune, for collect_bench to compare with.

    python3 bench/max_autotune_time.py PROBLEMS.json [--search-space DEFAULT|EXHAUSTIVE]

PROBLEMS.json: a list of {"op": "mm"|"addmm"|"bmm", "layout": "nn", "B", "M", "N", "K",
"dtype"}. Each problem is compiled in this one process with max-autotune (Triton and ATen
choices, Inductor's own configs for the shape), every cache Inductor keeps fresh
(torch._inductor.utils.fresh_cache: its kernel and autotuning caches start empty), and the
wall time of the first call (trace, lowering, precompile, benchmark) is that problem's
time. Prints one JSON object: {"seconds": [...], "median_s": ..., "versions": {...}}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any


def operands(torch: Any, p: dict[str, Any]) -> list[Any]:
    dtype = getattr(torch, p["dtype"])
    g = torch.Generator(device="cuda").manual_seed(p["M"] * 31 + p["N"] * 7 + p["K"])
    batch = [p["B"]] if p["op"] == "bmm" else []

    def uniform(*shape: int) -> Any:
        return torch.rand(*shape, generator=g, device="cuda").add_(0.1).to(dtype)

    def matrix(rows: int, cols: int, transposed: bool) -> Any:
        return uniform(*batch, cols, rows).transpose(-1, -2) if transposed else uniform(*batch, rows, cols)

    layout = p.get("layout", "nn")
    a = matrix(p["M"], p["K"], layout[0] == "t")
    b = matrix(p["K"], p["N"], layout[1] == "t")
    return [uniform(p["N"]), a, b] if p["op"] == "addmm" else [a, b]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems")
    parser.add_argument("--search-space", default="DEFAULT", choices=["DEFAULT", "EXHAUSTIVE"])
    args = parser.parse_args()
    try:
        with open(args.problems) as f:
            problems = json.load(f)
    except (OSError, ValueError) as e:
        print(f"error: {args.problems}: {e}", file=sys.stderr)
        return 2
    try:
        import torch
        import triton
        from torch._inductor import config as inductor_config
        from torch._inductor.utils import fresh_cache
    except ImportError as e:
        print(f"error: --python: torch with Inductor is needed: {e}", file=sys.stderr)
        return 2
    functions = {"mm": torch.mm, "bmm": torch.bmm, "addmm": torch.addmm}
    seconds = []
    for p in problems:
        xs = operands(torch, p)
        fn = functions[p["op"]]
        torch._dynamo.reset()
        with fresh_cache(), inductor_config.patch({
                "max_autotune": True, "max_autotune_gemm": True,
                "max_autotune_gemm_backends": "TRITON,ATEN",
                "max_autotune_gemm_search_space": args.search_space}):
            start = time.perf_counter()
            torch.compile(lambda *a: fn(*a), dynamic=False)(*xs)
            torch.cuda.synchronize()
            seconds.append(time.perf_counter() - start)
        print(f"max-autotune {p['op']} {p['B']}x{p['M']}x{p['N']}x{p['K']} {p['dtype']}: "
              f"{seconds[-1]:.2f} s", file=sys.stderr)
    print(json.dumps({"seconds": seconds, "median_s": statistics.median(seconds) if seconds else None,
                      "versions": {"torch": torch.__version__, "triton": triton.__version__}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
