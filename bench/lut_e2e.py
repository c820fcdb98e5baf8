#!/usr/bin/env python3
"""End to end: does a lookup table exported from our model make torch.compile as fast as
max-autotune, at a fraction of the compile time? (GPU machine, torch with Inductor.)

    python3 bench/lut_e2e.py --mmt build/src/cli/matmul_toolkit --model data/models/X.pt \\
        [--model other.pt ...] (--shapeset FILE | --log-normal N [--seed S]) \\
        [--ops mm addmm bmm] [--dtypes bfloat16] [--top-k 1 1+aten 1+aten@10 5] [--out DIR] [--every N] [--limit N]
    python3 bench/lut_e2e.py --table NAME=lut.json [--table ...] --shapeset FILE   # tables made elsewhere

1. Problems: a shapeset file's shapes (its layouts, `--ops` filters, `--dtypes` replaces
   each shape's dtype) or N distinct problems with log-normal sizes drawn here in Python
   with torch-diode's parameters (those of `collect --log-normal`), clamped to
   [--min-size, --max-size], from Python's random.Random(--seed). These are NOT the draws of
   the C++ generator: `collect --log-normal --seed S` gives other problems, and the default
   seed is neither collect's (42) nor create-validation's (43). The list used is written to
   OUT/problems_shapeset.json, so the run can be repeated with --shapeset.
2. For each --model and each K of --top-k: `MMT export-lut --shapeset OUT/problems_shapeset.json
   --lut-format inductor --top-k K --output OUT/lut_<model>_top<K>.json` (K+aten adds
   --with-aten: the table also offers ATen, which Inductor times against the picks;
   1+aten@P adds --aten-within P: ATen only where the model predicts it within P % of the
   pick, else the one predicted faster alone; 1+aten@Tus adds --aten-from T: only where the
   faster of the two is predicted at T µs or more; +fastP adds --compile-margin P: the
   fastest-compiling kernel config within P % of the best; +pairedP adds
   --paired-compile-margin P: that margin where the table pairs the pick with ATen; +aloneTus adds
   --aten-alone-from T: ATen alone where predicted faster at T µs or more; +gemv adds
   --aten-alone-gemv: ATen alone where M = 1 and predicted fastest; +runnerP adds
   --runner-up-within P: a pair also offers the best other kernel within P %; +heavyP adds
   --heavy-pick-alone P: a heavy pick predicted more than P % faster than ATen alone where K
   compiles slowly; a final +noepi
   compiles with that table and Inductor's benchmark_epilogue_fusion off, +precompile with
   Inductor's parallel precompile of the table's hits, which use_table skips). Each
   --table NAME=FILE is one more variant, a table exported beforehand (e.g. on a machine
   without a GPU, from OUT/problems_shapeset.json of an earlier run; NAME may end in the
   setting suffixes). Each --use-model POLICY is one more variant: no table, the model deciding
   every GEMM while Inductor compiles it (matmul_toolkit_inductor.use_model's choices handler
   over libmmt_rank.so), with that decision policy.
3. In this one process, per problem (operands seeded, uniform in [0.1, 1.1], in the
   problem's layout; addmm with the 1-D bias torch.nn.Linear passes) torch.compile
   (dynamic=False) of torch.mm / addmm / bmm, every compile from scratch (a function of
   its own for Dynamo, torch._dynamo.reset per problem, fresh_cache, no local autotune or
   FX graph cache), with max_autotune=True and max_autotune_gemm_backends="TRITON,ATEN"
   in every variant:
     - max-autotune: Inductor's own choices (its configs and ATen), benchmarked;
     - MODEL/topK: the same with the table installed as matmul_toolkit_inductor's use_table
       installs it (config.lookup_table.table, a LookupTableChoices handler, no parallel
       precompile of a hit's choices). On a hit Inductor takes only the table's Triton configs
       (one config: no benchmarking at all); anything else falls back to full max-autotune
       and is reported per problem ('miss': none of the keys Inductor looked up is in the
       table; 'unused': a key matched but Inductor does not use the triton::mm template for
       this shape, e.g. a large-K mm it autotunes with decompose_k; 'none': Inductor never
       consulted the table).
   The table variants compile before max-autotune. --aa adds plain max-autotune once more,
   compiled first, as a variant: its ratios (ideally 1) show run-to-run noise (autotuning may
   pick another kernel) and any effect of the compile order.
   Compile time: wall time of the first call (trace, lowering, autotuning, first run).
   Runtime (steady state, warm L2): after warmup, the compiled call is captured in one CUDA
   graph as back-to-back calls, as many as make a replay last about --sample-ms (at least
   --replays), so host launch cost never shows; once every variant of the problem is
   compiled, the graphs (and eager ATen's, as a reference) are replayed round-robin between
   CUDA events, --repeats times after an untimed ~50 ms warm-up, and the median per call is
   taken: clock drift hits every variant alike. Each variant's output (first call and
   graph) is checked against eager (max |out - ref| / max |ref| < 2e-2); a wrong or failed
   variant is reported and left out of the ratios.
4. Report (stdout; progress on stderr): device, torch and triton versions; per problem
   max-autotune's runtime and compile time, then per variant
     runtime ratio = max-autotune time / variant time   (> 1: the variant's kernel is faster)
     compile ratio = variant compile / max-autotune compile (< 1: the variant compiles faster)
   and the lookup result; per variant overall the runtime ratio's geomean, median and worst
   (min), the total-time ratio (sum of max-autotune times / sum of variant times), the compile
   ratio of the sums, and the misses. OUT/lut_e2e.csv (one row per problem and variant) and
   OUT/lut_e2e.json are rewritten after every problem; Ctrl-C prints what is done (exit 130).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

# The tables are installed the way the shipped package's use_table does it.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))

from matmul_toolkit_inductor.dataset import write_file_atomically  # noqa: E402

OPS = ("mm", "addmm", "bmm")
LAYOUTS = ("nn", "nt", "tn", "tt")
DTYPES = ("float16", "bfloat16", "float32")
DTYPE_SHORT = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}
# torch-diode's log-normal fit (mean, std of log size), as collect --log-normal uses them.
LOG_NORMAL = {"M": (6.5725472164323095, 2.556199441605505),
              "N": (5.913930073563466, 1.66968141897024),
              "K": (6.204916071423808, 2.1646646856090177)}
DEFAULT_SEED = 2026
MAX_REL_ERROR = 2e-2
AUTOTUNE = "max-autotune"
AUTOTUNE_AGAIN = "max-autotune-again"
RESULTS_JSON = "lut_e2e.json"
RESULTS_CSV = "lut_e2e.csv"
SHAPESET_NAME = "problems_shapeset.json"
CSV_FIELDS = ["problem", "op", "layout", "B", "M", "N", "K", "dtype", "variant", "runtime_ms",
              "compile_s", "runtime_ratio", "compile_ratio", "lookup", "lookup_configs", "kernel",
              "max_rel_error", "error"]


class UsageError(Exception):
    """Bad input: printed as `error: <subject>: <what>`, exit code 2."""

    def __init__(self, subject: str, what: str) -> None:
        super().__init__(f"{subject}: {what}")


# ------------------------------------------------------------------------------ problems
@dataclass(frozen=True)
class Problem:
    op: str
    layout: str
    B: int
    M: int
    N: int
    K: int
    dtype: str

    @property
    def op_key(self) -> str:
        """The shapeset's operation key: mm, mm_nt, addmm_tt, ..."""
        return self.op if self.layout == "nn" else f"{self.op}_{self.layout}"

    @property
    def name(self) -> str:
        dims = (f"{self.B}x" if self.op == "bmm" else "") + f"{self.M}x{self.N}x{self.K}"
        return f"{self.op_key} {dims} {DTYPE_SHORT.get(self.dtype, self.dtype)}"

    def shape_document(self) -> dict[str, Any]:
        """The shape as a shapeset holds it (row-major output, torch-diode's field order)."""
        return {"version": 1, "B": self.B, "M": self.M, "M_dtype": self.dtype, "N": self.N,
                "K": self.K, "K_dtype": self.dtype, "out_dtype": self.dtype,
                "out_size": [self.B, self.M, self.N],
                "out_stride": [self.M * self.N, self.N, 1]}


def parse_op_key(key: str) -> tuple[str, str]:
    op, _, layout = key.partition("_")
    layout = layout or "nn"
    if op not in OPS or layout not in LAYOUTS:
        raise ValueError(f"unknown operation '{key}' (expected mm, addmm or bmm, optionally _nt, _tn or _tt)")
    return op, layout


def problems_from_shapeset(document: Any, ops: list[str], dtypes: Optional[list[str]],
                           notes: list[str]) -> list[Problem]:
    """The shapeset's problems of the listed ops (in `dtypes` when given, else each shape's
    own dtype), distinct and in file order. Shapes that cannot run here go to `notes`."""
    if not isinstance(document, dict) or not isinstance(document.get("operations"), dict):
        raise ValueError('not a shapeset ({"operations": {OP: {"shapes": [...]}}})')
    problems: list[Problem] = []
    for key, entry in document["operations"].items():
        op, layout = parse_op_key(key)
        if op not in ops:
            continue
        for i, shape in enumerate(entry.get("shapes", [])):
            try:
                problems += shape_problems(op, layout, shape, dtypes)
            except (KeyError, TypeError, ValueError) as e:
                notes.append(f"{key} shape {i}: skipped: {e}")
    return distinct(problems)


def shape_problems(op: str, layout: str, shape: dict[str, Any], dtypes: Optional[list[str]]) -> list[Problem]:
    dims = {name: int(shape[name]) for name in ("B", "M", "N", "K")}
    if any(v < 1 for v in dims.values()):
        raise ValueError(f"sizes must be positive: {dims}")
    if op != "bmm":
        dims["B"] = 1
    if dtypes:
        return [Problem(op, layout, dtype=d, **dims) for d in dtypes]
    own = {shape["M_dtype"], shape["K_dtype"], shape["out_dtype"]}
    if len(own) != 1:
        raise ValueError(f"mixed dtypes {sorted(own)} (torch.{op} takes one)")
    dtype = own.pop()
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype} is not one of {', '.join(DTYPES)}")
    return [Problem(op, layout, dtype=dtype, **dims)]


def distinct(problems: list[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))


def draw_dim(rng: random.Random, mean: float, std: float, min_size: int, max_size: int) -> int:
    """As collect --log-normal: exp(N(mean, std)) clamped to the range, rounded down."""
    return int(math.floor(min(max(rng.lognormvariate(mean, std), min_size), max_size)))


def log_normal_problems(count: int, seed: int, ops: list[str], dtypes: list[str], layouts: list[str],
                        batch_sizes: list[int], min_size: int, max_size: int) -> list[Problem]:
    """`count` distinct problems drawn as the C++ generator draws them (sizes M, N, K, then
    op, dtype, layout, bmm batch), but from Python's random.Random(seed): other draws."""
    rng = random.Random(seed)
    problems: dict[Problem, None] = {}
    for _ in range(max(10000, 200 * count)):
        if len(problems) == count:
            break
        m, n, k = (draw_dim(rng, *LOG_NORMAL[d], min_size, max_size) for d in ("M", "N", "K"))
        op = rng.choice(ops)
        dtype = rng.choice(dtypes)
        layout = rng.choice(layouts)
        batch = rng.choice(batch_sizes) if op == "bmm" else 1
        problems.setdefault(Problem(op, layout, batch, m, n, k, dtype))
    if len(problems) < count:
        raise UsageError("--log-normal", f"asked for {count} distinct problems, the size range "
                                         f"and lists give only {len(problems)}")
    return list(problems)


def shapeset_document(problems: list[Problem]) -> dict[str, Any]:
    """A shapeset `export-lut --shapeset` reads: operations in first-seen order."""
    operations: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for p in problems:
        operations.setdefault(p.op_key, {"shapes": []})["shapes"].append(p.shape_document())
    return {"operations": operations}


# ------------------------------------------------------------------------------- tables
@dataclass
class Variant:
    """One compile setting: max-autotune alone (table None) or a model's top-K table."""
    name: str
    model: Optional[str] = None
    top_k: Optional[str] = None
    lut: Optional[str] = None
    table: Optional[dict[str, Any]] = None
    export_s: Optional[float] = None
    settings: Optional[dict[str, Any]] = None  # Inductor settings (and TABLE_OPTIONS) of this variant only
    hook_policy: Optional[str] = None  # use_model with this decision policy instead of a table


# Suffixes of a --top-k item, each compiling that table with settings of its own:
# +noepi turns Inductor's benchmark_epilogue_fusion off (a table that offers two choices then
# makes Inductor time them at lowering instead of deferring the choice to the scheduler; it
# spared no compile of the pick on the H200); +precompile installs the table with
# use_table's precompile_hits=True: Inductor precompiles a hit's choices in its worker pool
# before timing them, and so compiles a paired pick three times instead of twice (docs/lookup_tables.md,
# the benchmarks of the picks).
SETTING_SUFFIXES: dict[str, dict[str, Any]] = {
    "+noepi": {"benchmark_epilogue_fusion": False},
    "+precompile": {"precompile_hits": True},
}
TABLE_OPTIONS = ("precompile_hits",)  # settings that are use_table's options, not Inductor config


def model_labels(models: list[str]) -> list[str]:
    """File-name-safe, distinct labels: the model files' stems (with _2, _3 on repeats)."""
    labels: list[str] = []
    for path in models:
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.splitext(os.path.basename(path))[0]) or "model"
        label, n = stem, 2
        while label in labels:
            label, n = f"{stem}_{n}", n + 1
        labels.append(label)
    return labels


NUMBER = r"[0-9]+(?:\.[0-9]+)?"


def table_size(text: str) -> tuple[int, bool, list[str]]:
    """A --top-k item: "K" (K configs), "K+aten" (export-lut --with-aten: Inductor also
    times its ATen choice, a top-1 table too), "1+aten@P" (--aten-within P: ATen beside the
    pick only where the model predicts the two within P %, else the faster alone) or
    "1+aten@Tus" (--aten-from T: only where the faster is predicted at T µs or more),
    optionally followed by "+fastP" (--compile-margin P: the fastest-compiling kernel
    config within P % of the best) and, with 1+aten, "+pairedP" (--paired-compile-margin P:
    that margin where the table pairs the pick with ATen), "+aloneTus" (--aten-alone-from
    T: ATen alone where predicted faster and at T µs or more), "+gemv" (--aten-alone-gemv:
    ATen alone where M = 1 and predicted fastest), "+runnerP" (--runner-up-within P: a
    pair also offers the best other kernel config within P % of the pick) and, with
    1+aten@, "+heavyP" (--heavy-pick-alone P: where K compiles slowly, a register-heavy pick
    predicted more than P % faster than ATen stands alone). The third item: export-lut's
    extra arguments."""
    match = re.fullmatch(rf"([0-9]+)(\+aten(?:@({NUMBER})(%|us)?)?)?(?:\+fast({NUMBER}))?(?:\+paired({NUMBER}))?"
                         rf"(?:\+alone({NUMBER})us)?(\+gemv)?(?:\+runner({NUMBER}))?(?:\+heavy({NUMBER}))?", text)
    if not match or int(match.group(1)) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not K, K+aten, 1+aten@PERCENT or 1+aten@Tus with K >= 1, "
                                         "optionally +fastPERCENT, +pairedPERCENT, +aloneTus, +gemv, +runnerPERCENT "
                                         "and +heavyPERCENT")
    extra: list[str] = []
    if match.group(3) is not None:
        if int(match.group(1)) != 1:
            raise argparse.ArgumentTypeError(f"{text!r}: +aten@ needs K = 1")
        extra = ["--aten-from" if match.group(4) == "us" else "--aten-within", match.group(3)]
    if match.group(5) is not None:
        extra += ["--compile-margin", match.group(5)]
    for group, option, name in ((6, "--paired-compile-margin", "+paired"), (7, "--aten-alone-from", "+alone")):
        if match.group(group) is None:
            continue
        if int(match.group(1)) != 1 or not match.group(2):
            raise argparse.ArgumentTypeError(f"{text!r}: {name} needs 1+aten")
        extra += [option, match.group(group)]
    if match.group(8) is not None:
        if int(match.group(1)) != 1 or not match.group(2):
            raise argparse.ArgumentTypeError(f"{text!r}: +gemv needs 1+aten")
        extra.append("--aten-alone-gemv")
    if match.group(9) is not None:
        if int(match.group(1)) != 1 or not match.group(2):
            raise argparse.ArgumentTypeError(f"{text!r}: +runner needs 1+aten")
        extra += ["--runner-up-within", match.group(9)]
    if match.group(10) is not None:
        if match.group(3) is None:
            raise argparse.ArgumentTypeError(f"{text!r}: +heavy needs 1+aten@ (a pairing rule)")
        extra += ["--heavy-pick-alone", match.group(10)]
    return int(match.group(1)), bool(match.group(2)), extra


def split_settings(item: str) -> tuple[str, Optional[dict[str, Any]]]:
    """A --top-k item without its SETTING_SUFFIXES (any order, at the end), and the Inductor
    settings they ask for (None without any)."""
    settings: dict[str, Any] = {}
    found = True
    while found:
        found = False
        for suffix, patch in SETTING_SUFFIXES.items():
            if item.endswith(suffix) and not set(patch) & set(settings):
                item, found = item[:-len(suffix)], True
                settings |= patch
    return item, settings or None


def export_lut(mmt: str, model: str, shapeset: str, top_k: str, output: str, search_space: str) -> float:
    """Runs export-lut; seconds it took. Raises UsageError with its last error line."""
    k, with_aten, extra = table_size(top_k)
    command = [mmt, "export-lut", "--model", model, "--shapeset", shapeset, "--lut-format", "inductor",
               "--top-k", str(k), "--search-space", search_space, "--output", output]
    if with_aten:
        command.append("--with-aten")
    command += extra
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise UsageError(model, f"export-lut failed (exit {done.returncode}): {lines[-1] if lines else ''}")
    return time.monotonic() - start


def make_variants(args: argparse.Namespace, shapeset: str) -> list[Variant]:
    variants = []
    for model, label in zip(args.model, model_labels(args.model)):
        for item in args.top_k:
            k, settings = split_settings(item)
            lut = os.path.join(args.out, f"lut_{label}_top{re.sub(r'[^A-Za-z0-9.]', '_', k)}.json")
            seconds = export_lut(args.mmt, model, shapeset, k, lut, args.search_space)
            with open(lut) as f:
                table = json.load(f)
            variants.append(Variant(f"{label}/top{item}", model, k, lut, table, seconds, settings))
            print(f"exported {lut}: {len(table)} keys in {seconds:.1f} s", file=sys.stderr)
    for name, path in args.table:
        try:
            with open(path) as f:
                table = json.load(f)
        except (OSError, ValueError) as e:
            raise UsageError(path, f"--table: {e}")
        if not isinstance(table, dict):
            raise UsageError(path, "--table: not an Inductor lookup table (a JSON object of keys)")
        variants.append(Variant(name, lut=path, table=table, settings=split_settings(name)[1]))
    hook_model = args.model[0] if args.model else ""
    for policy in args.use_model or []:
        variants.append(Variant(f"use_model/{policy}", model=hook_model or "the default model", hook_policy=policy))
    again = [Variant(AUTOTUNE_AGAIN)] if args.aa else []
    return again + variants + [Variant(AUTOTUNE)]


# A --use-model item POLICY+pad: the model also decides Inductor's shape padding (pad="model").
PAD_SUFFIX = "+pad"


def hook_settings(item: str) -> dict[str, Any]:
    """use_model's arguments of one --use-model item: POLICY, or POLICY+pad."""
    if item.endswith(PAD_SUFFIX):
        return {"policy": item[: -len(PAD_SUFFIX)], "pad": "model"}
    return {"policy": item}


@contextlib.contextmanager
def model_installed(model: str, item: str) -> Iterator[Any]:
    """use_model as a user installs it (every compiling thread, its config settings), forced
    onto any GPU, with the --use-model item's policy and padding. Yields the hook and why it
    was forced (None on the model's own GPU)."""
    from matmul_toolkit_inductor.model_hook import gpu_mismatch, use_model

    with use_model(model or None, force=True, **hook_settings(item)) as hook:
        yield hook, gpu_mismatch(hook.model.info())


def hook_status(hook: Any) -> str:
    """hit: the model decided a GEMM; miss: it left every GEMM to Inductor; none: not asked."""
    if not hook.decisions:
        return "none"
    return "hit" if any(d.decision != "fallback" for d in hook.decisions) else "miss"


# ----------------------------------------------------------------------------- statistics
def geomean(values: list[float]) -> Optional[float]:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def ratio(numerator: Optional[float], denominator: Optional[float]) -> Optional[float]:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def usable(result: Optional[dict[str, Any]]) -> bool:
    """A variant's result whose time counts: measured and correct."""
    return result is not None and result.get("runtime_ms") is not None and not result.get("error")


def summarize(records: list[dict[str, Any]], variant: str) -> dict[str, Any]:
    """One variant against max-autotune over the problems where both have a usable result."""
    pairs = [(r["results"][AUTOTUNE], r["results"][variant]) for r in records
             if usable(r["results"].get(AUTOTUNE)) and usable(r["results"].get(variant))]
    lookups = [r["results"][variant].get("lookup") for r in records if variant in r["results"]]
    ratios = [a["runtime_ms"] / v["runtime_ms"] for a, v in pairs]
    hit_ratios = [a["runtime_ms"] / v["runtime_ms"] for a, v in pairs if v.get("lookup") == "hit"]
    return {
        "problems": len(pairs),
        "failed": sum(1 for r in records if variant in r["results"] and not usable(r["results"][variant])),
        "hits": lookups.count("hit"),
        "misses": lookups.count("miss"),
        "unused": lookups.count("unused"),
        "not_consulted": lookups.count("none"),
        "runtime_ratio_geomean": geomean(ratios),
        "runtime_ratio_geomean_hits": geomean(hit_ratios),
        "runtime_ratio_median": statistics.median(ratios) if ratios else None,
        "runtime_ratio_worst": min(ratios) if ratios else None,
        "total_time_ratio": ratio(sum(a["runtime_ms"] for a, _ in pairs), sum(v["runtime_ms"] for _, v in pairs)),
        "compile_ratio": ratio(sum(v["compile_s"] for _, v in pairs), sum(a["compile_s"] for a, _ in pairs)),
        "compile_s_total": sum(v["compile_s"] for _, v in pairs),
        "autotune_compile_s_total": sum(a["compile_s"] for a, _ in pairs),
    }


# -------------------------------------------------------------------------------- reports
def fmt(value: Optional[float], spec: str = ".2f", unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


def header(variants: list[Variant]) -> str:
    names = ", ".join(v.name for v in variants if v.name != AUTOTUNE)
    return (f"per problem: max-autotune runtime (ms, CUDA-graph replay) and compile time (s); then for "
            f"each of {names}:\n"
            "  runtime ratio = max-autotune time / variant time (>1: variant faster than max-autotune), "
            "compile ratio = variant compile / max-autotune compile (<1: variant compiles faster), "
            "lookup hit / miss (no key) / unused (key found, template not used here) / none (not consulted)")


def problem_line(record: dict[str, Any], variants: list[Variant]) -> str:
    auto = record["results"].get(AUTOTUNE, {})
    parts = [f"{record['problem']:<26} max-autotune {describe_time(auto)}"]
    for v in variants:
        if v.name == AUTOTUNE:
            continue
        r = record["results"].get(v.name, {})
        lookup = r.get("lookup") or "-"
        if not usable(r):
            parts.append(f"{v.name}: FAILED ({r.get('error', 'not run')}) [{lookup}]")
            continue
        rt = ratio(auto.get("runtime_ms"), r["runtime_ms"]) if usable(auto) else None
        cr = ratio(r["compile_s"], auto.get("compile_s")) if usable(auto) else None
        parts.append(f"{v.name}: {fmt(rt)}x rt, {fmt(cr)}x compile [{lookup}]")
    return " | ".join(parts)


def describe_time(result: dict[str, Any]) -> str:
    if not usable(result):
        return f"FAILED ({result.get('error', 'not run')})"
    return f"{result['runtime_ms']:.4f} ms, {result['compile_s']:.1f} s ({result.get('kernel', '?')})"


def summary_table(summary: dict[str, dict[str, Any]]) -> str:
    lines = ["| variant | problems | runtime ratio geomean | (hits only) | median | worst | total-time ratio "
             "| compile ratio | compile s (max-autotune s) | misses | unused | not consulted | failed |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in summary.items():
        lines.append(
            f"| {name} | {s['problems']} | {fmt(s['runtime_ratio_geomean'], '.3f')} | "
            f"{fmt(s['runtime_ratio_geomean_hits'], '.3f')} | {fmt(s['runtime_ratio_median'], '.3f')} | "
            f"{fmt(s['runtime_ratio_worst'], '.3f')} | {fmt(s['total_time_ratio'], '.3f')} | "
            f"{fmt(s['compile_ratio'], '.3f')} | {s['compile_s_total']:.0f} ({s['autotune_compile_s_total']:.0f}) | "
            f"{s['misses']} | {s['unused']} | {s['not_consulted']} | {s['failed']} |")
    lines.append("runtime ratios: max-autotune time / variant time (>1: faster than max-autotune); total-time "
                 "ratio: sum of max-autotune times / sum of the variant's; compile ratio: sum of the variant's "
                 "compile times / sum of max-autotune's (<1: compiles faster). Over problems where both ran "
                 "correctly.")
    return "\n".join(lines)


def csv_text(records: list[dict[str, Any]], variants: list[Variant]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for record in records:
        auto = record["results"].get(AUTOTUNE, {})
        for name in [v.name for v in variants] + ["eager"]:
            r = record["results"].get(name)
            if r is None:
                continue
            counts = usable(r) and usable(auto)
            writer.writerow({
                **{k: record[k] for k in ("problem", "op", "layout", "B", "M", "N", "K", "dtype")},
                "variant": name, "runtime_ms": r.get("runtime_ms"), "compile_s": r.get("compile_s"),
                "runtime_ratio": ratio(auto["runtime_ms"], r["runtime_ms"]) if counts else None,
                "compile_ratio": ratio(r.get("compile_s"), auto["compile_s"]) if counts else None,
                "lookup": r.get("lookup"), "lookup_configs": r.get("lookup_configs"), "kernel": r.get("kernel"),
                "max_rel_error": r.get("max_rel_error"), "error": r.get("error")})
    return out.getvalue()


def write_results(out: str, result: dict[str, Any], variants: list[Variant]) -> None:
    result["summary"] = {v.name: summarize(result["problems"], v.name) for v in variants if v.name != AUTOTUNE}
    write_file_atomically(Path(out, RESULTS_JSON), json.dumps(result, indent=1) + "\n")
    write_file_atomically(Path(out, RESULTS_CSV), csv_text(result["problems"], variants))


# ------------------------------------------------------------------------------ the GPU side
def import_torch() -> tuple[Any, str]:
    """torch (with CUDA and Inductor's lookup table) and triton's version; UsageError if not."""
    try:
        import torch
        import torch._inductor.config  # noqa: F401
        from torch._inductor.lookup_table.choices import LookupTableChoices  # noqa: F401
    except ImportError as e:
        raise UsageError("python", f"torch with torch._inductor.lookup_table is needed: {e}")
    if not torch.cuda.is_available():
        raise UsageError("cuda", "no CUDA device (Inductor consults the lookup table for CUDA inputs only)")
    try:
        import triton
        triton_version = getattr(triton, "__version__", "?")
    except ImportError:
        triton_version = "not installed"
    return torch, triton_version


def make_operands(torch: Any, p: Problem, seed: int) -> list[Any]:
    """Uniform in [0.1, 1.1] in the problem's layout ('t': stored transposed); addmm: 1-D bias."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dtype = getattr(torch, p.dtype)
    batch = [p.B] if p.op == "bmm" else []

    def uniform(*shape: int) -> Any:
        return (torch.rand(*shape, generator=gen, device="cuda", dtype=torch.float32) + 0.1).to(dtype)

    def matrix(rows: int, cols: int, transposed: bool) -> Any:
        return uniform(*batch, cols, rows).transpose(-1, -2) if transposed else uniform(*batch, rows, cols)

    a = matrix(p.M, p.K, p.layout[0] == "t")
    b = matrix(p.K, p.N, p.layout[1] == "t")
    return [uniform(p.N), a, b] if p.op == "addmm" else [a, b]


def max_rel_error(out: Any, ref: Any) -> float:
    diff = (out.float() - ref.float()).abs().max().item()
    scale = ref.float().abs().max().item()
    return diff / scale if scale > 0 else diff


@dataclass
class Timing:
    """How runtimes are taken (see --replays, --repeats, --sample-ms)."""
    min_calls: int
    repeats: int
    sample_ms: float


@dataclass
class Captured:
    """A CUDA graph of `calls` back-to-back calls, its last output, and what must stay alive
    while it is replayed (the compiled function, whose kernels the graph launches)."""
    graph: Any
    calls: int
    out: Any
    keep: Any = None


def capture(torch: Any, fn: Callable[[], Any], calls: int) -> tuple[Any, Any]:
    """A CUDA graph of `calls` calls of fn (warmed up on a side stream first) and its output."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            out = fn()
    return graph, out


def capture_for_timing(torch: Any, fn: Callable[[], Any], timing: Timing, keep: Any = None) -> Captured:
    """Enough calls in one graph that a replay lasts about --sample-ms (at least --replays):
    the GPU runs them back to back, so host launch cost never shows in the time."""
    one, _ = capture(torch, fn, 1)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    one.replay()
    start.record()
    for _ in range(5):
        one.replay()
    end.record()
    end.synchronize()
    estimate_ms = max(start.elapsed_time(end) / 5, 1e-4)
    del one
    calls = max(timing.min_calls, min(10000, math.ceil(timing.sample_ms / estimate_ms)))
    graph, out = capture(torch, fn, calls)
    return Captured(graph, calls, out, keep)


def time_interleaved(torch: Any, captured: dict[str, Captured], timing: Timing) -> dict[str, float]:
    """Median ms per call of each graph, replayed round-robin (after an untimed warm-up of
    about 50 ms so the clocks are up), so clock and temperature drift hit every variant alike."""
    rounds = max(1, math.ceil(50.0 / (timing.sample_ms * max(1, len(captured)))))
    for _ in range(rounds):
        for c in captured.values():
            c.graph.replay()
    events: dict[str, list[Any]] = {name: [] for name in captured}
    for _ in range(timing.repeats):
        for name, c in captured.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            c.graph.replay()
            end.record()
            events[name].append((start, end))
    torch.cuda.synchronize()
    return {name: statistics.median(s.elapsed_time(e) / captured[name].calls for s, e in pairs)
            for name, pairs in events.items()}


class LookupRecorder:
    """A LookupTableChoices that records every lookup: keys tried, configs found."""

    def __init__(self) -> None:
        from torch._inductor.lookup_table.choices import LookupTableChoices

        from matmul_toolkit_inductor.lut import hit_noting_choices

        lookups: list[dict[str, Any]] = []

        class Recording(hit_noting_choices(LookupTableChoices)):  # type: ignore[misc]
            def lookup_template_configs(self, kernel_inputs: Any, op_name: str, template_uids: list[str],
                                        template_hash_map: Optional[dict[str, Optional[str]]] = None
                                        ) -> dict[str, list[dict[str, Any]]]:
                found = super().lookup_template_configs(kernel_inputs, op_name, template_uids, template_hash_map)
                keys = [k for k in self.make_lookup_key_variants(kernel_inputs, op_name) if k]
                table = self._get_lookup_table()
                lookups.append({"op": op_name, "keys": keys, "in_table": any(k in table for k in keys),
                                "configs": sum(len(c) for c in found.values())})
                return found

        self.lookups = lookups
        self.handler = Recording()

    def status(self) -> str:
        """hit: configs taken from the table; unused: a key matched but Inductor's templates
        here exclude its entries (e.g. decompose_k shapes drop triton::mm); miss: no key in
        the table; none: Inductor never looked."""
        if not self.lookups:
            return "none"
        if any(entry["configs"] for entry in self.lookups):
            return "hit"
        return "unused" if any(entry["in_table"] for entry in self.lookups) else "miss"


@contextlib.contextmanager
def choices_handler(handler: Any) -> Iterator[None]:
    from torch._inductor.choices import InductorChoices
    from torch._inductor.virtualized import V

    V.set_choices_handler(handler)
    try:
        yield
    finally:
        V.set_choices_handler(InductorChoices())


def inductor_patch(table: Optional[dict[str, Any]], settings: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The same max-autotune settings for every variant; only the table (and a table
    variant's own settings) differ."""
    return {"max_autotune": True, "max_autotune_gemm": True, "max_autotune_gemm_backends": "TRITON,ATEN",
            "autotune_local_cache": False, "fx_graph_cache": False, "lookup_table.table": table} | \
        {name: value for name, value in (settings or {}).items() if name not in TABLE_OPTIONS}


def fresh_gemm(op: Callable[..., Any]) -> Callable[..., Any]:
    """A function with its own code object: Dynamo caches compiled code per code object, so
    every variant compiles from scratch while the earlier variants' compiled code (and the
    kernels their graphs launch) stays alive until the problem is done."""
    return eval("lambda *xs: op(*xs)", {"op": op})


CACHE_ROOT: list[str] = []  # the parent of every fresh_cache dir, removed at exit


def cache_root() -> str:
    """Inductor's fresh_cache dirs go under one temp dir of this run, removed at the end:
    fresh_cache's own removal can race compile workers still writing there."""
    if not CACHE_ROOT:
        CACHE_ROOT.append(tempfile.mkdtemp(prefix="lut_e2e_cache_"))
    return CACHE_ROOT[0]


CONSTEXPR = re.compile(r"\b(BLOCK_M|BLOCK_N|BLOCK_K|GROUP_M)\s*:\s*tl\.constexpr\s*=\s*(\d+)")
LAUNCH = re.compile(r"\b(num_stages|num_warps)\s*[=:]\s*['\"]?(\d+)")


def kernel_of(codes: list[str]) -> str:
    """What the compiled GEMM runs, read from Inductor's output code: "triton MxNxK gG sS wW"
    (its Triton template's config), "aten" (an extern cuBLAS call), or "other"."""
    text = "\n".join(codes)
    at = text.find("def triton_tem_")
    if at >= 0:
        block = dict(CONSTEXPR.findall(text[at:at + 4000]))
        launch = dict(LAUNCH.findall(text[max(0, at - 30000):at]))
        if "BLOCK_M" in block:
            return (f"triton {block['BLOCK_M']}x{block.get('BLOCK_N')}x{block.get('BLOCK_K')} "
                    f"g{block.get('GROUP_M', '?')} s{launch.get('num_stages', '?')} w{launch.get('num_warps', '?')}")
        return "triton"
    if re.search(r"extern_kernels\.(mm|addmm|bias_addmm|bmm|baddbmm)\b", text):
        return "aten"
    return "other" if text else "unknown"


@contextlib.contextmanager
def output_code(codes: list[str]) -> Iterator[None]:
    """Collects the output code Inductor writes (as run_and_get_code does, without its
    Dynamo reset, which would free the earlier variants' kernels)."""
    from unittest import mock

    from torch._inductor.graph import GraphLowering

    def save(code: str) -> None:
        codes.append(code)

    with mock.patch.object(GraphLowering, "save_output_code", save):
        yield


def compile_variant(torch: Any, p: Problem, operands: list[Any], ref: Any, variant: Variant,
                    timing: Timing) -> tuple[dict[str, Any], Optional[Captured]]:
    """Compile from scratch with the variant's settings, check, capture for timing; a failure
    is a result, not an exception."""
    from torch._inductor import config as inductor_config
    from torch._inductor.choices import InductorChoices
    from torch._inductor.utils import fresh_cache

    from matmul_toolkit_inductor import lut

    recorder = LookupRecorder() if variant.table is not None else None
    hook: Any = None
    forced: Optional[str] = None
    lut.TABLE_HITS.op = None
    lut.TABLE_HITS.skip_precompile = variant.table is not None and not (variant.settings or {}).get("precompile_hits")
    result: dict[str, Any] = {"runtime_ms": None, "compile_s": None}
    captured = None
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(fresh_cache(dir=cache_root()))
            stack.enter_context(inductor_config.patch(inductor_patch(variant.table, variant.settings)))
            if variant.hook_policy:
                hook, forced = stack.enter_context(model_installed(
                    "" if variant.model == "the default model" else variant.model or "", variant.hook_policy))
            else:
                stack.enter_context(choices_handler(recorder.handler if recorder else InductorChoices()))
            compiled = torch.compile(fresh_gemm(getattr(torch, p.op)), dynamic=False)
            codes: list[str] = []
            with output_code(codes):
                start = time.perf_counter()
                out = compiled(*operands)
                torch.cuda.synchronize()
                result["compile_s"] = time.perf_counter() - start
            if not codes:  # Dynamo ran the function eagerly: nothing of this variant was compiled
                raise RuntimeError("Inductor produced no code (Dynamo fell back to eager)")
            result["kernel"] = kernel_of(codes)
            result["max_rel_error"] = max_rel_error(out, ref)
            captured = capture_for_timing(torch, lambda: compiled(*operands), timing, keep=compiled)
    except KeyboardInterrupt:
        raise
    except Exception as e:  # a compile or capture failure is reported, the run goes on
        text = str(e).strip().splitlines()
        result["error"] = f"{type(e).__name__}: {text[0][:200] if text else ''}"
        captured = None
    if hook:
        result["lookup"] = hook_status(hook)
        result["decisions"] = hook.explain().splitlines()[1:]
        if forced:
            result["model_forced"] = forced
    if recorder:
        result["lookup"] = recorder.status()
        result["lookup_configs"] = max((e["configs"] for e in recorder.lookups), default=0)
        result["keys_tried"] = sorted({k for e in recorder.lookups for k in e["keys"]})
    return result, captured


def capture_eager(torch: Any, p: Problem, operands: list[Any], timing: Timing
                  ) -> tuple[dict[str, Any], Optional[Captured]]:
    """Eager ATen (cuBLAS), timed the same way: a reference, not a variant."""
    op = getattr(torch, p.op)
    try:
        return {"runtime_ms": None, "compile_s": None}, capture_for_timing(torch, lambda: op(*operands), timing)
    except Exception as e:  # reference only: report and go on
        return {"runtime_ms": None, "error": f"{type(e).__name__}: {str(e)[:200]}"}, None


def finish(torch: Any, results: dict[str, dict[str, Any]], captured: dict[str, Captured], ref: Any,
           timing: Timing) -> None:
    """Times every captured graph, checks its output, and marks wrong results as errors."""
    for name, ms in time_interleaved(torch, captured, timing).items():
        r = results[name]
        r["runtime_ms"], r["calls_per_sample"] = ms, captured[name].calls
        r["max_rel_error"] = max(r.get("max_rel_error", 0.0), max_rel_error(captured[name].out, ref))
        if r["max_rel_error"] >= MAX_REL_ERROR:
            r["error"] = f"wrong result: max rel. error {r['max_rel_error']:.1e}"


def warm_up(torch: Any, timing: Timing) -> None:
    """One untimed max-autotune compile, so process start-up (imports, compile workers) is
    charged to no variant."""
    p = Problem("mm", "nn", 1, 64, 64, 64, "float16")
    operands = make_operands(torch, p, 0)
    compile_variant(torch, p, operands, torch.mm(*operands), Variant(AUTOTUNE), timing)
    torch._dynamo.reset()


def measure_problem(torch: Any, index: int, p: Problem, variants: list[Variant], args: argparse.Namespace
                    ) -> dict[str, Any]:
    record: dict[str, Any] = {"problem": p.name, "op": p.op, "layout": p.layout, "B": p.B, "M": p.M,
                              "N": p.N, "K": p.K, "dtype": p.dtype, "results": {}}
    timing = Timing(args.replays, args.repeats, args.sample_ms)
    operands = make_operands(torch, p, args.seed + index)
    ref = getattr(torch, p.op)(*operands)
    captured: dict[str, Captured] = {}
    torch._dynamo.reset()
    try:
        for variant in variants:  # tables first, max-autotune last (see the module doc)
            print(f"  {p.name}: {variant.name} ...", file=sys.stderr, flush=True)
            record["results"][variant.name], c = compile_variant(torch, p, operands, ref, variant, timing)
            if c is not None:
                captured[variant.name] = c
        record["results"]["eager"], c = capture_eager(torch, p, operands, timing)
        if c is not None:
            captured["eager"] = c
        finish(torch, record["results"], captured, ref, timing)
    except KeyboardInterrupt:
        raise
    except Exception as e:  # a replay that fails spoils this problem's times, not the run
        for r in record["results"].values():
            r["runtime_ms"], r["error"] = None, r.get("error") or f"timing failed: {type(e).__name__}: {str(e)[:200]}"
    finally:
        captured.clear()
        torch._dynamo.reset()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    return record


# ---------------------------------------------------------------------------------- main
def named_table(text: str) -> tuple[str, str]:
    """--table NAME=FILE."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=FILE")
    return name, path


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "),
                                epilog=__doc__.split("\n\n", 2)[2],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mmt", help="the matmul_toolkit binary (runs export-lut; needed with --model)")
    p.add_argument("--model", action="append", default=[], help="model checkpoint (.pt); repeatable")
    p.add_argument("--table", action="append", default=[], type=named_table, metavar="NAME=FILE",
                   help="a lookup table exported already (export-lut --lut-format inductor), measured "
                        "as variant NAME (a NAME ending in +noepi or +precompile: compiled with that "
                        "setting, as in --top-k); repeatable")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--shapeset", help="shapeset JSON whose shapes are the problems")
    source.add_argument("--log-normal", type=int, metavar="N",
                        help="N distinct problems with log-normal sizes, drawn in Python from --seed "
                             "(NOT the C++ generator's draws for that seed)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED,
                   help=f"seed of the --log-normal draws and of the operands (default {DEFAULT_SEED}; "
                        "collect uses 42, create-validation 43)")
    p.add_argument("--ops", nargs="+", default=list(OPS), choices=OPS, help="operations (default: all)")
    p.add_argument("--dtypes", nargs="+", choices=DTYPES,
                   help="dtypes (shapeset: replaces each shape's own; --log-normal: drawn from, default bfloat16)")
    p.add_argument("--layouts", nargs="+", default=["nn"], choices=LAYOUTS,
                   help="--log-normal: layouts drawn from (default nn; t = column-major operand)")
    p.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 2, 4, 8],
                   help="--log-normal: bmm batch sizes drawn from (default 1 2 4 8, as collect)")
    p.add_argument("--min-size", type=int, default=32, help="--log-normal: smallest M, N, K (default 32)")
    p.add_argument("--max-size", type=int, default=4096, help="--log-normal: largest M, N, K (default 4096)")
    p.add_argument("--top-k", nargs="+", type=str, default=["1", "5"],
                   help="K of each model's tables; K+aten also offers Inductor's ATen choice "
                        "(export-lut --with-aten); 1+aten@P only where predicted within P %% "
                        "(--aten-within P), 1+aten@Tus only from T us (--aten-from T)"
                        "; +fastP: --compile-margin P; +pairedP: --paired-compile-margin P; "
                        "+aloneTus: --aten-alone-from T; +gemv: --aten-alone-gemv; "
                        "+runnerP: --runner-up-within P; +heavyP: --heavy-pick-alone P; a final +noepi "
                        "compiles the table with benchmark_epilogue_fusion off, +precompile with "
                        "Inductor's precompile of table hits (use_table skips it); "
                        "e.g. 1 1+aten 1+aten@10 1+aten@15us 1+aten@15us+fast5+alone100us 5 (default 1 5)")
    p.add_argument("--use-model", nargs="+", metavar="POLICY",
                   help="also compile with matmul_toolkit_inductor.use_model deciding every GEMM (no table), "
                        "one variant per decision policy (graph, isolated; POLICY+pad: the model also decides "
                        "Inductor's shape padding, use_model(pad='model')); the model is the first --model, "
                        "else the shipped one")
    p.add_argument("--search-space", default="DEFAULT", choices=["DEFAULT", "EXHAUSTIVE"],
                   help="export-lut's --search-space: the configs the model ranks (default DEFAULT)")
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT") or "out", "lut_e2e"),
                   help="output directory (default $OUT/lut_e2e, else out/lut_e2e)")
    p.add_argument("--every", type=int, default=1,
                   help="measure every Nth problem (a sample spread over a shapeset's models and sizes)")
    p.add_argument("--limit", type=int, default=0, help="measure only the first N problems (0: all)")
    p.add_argument("--replays", type=int, default=20,
                   help="fewest calls per timed sample: one CUDA graph of back-to-back calls (default 20)")
    p.add_argument("--sample-ms", type=float, default=1.0,
                   help="more calls per sample until one lasts about this long (default 1 ms)")
    p.add_argument("--repeats", type=int, default=5, help="timed samples per variant; median taken (default 5)")
    p.add_argument("--aa", action="store_true",
                   help=f"also compile plain max-autotune first, as variant '{AUTOTUNE_AGAIN}': an A/A "
                        "comparison that shows the noise and any order effect in the ratios")
    p.add_argument("--budget", type=float, default=0.0,
                   help="seconds: start no problem after this (0: none); with --resume a later run goes on")
    p.add_argument("--resume", action="store_true",
                   help=f"keep the problems OUT/{RESULTS_JSON} already holds for the same variants; measure the rest")
    args = p.parse_args(argv)
    if not args.sample_ms > 0:
        p.error("--sample-ms must be positive")
    for name in ("log_normal", "limit", "every", "replays", "repeats", "min_size", "max_size"):
        value = getattr(args, name)
        if value is not None and value < (0 if name == "limit" else 1):
            p.error(f"--{name.replace('_', '-')} is too small")
    if args.max_size < args.min_size:
        p.error("--max-size must be at least --min-size")
    for k in args.top_k:
        try:
            table_size(split_settings(k)[0])
        except argparse.ArgumentTypeError as e:
            p.error(f"--top-k: {e}")
    if any(b < 1 for b in args.batch_sizes):
        p.error("--batch-sizes must be at least 1")
    if not args.model and not args.table and not args.use_model:
        p.error("give --model (with --mmt), --table or --use-model")
    if args.model and not args.mmt:
        p.error("--model needs --mmt (export-lut makes its tables)")
    names = [name for name, _ in args.table]
    if len(set(names)) != len(names):
        p.error("--table: each NAME once")
    args.top_k = list(dict.fromkeys(args.top_k))
    return args


def check_inputs(args: argparse.Namespace) -> None:
    if args.use_model:
        from matmul_toolkit_inductor.model_hook import probe_problem
        from matmul_toolkit_inductor.rank_library import RankLibraryError, RankModel

        try:
            with RankModel.open(args.model[0] if args.model else "") as ranker:
                op, shape = probe_problem()
                for item in args.use_model:  # an unknown policy fails here, not in every compile
                    ranker.decide({"op": op, "shape": shape, "policy": hook_settings(item)["policy"]})
        except RankLibraryError as e:
            raise UsageError("--use-model", str(e))
    if args.model and not (os.path.isfile(args.mmt) and os.access(args.mmt, os.X_OK)) \
            and shutil.which(args.mmt) is None:
        raise UsageError(args.mmt, "no such executable (--mmt: the matmul_toolkit binary)")
    for _, path in args.table:
        if not os.path.isfile(path):
            raise UsageError(path, "no such lookup table (--table)")
    for model in args.model:
        if not os.path.isfile(model):
            raise UsageError(model, "no such model file (--model)")
    if args.shapeset and not os.path.isfile(args.shapeset):
        raise UsageError(args.shapeset, "no such shapeset file (--shapeset)")


def load_problems(args: argparse.Namespace) -> list[Problem]:
    notes: list[str] = []
    if args.shapeset:
        try:
            with open(args.shapeset) as f:
                problems = problems_from_shapeset(json.load(f), args.ops, args.dtypes, notes)
        except (OSError, ValueError) as e:
            raise UsageError(args.shapeset, str(e))
    else:
        problems = log_normal_problems(args.log_normal, args.seed, args.ops, args.dtypes or ["bfloat16"],
                                       args.layouts, args.batch_sizes, args.min_size, args.max_size)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    problems = problems[:: args.every]
    if args.limit:
        problems = problems[: args.limit]
    if not problems:
        raise UsageError(args.shapeset or "--log-normal", f"no problems of --ops {' '.join(args.ops)}")
    return problems


def resumed_records(args: argparse.Namespace, variants: list[Variant],
                    machine: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The problems an earlier run of the same variants measured on the same GPU and software
    (machine: device, torch, triton); a total over two machines would mean neither."""
    path = os.path.join(args.out, RESULTS_JSON)
    if not args.resume or not os.path.isfile(path):
        return {}
    with open(path) as f:
        previous = json.load(f)
    if [v["name"] for v in previous.get("variants", [])] != [v.name for v in variants]:
        raise UsageError(path, "--resume: its variants differ from this run's (models, --top-k)")
    for key, value in machine.items():
        if previous.get(key) != value:
            raise UsageError(path, f"--resume: measured with {key} {previous.get(key)}, this run has {value}")
    return {r["problem"]: r for r in previous.get("problems", [])}


def run(args: argparse.Namespace) -> int:
    check_inputs(args)
    problems = load_problems(args)
    os.makedirs(args.out, exist_ok=True)
    shapeset = os.path.join(args.out, SHAPESET_NAME)
    write_file_atomically(Path(shapeset), json.dumps(shapeset_document(problems), indent=2) + "\n")
    torch, triton_version = import_torch()
    # Table variants skip the precompile of their hits, as use_table installs a table.
    from torch._inductor.select_algorithm import AlgorithmSelectorCache

    from matmul_toolkit_inductor.lut import skip_precompile_of_hits

    skip_precompile_of_hits(AlgorithmSelectorCache)
    device = torch.cuda.get_device_name()
    print(f"device: {device}; torch {torch.__version__}; triton {triton_version}; CUDA {torch.version.cuda}")
    print(f"{len(problems)} problems (written to {shapeset})")
    variants = make_variants(args, shapeset)
    # Each variant's fresh_gemm shares the frame Dynamo counts recompiles of: past its limit
    # (8) it would run the op eagerly.
    for limit in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, limit):
            setattr(torch._dynamo.config, limit, max(getattr(torch._dynamo.config, limit), 2 * len(variants) + 8))
    done = resumed_records(args, variants, {"device": device, "torch": torch.__version__, "triton": triton_version})
    result = {"device": device, "torch": torch.__version__, "triton": triton_version, "cuda": torch.version.cuda,
              "command": sys.argv, "shapeset": shapeset,
              "timing": {"min_calls": args.replays, "sample_ms": args.sample_ms, "repeats": args.repeats},
              "inductor": inductor_patch(None) | {"lookup_table.table": "per variant"},
              "variants": [{"name": v.name, "model": v.model, "top_k": v.top_k, "lut": v.lut,
                            "keys": len(v.table or {}), "export_s": v.export_s} for v in variants],
              "problems": [], "interrupted": False, "unmeasured": 0}
    print(header(variants), flush=True)
    status = measure_all(torch, problems, variants, args, result, done)
    write_results(args.out, result, variants)
    print()
    print(summary_table(result["summary"]))
    note = f"; {result['unmeasured']} problems not measured (--budget or Ctrl-C; --resume goes on)" \
        if result["unmeasured"] else ""
    print(f"(written under {args.out}: {RESULTS_JSON}, {RESULTS_CSV}, {SHAPESET_NAME}, the tables{note})")
    return status


def measure_all(torch: Any, problems: list[Problem], variants: list[Variant], args: argparse.Namespace,
                result: dict[str, Any], done: dict[str, dict[str, Any]]) -> int:
    """Fills result["problems"] (results kept by --resume included); 130 after Ctrl-C, else 0.
    After Ctrl-C or past --budget no problem is started; the ones not measured are counted."""
    start = time.monotonic()
    stopped = False
    try:
        if len(done) < len(problems):
            warm_up(torch, Timing(args.replays, args.repeats, args.sample_ms))
    except KeyboardInterrupt:
        stopped = True
    for i, p in enumerate(problems):
        if p.name not in done and (stopped or (args.budget and time.monotonic() - start > args.budget)):
            result["unmeasured"] += 1
            continue
        if p.name in done:
            result["problems"].append(done[p.name])
        else:
            print(f"[{i + 1}/{len(problems)}] {p.name} ({time.monotonic() - start:.0f} s elapsed)",
                  file=sys.stderr, flush=True)
            try:
                result["problems"].append(measure_problem(torch, i, p, variants, args))
            except KeyboardInterrupt:
                stopped = True
                result["unmeasured"] += 1
                print("\ninterrupted: the summary covers the problems done so far", file=sys.stderr)
                continue
            write_results(args.out, result, variants)
        print(problem_line(result["problems"][-1], variants), flush=True)
    result["interrupted"] = stopped
    return 130 if stopped else 0


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return run(args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        for root in CACHE_ROOT:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
