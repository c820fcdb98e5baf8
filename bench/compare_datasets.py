#!/usr/bin/env python3
"""Two datasets of the same problems and configs, side by side (an A/B of kernel versions).

Reads torch-diode datasets in JSON (`matmul_toolkit convert` writes them from msgpack), e.g.
the same `collect` command run with two builds, and prints
  - per dataset, the best config's time relative to the reference entry (aten_*: cuBLAS on
    the CUDA backend; reference time / best time, > 1: faster than cuBLAS), median and p10,
    over all problems and by operand alignment (K odd: A's rows 2-byte aligned in 16-bit
    dtypes; N odd: B's);
  - the per-config speedup BASE time / NEW time, median, p10 and p90, for configs that
    give fewer output tiles than --sms and a K long enough to split in two parts of 4+
    k-tiles (where the split variants apply), for the other configs of fewer tiles, and
    for the rest;
  - rank agreement per problem over the configs both timed, without and with the
    reference entry: Spearman's rho (median, p10, mean), how often both pick the same
    fastest choice, what NEW's pick costs when timed by BASE and BASE's pick when timed by
    NEW (best / time of the other's pick, geomean: the top-1 of a model that knew the other
    run's times), the regret of those picks (p95 over both ways), and how many problems have
    a choice more than 1.35x apart. Run on one collection measured twice (e.g. `--repeat
    10` against the default, or the same command twice) it says whether the ranking holds.

  python3 bench/compare_datasets.py base.json new.json [--sms 132]
"""

import argparse
import json
import math
import statistics
import sys


def load(path):
    """{(op, B, M, N, K, dtype): {config name: seconds}}; the reference entry is 'aten'."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"error: {path}: {e}")
    try:
        out = parse(data)
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        sys.exit(f"error: {path}: not a torch-diode dataset ({type(e).__name__}: {e})")
    if not out:
        sys.exit(f"error: {path}: no timed configs")
    return out


def parse(data):
    """The timed configs of a parsed dataset, keyed as load() returns them."""
    out = {}
    for hardware in data["hardware"].values():
        for op, operation in hardware.get("operation", {}).items():
            for key, solution in operation.get("solution", {}).items():
                p = json.loads(key)
                times = out.setdefault((op, p["B"], p["M"], p["N"], p["K"], p["M_dtype"]), {})
                for entry in solution["timed_configs"]:
                    c = entry["config"]
                    name = "aten" if c.get("name", "").startswith("aten") else (
                        f"{c['block_m']}x{c['block_n']}x{c['block_k']} g{c['group_m']} "
                        f"s{c['num_stages']} w{c['num_warps']}")
                    times[name] = entry["time"]
    return out


def quantiles(values):
    v = sorted(values)
    return statistics.median(v), v[len(v) // 10], v[(9 * len(v)) // 10]


def alignment_class(problem):
    _, _, _, n, k, _ = problem
    return {(True, True): "K and N odd", (True, False): "K odd", (False, True): "N odd",
            (False, False): "K and N even"}[(k % 2 == 1, n % 2 == 1)]


def best_vs_reference(times):
    ours = [t for name, t in times.items() if name != "aten"]
    return times["aten"] / min(ours) if "aten" in times and ours else None


def ranks(values):
    """Ranks 1..n, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    var = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return cov / var if var > 0 else None


def rank_agreement(base, new, problems, with_reference):
    """Per problem over the choices both timed (the reference entry too when asked):
    Spearman's rho, whether both runs pick the same fastest choice, each run's pick timed
    by the other run (best / time of the pick, both ways) and whether a choice moved by
    more than 1.35x."""
    rhos, same, pick_cost, moved = [], 0, [], 0
    for p in problems:
        names = sorted(set(base[p]) & set(new[p]) - (set() if with_reference else {"aten"}))
        if len(names) < 3:
            continue
        a = [base[p][n] for n in names]
        b = [new[p][n] for n in names]
        rho = spearman(a, b)
        if rho is None:
            continue
        rhos.append(rho)
        new_pick, base_pick = names[b.index(min(b))], names[a.index(min(a))]
        same += new_pick == base_pick
        pick_cost += [min(a) / base[p][new_pick], min(b) / new[p][base_pick]]
        moved += any(abs(math.log(y / x)) > math.log(1.35) for x, y in zip(a, b))
    return rhos, same, pick_cost, moved


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--sms", type=int, default=132, help="SMs of the GPU (132: H100 SXM, H200)")
    args = ap.parse_args()
    base, new = load(args.base), load(args.new)
    common = sorted(set(base) & set(new))
    if not common:
        sys.exit("error: the datasets share no problem")

    print(f"{len(common)} problems in both\n")
    print("best config vs reference (reference time / best time): median, p10")
    print("| problems | n | base | new |\n|---|---|---|---|")
    groups = {"all": common}
    for p in common:
        groups.setdefault(alignment_class(p), []).append(p)
    for name, problems in groups.items():
        row = []
        for data in (base, new):
            r = [x for x in (best_vs_reference(data[p]) for p in problems) if x]
            row.append("%.2f, %.2f" % quantiles(r)[:2] if r else "-")
        print(f"| {name} | {len(problems)} | {row[0]} | {row[1]} |")

    print("\nper-config speedup (base time / new time): median, p10, p90")
    print("| problems | configs | median | p10 | p90 |\n|---|---|---|---|---|")
    buckets = {}
    for p in common:
        _, batch, m, n, _, _ = p
        for name in set(base[p]) & set(new[p]) - {"aten"}:
            bm, bn, bk = (int(x) for x in name.split()[0].split("x"))
            tiles = math.ceil(m / bm) * math.ceil(n / bn) * batch
            # Where the split variants apply: two parts of at least 4 k-tiles, SMs to spare.
            splits = min(args.sms // tiles, math.ceil(p[4] / bk) // 4) if tiles < args.sms else 1
            key = ("fewer tiles than SMs, 2+ parts of 4+ k-tiles" if splits >= 2 else
                   "fewer tiles than SMs, short K" if tiles < args.sms else "the rest")
            buckets.setdefault(key, []).append(base[p][name] / new[p][name])
    for key, speedups in sorted(buckets.items()):
        print("| %s | %d | %.2f | %.2f | %.2f |" % ((key, len(speedups)) + quantiles(speedups)))

    print("\nrank agreement over the choices both timed (problems with 3+): Spearman; the same fastest")
    print("choice; each run's pick timed by the other run (best / time of the pick, geomean, both ways)")
    print("and its regret (time / best - 1, p95); problems with a choice more than 1.35x apart")
    print("| choices | problems | Spearman median | p10 | mean | same fastest | pick by the other run | regret p95 | 1.35x apart |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, with_reference in (("configs", False), ("configs and reference", True)):
        rhos, same, pick_cost, moved = rank_agreement(base, new, common, with_reference)
        if not rhos:
            continue
        median, p10, _ = quantiles(rhos)
        geomean = math.exp(statistics.fmean(math.log(c) for c in pick_cost))
        regrets = sorted(1 / c - 1 for c in pick_cost)
        print(f"| {label} | {len(rhos)} | {median:.3f} | {p10:.3f} | {statistics.fmean(rhos):.3f} | "
              f"{same}/{len(rhos)} | {geomean:.4f} | {100 * regrets[(95 * len(regrets)) // 100]:.1f} % | {moved} |")

if __name__ == "__main__":
    main()
