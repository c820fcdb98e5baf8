"""`python3 -m matmul_toolkit_inductor.recommend`: `matmul_toolkit recommend` without the binary
and without torch, through libmmt_rank.so (rank_library.py).

It takes recommend's options. With --json it prints what `matmul_toolkit recommend --json
--no-prune` prints: the same configs and predicted times, from the same C++ code. The space is
never pruned by a backend; the library holds no CUDA code. Bad input is one line
`error: <option or file>: <what is wrong>` and exit code 2.

    python3 -m matmul_toolkit_inductor.recommend --m 1024 --n 4096 --k 4096 --dtype bfloat16 --json
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Optional

from .rank_library import BAD_INPUT, RankLibraryError, RankModel

# recommend's options that go to the library as they are (its defaults apply to those not given).
PASSED_ON = ("op", "m", "n", "k", "batch", "dtype", "layout", "shapeset", "top_k", "search_space")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python3 -m matmul_toolkit_inductor.recommend",
                                description="Rank a config space (DEFAULT or EXHAUSTIVE) with the model and print "
                                            "the K configs with the lowest predicted time, for one problem or a "
                                            "shapeset (matmul_toolkit recommend, through libmmt_rank.so)")
    p.add_argument("--model", help="trained model checkpoint (.pt); default: the shipped one, found as "
                                   "matmul_toolkit finds it")
    p.add_argument("--op", help="operation: mm, addmm or bmm (default mm)")
    p.add_argument("--m", type=int, help="rows of A and of the output")
    p.add_argument("--n", type=int, help="columns of B and of the output")
    p.add_argument("--k", type=int, help="columns of A, rows of B")
    p.add_argument("--batch", type=int, help="batch size (bmm only; default 1)")
    p.add_argument("--dtype", help="operand dtype (default: float16 for a GPU model, float32 for a CPU model)")
    p.add_argument("--layout", help="operand layouts: nn, nt, tn or tt (default nn)")
    p.add_argument("--shapeset", help="rank every problem of a shapeset file instead of one problem")
    p.add_argument("--top-k", type=int, help="configs to print per problem (default 5)")
    p.add_argument("--search-space", help="config space to rank: DEFAULT or EXHAUSTIVE (default DEFAULT)")
    p.add_argument("--allow-tf32", action="store_true", help="set ALLOW_TF32 on float32 problems")
    p.add_argument("--no-prune", action="store_true",
                   help="accepted for recommend's sake: this ranking never prunes the space")
    p.add_argument("--json", action="store_true", help="print the recommendations as JSON")
    args = p.parse_args(argv)
    single = [name for name in ("op", "m", "n", "k", "batch", "dtype", "layout") if getattr(args, name) is not None]
    if args.shapeset is not None and single:
        p.error(f"--shapeset excludes --{single[0]}")
    return args


def request_of(args: argparse.Namespace) -> dict[str, Any]:
    request = {name: getattr(args, name) for name in PASSED_ON if getattr(args, name) is not None}
    if args.allow_tf32:
        request["allow_tf32"] = True
    return request


def table(document: dict[str, Any]) -> str:
    """The recommendations as recommend prints them without --json."""
    lines = []
    for problem in document["problems"]:
        s = problem["shape"]
        label = f"{problem['op']} M={s['M']} N={s['N']} K={s['K']}" + (f" B={s['B']}" if s["B"] != 1 else "")
        lines.append(f"{label} {s['M_dtype']}: {problem['candidates']} {document['search_space']} candidates "
                     f"ranked in {problem['ranking_ms']:.3f} ms")
        lines.append(f"{'rank':>5} {'block_m':>8} {'block_n':>8} {'block_k':>8} {'group_m':>8} {'stages':>7} "
                     f"{'warps':>6} {'EVEN_K':>7} {'predicted_ms':>13}")
        for entry in problem["top_k"]:
            c = entry["config"]
            if c["name"].startswith("aten_"):  # ATen has no tiles
                lines.append(f"{entry['rank']:>5} {c['name']:<47} {entry['predicted_ms']:>13.6g}")
                continue
            lines.append(f"{entry['rank']:>5} {c['block_m']:>8} {c['block_n']:>8} {c['block_k']:>8} "
                         f"{c['group_m']:>8} {c['num_stages']:>7} {c['num_warps']:>6} "
                         f"{'yes' if c['EVEN_K'] else 'no':>7} {entry['predicted_ms']:>13.6g}")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        with RankModel.open(args.model or "") as model:
            document = model.recommend(request_of(args))
    except RankLibraryError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2 if e.status == BAD_INPUT else 1
    print(json.dumps(document, indent=2) if args.json else table(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())
