"""The suite's arithmetic: each variant's speed and compile time against default torch.compile
and max-autotune, per workload and over the suite, and the issue's targets. Plain Python over
the results document ({"workloads": {NAME: {VARIANT: {"ms", "compile_s", ...}}}})."""

from __future__ import annotations

import math
import statistics
from typing import Any, Optional

DEFAULT = "default"
MAX_AUTOTUNE = "max_autotune"

# What `ours` must reach on every workload (the whole-model issue).
TARGETS = {"speed_vs_default_min": 0.99, "speed_vs_default_geomean": 1.03,
           "speed_vs_max_autotune_min": 1.00, "compile_vs_default_max": 1.3}


# The host's time to issue a call over the call's time from which the host sets the pace.
HOST_BOUND = 0.9

# How a run's environment says that its variants' rounds took turns (suite.environment's
# "timing"): round r of each variant then ran side by side, and the rounds pair up.
TURNS = "rounds taking turns"


def usable(result: Optional[dict[str, Any]]) -> bool:
    """A variant's result that counts: timed, compiled, and checked against eager."""
    if not result:
        return False
    return (not result.get("error") and isinstance(result.get("ms"), (int, float)) and result["ms"] > 0
            and isinstance(result.get("compile_s"), (int, float)))


def geomean(values: list[float]) -> Optional[float]:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def ratio(numerator: Optional[float], denominator: Optional[float]) -> Optional[float]:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def relative_to_default(result: dict[str, Any]) -> Optional[tuple[float, float]]:
    """(ms, compile s) over those of the default compile measured in the same process."""
    if not isinstance(result.get("default_ms"), (int, float)) or not isinstance(result.get("default_compile_s"),
                                                                                (int, float)):
        return None
    if result["default_ms"] <= 0 or result["default_compile_s"] <= 0:
        return None
    return result["ms"] / result["default_ms"], result["compile_s"] / result["default_compile_s"]


def compare(results: dict[str, dict[str, Any]], variant: str, reference: str) -> Optional[dict[str, float]]:
    """One workload's `variant` against `reference`: speed (reference ms / variant ms: > 1 is
    faster) and compile (variant s / reference s: < 1 compiles faster); None unless both count.
    Two results of different runs (another process, maybe another machine) are compared
    through each one's own default compile: (reference / its default) / (variant / its default)."""
    v, r = results.get(variant), results.get(reference)
    if not usable(v) or not usable(r) or v is None or r is None:
        return None
    if v.get("run") != r.get("run"):
        rv, rr = relative_to_default(v), relative_to_default(r)
        if rv is not None and rr is not None:
            return {"speed": rr[0] / rv[0], "compile": rv[1] / rr[1]}
    return {"speed": r["ms"] / v["ms"], "compile": ratio(v["compile_s"], r["compile_s"]) or math.nan}


def same_run(a: Optional[dict[str, Any]], b: Optional[dict[str, Any]]) -> bool:
    """Both results count and were measured in one workload process (the same run)."""
    return usable(a) and usable(b) and a is not None and b is not None and bool(a.get("run")) \
        and a.get("run") == b.get("run")


def device_speed(results: dict[str, dict[str, Any]], variant: str, reference: str) -> Optional[float]:
    """`reference`'s device time a call over `variant`'s (> 1: the variant's kernels take less),
    from the in-graph profiles of one run: the kernels alone, without the host's gaps that the
    timed rounds include; None unless both were profiled in the same process run."""
    v, r = results.get(variant), results.get(reference)
    if not same_run(v, r) or v is None or r is None:
        return None
    base, mine = (((x.get("in_graph") or {}).get("breakdown_us") or {}).get("total") for x in (r, v))
    if not (isinstance(base, (int, float)) and isinstance(mine, (int, float)) and base > 0 and mine > 0):
        return None
    return base / mine


def paired_speed(document: dict[str, Any], results: dict[str, dict[str, Any]], variant: str,
                 reference: str) -> Optional[dict[str, float]]:
    """`reference`'s round over `variant`'s, round by round, where the two took turns in one
    run: the median and quartiles of those ratios, a band for the run's noise (a band wholly
    above or below 1 is a difference the drift shared by both does not explain); None for
    results of different runs, timed one variant after the other, or dynamic (their rounds
    are kept for the first length only)."""
    v, r = results.get(variant), results.get(reference)
    if not same_run(v, r) or v is None or r is None or "ms_by_length" in v or "ms_by_length" in r:
        return None  # a dynamic workload's rounds_ms hold its first length only
    if TURNS not in str(document.get("runs", {}).get(v.get("run"), {}).get("timing", "")):
        return None
    mine, theirs = v.get("rounds_ms") or [], r.get("rounds_ms") or []
    if len(mine) != len(theirs) or len(mine) < 4:
        return None
    ratios = [a / b for a, b in zip(theirs, mine)]
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    return {"median": median, "q1": q1, "q3": q3, "rounds": len(ratios)}


def compile_spread(results: dict[str, dict[str, Any]], variant: str,
                   reference: str) -> Optional[dict[str, float]]:
    """Where both were compiled several times in one run (suite.py --compiles): the speed of
    each of `variant`'s compiles against `reference`'s median (lowest and highest), beside the
    same for each of `reference`'s own compiles. What Inductor tunes at a kernel's first run
    moves a compile by a few per cent; a variant whose compiles stay inside the reference's
    own spread differs from it by no more than that draw."""
    v, r = results.get(variant), results.get(reference)
    if not same_run(v, r) or v is None or r is None:
        return None
    mine, theirs = ([c["ms"] for c in x.get("compiles") or [] if isinstance(c.get("ms"), (int, float)) and c["ms"] > 0]
                    for x in (v, r))
    if len(mine) < 2 or len(theirs) < 2:
        return None
    base = r["ms"]
    return {"low": base / max(mine), "high": base / min(mine),
            "reference_low": base / max(theirs), "reference_high": base / min(theirs), "compiles": len(mine)}


def timed_ms(result: dict[str, Any], length: str) -> Optional[float]:
    """The rounds' ms a call at `length`: a dynamic workload's "ms_by_length", another's "ms"."""
    by_length = result.get("ms_by_length")
    ms = by_length.get(length) if by_length else result.get("ms")
    return float(ms) if isinstance(ms, (int, float)) and ms > 0 else None


def host_paced(result: dict[str, Any], length: str) -> Optional[bool]:
    """Whether the host set the pace of `result`'s timed rounds at `length`: it took at least
    HOST_BOUND of a call's time to issue a call ("host_ms_by_length"); None where the rounds
    kept no host time (runs before 2026-12-06's sixth session)."""
    host = (result.get("host_ms_by_length") or {}).get(length)
    ms = timed_ms(result, length)
    if not isinstance(host, (int, float)) or ms is None:
        return None
    return host >= HOST_BOUND * ms


def speeds_by_length(results: dict[str, dict[str, Any]], variant: str,
                     reference: str) -> Optional[dict[str, dict[str, Any]]]:
    """A dynamic workload's speed against `reference` at each sequence length, where both ran
    in one run, and whether the host set the pace of either there (None: not known, a side
    kept no host time): at such a length the ratio compares the two processes' hosts, not
    their programs (2026-12-06: three processes with the same program, 0.710 to 0.881 ms a
    call)."""
    v, r = results.get(variant), results.get(reference)
    if not same_run(v, r) or v is None or r is None:
        return None
    mine, theirs = v.get("ms_by_length") or {}, r.get("ms_by_length") or {}
    speeds = {}
    for length, ms in mine.items():
        if not (isinstance(ms, (int, float)) and ms > 0 and isinstance(theirs.get(length), (int, float))):
            continue
        paced = (host_paced(v, length), host_paced(r, length))
        speeds[length] = {"speed": theirs[length] / ms,
                          "host_paced": True if True in paced else (None if None in paced else False)}
    return speeds or None


def variant_names(document: dict[str, Any]) -> list[str]:
    """Every variant in the document, default first, max-autotune second, then first-seen order."""
    names: dict[str, None] = {DEFAULT: None, MAX_AUTOTUNE: None}
    for results in document.get("workloads", {}).values():
        for name in results:
            names.setdefault(name)
    present = {n for results in document.get("workloads", {}).values() for n in results}
    return [n for n in names if n in present]


def summarize(document: dict[str, Any]) -> dict[str, Any]:
    """Per variant: per-workload ratios against default and max-autotune, their geomeans and
    extremes, and (for every variant but the references) which targets it meets."""
    workloads = document.get("workloads", {})
    out: dict[str, Any] = {}
    for variant in variant_names(document):
        rows: dict[str, dict[str, Any]] = {}
        for name, results in workloads.items():
            if variant not in results:
                continue
            vs_default = compare(results, variant, DEFAULT)
            vs_autotune = compare(results, variant, MAX_AUTOTUNE)
            rows[name] = {"speed_vs_default": vs_default["speed"] if vs_default else None,
                          "compile_vs_default": vs_default["compile"] if vs_default else None,
                          "speed_vs_max_autotune": vs_autotune["speed"] if vs_autotune else None,
                          "compile_vs_max_autotune": vs_autotune["compile"] if vs_autotune else None,
                          "device_vs_default": device_speed(results, variant, DEFAULT),
                          "rounds_vs_default": paired_speed(document, results, variant, DEFAULT),
                          "compiles_vs_default": compile_spread(results, variant, DEFAULT),
                          "lengths_vs_default": speeds_by_length(results, variant, DEFAULT)}
        column: dict[str, list[float]] = {key: [v for r in rows.values() if (v := r[key]) is not None]
                  for key in ("speed_vs_default", "compile_vs_default", "speed_vs_max_autotune",
                              "compile_vs_max_autotune", "device_vs_default")}
        entry: dict[str, Any] = {
            "workloads": rows,
            "measured": sum(1 for n, r in workloads.items() if usable(r.get(variant))),
            "failed": sorted(n for n, r in workloads.items() if variant in r and not usable(r[variant])),
            "speed_vs_default_geomean": geomean(column["speed_vs_default"]),
            "speed_vs_default_min": min(column["speed_vs_default"], default=None),
            "speed_vs_max_autotune_geomean": geomean(column["speed_vs_max_autotune"]),
            "speed_vs_max_autotune_min": min(column["speed_vs_max_autotune"], default=None),
            "compile_vs_default_max": max(column["compile_vs_default"], default=None),
            "compile_vs_max_autotune_max": max(column["compile_vs_max_autotune"], default=None),
            "device_vs_default_geomean": geomean(column["device_vs_default"]),
            "device_vs_default_min": min(column["device_vs_default"], default=None),
            "device_vs_default_measured": len(column["device_vs_default"]),
        }
        if variant not in (DEFAULT, MAX_AUTOTUNE):
            entry["targets"] = targets_met(entry, len(workloads))
        out[variant] = entry
    return out


def targets_met(entry: dict[str, Any], workloads: int) -> dict[str, Optional[bool]]:
    """Which of TARGETS a variant's summary meets; None where it cannot be told yet (a
    workload unmeasured against a reference)."""
    rows = entry["workloads"].values()
    complete_default = len(rows) == workloads and all(r["speed_vs_default"] is not None for r in rows)
    complete_autotune = len(rows) == workloads and all(r["speed_vs_max_autotune"] is not None for r in rows)

    def check(value: Optional[float], ok: bool, complete: bool) -> Optional[bool]:
        if value is None:
            return None
        return ok if complete or not ok else None  # a miss is a miss; a pass needs every workload

    return {
        "speed_vs_default_min": check(entry["speed_vs_default_min"], (entry["speed_vs_default_min"] or 0)
                                      >= TARGETS["speed_vs_default_min"], complete_default),
        "speed_vs_default_geomean": check(entry["speed_vs_default_geomean"], (entry["speed_vs_default_geomean"] or 0)
                                          >= TARGETS["speed_vs_default_geomean"], complete_default),
        "speed_vs_max_autotune_min": check(entry["speed_vs_max_autotune_min"], (entry["speed_vs_max_autotune_min"] or 0)
                                           >= TARGETS["speed_vs_max_autotune_min"], complete_autotune),
        "compile_vs_default_max": check(entry["compile_vs_default_max"], (entry["compile_vs_default_max"] or math.inf)
                                        <= TARGETS["compile_vs_default_max"], complete_default),
    }


def fmt(value: Optional[float], spec: str = ".3f") -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:{spec}}"


def table(document: dict[str, Any]) -> str:
    """A Markdown table: per workload each variant's runtime and compile time, and its speed
    against default and max-autotune: the ratio of the medians, in brackets the quartiles
    of the round-by-round ratios where the rounds took turns (their median may differ from
    the ratio of the medians, which can lie at the band's edge), and with several compiles
    (--compiles) the speed of its slowest and fastest compile against default's median,
    beside default's own compiles' ("compiles 0.95-1.00, default's 0.97-1.01"), and for a
    dynamic workload the speed at each length, marked where the host set the pace
    ("(128: 0.776, host-paced; 256: 0.999; 512: 1.002)")."""
    variants = variant_names(document)
    header = ["workload"] + [f"{v}: ms, compile s" for v in variants] + \
             [f"{v} speed vs default / vs max-autotune" for v in variants if v != DEFAULT]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, results in document.get("workloads", {}).items():
        cells = [name]
        for v in variants:
            r = results.get(v)
            if r is None:
                cells.append("not run")
            elif not usable(r):
                cells.append("failed")
            else:
                cells.append(f"{r['ms']:.3f}, {r['compile_s']:.1f}")
        for v in variants:
            if v == DEFAULT:
                continue
            d = compare(results, v, DEFAULT)
            a = compare(results, v, MAX_AUTOTUNE) if v != MAX_AUTOTUNE else None
            band = paired_speed(document, results, v, DEFAULT)
            noise = f" [{band['q1']:.3f}-{band['q3']:.3f}]" if band else ""
            spread = compile_spread(results, v, DEFAULT)
            if spread:
                noise += (f", compiles {spread['low']:.3f}-{spread['high']:.3f}, default's "
                          f"{spread['reference_low']:.3f}-{spread['reference_high']:.3f}")
            lengths = speeds_by_length(results, v, DEFAULT)
            if lengths:
                noise += " (" + "; ".join(f"{length}: {s['speed']:.3f}" + (", host-paced" if s["host_paced"] else "")
                                          for length, s in lengths.items()) + ")"
                if any(s["host_paced"] is None for s in lengths.values()):
                    noise += " host time not kept"
            cells.append(f"{fmt(d['speed'] if d else None)}{noise} / {fmt(a['speed'] if a else None)}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def overview(summary: dict[str, Any]) -> str:
    """One line per variant: its geomeans and extremes against both references."""
    lines = []
    for variant, s in summary.items():
        line = (f"{variant}: {s['measured']} workloads; speed vs default geomean {fmt(s['speed_vs_default_geomean'])} "
                f"(min {fmt(s['speed_vs_default_min'])}), vs max-autotune geomean "
                f"{fmt(s['speed_vs_max_autotune_geomean'])} (min {fmt(s['speed_vs_max_autotune_min'])}); compile vs "
                f"default at most {fmt(s['compile_vs_default_max'], '.2f')}x, vs max-autotune at most "
                f"{fmt(s['compile_vs_max_autotune_max'], '.2f')}x")
        if s.get("device_vs_default_measured") and variant != DEFAULT:
            line += (f"; device time vs default geomean {fmt(s['device_vs_default_geomean'])} "
                     f"(min {fmt(s['device_vs_default_min'])}, {s['device_vs_default_measured']} profiled)")
        if s["failed"]:
            line += f"; failed: {', '.join(s['failed'])}"
        if "targets" in s:
            marks = {True: "met", False: "MISSED", None: "open"}
            line += "; targets: " + ", ".join(f"{k} {marks[v]}" for k, v in s["targets"].items())
        lines.append(line)
    return "\n".join(lines)
