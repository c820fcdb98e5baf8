"""In-graph truth: where a compiled model's device time goes, GEMM by GEMM.

A profiled replay (torch.profiler over CUDA-graph replays; CUPTI reports every kernel of a
graph) gives the device kernels of a call in program order. Each kernel falls in a category
by its name: a GEMM of Inductor's (a Triton template, `triton_tem_*`, or a cuBLAS / CUTLASS
GEMM that an mm, addmm, bmm or int_mm lowered to, with cuBLAS's split-K reduction counted
with the GEMM before it), attention, convolution, another library's GEMM (grouped mm), or
other (Inductor's pointwise and reduction kernels, copies, the optimizer). GEMM kernels are
matched to the GEMMs Inductor lowered (the recorder's records, in lowering order) one for one
when their counts agree; a kernel's time then belongs to its GEMM, whose Triton template
holds any epilogue it fused. Pure functions over (name, microseconds) pairs: no torch here.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from autotune_state import tuned_configs
from summary import HOST_BOUND, host_paced, same_run, timed_ms

GEMM = "gemm"
ATTENTION = "attention"
CONVOLUTION = "convolution"
OTHER_GEMM = "other_gemm"
OTHER = "other"
# A Triton choice faster or slower than cuBLAS in the graph by more than this: twice what the
# same cuBLAS kernel differed by between two variants of one run (5 %, H200, 2026-12-02).
VERSUS_TOLERANCE = 0.10
CATEGORIES = (GEMM, ATTENTION, CONVOLUTION, OTHER_GEMM, OTHER)
GAPS_KEPT = 5  # the longest waits between kernels a report keeps
OTHER_KERNELS_KEPT = 12  # the costliest non-GEMM kernels a report keeps

_TRITON_TEMPLATE = re.compile(r"^triton_tem_")
_TRITON_CONVOLUTION = re.compile(r"_convolution(_|$)")
_TRITON_GEMM_OP = re.compile(r"_(mm|addmm|bmm|baddbmm|_int_mm)(_|$)")
_ATTENTION = re.compile(r"fmha|flash|sdpa|attention|Attention", re.IGNORECASE)
_CONVOLUTION = re.compile(r"conv|fprop|dgrad|wgrad|cudnn", re.IGNORECASE)
_OTHER_GEMM = re.compile(r"GroupProblemShape|grouped_gemm|grouped_mm", re.IGNORECASE)
_LIBRARY_GEMM = re.compile(r"nvjet|gemm|xmma|cutlass|cublas|Kernel2", re.IGNORECASE)
_INDUCTOR_INDEX = re.compile(r"_\d+$")
_KERNEL_DEFINITION = re.compile(r"^def (triton_\w+)\(", re.MULTILINE)
# Inductor's generated program: its wrapper module defines `call` (a kernel's file does not)
_WRAPPER_CALL = re.compile(r"^\s*def call\(", re.MULTILINE)
# What Inductor writes beside a kept config about how it got it, not part of the config
_TUNING_BOOKKEEPING = ("configs_hash", "found_by_coordesc", "time_taken_ms", "triton_cache_hash")
_SPLIT_K_REDUCE = re.compile(r"splitKreduce|reduce_kernel.*splitK", re.IGNORECASE)


def category(name: str) -> str:
    """The category of one device kernel, by its name."""
    if _TRITON_TEMPLATE.search(name):
        # Inductor's convolution template (max_autotune_gemm autotunes convolutions too)
        return CONVOLUTION if _TRITON_CONVOLUTION.search(name) and not _TRITON_GEMM_OP.search(name) else GEMM
    if name.startswith("triton_"):  # Inductor's own pointwise, reduction, persistent kernels
        return OTHER
    if _ATTENTION.search(name):
        return ATTENTION
    if _CONVOLUTION.search(name):
        return CONVOLUTION
    if _OTHER_GEMM.search(name):
        return OTHER_GEMM
    if _SPLIT_K_REDUCE.search(name) or _LIBRARY_GEMM.search(name):
        return GEMM
    return OTHER


def is_split_k_reduction(name: str) -> bool:
    return bool(_SPLIT_K_REDUCE.search(name))


@dataclass
class GemmKernel:
    """One GEMM's kernels in one call: the GEMM kernel and any split-K reduction after it."""
    names: list[str]
    us: float


def gemm_kernels(kernels: Sequence[tuple[str, float]]) -> list[GemmKernel]:
    """The GEMM kernels of a call in order, a split-K reduction folded into the GEMM before it."""
    gemms: list[GemmKernel] = []
    for name, us in kernels:
        if category(name) != GEMM:
            continue
        if is_split_k_reduction(name) and gemms:
            gemms[-1].names.append(name)
            gemms[-1].us += us
            continue
        gemms.append(GemmKernel([name], us))
    return gemms


def split_calls(kernels: Sequence[tuple[str, float]], calls: int) -> list[list[tuple[str, float]]]:
    """A profile of `calls` identical calls cut into one kernel list per call (equal lengths);
    raises ValueError when the profile does not divide evenly."""
    if calls < 1 or len(kernels) % calls:
        raise ValueError(f"{len(kernels)} kernels do not split into {calls} identical calls")
    n = len(kernels) // calls
    parts = [list(kernels[i * n:(i + 1) * n]) for i in range(calls)]
    names = [name for name, _ in parts[0]]
    for part in parts[1:]:
        if [name for name, _ in part] != names:
            raise ValueError("the profiled calls ran different kernels")
    return parts


def per_call_kernels(kernels: Sequence[tuple[str, float]], calls: int) -> list[tuple[str, float]]:
    """One call's kernels in order, each with its median time over the profiled calls."""
    parts = split_calls(kernels, calls)
    return [(parts[0][i][0], statistics.median(p[i][1] for p in parts)) for i in range(len(parts[0]))]


def breakdown(kernels: Sequence[tuple[str, float]]) -> dict[str, float]:
    """Microseconds per category for one call's kernels, and "total"."""
    out = {c: 0.0 for c in CATEGORIES}
    for name, us in kernels:
        out[category(name)] += us
    out["total"] = sum(us for _, us in kernels)
    return out


def attribute(kernels: Sequence[tuple[str, float]], records: Sequence[dict[str, Any]]
              ) -> tuple[Optional[list[dict[str, Any]]], str]:
    """Each recorded GEMM (GemmRecord.to_dict(), lowering order) with its in-graph kernel time
    for one call, or (None, why) when the GEMM kernels and the records do not pair up."""
    gemms = gemm_kernels(kernels)
    if len(gemms) != len(records):
        return None, (f"{len(gemms)} GEMM kernels in a call against {len(records)} GEMMs lowered "
                      "(a GEMM decomposed, fused away, run outside Inductor, or not a GEMM of ours)")
    rows = []
    for record, kernel in zip(records, gemms):
        triton = any(_TRITON_TEMPLATE.search(n) for n in kernel.names)
        rows.append(record | {"kernel": kernel.names[0], "kernels": len(kernel.names),
                              "ran": "triton" if triton else "aten", "in_graph_us": kernel.us})
    return rows, ""


def by_problem(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Attributed rows merged per problem (same op, shape and kernel kind), first-seen order:
    count, in-graph µs per instance (median), Inductor's benchmark of the kind that ran, and
    cuBLAS timed without the host's launch where ATen ran."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        shape = row.get("shape") or {}
        key = (row.get("op"), shape.get("B"), shape.get("M"), shape.get("N"), shape.get("K"),
               shape.get("M_dtype"), row["ran"])
        groups.setdefault(key, []).append(row)
    merged = []
    for (op, B, M, N, K, dtype, ran), group in groups.items():
        in_graph = statistics.median(r["in_graph_us"] for r in group)
        benchmark = [r["benchmark_ms"].get("triton" if ran == "triton" else "aten") for r in group]
        known = [b for b in benchmark if b is not None]
        isolated_us = 1000.0 * statistics.median(known) if known else None
        gated = [r["gated_ms"] for r in group if r.get("gated_ms") is not None]
        dims = (f"{B}x" if B and B > 1 else "") + f"{M}x{N}x{K}"
        merged.append({
            "problem": f"{op} {dims} {dtype}", "ran": ran, "count": len(group), "kernel": group[0]["kernel"],
            "in_graph_us": in_graph, "total_us": sum(r["in_graph_us"] for r in group),
            "isolated_us": isolated_us,
            "in_graph_over_isolated": in_graph / isolated_us if isolated_us else None,
            # cuBLAS alone without the host's launch (the suite's GatedTimer), where ATen ran
            "gated_us": 1000.0 * statistics.median(gated) if gated else None,
        })
    return merged


def disagreements(problems: Sequence[dict[str, Any]], tolerance: float = 0.15) -> list[dict[str, Any]]:
    """The problems whose in-graph time differs from the isolated benchmark by more than
    `tolerance` (a fraction), largest total time first."""
    out = [p for p in problems if p["in_graph_over_isolated"] is not None
           and abs(p["in_graph_over_isolated"] - 1.0) > tolerance]
    return sorted(out, key=lambda p: -p["total_us"])


def timeline(spans: Sequence[tuple[str, float, float]], calls: int, gaps: int = GAPS_KEPT) -> dict[str, Any]:
    """Where the GPU waits inside the profiled calls, from the kernels' (name, start µs, end µs)
    in start order: the calls' span from the first kernel's start to the last one's end, the
    time some kernel ran (overlaps counted once), the rest idle, all µs a call; and the `gaps`
    longest waits between one kernel's end and the next start, each as the median over the
    calls at that place in the call, with the kernels on either side. Measured in the same
    window as the kernels, unlike the timed rounds' wall time, a separate run whose kernels
    need not take the same time."""
    if not spans:
        return {}
    busy, reach = 0.0, spans[0][1]
    waits: list[float] = []
    for _, start, end in spans:
        waits.append(max(0.0, start - reach))
        busy += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    span = reach - spans[0][1]
    out: dict[str, Any] = {"span_us_a_call": span / calls, "busy_us_a_call": busy / calls,
                           "idle_us_a_call": (span - busy) / calls}
    if len(spans) % calls == 0:
        n = len(spans) // calls
        places = [(statistics.median(waits[c * n + i] for c in range(calls)), i) for i in range(1, n)]
        places.sort(reverse=True)
        out["longest_gaps"] = [{"us": us, "after": spans[i - 1][0], "before": spans[i][0]}
                               for us, i in places[:gaps] if us > 0]
    return out


def runtime_tuned(cache_dir: str) -> list[dict[str, Any]]:
    """The kernels Inductor tuned at their first run (a pointwise or reduction kernel offered
    several block sizes, `triton.autotune_pointwise`), each with the config it kept: every
    `*.best_config` under a compile's cache folder (autotune_state.tuned_configs), named by the
    kernel a source file of the same name beside it defines, else by the file's own name.
    torch 2.11 names the file by a hash of the kernel's file name and the cache key tag, which
    names the same kernel alike in every compile (default's and ours' reports share names)
    but has no source beside it. Which config a compile keeps is a draw of its timing, so two
    compiles of one graph can differ here; sorted by kernel name."""
    found = []
    for relative, text in sorted(tuned_configs(cache_dir).items()):
        path = Path(cache_dir) / relative
        try:
            kept = json.loads(text)
            source = path.with_suffix(".py")
            names = _KERNEL_DEFINITION.findall(source.read_text()) if source.is_file() else []
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if not isinstance(kept, dict):
            continue
        config = {k: v for k, v in kept.items() if k not in _TUNING_BOOKKEEPING}
        found.append({"kernel": names[0] if names else path.stem, "config": config})
    return sorted(found, key=lambda r: r["kernel"])


def generated_programs(cache_dir: str) -> dict[str, str]:
    """The programs a compile generated: every wrapper module under its cache folder (the
    Python file that defines `call`, with its kernels' sources inside), by file name. Two
    variants' programs, diffed, show what a compile mode or a pick changed around the GEMMs:
    copies, layouts, fusions; a dynamic graph's kernels take their sizes and strides as
    arguments, so the same kernel source there can still run on other strides."""
    found = {}
    for path in sorted(Path(cache_dir).rglob("*.py")):
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        if _WRAPPER_CALL.search(text):
            found[path.name] = text
    return found


def retuned_versus(base: dict[str, Any], other: dict[str, Any]) -> list[dict[str, Any]]:
    """The runtime-tuned kernel kinds whose kept configs differ between two variants' results
    (as multisets: a kind may have several kernels), each with both lists."""
    def by_kind(result: dict[str, Any]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for r in result.get("runtime_tuned") or []:
            out.setdefault(kernel_kind(r["kernel"]), []).append(json.dumps(r["config"], sort_keys=True))
        return {k: sorted(v) for k, v in out.items()}

    mine, theirs = by_kind(other), by_kind(base)
    return [{"kernel": k, "base": theirs[k], "other": mine[k]}
            for k in sorted(set(mine) & set(theirs)) if mine[k] != theirs[k]]


def kernel_kind(name: str) -> str:
    """A kernel's name without the index Inductor numbers its kernels with
    (triton_poi_fused_gelu_view_9 -> triton_poi_fused_gelu_view): the same fused kernel has
    another number in another variant's program."""
    return _INDUCTOR_INDEX.sub("", name) if name.startswith("triton_") else name


def top_other_kernels(call: Sequence[tuple[str, float]], kept: int = OTHER_KERNELS_KEPT) -> list[dict[str, Any]]:
    """The non-GEMM kernels of one call that took the most device time, merged by kind
    (kernel_kind): the kernels to compare between variants whose GEMMs ran the same."""
    by_name: dict[str, list[float]] = {}
    for name, us in call:
        if category(name) != GEMM:
            by_name.setdefault(kernel_kind(name), []).append(us)
    costliest = sorted(by_name.items(), key=lambda item: -sum(item[1]))[:kept]
    return [{"kernel": n, "count": len(v), "total_us": sum(v)} for n, v in costliest]


def report(kernels: Sequence[tuple[str, float]], calls: int, records: Sequence[dict[str, Any]],
           spans: Sequence[tuple[str, float, float]] = ()) -> dict[str, Any]:
    """The in-graph report of one variant: per-call breakdown by category, the GPU's waits
    (timeline(), where the kernels' start and end times are given), the costliest other
    kernels, and per GEMM problem its in-graph time beside Inductor's benchmark where it
    benchmarked."""
    try:
        call = per_call_kernels(kernels, calls)
    except ValueError as e:
        return {"error": str(e), "kernels": len(kernels)}
    rows, why = attribute(call, records)
    out: dict[str, Any] = {"breakdown_us": breakdown(call), "kernels_per_call": len(call),
                           "gemm_kernels": len(gemm_kernels(call)), "gemms_lowered": len(records),
                           "other_kernels": top_other_kernels(call)}
    if spans:
        out["timeline"] = timeline(spans, calls)
    if rows is None:
        out["unattributed"] = why
        names: dict[str, list[float]] = {}
        for g in gemm_kernels(call):
            names.setdefault(g.names[0], []).append(g.us)
        out["gemm_kernels_by_name"] = {n: {"count": len(v), "total_us": sum(v)} for n, v in names.items()}
    else:
        out["problems"] = by_problem(rows)
    return out


def _per_problem(report_: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A report's problems merged over the kinds that ran: count, µs a call, the kinds."""
    out: dict[str, dict[str, Any]] = {}
    for p in report_.get("problems", []):
        entry = out.setdefault(p["problem"], {"count": 0, "total_us": 0.0, "ran": []})
        entry["count"] += p["count"]
        entry["total_us"] += p["total_us"]
        entry["ran"].append(p["ran"])
    return out


def versus(base: dict[str, Any], other: dict[str, Any],
           tolerance: float = VERSUS_TOLERANCE) -> Optional[dict[str, Any]]:
    """One variant's in-graph report against another's (default torch.compile's: cuBLAS for
    every GEMM), both attributed: per GEMM problem that ran Triton in `other`, its µs a call in
    each (a Triton template's kernel holds the prologue and epilogue it fused, which `base` runs
    as other kernels: the categories' totals settle what fusion moved), and the problems on
    which Triton ran faster or slower than `base` by more than `tolerance`. None when either
    report is not attributed."""
    if "problems" not in base or "problems" not in other:
        return None
    mine, theirs = _per_problem(other), _per_problem(base)
    rows = []
    for problem, entry in mine.items():
        if "triton" not in entry["ran"] or problem not in theirs:
            continue
        base_us, other_us = theirs[problem]["total_us"], entry["total_us"]
        rows.append({"problem": problem, "count": entry["count"], "base_us": base_us, "other_us": other_us,
                     "ratio": other_us / base_us if base_us else None, "saved_us": base_us - other_us})
    faster = [r for r in rows if r["ratio"] is not None and r["ratio"] < 1 - tolerance]
    slower = [r for r in rows if r["ratio"] is not None and r["ratio"] > 1 + tolerance]
    b, o = base["breakdown_us"], other["breakdown_us"]
    return {"delta_us": {c: o[c] - b[c] for c in (*CATEGORIES, "total")},
            "triton_gemms": sum(r["count"] for r in rows), "gemms": sum(e["count"] for e in mine.values()),
            "triton_problems": rows, "faster": faster, "slower": slower}


def triton_wins(document: dict[str, Any], base: str = "default", tolerance: float = VERSUS_TOLERANCE,
                any_run: bool = False) -> dict[str, Optional[list[dict[str, Any]]]]:
    """Per workload, the GEMM problems on which a Triton choice of any variant ran faster in the
    graph than `base`'s cuBLAS of the same run (of any run with `any_run`), each with the
    variant that saved the most, largest saving first: [] where none did (there "never slower
    than default" is the bar), None where no such variant ran Triton against an attributed
    `base` report."""
    out: dict[str, Optional[list[dict[str, Any]]]] = {}
    for name, variants in document.get("workloads", {}).items():
        reference = (variants.get(base) or {}).get("in_graph")
        found: Optional[list[dict[str, Any]]] = None
        for variant, result in variants.items():
            report_ = result.get("in_graph") if isinstance(result, dict) and variant != base else None
            if not any_run and not same_run(result, variants.get(base)):
                continue  # kernels of two runs differ by their noise, up to 10 % here
            against = versus(reference, report_, tolerance) if reference and report_ else None
            if against is None or not against["triton_problems"]:
                continue
            found = (found or []) + [r | {"variant": variant} for r in against["faster"]]
        if found is None:
            out[name] = None
            continue
        best: dict[str, dict[str, Any]] = {}
        for r in found:  # each problem once, with the variant that saved the most
            if r["problem"] not in best or r["saved_us"] > best[r["problem"]]["saved_us"]:
                best[r["problem"]] = r
        out[name] = sorted(best.values(), key=lambda r: -r["saved_us"])
    return out


def headroom(variants: dict[str, Any], wins: Sequence[dict[str, Any]], variant: str = "ours",
             base: str = "default") -> dict[str, Optional[float]]:
    """What Triton picks could save in one workload's graph: the µs a call of its `wins` (one
    per problem, from triton_wins), their share of `base`'s timed call, and the part that
    `variant`'s own Triton picks saved (None where it has no report of `base`'s run)."""
    saved = sum(r["saved_us"] for r in wins)
    base_ms = profiled_ms(variants.get(base) or {})
    reference, mine = ((variants.get(v) or {}).get("in_graph") for v in (base, variant))
    against = (versus(reference, mine) if reference and mine and same_run(variants.get(variant), variants.get(base))
               else None)
    problems = {r["problem"] for r in wins}
    return {"us": saved, "share": saved / (1000.0 * base_ms) if base_ms else None,
            "ours_us": None if against is None else
            sum(r["saved_us"] for r in against["faster"] if r["problem"] in problems)}


def judge_picks(document: dict[str, Any], variant: str = "ours", oracle: str = "max_autotune",
                base: str = "default", tolerance: float = VERSUS_TOLERANCE) -> dict[str, dict[str, Any]]:
    """`variant`'s picks judged by in-graph time, per workload whose three results share one run:
    on every problem where `oracle` ran Triton, the graph's verdict is Triton (it ran faster
    than `base`'s cuBLAS by more than `tolerance`), ATen (slower by more), or either; a pick
    agrees unless it goes against a verdict. {NAME: {"problems", "agree", "triton", "aten",
    "either", "wrong": [{"problem", "ratio", "picked"}]}}."""
    out: dict[str, dict[str, Any]] = {}
    for name, variants in document.get("workloads", {}).items():
        b, v, o = (variants.get(x) for x in (base, variant, oracle))
        if not (same_run(b, v) and same_run(b, o)) or b is None or v is None or o is None:
            continue
        reports = [r.get("in_graph") or {} for r in (b, v, o)]
        if not all("problems" in r for r in reports):
            continue
        against = versus(reports[0], reports[2], tolerance)
        mine = _per_problem(reports[1])
        entry: dict[str, Any] = {"problems": 0, "agree": 0, "triton": 0, "aten": 0, "either": 0, "wrong": []}
        for row in against["triton_problems"] if against else []:
            problem, ratio = row["problem"], row["ratio"]
            if ratio is None or problem not in mine:
                continue
            verdict = "triton" if ratio < 1 - tolerance else "aten" if ratio > 1 + tolerance else "either"
            picked = "triton" if "triton" in mine[problem]["ran"] else "aten"
            entry["problems"] += 1
            entry[verdict] += 1
            if verdict in ("either", picked):
                entry["agree"] += 1
            else:
                entry["wrong"].append({"problem": problem, "ratio": ratio, "picked": picked})
        if entry["problems"]:
            out[name] = entry
    return out


def _versus_lines(against: dict[str, Any], tolerance: float) -> list[str]:
    d = against["delta_us"]
    lines = ["   against default, device µs a call: " + ", ".join(f"{c} {d[c]:+.1f}" for c in (GEMM, OTHER, "total"))
             + f"; Triton ran {against['triton_gemms']} of {against['gemms']} GEMMs"]
    for label, rows in (("faster", against["faster"]), ("slower", against["slower"])):
        if rows:
            saved = sum(r["saved_us"] for r in rows)
            lines.append(f"   Triton {label} than default's cuBLAS by more than {tolerance:.0%} on {len(rows)} "
                         f"problem(s): {abs(saved):.1f} µs a call {'saved' if saved >= 0 else 'lost'}")
            lines += [f"     {r['problem']:<36} x{r['count']:<3} {r['other_us']:8.1f} against {r['base_us']:8.1f} µs"
                      f" ({r['ratio']:.2f}x)" for r in sorted(rows, key=lambda r: -abs(r["saved_us"]))]
    return lines


def other_kernels_versus(base: dict[str, Any], other: dict[str, Any], kept: int = GAPS_KEPT) -> list[dict[str, Any]]:
    """The non-GEMM kernels whose µs a call differ most between two reports (by kind, among
    each report's costliest; a kernel missing from one counts 0 there), largest change first."""
    def by_kind(report_: dict[str, Any]) -> dict[str, float]:
        out: dict[str, float] = {}
        for r in report_.get("other_kernels", []):
            out[kernel_kind(r["kernel"])] = out.get(kernel_kind(r["kernel"]), 0.0) + r["total_us"]
        return out

    mine, theirs = by_kind(other), by_kind(base)
    kinds = sorted(dict.fromkeys([*theirs, *mine]), key=lambda k: -abs(mine.get(k, 0.0) - theirs.get(k, 0.0)))
    return [{"kernel": k, "base_us": theirs.get(k, 0.0), "other_us": mine.get(k, 0.0),
             "delta_us": mine.get(k, 0.0) - theirs.get(k, 0.0)} for k in kinds[:kept]]


def _other_kernel_lines(base: dict[str, Any], other: dict[str, Any]) -> list[str]:
    rows = [r for r in other_kernels_versus(base, other) if abs(r["delta_us"]) >= 1.0]
    if not rows:
        return []
    return (["   other kernels that moved most against default (µs a call):"]
            + [f"     {r['kernel'][:60]:<60} {r['other_us']:8.1f} against {r['base_us']:8.1f} ({r['delta_us']:+.1f})"
               for r in rows])


def profiled_ms(result: dict[str, Any]) -> Optional[float]:
    """The timed ms a call of what the profile ran: a dynamic workload's at the length it
    was profiled at (its "ms" is the geomean over its lengths), another's "ms"."""
    length = result.get("profiled_length")
    if length is not None:
        return (result.get("ms_by_length") or {}).get(str(length))
    return result.get("ms")


def host_in_rounds(result: dict[str, Any]) -> str:
    """The timed rounds' host ms a call against their ms a call, at each length ("0.70 of 0.71
    ms at 128 tokens (the host sets the pace), ..."); "" where the rounds kept no host time."""
    parts = []
    for length, host_ms in (result.get("host_ms_by_length") or {}).items():
        paced = host_paced(result, length)
        if paced is None:
            continue
        at = f" at {length} tokens" if result.get("ms_by_length") else ""
        parts.append(f"{host_ms:.3f} of {timed_ms(result, length):.3f} ms{at}"
                     + (" (the host sets the pace)" if paced else ""))
    return ", ".join(parts)


def text(document: dict[str, Any], tolerance: float = 0.15) -> str:
    """The in-graph reports of a results document as text: per workload and variant the
    device time per category, then each GEMM problem's in-graph time beside Inductor's
    isolated benchmark of the kind that ran, a ratio off by more than `tolerance` marked."""
    lines = []
    for name, variants in document.get("workloads", {}).items():
        for variant, result in variants.items():
            report_ = result.get("in_graph") if isinstance(result, dict) else None
            host_rounds = host_in_rounds(result) if isinstance(result, dict) else ""
            if not report_ and not host_rounds:
                continue
            ms = profiled_ms(result)
            at = f" at {result['profiled_length']} tokens" if "profiled_length" in result else ""
            lines.append(f"== {name} / {variant}: {ms or float('nan'):.3f} ms a call{at}")
            if host_rounds:
                lines.append("   in the timed rounds the host issued a call in " + host_rounds)
            if not report_:
                lines.append("   no in-graph report (not profiled)")
                continue
            if "error" in report_:
                lines.append(f"   no report: {report_['error']}")
                continue
            b = report_["breakdown_us"]
            lines.append("   device µs a call: " + ", ".join(f"{c} {b[c]:.1f}" for c in (*CATEGORIES, "total")))
            host_notes = (f"; {result['cudagraph_skips']} graph(s) skipped by CUDA graphs"
                          if result.get("cudagraph_skips") else "")
            if isinstance(result.get("host_us_a_call"), (int, float)) and result.get("wall_us_a_call"):
                host, wall = result["host_us_a_call"], result["wall_us_a_call"]
                host_notes += (f"; the host issues a call in {host:.0f} of its {wall:.0f} µs"
                               + (" (the host sets the pace)" if host >= HOST_BOUND * wall else ""))
            if ms and 0 < b["total"] <= 1000.0 * ms:
                # The timed rounds' wall time beyond the profiled kernels: the GPU's waits, and
                # whatever the kernels took more or less in the separate profiled round (the
                # timeline below has no such mix)
                beyond = 1000.0 * ms - b["total"]
                lines.append(f"   the timed call {beyond:.1f} µs beyond the profiled kernels "
                             f"({beyond / (1000.0 * ms):.1%} of it)" + host_notes)
            elif ms:
                lines.append("   the profiled kernels took longer than the timed call (the profiler's overhead, "
                             "or a profile of another run): no idle time" + host_notes)
            t = report_.get("timeline")
            if t:
                lines.append(f"   in the profiled calls: span {t['span_us_a_call']:.1f} µs a call, kernels busy "
                             f"{t['busy_us_a_call']:.1f}, the GPU idle {t['idle_us_a_call']:.1f}")
                lines += [f"     waits {g['us']:6.1f} µs after {g['after'][:44]} before {g['before'][:44]}"
                          for g in t.get("longest_gaps", [])]
            if "problems" not in report_:
                lines.append(f"   GEMMs not attributed: {report_.get('unattributed', '')}")
                continue
            reference = (variants.get("default") or {}).get("in_graph")
            comparable = variant != "default" and same_run(result, variants.get("default"))
            against = versus(reference, report_) if reference and comparable else None
            if reference and variant != "default" and not comparable:
                lines.append("   not set against default: measured in another run than default's")
            for p in report_["problems"]:
                isolated = "–" if p["isolated_us"] is None else f"{p['isolated_us']:.1f}"
                gated = "" if p.get("gated_us") is None else f", without launch {p['gated_us']:.1f} µs"
                ratio = p["in_graph_over_isolated"]
                mark = "" if ratio is None else f" ({ratio:.2f}x{' !' if abs(ratio - 1) > tolerance else ''})"
                lines.append(f"   {p['problem']:<36} {p['ran']:<6} x{p['count']:<3} in graph {p['in_graph_us']:8.1f} µs"
                             f", isolated {isolated:>8} µs{mark}{gated}  {p['kernel'][:48]}")
            if against is not None and against["triton_problems"]:
                lines += _versus_lines(against, VERSUS_TOLERANCE)
            if reference and comparable:
                lines += _other_kernel_lines(reference, report_)
            if result.get("default_tuned"):
                d = result["default_tuned"]
                lines.append(f"   default's tuned configs put in place (+defaulttuned): {d['restored']}; after the "
                             f"compile {d['unchanged']} as put, {d['rewritten']} tuned again, {d['own']} kernels "
                             f"tuned by this compile alone")
            if variant != "default" and comparable:
                retuned = retuned_versus(variants["default"], result)
                if retuned:
                    lines.append(f"   runtime-tuned kernels that kept another config than default's: {len(retuned)}")
                    lines += [f"     {r['kernel'][:60]}: {', '.join(r['other'])} against {', '.join(r['base'])}"
                              for r in retuned[:GAPS_KEPT]]
    wins = triton_wins(document, tolerance=VERSUS_TOLERANCE)
    if any(v is not None for v in wins.values()):
        lines.append("== Triton against cuBLAS in the graph (the problems where a variant ran Triton; "
                     "the most any pick could save, as a share of default's call; what ours saved of it)")
        elsewhere = triton_wins(document, tolerance=VERSUS_TOLERANCE, any_run=True)
        for name, found in wins.items():
            apart = ""
            if found is None:
                # Only runs other than default's ran Triton: their kernels are set against
                # default's all the same, within the tolerance that covers two runs' noise
                found, apart = elsewhere.get(name), " (Triton of other runs than default's)"
            if found is None:
                continue
            if not found:
                lines.append(f"   {name:<20} no Triton choice ran faster than cuBLAS{apart}")
                continue
            best = ", ".join(f"{r['problem']} ({r['variant']}, {r['saved_us']:.1f} µs)" for r in found[:3])
            room = headroom(document["workloads"][name], found)
            share = "" if room["share"] is None else f" = {room['share']:.2%} of default's call"
            ours = "" if room["ours_us"] is None else f", ours saved {room['ours_us']:.1f}"
            lines.append(f"   {name:<20} faster on {len(found)}, {room['us']:.1f} µs a call{share}{ours}{apart}: "
                         + best)
    judged = judge_picks(document)
    if judged:
        lines.append("== ours' picks judged in the graph (where max-autotune ran Triton: its time against "
                     "default's cuBLAS, one run)")
        for name, e in judged.items():
            lines.append(f"   {name:<20} agree on {e['agree']} of {e['problems']} (Triton faster {e['triton']}, "
                         f"cuBLAS faster {e['aten']}, within {VERSUS_TOLERANCE:.0%} {e['either']})"
                         + "".join(f"; {w['problem']}: picked {w['picked']}, Triton at {w['ratio']:.2f}x"
                                   for w in e["wrong"]))
        agree, problems = sum(e["agree"] for e in judged.values()), sum(e["problems"] for e in judged.values())
        lines.append(f"   all                  agree on {agree} of {problems}")
    return "\n".join(lines)
