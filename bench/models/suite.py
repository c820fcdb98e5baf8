#!/usr/bin/env python3
"""Whole models: does torch.compile with our picks run real models faster than default
torch.compile and max-autotune, and compile as fast as default? (GPU machine, torch with
Inductor, transformers and torchvision.)

    python3 bench/models/suite.py --mmt build/src/cli/matmul_toolkit [--workloads NAME ...]
        [--variants default ours table max_autotune_gemm max_autotune] [--budget S] [--fresh]

Workloads (workloads.py): real transformers / torchvision models built from their configs
with random weights, in inference (prefill and decode shapes, bf16 and fp16) and one
training step. Every workload runs in a process of its own. It starts one process per
variant (spawned: CUDA, Dynamo and the caches of its own). All of them at once do what is
timed nowhere: start-up, one warm-up compile that starts Inductor's compile workers, the
eager reference, building the model. Then, one at a time, each compiles its model from
scratch (fresh Inductor and Triton caches) and keeps it. Then the variants are timed in
rounds that take turns, so that the GPU's drift (clocks, temperature) falls on all of them
alike:
  default            torch.compile, CUDA graphs (triton.cudagraphs): cuBLAS for every GEMM
  max_autotune       mode="max-autotune" (GEMM autotuning, coordinate descent, CUDA graphs)
  max_autotune_gemm  GEMM autotuning only (max_autotune_gemm), CUDA graphs
  ours               the shipped model deciding every GEMM while it compiles
                     (matmul_toolkit_inductor.use_model, libmmt_rank.so), with the options its
                     users are given (compile_options: max_autotune_gemm, pointwise kernels on
                     Inductor's heuristic block size, CUDA graphs): no table, no shapes known
                     ahead; `ours@POLICY` names another decision policy
  table              ours' options with the shipped model's table for this workload's GEMMs:
                     the GEMMs the default compile lowered (GemmRecorder), exported by
                     `matmul_toolkit export-lut --policy P` (default: the export-lut default),
                     installed with use_table; `table@POLICY` likewise. --table gives the
                     default policy's table exported elsewhere (on the suite's shapeset)
A dynamic workload (llama_dynamic) compiles once with dynamic=True and runs at each of its
sequence lengths: "ms" is the geomean over them, "ms_by_length" each; its in-graph report is
of the first length ("profiled_length"), the sizes its GEMMs were lowered and recorded at.
Every variant records "graphs_compiled", how many graphs Dynamo compiled for the first calls
(at every length), and "cudagraph_skips", how many graphs Inductor's CUDA graph trees skipped
(their kernels launch from the host on every call; the log says why). Code that Inductor's
graph partitioning keeps out of CUDA graphs is not counted there.
A variant name may end in settings, each one suspect of the in-graph gap tested alone:
+noepi (benchmark_epilogue_fusion off), +noflush (Inductor's benchmarker without its L2
flush), +gated (Inductor's autotuning timed without the host's launch: timing.GatedTimer),
+biasaddmm (an addmm's ATen choice is bias_addmm only: the 1-D bias cuBLASLt fuses),
+flexible (max_autotune_allow_flexible_layouts), +atenonly (ATen the only GEMM backend: with
+biasaddmm, default's cuBLAS calls compiled in max_autotune_gemm's mode), +pwfixed (every
pointwise kernel runs Inductor's one heuristic block size, triton.autotune_pointwise off: no
first-run draw, which the benchmarker times with L2 flushed; ours and the table compile so
already, with use_model's compile_options, and +pwtuned gives them the draw back); and for ours,
+outeraten (the model's picks for K = 1 GEMMs, the rotary embedding's outer products, on ATen:
is the GPU's idle time beside them theirs?) and +nopatchify (convolutions whose stride equals
their kernel stay convolutions: use_model(patchify=False); by default they become GEMMs the
model decides). +defaulttuned takes the first-run draw out of a
comparison (not all of the difference between compiles, 2026-12-06): the kernels
Inductor tunes at their first run (pointwise block sizes) keep the configs default's compile
of the same run kept, where the kernel is the same (its *.best_config files are put into the
variant's fresh cache before it compiles; "default_tuned" counts those Inductor left as they
were, tuned again, and the kernels only the variant has).

--compiles N compiles each variant N times, each compile a process of its own with fresh
caches (VARIANT~2, ...), all timed in the same rounds: the variant's "ms" and "compile_s" are
the medians over its compiles, "compiles" holds each one's, and its other fields are its first
compile's. What Inductor tunes at a kernel's first run (a pointwise kernel's block size) is a
draw of each compile's timing, which moved whole workloads by 2-3 %.
Per variant: compile time = wall time of the first call, with Dynamo's and Inductor's phases
("compile_phases_s"). An autotuning variant (max_autotune, max_autotune_gemm) cut off while
compiling (a device call's limit) goes on in a later run from the GEMMs it had timed
(autotune_state.py, --autotune-state); its compile time is then the sum of the attempts'
("compile_attempts"). Runtime = median over --rounds
rounds of back-to-back calls, CUDA events around each round and
torch.compiler.cudagraph_mark_step_begin before each call. Round r runs every variant once,
in an order rotated by r; each round starts with one untimed call and lasts at least --calls
calls and about --round-ms (a decode step of 0.4 ms runs 63 calls a round: rounds of ten,
4 ms each, spread by 25 %). Every variant's process issues its timed calls from the same CPU
(timing_cpu, "timing_cpu"), and keeps the host's median ms a call to issue a round at each
length ("host_ms_by_length": about "ms_by_length", the host set the pace). Correctness: the
first call's output (inference: logits or last hidden state; training: the loss) against
eager's, relative L2 error under the workload's
tolerance (3e-2; 1e-1 for the mixture of experts, where default torch.compile itself is
5.7e-2 from eager; a larger one marks the variant failed). Then, one variant at a time, one
profiled round (torch.profiler, --profile-calls calls): the in-graph report (ingraph.py):
device time per category, and each GEMM's in-graph time beside Inductor's benchmark of the
choice it kept (timed here with Inductor's benchmarker, L2 flushed, where Inductor
benchmarked nothing). "host_us_a_call" is the host's time to issue a call of back-to-back
calls, beside "wall_us_a_call" until the GPU has run them: about equal, the host (or a sync
inside a call) sets the pace. "recompiled_while_timed" counts graphs Dynamo compiled after the
first calls (none is expected).

Results: --results (default bench/models/results_h200.json), rewritten after every workload:
{"device", "torch", ..., "workloads": {NAME: {VARIANT: {"ms", "compile_s", ...}}}}, and per
workload OUT/NAME/ (the shapeset of its GEMMs, the tables, the child's log, and code/VARIANT/
the program each variant's profiled compile generated, to diff). A workload already
in the results with every asked variant is kept (--fresh measures it again); one that lacks
some runs just those, beside a default compile of their own (a default already kept stays where
variants of its run were timed beside it); a workload not
expected to end within --budget seconds is left for a later run, and Ctrl-C keeps what is
finished: a later run goes on.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, NoReturn, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.normpath(os.path.join(HERE, os.pardir, os.pardir))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(SOURCE_DIR, "python"))

import autotune_state  # noqa: E402
import ingraph  # noqa: E402
from matmul_toolkit_inductor.dataset import write_file_atomically  # noqa: E402
from matmul_toolkit_inductor.model_hook import compile_options  # noqa: E402
import summary  # noqa: E402
import workloads as W  # noqa: E402

RESULTS = os.path.join(HERE, "results_h200.json")
SHAPESET = os.path.join(SOURCE_DIR, "data", "shapesets", "model_suite.json")
DEFAULT_VARIANTS = ("default", "ours", "table", "max_autotune_gemm", "max_autotune")
BASES = ("default", "max_autotune", "max_autotune_gemm", "ours", "table")
# The bases that pick with the shipped model (and take a @POLICY).
MODEL_BASES = ("ours", "table")
# The bases whose compile benchmarks every GEMM's choices: minutes, resumed across processes.
AUTOTUNING_BASES = ("max_autotune", "max_autotune_gemm")
SETTINGS = ("+noepi", "+noflush", "+gated", "+biasaddmm", "+flexible", "+outeraten", "+defaulttuned", "+atenonly",
            "+pwfixed", "+pwtuned", "+nopatchify")
BENCHMARKER_SETTINGS = {"+noflush", "+gated"}  # those that change how Inductor's benchmarker times
WARM_UP_CALLS = 3
# What each compile of a variant keeps under "compiles" (--compiles)
COMPILE_KEYS = ("ms", "ms_by_length", "host_ms_by_length", "compile_s", "runtime_tuned", "error")
SEED = 0


class UsageError(Exception):
    """Bad input: printed as `error: <subject>: <what>`, exit code 2."""

    def __init__(self, subject: str, what: str) -> None:
        super().__init__(f"{subject}: {what}")


# ----------------------------------------------------------------------------- variants
@dataclass(frozen=True)
class Variant:
    """One way of compiling: a base mode, a decision policy (ours, table) and suspect settings."""
    name: str
    base: str
    policy: Optional[str] = None
    settings: tuple[str, ...] = ()

    def inductor_options(self) -> dict[str, Any]:
        """torch.compile options (None mode) for every base but max_autotune; ours and the
        table compile with what use_model's users are told to (compile_options)."""
        options: dict[str, Any] = {"triton.cudagraphs": True}
        if self.base in MODEL_BASES:
            options |= compile_options()
            if "+pwtuned" in self.settings:
                options.pop("triton.autotune_pointwise")
        if self.base == "max_autotune_gemm":
            options["max_autotune_gemm"] = True
        if "+noepi" in self.settings:
            options["benchmark_epilogue_fusion"] = False
        if "+flexible" in self.settings:
            options["max_autotune_allow_flexible_layouts"] = True
        if "+atenonly" in self.settings:
            options["max_autotune_gemm_backends"] = "ATEN"
        if "+pwfixed" in self.settings:
            options["triton.autotune_pointwise"] = False
        return options

    def compile_kwargs(self) -> dict[str, Any]:
        if self.base == "max_autotune":
            extra = {k: v for k, v in self.inductor_options().items() if k != "triton.cudagraphs"}
            # A mode and options do not combine in torch.compile: the mode's settings go in by hand.
            if extra:
                return {"options": {"max_autotune": True, "coordinate_descent_tuning": True,
                                    "triton.cudagraphs": True} | extra}
            return {"mode": "max-autotune"}
        return {"options": self.inductor_options()}


def parse_variant(text: str) -> Variant:
    """BASE[@POLICY][+setting ...][~COPY]: e.g. ours, table@isolated, max_autotune_gemm+noepi;
    ~COPY (2, 3, ...) names another compile of the same variant (--compiles)."""
    match = re.fullmatch(r"([a-z_]+)(?:@([a-z_-]+))?((?:\+[a-z]+)*)(?:~[2-9]|~[1-9][0-9]+)?", text)
    if not match or match.group(1) not in BASES:
        raise UsageError("--variants", f"'{text}' is not BASE[@POLICY][+SETTING...] with BASE one of "
                                       f"{', '.join(BASES)}")
    base, policy, tail = match.group(1), match.group(2), match.group(3)
    if policy and base not in MODEL_BASES:
        raise UsageError("--variants", f"'{text}': only {' and '.join(MODEL_BASES)} take a @POLICY")
    settings = tuple("+" + s for s in tail.split("+")[1:])
    for s in settings:
        if s not in SETTINGS:
            raise UsageError("--variants", f"'{text}': unknown setting {s} (known: {' '.join(SETTINGS)})")
    if base == "default" and settings:
        raise UsageError("--variants", f"'{text}': default takes no settings (they change GEMM autotuning)")
    if base != "ours" and "+outeraten" in settings:
        raise UsageError("--variants", f"'{text}': +outeraten changes the model's picks inside ours only")
    if base not in AUTOTUNING_BASES and "+atenonly" in settings:
        raise UsageError("--variants", f"'{text}': +atenonly limits GEMM autotuning ({' and '.join(AUTOTUNING_BASES)})")
    if base in MODEL_BASES and "+biasaddmm" in settings:
        raise UsageError("--variants", f"'{text}': the model's policy names its ATen choices itself (the graph "
                                       "policy: bias_addmm alone)")
    if base in MODEL_BASES and "+pwfixed" in settings:
        raise UsageError("--variants", f"'{text}': {base} runs its pointwise kernels on a fixed block size already "
                                       "(compile_options); +pwtuned tunes them")
    if base == "max_autotune" and "+pwfixed" in settings:
        raise UsageError("--variants", f"'{text}': mode max-autotune tunes pointwise kernels whatever "
                                       "triton.autotune_pointwise says")
    if base != "ours" and "+nopatchify" in settings:
        raise UsageError("--variants", f"'{text}': only ours takes +nopatchify (use_model(patchify=False))")
    if base not in MODEL_BASES and "+pwtuned" in settings:
        raise UsageError("--variants", f"'{text}': only {' and '.join(MODEL_BASES)} take +pwtuned (the others tune "
                                       "pointwise kernels at their first run already)")
    if len(set(settings)) != len(settings):
        raise UsageError("--variants", f"'{text}': a setting repeats")
    return Variant(text, base, policy, settings)


def variant_order(variants: list[Variant]) -> list[Variant]:
    """default first (its recorded GEMMs make the tables), the rest as given."""
    return sorted(variants, key=lambda v: v.name != "default")


def compile_copies(variants: list[Variant], compiles: int) -> list[Variant]:
    """Each variant, then (--compiles N) N - 1 more compiles of each, named VARIANT~2 ...:
    each its own process, fresh caches, timed in the same rounds."""
    return variants + [parse_variant(f"{v.name}~{k}") for k in range(2, compiles + 1) for v in variants]


def fold_compiles(results: dict[str, dict[str, Any]], variants: list[Variant], compiles: int,
                  dynamic: bool) -> dict[str, dict[str, Any]]:
    """One result per variant from its compiles' (the first compile's, with "compiles": each
    compile's runtime, host time, compile time and runtime-tuned kernels, and "ms",
    "ms_by_length", "host_ms_by_length" and "compile_s" the medians over them). Several
    compiles of a variant differ by what Inductor tuned at their first run; any compile's
    error is the variant's. With one compile, the results as they are."""
    if compiles == 1:
        return dict(results)
    folded: dict[str, dict[str, Any]] = {}
    for v in variants:
        if v.name not in results:
            continue
        found = [results[name] for name in [v.name, *(f"{v.name}~{k}" for k in range(2, compiles + 1))]
                 if name in results]
        result = dict(results[v.name])
        result["compiles"] = [{k: r[k] for k in COMPILE_KEYS if k in r} for r in found]
        errors = [r["error"] for r in found if r.get("error")]
        timed = [r for r in found if r.get("ms") is not None]
        if errors:
            result["error"], result["ms"] = errors[0], None
        elif timed:
            if dynamic:
                result["ms_by_length"] = {length: median([r["ms_by_length"][length] for r in timed])
                                          for length in timed[0]["ms_by_length"]}
                result["ms"] = summary.geomean(list(result["ms_by_length"].values()))
            else:
                result["ms"] = median([r["ms"] for r in timed])
            # The host's time a call, set against the medians' ms a call: its median too.
            hosts = [r["host_ms_by_length"] for r in timed if r.get("host_ms_by_length")]
            if hosts:
                result["host_ms_by_length"] = {length: median([h[length] for h in hosts if length in h])
                                               for length in hosts[0]}
        compiled = [r["compile_s"] for r in found if isinstance(r.get("compile_s"), (int, float))]
        if compiled and not errors:
            result["compile_s"] = median(compiled)
        folded[v.name] = result
    return folded


# ------------------------------------------------------------------------------ results
def load_results(path: str) -> dict[str, Any]:
    if not os.path.isfile(path):
        return {"workloads": {}}
    try:
        with open(path) as f:
            document = json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError(path, f"cannot read the results: {e}")
    if not isinstance(document, dict) or not isinstance(document.get("workloads"), dict):
        raise UsageError(path, 'not a results file ({"workloads": {...}})')
    return document


def pending(document: dict[str, Any], workloads: list[W.Workload], variants: list[Variant], fresh: bool
            ) -> list[tuple[W.Workload, list[Variant]]]:
    """The workloads to measure and, for each, the variants to run: every asked one with
    --fresh, else those without a usable result, and default with them (its GEMMs make the
    tables, and each variant is judged against the default compile of its own run)."""
    todo = []
    for w in workloads:
        have = document["workloads"].get(w.name, {})
        missing = [v for v in variants if fresh or not summary.usable(have.get(v.name))]
        if missing:
            run = missing if any(v.name == "default" for v in missing) else [parse_variant("default"), *missing]
            todo.append((w, variant_order(run)))
    return todo


def merge(document: dict[str, Any], name: str, record: dict[str, Any], environment: dict[str, Any],
          companion: bool = False) -> None:
    """A workload's fresh record replaces its variants in the results (the other variants of
    an earlier run stay, with the environment they were measured in). With `companion` (default
    ran only as the reference of the asked variants, which keep its times as default_ms and
    default_compile_s), an earlier default stays where variants kept from its run were timed
    beside it: their paired rounds and compile spreads are measured against it alone."""
    results = document["workloads"].setdefault(name, {})
    kept_default = results.get("default")
    keep_default = companion and summary.usable(kept_default) and any(
        v != "default" and v not in record.get("variants", {}) and summary.same_run(r, kept_default)
        for v, r in results.items())
    for variant, result in record.get("variants", {}).items():
        if summary.usable(results.get(variant)) and not summary.usable(result):
            continue  # a failed or interrupted run does not replace a measurement
        if variant == "default" and keep_default:
            continue
        results[variant] = result
    document.setdefault("definitions", {})[name] = record.get("description", "")
    for key, value in environment.items():
        document[key] = value
    # Each run's own environment, for the variants that carry its name.
    for run in {r["run"] for r in record.get("variants", {}).values() if isinstance(r, dict) and "run" in r}:
        document.setdefault("runs", {})[run] = environment


def write_results(path: str, document: dict[str, Any]) -> None:
    document["summary"] = summary.summarize(document)
    write_file_atomically(Path(path), json.dumps(document, indent=1, sort_keys=False) + "\n")


# ------------------------------------------------------------------------------- parent
def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "),
                                epilog=__doc__.split("\n\n", 2)[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", nargs="+", help="workloads to run (default: all; --list shows them)")
    p.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS),
                   help=f"variants (default: {' '.join(DEFAULT_VARIANTS)}); default always runs first")
    p.add_argument("--list", action="store_true", help="print the workloads and exit")
    p.add_argument("--report", action="store_true",
                   help="print the in-graph reports of --results (no GPU needed) and exit")
    p.add_argument("--mmt", help="the matmul_toolkit binary (export-lut makes the table variants' tables)")
    p.add_argument("--table",
                   help="table of the default policy exported elsewhere (export-lut --lut-format inductor on a "
                        "shapeset that holds the workloads' GEMMs, e.g. the suite's): the table variants use it "
                        "instead of one exported with --mmt")
    p.add_argument("--model", default=os.path.join(SOURCE_DIR, "data", "models", "inductor_h200.pt"),
                   help="model checkpoint that ours and the tables pick with (default: the shipped H200 model)")
    p.add_argument("--force-model", action="store_true",
                   help="ours installs the model on a GPU other than the one it was trained on "
                        "(use_model(force=True)); each such result says model_forced")
    p.add_argument("--results", default=RESULTS, help=f"results JSON, read and rewritten (default {RESULTS})")
    p.add_argument("--shapeset", default=SHAPESET,
                   help="shapeset that gathers every measured workload's GEMMs, read and rewritten "
                        f"(default {os.path.relpath(SHAPESET, SOURCE_DIR)}; collect-shapeset --shapeset times them)")
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT") or "out", "models"),
                   help="folder for shapesets, tables and logs (default $OUT/models)")
    p.add_argument("--fresh", action="store_true", help="measure every asked workload again")
    p.add_argument("--autotune-state",
                   help="folder of the autotuning variants' resume states: a max-autotune compile stopped "
                        "unfinished goes on from the GEMMs it timed (default OUT/autotune_state)")
    p.add_argument("--budget", type=float, default=0.0,
                   help="seconds this run may take: a workload starts only if it is expected to end by then "
                        "(its earlier compile times, else its variants' elsewhere, plus a minute; 0: no limit)")
    p.add_argument("--workload-timeout", type=float, default=3000.0,
                   help="seconds one workload's process may take before it is stopped (default 3000)")
    # 30: a prefill's rounds spread by 2-3 % (the GPU's power and clocks), so that ten rounds'
    # median moved ours against default by about 1 %; thirty cost under 3 s a variant.
    p.add_argument("--rounds", type=int, default=30,
                   help="timed rounds per variant, rounded up to a multiple of the variants; median taken (default 30)")
    p.add_argument("--compiles", type=int, default=1,
                   help="compiles of each variant, each in a process of its own with fresh caches, timed in the "
                        "same rounds; its runtime and compile time are the medians (default 1). What Inductor tunes "
                        "at a kernel's first run differs between compiles and moved whole workloads by 2-3 %%")
    p.add_argument("--calls", type=int, default=10, help="fewest calls per timed round (default 10)")
    p.add_argument("--round-ms", type=float, default=25.0,
                   help="more calls per round until a round lasts about this long (default 25 ms)")
    p.add_argument("--profile-calls", type=int, default=3, help="calls in the profiled round (default 3; 0: none)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--record", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for name in ("rounds", "calls", "compiles"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if args.profile_calls < 0:
        p.error("--profile-calls must be 0 or more")
    if args.round_ms < 0:
        p.error("--round-ms must be 0 or more")
    if args.budget < 0:
        p.error("--budget must be 0 or more")
    args.autotune_state = args.autotune_state or os.path.join(args.out, "autotune_state")
    # default runs in every workload process: it records the GEMMs the tables are made for,
    # and every variant is judged against the default compile of its own process.
    for v in args.variants:
        if "~" in v:
            raise UsageError("--variants", f"'{v}': the suite names each variant's other compiles itself (--compiles)")
    args.parsed_variants = variant_order([parse_variant(v) for v in dict.fromkeys(["default", *args.variants])])
    return args


def child_command(args: argparse.Namespace, w: W.Workload, variants: list[Variant], record: str) -> list[str]:
    command = [sys.executable, os.path.abspath(__file__), "--child", w.name, "--record", record,
               "--variants", *[v.name for v in variants], "--out", args.out, "--model", args.model,
               "--rounds", str(args.rounds), "--calls", str(args.calls), "--round-ms", str(args.round_ms),
               "--compiles", str(args.compiles),
               "--profile-calls", str(args.profile_calls), "--autotune-state", args.autotune_state]
    if args.mmt:
        command += ["--mmt", args.mmt]
    if args.table:
        command += ["--table", os.path.abspath(args.table)]
    if args.force_model:
        command.append("--force-model")
    return command


def run_workload_process(command: list[str], log_path: str, timeout: float) -> tuple[int, bool]:
    """Runs one workload's process in a session of its own (its compile workers die with it);
    (exit code, whether it was stopped by the timeout)."""
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                   env=os.environ | {"PYTHONUNBUFFERED": "1"})
        try:
            return process.wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return -9, True
        except KeyboardInterrupt:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise


def check_inputs(args: argparse.Namespace) -> list[W.Workload]:
    try:
        W.check()
        chosen = W.by_name(args.workloads)
    except W.WorkloadError as e:
        raise UsageError("--workloads", str(e))
    if os.path.exists(args.autotune_state) and not os.path.isdir(args.autotune_state):
        raise UsageError("--autotune-state", f"{args.autotune_state} is not a folder")
    if any(v.base == "ours" for v in args.parsed_variants):
        from matmul_toolkit_inductor.rank_library import RankLibraryError, load_library

        try:
            load_library()
        except RankLibraryError as e:
            raise UsageError("--variants", f"ours needs the C library: {e}")
    if args.table and not os.path.isfile(args.table):
        raise UsageError(args.table, "no such table file (--table)")
    if any(v.base == "table" and not (args.table and v.policy is None) for v in args.parsed_variants):
        if not args.mmt:
            raise UsageError("--mmt", "the table variants need the matmul_toolkit binary (export-lut) or, "
                                      "for the default policy, --table")
        if not (os.path.isfile(args.mmt) and os.access(args.mmt, os.X_OK)):
            raise UsageError(args.mmt, "no such executable (--mmt)")
        if not os.path.isfile(args.model):
            raise UsageError(args.model, "no such model file (--model)")
    return chosen


def run_parent(args: argparse.Namespace) -> int:
    if args.list:
        for w in W.WORKLOADS:
            print(f"{w.name:20} {w.describe()}")
        return 0
    if args.report:
        print(ingraph.text(load_results(args.results)))
        return 0
    chosen = check_inputs(args)
    document = load_results(args.results)
    todo = pending(document, chosen, args.parsed_variants, args.fresh)
    os.makedirs(args.out, exist_ok=True)
    print(f"{len(chosen)} workloads, {len(todo)} to measure; variants {' '.join(v.name for v in args.parsed_variants)}",
          file=sys.stderr, flush=True)
    start = time.monotonic()
    status = 0

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # a SIGTERM (timeout, a batch system) stops as Ctrl-C does

    signal.signal(signal.SIGTERM, stop)
    try:
        started = 0
        for i, (w, variants) in enumerate(todo):
            elapsed = time.monotonic() - start
            expected = expected_seconds(document, w.name, variants, resumes(args, w, variants), args.compiles)
            # Where none fits, the first starts all the same: every run makes progress.
            if args.budget and elapsed + expected > args.budget and (started or any(
                    elapsed + expected_seconds(document, x.name, xv, resumes(args, x, xv), args.compiles) <= args.budget
                    for x, xv in todo[i + 1:])):
                print(f"--budget: {w.name} left for a later run (about {expected:.0f} s, "
                      f"{max(0.0, args.budget - elapsed):.0f} s left)", file=sys.stderr)
                continue
            started += 1
            folder = os.path.join(args.out, w.name)
            os.makedirs(folder, exist_ok=True)
            record_path = os.path.join(folder, "record.json")
            with contextlib.suppress(OSError):
                os.unlink(record_path)
            print(f"[{i + 1}/{len(todo)}] {w.name}: {' '.join(v.name for v in variants)} ({elapsed:.0f} s elapsed)",
                  file=sys.stderr, flush=True)
            # default was asked for only as the others' reference (merge keeps an earlier one)
            companion = not args.fresh and summary.usable(document["workloads"].get(w.name, {}).get("default"))
            began = time.monotonic()
            try:
                code, timed_out = run_workload_process(child_command(args, w, variants, record_path),
                                                       os.path.join(folder, "log.txt"), args.workload_timeout)
                why = "timed out" if timed_out else f"exit {code}"
            except KeyboardInterrupt:
                code, why = 130, "interrupted"
            record = load_record(record_path)
            if code != 0 or record is None:
                status = 1
                print(f"  {w.name}: process {why}; see {folder}/log.txt", file=sys.stderr)
                # What it measured is kept (a runtime from the rounds it finished); a variant
                # left without one says why.
                record = record or {"variants": {}}
                for v in variants:
                    entry = record["variants"].setdefault(v.name, {})
                    if entry.get("ms") is None and "error" not in entry:
                        entry["error"] = f"workload process {why}"
                        # how long it ran unfinished: what the next run must expect at least
                        entry["process_s"] = round(time.monotonic() - began, 1)
            merge(document, w.name, record, record.get("environment", {}), companion)
            write_results(args.results, document)
            gather_shapes(args.shapeset, os.path.join(folder, "shapeset.json"))
            print(workload_line(w.name, document["workloads"][w.name]), flush=True)
            if code == 130:
                raise KeyboardInterrupt
    except KeyboardInterrupt:
        print("\ninterrupted: the results keep the workloads finished", file=sys.stderr)
        status = 130
    write_results(args.results, document)
    print()
    print(summary.table(document))
    print()
    print(summary.overview(document["summary"]))
    return status


WORKLOAD_OVERHEAD_S = 60.0  # a workload process's start-up, eager reference, rounds and profile


def expected_seconds(document: dict[str, Any], name: str, variants: list[Variant], resuming: bool = False,
                     compiles: int = 1) -> float:
    """About how long a workload's process takes: per variant its compile time in the results,
    else the median of that variant's compile times in the other workloads (max-autotune's
    take minutes), times `compiles`, plus WORKLOAD_OVERHEAD_S; and at least a minute more than an earlier
    process of it ran before it was stopped unfinished, unless it is `resuming` that
    process's compile (what it spent autotuning is kept)."""
    workloads = document.get("workloads", {})
    own = workloads.get(name, {})
    total = 0.0
    for v in variants:
        if summary.usable(own.get(v.name)):
            total += own[v.name]["compile_s"]
            continue
        others = [r[v.name]["compile_s"] for r in workloads.values() if summary.usable(r.get(v.name))]
        total += statistics.median(others) if others else 0.0
    total = WORKLOAD_OVERHEAD_S + compiles * total
    stopped = [] if resuming else [
        e["process_s"] for e in own.values()
        if isinstance(e, dict) and not summary.usable(e) and isinstance(e.get("process_s"), (int, float))]
    return max([total] + [s + WORKLOAD_OVERHEAD_S for s in stopped])


def state_path(folder: str, workload: str, variant: str) -> str:
    """Where an autotuning variant's compile keeps its resume state (autotune_state.py)."""
    return os.path.join(folder, re.sub(r"[^A-Za-z0-9_.-]", "_", f"{workload}.{variant}") + ".json")


def resumes(args: argparse.Namespace, w: W.Workload, variants: list[Variant]) -> bool:
    """Whether an autotuning variant of the workload (any of its compiles) has an earlier
    attempt's state to go on from."""
    return any(v.base in AUTOTUNING_BASES and os.path.isfile(state_path(args.autotune_state, w.name, v.name))
               for v in compile_copies(variants, args.compiles))


def gather_shapes(path: str, workload_shapeset: str) -> None:
    """Adds a workload's GEMMs (its default compile's shapeset) to the suite's shapeset:
    each problem once, in first-measured order."""
    from matmul_toolkit_inductor.dataset import MMShape, shapeset_document

    problems: dict[tuple[str, Any], None] = {}
    for source in (path, workload_shapeset):
        if not os.path.isfile(source):
            continue
        with open(source) as f:
            document = json.load(f)
        for op, entry in document.get("operations", {}).items():
            for shape in entry.get("shapes", []):
                problems.setdefault((op, MMShape.from_dict(shape)))
    if problems:
        write_file_atomically(Path(path), json.dumps(shapeset_document(list(problems)), indent=1) + "\n")


def load_record(path: str) -> Optional[dict[str, Any]]:
    try:
        with open(path) as f:
            record = json.load(f)
        return record if isinstance(record, dict) else None
    except (OSError, ValueError):
        return None


def workload_line(name: str, results: dict[str, Any]) -> str:
    parts = [name]
    for variant, r in results.items():
        if summary.usable(r):
            parts.append(f"{variant} {r['ms']:.3f} ms / {r['compile_s']:.1f} s")
        else:
            parts.append(f"{variant} FAILED ({str(r.get('error', '?'))[:120]})")
    return " | ".join(parts)


# -------------------------------------------------------------------------------- child
def version_of(module: str) -> str:
    """A module's version, or why there is none (never raises: it only labels a result)."""
    try:
        return str(__import__(module).__version__)
    except Exception as e:
        return f"unknown ({type(e).__name__})"


def toolkit_commit() -> str:
    # The device's copy of the work tree may hold no repository (or another one's HEAD): the
    # caller names the commit it sent.
    if os.environ.get("MMT_TOOLKIT_COMMIT"):
        return os.environ["MMT_TOOLKIT_COMMIT"]
    try:
        return subprocess.run(["git", "-C", SOURCE_DIR, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip() or "unknown"
    except OSError:
        return "unknown (no git)"


def environment(torch: Any) -> dict[str, Any]:
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": version_of("triton"),
            "cuda": torch.version.cuda, "transformers": version_of("transformers"),
            "torchvision": version_of("torchvision"), "python": sys.version.split()[0],
            "toolkit_commit": toolkit_commit(),
            "timing": "median of rounds of back-to-back calls between CUDA events, CUDA graphs (cudagraph trees), "
                      f"each variant in a process of its own, the variants' {summary.TURNS}; "
                      "compile = first call with fresh caches after a warm-up compile"}


def relative_error(torch: Any, out: Any, ref: Any) -> float:
    out, ref = out.float(), ref.float()
    scale = ref.norm().item()
    return (out - ref).norm().item() / scale if scale > 0 else (out - ref).norm().item()


def calls_per_round(per_call_ms: float, fewest: int, round_ms: float) -> int:
    """Calls in a timed round: at least `fewest`, and enough for about `round_ms`."""
    if per_call_ms <= 0:
        return fewest
    return max(fewest, math.ceil(round_ms / per_call_ms))


def profiled_kernels(torch: Any, call: Callable[[], Any], calls: int) -> list[tuple[str, float, float]]:
    """The device kernels (and copies) of `calls` calls, in start order: (name, start µs, end µs)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            torch.compiler.cudagraph_mark_step_begin()
            call()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
              and not getattr(e, "is_user_annotation", False) and "#" not in e.name]
    events.sort(key=lambda e: e.time_range.start)
    # time_range is the kernel's own start and end on the GPU (µs, the profiler's clock)
    return [(e.name, float(e.time_range.start), float(e.time_range.end)) for e in events]


def host_and_wall_us(torch: Any, call: Callable[[], Any], calls: int) -> tuple[float, float]:
    """µs a call that the host takes to issue `calls` back-to-back calls, and until the GPU has
    run them all. Host about equal to wall: the host, or a sync inside a call, sets the pace
    (the GPU waits on it); host well under wall: the GPU does."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        torch.compiler.cudagraph_mark_step_begin()
        call()
    issued = time.perf_counter()
    torch.cuda.synchronize()
    done = time.perf_counter()
    return 1e6 * (issued - start) / calls, 1e6 * (done - start) / calls


# An outer product's ATen entry, by the model's op.
OUTER_PRODUCT_ATEN = {"mm": "aten::mm", "addmm": "aten::bias_addmm", "bmm": "aten::bmm"}


def outer_products_on_aten(op_key: str, shape: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """+outeraten: the model's answer for a K = 1 GEMM (an outer product, such as the rotary
    embedding's frequencies times positions) made ATen alone; any other answer as it is."""
    if int(shape.get("K", 0)) != 1 or answer.get("decision") == "aten":
        return answer
    vendor_ms = answer.get("vendor_ms")
    return dict(answer, entries=[{"template_id": OUTER_PRODUCT_ATEN[op_key.split("_")[0]]}],
                predicted_ms=[] if vendor_ms is None else [vendor_ms], decision="aten")


@contextlib.contextmanager
def suspect_settings(variant: Variant) -> Iterator[None]:
    """The +noflush, +gated, +biasaddmm and +outeraten settings, which are patches, not
    Inductor options."""
    from torch._inductor.runtime.benchmarking import benchmarker

    from matmul_toolkit_inductor.timing import gated_benchmarks

    undo: list[Callable[[], None]] = []
    stack = contextlib.ExitStack()
    if "+gated" in variant.settings:
        stack.enter_context(gated_benchmarks())
        undo.append(stack.close)
    if "+noflush" in variant.settings:
        # The benchmarker zeroes a buffer of its L2 size before every timed run; 4 bytes keep
        # the call and drop the flush.
        had = "L2_cache_size" in vars(benchmarker)
        old = vars(benchmarker).get("L2_cache_size")
        benchmarker.L2_cache_size = 4
        undo.append(lambda: setattr(benchmarker, "L2_cache_size", old) if had else vars(benchmarker).pop("L2_cache_size", None))
    if "+biasaddmm" in variant.settings:
        from torch._inductor.choices import InductorChoices
        from torch._inductor.virtualized import V

        class BiasAddmmOnly(InductorChoices):
            def get_template_configs(self, kernel_inputs: Any, templates: list[Any], op_name: str,
                                     kwarg_overrides: Any = None) -> Any:
                uids = [getattr(t, "uid", None) for t in templates]
                if op_name == "addmm" and "aten::bias_addmm" in uids:
                    templates = [t for t in templates if getattr(t, "uid", None) != "aten::addmm"]
                return super().get_template_configs(kernel_inputs, templates, op_name, kwarg_overrides)

        V.set_choices_handler(BiasAddmmOnly())
        undo.append(lambda: V.set_choices_handler(InductorChoices()))
    if "+outeraten" in variant.settings:
        from matmul_toolkit_inductor.model_hook import ModelHook

        decide = ModelHook._decide

        def outer_on_aten(hook: Any, key: str, shape: dict[str, Any]) -> dict[str, Any]:
            return outer_products_on_aten(key, shape, decide(hook, key, shape))

        setattr(ModelHook, "_decide", outer_on_aten)
        undo.append(lambda: setattr(ModelHook, "_decide", decide))
    try:
        yield
    finally:
        for step in reversed(undo):
            step()


def export_table(args: argparse.Namespace, shapeset: str, policy: Optional[str], folder: str) -> tuple[str, float]:
    """Runs export-lut on the workload's shapeset; (table path, seconds)."""
    label = policy or "default"
    table = os.path.join(folder, f"lut_{label}.json")
    command = [args.mmt, "export-lut", "--model", args.model, "--shapeset", shapeset, "--lut-format", "inductor",
               "--output", table]
    if policy:
        command += ["--policy", policy]
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise RuntimeError(f"export-lut failed (exit {done.returncode}): {lines[-1] if lines else ''}")
    print(done.stdout.strip(), flush=True)
    return table, time.monotonic() - start


# Per problem: Inductor's benchmark of the ATen call, and its time without the launch (None
# where the GPU's clock stayed low).
AtenTimes = dict[str, tuple[float, Optional[float]]]


def isolated_aten_ms(torch: Any, records: list[dict[str, Any]], cache: AtenTimes) -> None:
    """For records that kept ATen: the ATen call alone on fresh operands of the problem's
    layout, timed by Inductor's benchmarker (benchmark_ms["aten"], where Inductor timed
    nothing) and without the host's launch (gated_ms, timing.GatedTimer); both flush L2.
    A problem whose time without the launch is missing (the clock stayed low) is timed again."""
    from torch._inductor.runtime.benchmarking import benchmarker

    from matmul_toolkit_inductor.dataset import parse_op_key
    from matmul_toolkit_inductor.timing import GatedTimer

    timer = GatedTimer(torch, torch.device("cuda", torch.cuda.current_device()))
    for r in records:
        if r.get("shape") is None or r.get("chosen") != "aten":
            continue
        s, key = r["shape"], f"{r['op']} {json.dumps(r['shape'], sort_keys=True)}"
        if key not in cache or cache[key][1] is None:
            op, layout = parse_op_key(r["op"])
            dtype = getattr(torch, s["M_dtype"])
            batch = [s["B"]] if op == "bmm" else []

            def matrix(rows: int, cols: int, transposed: bool) -> Any:
                shape = [*batch, cols, rows] if transposed else [*batch, rows, cols]
                m = torch.randn(shape, device="cuda").to(dtype)
                return m.transpose(-1, -2) if transposed else m

            a, b = matrix(s["M"], s["K"], layout[0] == "t"), matrix(s["K"], s["N"], layout[1] == "t")
            if op == "addmm":
                bias = torch.randn(s["N"], device="cuda").to(dtype)
                fn: Callable[[], Any] = lambda: torch.addmm(bias, a, b)  # noqa: E731
            else:
                fn = (lambda: torch.bmm(a, b)) if op == "bmm" else (lambda: torch.mm(a, b))
            benchmark_ms = cache[key][0] if key in cache else float(benchmarker.benchmark_gpu(fn))
            cache[key] = benchmark_ms, gated_ms_or_none(timer, fn, key)
        if "aten" not in r["benchmark_ms"]:
            r["benchmark_ms"]["aten"] = cache[key][0]
            r["isolated_by"] = "suite (Inductor's benchmarker)"
        r["gated_ms"] = cache[key][1]


def gated_ms_or_none(timer: Any, fn: Callable[[], Any], problem: str) -> Optional[float]:
    """The fastest of `timer`'s runs of `fn`; None, said on stderr, where the SM clock stayed
    low through the timer's waits (a GPU throttled after the model's heaviest GEMMs, or
    another context on it): one problem's time is then missing, not the whole profile."""
    from matmul_toolkit_inductor.timing import SlowClockError

    try:
        return min(timer.timed_runs(fn))
    except SlowClockError as e:
        print(f"{problem}: no time without the launch: {e}", file=sys.stderr)
        return None


def warm_up(torch: Any) -> None:
    """One untimed compile, so that process start-up (imports, Inductor's compile workers)
    is charged to no variant."""
    layer = torch.nn.Linear(64, 64, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(8, 64, device="cuda", dtype=torch.bfloat16)
    torch.compile(layer, options={"triton.cudagraphs": True})(x)
    torch.cuda.synchronize()
    torch._dynamo.reset()


def wait_for_compile_workers(torch: Any) -> None:
    """The warm-up compile only starts Inductor's compile workers; until they are up, Inductor
    compiles kernels one by one in the process. Several variant processes start theirs at once,
    so a compile timed before they are all up would be slowed by the others' start-up."""
    from torch._inductor import async_compile

    wait = getattr(async_compile.AsyncCompile, "wait_pool_ready", None)
    try:
        if wait is not None:
            wait(timeout=180)
    except Exception as e:  # workers not up: the compile still works, on fewer of them
        print(f"compile workers not ready: {type(e).__name__}: {e}", file=sys.stderr, flush=True)


def compile_phase_seconds(torch: Any) -> dict[str, float]:
    """Seconds spent so far in each of Dynamo's and Inductor's timed compile phases (never
    raises: a torch without them has none to report)."""
    try:
        metrics = torch._dynamo.utils.compilation_time_metrics
        return {str(k): float(sum(v)) for k, v in metrics.items()}
    except Exception:
        return {}


def phase_difference(before: dict[str, float], after: dict[str, float], least_s: float = 0.05) -> dict[str, float]:
    """The phases that took at least `least_s` between two readings, longest first."""
    spent = {k: v - before.get(k, 0.0) for k, v in after.items()}
    return {k: round(v, 2) for k, v in sorted(spent.items(), key=lambda kv: -kv[1]) if v >= least_s}


def dynamo_graphs(torch: Any) -> int:
    """Graphs Dynamo has compiled in this process so far."""
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


def cudagraph_skips(torch: Any) -> int:
    """Graphs Inductor has run without CUDA graphs in this process so far (never raises: a
    torch without the counter has none to report)."""
    try:
        return int(torch._dynamo.utils.counters["inductor"]["cudagraph_skips"])
    except Exception:
        return 0


class VariantRun:
    """One variant, in a process of its own: built, compiled and checked once, with its hook,
    table and settings installed for the rest of the process (as a user keeps them), then
    timed a round at a time when the workload's process asks."""

    def __init__(self, torch: Any, args: argparse.Namespace, w: W.Workload, v: Variant) -> None:
        self.torch, self.args, self.w, self.v = torch, args, w, v
        self.result: dict[str, Any] = {"ms": None, "compile_s": None, "compile_kwargs": json.dumps(v.compile_kwargs())}
        self.stack = contextlib.ExitStack()
        self.calls: dict[str, Callable[[], Any]] = {}  # sequence length -> one call
        self.records: list[dict[str, Any]] = []
        self.recorder: Any = None
        self.graphs_compiled = 0
        self.refs: dict[int, Any] = {}
        self.eager: Any = None     # the eager reference's model, until its call is timed
        self.instance: Any = None  # the model this variant compiles
        self.host_ms: dict[str, list[float]] = {}  # sequence length -> the host's ms a call, each round
        self.timing_cpu: Optional[int] = None  # the CPU the timed calls were issued from, once pinned
        self.unpinned: Optional[set[int]] = None  # the CPUs before pinning (None: not tried yet)

    def prepare(self) -> None:
        """What is charged to no variant, and may run in every variant's process at once:
        Dynamo's limits, one warm-up compile (it starts Inductor's compile workers), the eager
        reference outputs, and the model to compile."""
        torch, w = self.torch, self.w
        for limit in ("recompile_limit", "cache_size_limit"):
            if hasattr(torch._dynamo.config, limit):
                setattr(torch._dynamo.config, limit, max(getattr(torch._dynamo.config, limit), 64))
        warm_up(torch)
        self.eager = W.build(torch, w, seed=SEED)
        self.refs = {w.seq: self.eager.call(self.eager.module).float().clone()}
        for seq in w.lengths[1:]:
            at = self.eager.at_length(torch, seq)
            self.refs[seq] = at.call(at.module).float().clone()
        if self.v.name != "default":  # only the default's eager call is timed
            self.drop_eager()
        self.instance = W.build(torch, w, seed=SEED)
        torch.cuda.synchronize()
        wait_for_compile_workers(torch)

    def eager_call_ms(self) -> float:
        """One eager call's wall time (its reference calls warmed it up); then the eager model
        goes. Timed alone, as compiles are."""
        start = time.perf_counter()
        self.eager.call(self.eager.module)
        self.torch.cuda.synchronize()
        ms = 1000 * (time.perf_counter() - start)
        self.drop_eager()
        return ms

    def drop_eager(self) -> None:
        """Frees the eager reference's model, so that the variant compiles alone on the GPU."""
        if self.eager is None:
            return
        self.eager = None
        import gc

        gc.collect()
        self.torch.cuda.empty_cache()

    def compile(self, tables: dict[Optional[str], str],
                default_tuned: Optional[dict[str, str]] = None) -> dict[str, Any]:
        """Compiles the variant (the first call at each length) and checks its outputs;
        `default_tuned`: the configs default's compile kept for its runtime-tuned kernels
        (autotune_state.tuned_configs), which +defaulttuned puts in place first."""
        from torch._inductor.runtime.cache_dir_utils import cache_dir
        from torch._inductor.utils import fresh_cache

        from matmul_toolkit_inductor import lut
        from matmul_toolkit_inductor.recorder import GemmRecorder

        torch, args, w, v, result, refs = self.torch, self.args, self.w, self.v, self.result, self.refs
        self.drop_eager()
        instance = self.instance
        hook = None
        self.stack.enter_context(fresh_cache())
        if "+defaulttuned" in v.settings:
            if default_tuned is None:
                raise RuntimeError("+defaulttuned: default did not compile in this run")
            autotune_state.restore_files(cache_dir(), default_tuned)
        if v.base == "ours":
            from matmul_toolkit_inductor.model_hook import gpu_mismatch, use_model

            hook = use_model(args.model, policy=v.policy, patchify="+nopatchify" not in v.settings,
                             force=args.force_model)
            if not hook.installed:
                raise RuntimeError("use_model did not install (another GPU than the model's; --force-model)")
            forced = gpu_mismatch(hook.model.info())
            if forced:
                result["model_forced"] = forced  # why it would not have installed
            self.stack.enter_context(hook)
        if v.base == "table":
            table_path = tables.get(v.policy)
            if table_path is None:
                raise RuntimeError(f"no table for policy {v.policy or 'default'} (the default variant records the GEMMs)")
            out_dir = os.path.abspath(args.out)
            inside = os.path.commonpath([os.path.abspath(table_path), out_dir]) == out_dir  # else --table's
            result["table"] = os.path.relpath(table_path, args.out) if inside else os.path.basename(table_path)
            lut.TABLE_HITS.hits = lut.TABLE_HITS.misses = 0
            lut.TABLE_HITS.missed = []
            self.stack.enter_context(lut.using_table(table_path))
        self.stack.enter_context(suspect_settings(v))
        self.recorder = GemmRecorder()
        compiled = torch.compile(instance.module, dynamic=bool(w.lengths) or None, **v.compile_kwargs())
        graphs_before, skips_before = dynamo_graphs(torch), cudagraph_skips(torch)
        phases_before = compile_phase_seconds(torch)
        with self.recorder, self.resumable() as attempt:
            start = time.perf_counter()
            out = instance.call(compiled)
            torch.cuda.synchronize()
            result["compile_s"] = time.perf_counter() - start
        result["compile_phases_s"] = phase_difference(phases_before, compile_phase_seconds(torch))
        if attempt is not None and attempt.note:
            print(f"{w.name}: {v.name}: {attempt.note}", flush=True)
        if attempt is not None and attempt.number > 1:
            # The attempts cut off earlier compiled too: charged with this one.
            result["compile_attempts"] = {"attempts": attempt.number, "earlier_s": round(attempt.earlier_s, 1),
                                          "last_s": result["compile_s"], "restored_files": attempt.restored}
            result["compile_s"] += attempt.earlier_s
        errors = [relative_error(torch, out, refs[w.seq])]
        del out
        self.calls[str(w.seq)] = lambda: instance.call(compiled)
        # A dynamic workload: the other lengths must run on the graph compiled for the first.
        others = {seq: instance.at_length(torch, seq) for seq in w.lengths[1:]}
        if others:
            result["first_call_s_by_length"] = {}
            with self.recorder:
                for seq, at in others.items():
                    start = time.perf_counter()
                    out = at.call(compiled)
                    torch.cuda.synchronize()
                    result["first_call_s_by_length"][str(seq)] = time.perf_counter() - start
                    errors.append(relative_error(torch, out, refs[seq]))
                    del out
                    self.calls[str(seq)] = lambda at=at: at.call(compiled)  # type: ignore[misc]
        if "+defaulttuned" in v.settings:
            assert default_tuned is not None, "checked before the compile"
            result["default_tuned"] = autotune_state.reuse_of(default_tuned, autotune_state.tuned_configs(cache_dir()))
        result["graphs_compiled"] = dynamo_graphs(torch) - graphs_before
        result["cudagraph_skips"] = cudagraph_skips(torch) - skips_before
        self.graphs_compiled = dynamo_graphs(torch)
        if v.base == "table":
            result["lookups"] = {"hits": lut.TABLE_HITS.hits, "misses": lut.TABLE_HITS.misses,
                                 "missed": list(lut.TABLE_HITS.missed)}
        if hook is not None:
            result["decisions"] = hook.explain().splitlines()
        result["max_rel_error"] = max(errors)
        if result["max_rel_error"] >= w.tolerance:
            result["error"] = f"wrong result: relative error {result['max_rel_error']:.1e} against eager"
        self.records = [r.to_dict() for r in self.recorder.records]
        result["gemms"] = {"lowered": len(self.records),
                           "chosen": {k: sum(1 for r in self.records if str(r["chosen"]) == k)
                                      for k in sorted({str(r["chosen"]) for r in self.records})}}
        # Compiling is over: the idle compile workers of several variant processes need not
        # stay (a later compile would start them again).
        with contextlib.suppress(Exception):
            from torch._inductor.async_compile import shutdown_compile_workers

            shutdown_compile_workers()
        return result

    def resumable(self) -> Any:
        """An autotuning variant's compile resumes an earlier attempt's (autotune_state.py);
        the others compile in seconds and start afresh."""
        if self.v.base not in AUTOTUNING_BASES:
            return contextlib.nullcontext(None)
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        identity = {"workload": self.w.name, "variant": self.v.name, "device": self.torch.cuda.get_device_name(),
                    "torch": self.torch.__version__, "triton": version_of("triton")}
        return autotune_state.resumable_compile(state_path(self.args.autotune_state, self.w.name, self.v.name),
                                                identity, cache_dir)

    def probe(self, length: str) -> float:
        """Warm-up calls (the first records the CUDA graphs), then one round of --calls: ms a call.
        From here to the profile the process issues its calls from timing_cpu()."""
        self.pin_to_timing_cpu()
        for _ in range(WARM_UP_CALLS):
            self.torch.compiler.cudagraph_mark_step_begin()
            self.calls[length]()
        return timed_round(self.torch, self.calls[length], self.args.calls)

    def pin_to_timing_cpu(self) -> None:
        """Issues the calls from timing_cpu() until unpin() (once; where pinning is refused,
        timed unpinned, said once)."""
        if self.unpinned is not None:
            return
        self.unpinned = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()
        if not self.unpinned:
            return
        cpu = timing_cpu(self.unpinned)
        try:
            os.sched_setaffinity(0, {cpu})
            self.timing_cpu = cpu
        except OSError as e:  # a container that forbids it
            print(f"{self.w.name}: {self.v.name}: timed calls not pinned to CPU {cpu}: {e}", file=sys.stderr,
                  flush=True)

    def unpin(self) -> None:
        """Every CPU again, for what follows the rounds (the profiler's threads, the isolated
        benchmarks)."""
        if self.timing_cpu is not None and self.unpinned:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, self.unpinned)

    def host_times(self) -> dict[str, Any]:
        """The rounds' host time a call at each length (median) and the CPU they were issued
        from, asked for after the rounds: kept even where the profile fails."""
        found: dict[str, Any] = {}
        if self.host_ms:
            found["host_ms_by_length"] = {length: median(times) for length, times in self.host_ms.items()}
        if self.timing_cpu is not None:
            found["timing_cpu"] = self.timing_cpu
        return found

    def round(self, length: str, calls: int) -> float:
        """One untimed call (another variant's process had the GPU), then `calls` timed: ms a call."""
        self.torch.compiler.cudagraph_mark_step_begin()
        self.calls[length]()
        return timed_round(self.torch, self.calls[length], calls, self.host_ms.setdefault(length, []))

    def profile(self, aten_cache: AtenTimes, report: bool = True) -> tuple[dict[str, Any], AtenTimes]:
        """The in-graph report and the host's time to issue a call beside the call's wall time
        (not for `report` False: a variant's other compiles, whose results keep neither), the
        kernels tuned at their first run with the configs they kept, and whether timing made
        Dynamo compile again; with the ATen timings, shared. A dynamic workload is profiled at
        the length it compiled for: its GEMMs were lowered (and recorded) at that length's
        sizes, Inductor's hints."""
        self.unpin()
        found: dict[str, Any] = {}
        first = self.calls[str(self.w.seq)]
        if report:
            found["host_us_a_call"], found["wall_us_a_call"] = host_and_wall_us(self.torch, first,
                                                                                 2 * self.args.calls)
        if report and self.args.profile_calls:
            if self.w.lengths:
                found["profiled_length"] = self.w.seq
            spans = profiled_kernels(self.torch, first, self.args.profile_calls)
            isolated_aten_ms(self.torch, self.records, aten_cache)
            kernels = [(name, end - start) for name, start, end in spans]
            found["in_graph"] = ingraph.report(kernels, self.args.profile_calls, self.records, spans)
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        cache = cache_dir()
        found["runtime_tuned"] = ingraph.runtime_tuned(cache)
        if report:
            self.keep_programs(cache)
        recompiled = dynamo_graphs(self.torch) - self.graphs_compiled
        if recompiled:
            found["recompiled_while_timed"] = recompiled
        return found, aten_cache

    def keep_programs(self, cache: str) -> None:
        """The compile's generated programs, into the workload's log folder (code/VARIANT/),
        to be diffed against another variant's. A copy for reading: one that cannot be
        written costs a line, never the variant's measurement."""
        folder = Path(self.args.out) / self.w.name / "code" / self.v.name
        try:
            for name, text in ingraph.generated_programs(cache).items():
                write_file_atomically(folder / name, text)
        except (OSError, ValueError) as e:
            print(f"{self.w.name}: {self.v.name}: generated program not kept: {e}", file=sys.stderr, flush=True)


def timed_round(torch: Any, call: Callable[[], Any], calls: int, host_ms: Optional[list[float]] = None) -> float:
    """Milliseconds a call over `calls` back-to-back calls, between CUDA events; `host_ms`
    gets the host's milliseconds a call to issue them (about equal: the host sets the pace)."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    began = time.perf_counter()
    start.record()
    for _ in range(calls):
        torch.compiler.cudagraph_mark_step_begin()
        call()
    end.record()
    if host_ms is not None:
        host_ms.append(1e3 * (time.perf_counter() - began) / calls)
    end.synchronize()
    return float(start.elapsed_time(end)) / calls


def timing_cpu(cpus: set[int]) -> int:
    """The one CPU, of those a variant's process may use, that it issues its timed calls from:
    the same in every variant's process. Where the host sets the pace (a dynamic graph's 128
    tokens), three processes running the same program issued a call in 441 to 1,094 µs
    (2026-12-06), the scheduler's choice of core one suspect; one core for all takes that one
    out. The highest: CPU 0 takes the most interrupts."""
    return max(cpus)


def variant_main(conn: Any, args: argparse.Namespace, workload: str, variant: str) -> None:
    """A variant's process: answers the workload's process ("prepare", "eager_call_ms",
    "compile", "probe", "round", "host_times", "profile", "close") until closed; a request
    that fails is answered {"failure": ...}."""
    import traceback

    import torch

    w, v = W.by_name([workload])[0], parse_variant(variant)
    run = VariantRun(torch, args, w, v)
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        what, params = request[0], request[1:]
        reply: Any = None
        try:
            if what == "compile":
                result = run.compile(*params)
                reply = {"result": result, "environment": environment(torch)}
                if v.name == "default":
                    from torch._inductor.runtime.cache_dir_utils import cache_dir

                    reply["tuned_files"] = autotune_state.tuned_configs(cache_dir())
                    try:
                        reply["gemm_problems"] = run.recorder.save_shapeset(
                            os.path.join(args.out, w.name, "shapeset.json"))
                    except Exception as e:  # the tables need it; the default's timings do not
                        reply["gemm_problems"] = f"not saved: {type(e).__name__}: {e}"
            elif what != "close":
                reply = getattr(run, what)(*params)
        except Exception as e:  # told to the workload's process, which goes on with the others
            traceback.print_exc()
            text = str(e).strip().splitlines()
            reply = {"failure": f"{type(e).__name__}: {text[0][:300] if text else ''}"}
        conn.send(reply)
        if what == "close":
            run.stack.close()
            return


class VariantProcess:
    """The workload's process's handle on one variant's process (multiprocessing, spawned:
    a fresh interpreter with CUDA and Dynamo of its own)."""

    CLOSE_WAIT_S = 30.0

    def __init__(self, args: argparse.Namespace, w: W.Workload, v: Variant) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self.name = v.name
        self.owed = 0  # requests sent and not yet answered
        self.conn, theirs = context.Pipe()
        self.process = context.Process(target=variant_main, args=(theirs, args, w.name, v.name),
                                       name=f"{w.name} {v.name}")
        self.process.start()
        theirs.close()

    def send(self, *message: Any) -> None:
        try:
            self.conn.send(message)
        except OSError:
            self.died()
        self.owed += 1

    def take(self, limit: Optional[float] = None) -> Any:
        """The answer to the oldest request, as sent (waiting at most `limit` s where given)."""
        try:
            if limit is not None and not self.conn.poll(limit):
                raise VariantFailed(f"the {self.name} process gave no answer in {limit:.0f} s")
            answer = self.conn.recv()
        except (EOFError, OSError):
            self.died()
        self.owed -= 1
        return answer

    def reply(self) -> Any:
        answer = self.take()
        if isinstance(answer, dict) and "failure" in answer:
            raise VariantFailed(answer["failure"])
        return answer

    def request(self, *message: Any) -> Any:
        self.send(*message)
        return self.reply()

    def died(self) -> NoReturn:
        self.process.join(10)
        raise VariantFailed(f"the {self.name} process died (exit code {self.process.exitcode})")

    def close(self) -> None:
        """Takes the answers still owed (requests the workload's process gave up on), asks the
        process to close, and kills it where an answer or its exit takes over CLOSE_WAIT_S."""
        with contextlib.suppress(VariantFailed):
            while self.owed > 0:
                self.take(self.CLOSE_WAIT_S)
            self.send("close")
            self.take(self.CLOSE_WAIT_S)
        self.process.join(self.CLOSE_WAIT_S)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


class VariantFailed(Exception):
    """A variant's process failed a request, or died."""


Times = dict[Any, list[float]]


def interleaved_rounds(timers: dict[Any, Any], rounds: int, fewest: int, round_ms: float,
                       turn_of: Callable[[Any], Any] = lambda key: key,
                       after_round: Callable[[Times, dict[Any, str]], None] = lambda times, failed: None
                       ) -> tuple[Times, dict[Any, str]]:
    """Times every timer (probe() -> ms a call; round(calls) -> ms a call) in rounds that take
    turns: round r runs each turn once, in an order rotated by r, so that a drift of the GPU
    (its clocks, its temperature) falls on every variant alike. A turn is the timers of one
    `turn_of` (a variant's sequence lengths), run one after the other. Calls a round: at least
    `fewest`, enough for about `round_ms`. At least `rounds` rounds, a multiple of the turns.
    `after_round` sees the times so far. Returns (each timer's rounds, the failures of those
    that failed)."""
    times: Times = {key: [] for key in timers}
    failed: dict[Any, str] = {}
    calls: dict[Any, int] = {}
    for key, timer in timers.items():
        try:
            calls[key] = calls_per_round(timer.probe(), fewest, round_ms)
        except VariantFailed as e:
            failed[key] = str(e)
    turns: dict[Any, list[Any]] = {}
    for key in timers:
        if key not in failed:
            turns.setdefault(turn_of(key), []).append(key)
    order = list(turns)
    # Each turn at each place of the rotation equally often: rounds a multiple of the turns.
    rounds = math.ceil(rounds / len(order)) * len(order) if order else 0
    for r in range(rounds):
        for turn in order[r % len(order):] + order[:r % len(order)]:
            for key in turns[turn]:
                if key in failed:
                    continue
                try:
                    times[key].append(timers[key].round(calls[key]))
                except VariantFailed as e:
                    failed[key] = str(e)
        after_round(times, failed)
    return times, failed


@dataclass
class RemoteTimer:
    """One sequence length of a variant's process, as interleaved_rounds times it."""
    handle: Any
    length: str

    def probe(self) -> float:
        return float(self.handle.request("probe", self.length))

    def round(self, calls: int) -> float:
        return float(self.handle.request("round", self.length, calls))


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def child_main(args: argparse.Namespace, start: Callable[..., Any] = VariantProcess) -> int:
    """A workload: a process for each variant, all prepared at once; then each compiled
    alone, the default first (its GEMMs make the tables); then all of them timed in
    interleaved rounds, then profiled one at a time. The record is rewritten after every
    compile and at the end."""
    w = W.by_name([args.child])[0]
    folder = os.path.join(args.out, w.name)
    os.makedirs(folder, exist_ok=True)
    record: dict[str, Any] = {"workload": w.name, "description": w.describe(), "environment": {}, "variants": {}}
    run = f"{socket.gethostname()}-{os.getpid()}-{datetime.datetime.now(datetime.timezone.utc):%Y%m%dT%H%M%SZ}"
    results: dict[str, dict[str, Any]] = {}  # by process: each variant's compiles apart
    variants = compile_copies(args.parsed_variants, args.compiles)

    def save() -> None:
        record["variants"] = fold_compiles(results, args.parsed_variants, args.compiles, bool(w.lengths))
        stamp_run(record["variants"], run)
        write_file_atomically(Path(args.record), json.dumps(record, indent=1) + "\n")

    tables: dict[Optional[str], str] = {}
    default_tuned: Optional[dict[str, str]] = None  # for +defaulttuned, once default compiled
    alive: dict[str, Any] = {}
    try:
        # Start-up, warm-up and the eager reference in every variant's process at once: none
        # of it is timed. Then each compiles alone, the default first (its GEMMs make the tables).
        for v in variants:
            alive[v.name] = start(args, w, v)
            alive[v.name].send("prepare")
        for name in list(alive):
            try:
                alive[name].reply()
            except VariantFailed as e:
                results[name] = {"error": f"prepare: {e}"}
                alive.pop(name).close()
        for v in variants:
            if v.name not in alive:
                continue
            print(f"{w.name}: {v.name} ...", flush=True)
            handle = alive[v.name]
            try:
                if v.name == "default":
                    record["eager_call_ms"] = handle.request("eager_call_ms")
                reply = handle.request("compile", tables, default_tuned)
            except VariantFailed as e:
                results[v.name] = {"error": str(e)}
                alive.pop(v.name).close()
            else:
                results[v.name] = reply["result"]
                record["environment"] = record["environment"] or reply["environment"]
                if v.name == "default":
                    record["gemm_problems"] = reply["gemm_problems"]
                    default_tuned = reply.get("tuned_files", {})
                    make_tables(args, w, folder, tables, record)
            print(f"{w.name}: {v.name}: {json.dumps({k: results[v.name].get(k) for k in ('compile_s', 'error')})}",
                  flush=True)
            save()
        lengths = [str(seq) for seq in (w.lengths or (w.seq,))]

        def keep_times(times: Times, failed: dict[Any, str]) -> None:
            """The runtimes from the rounds so far, saved: a workload stopped while timed
            keeps them (its rounds_ms shows how many ran)."""
            for name in alive:
                if not any((name, length) in failed for length in lengths):
                    fill_runtime(results[name], {length: times[(name, length)] for length in lengths}, bool(w.lengths))
            save()

        times, failed = interleaved_rounds({(name, length): RemoteTimer(handle, length)
                                            for name, handle in alive.items() for length in lengths},
                                           args.rounds, args.calls, args.round_ms,
                                           turn_of=lambda key: key[0], after_round=keep_times)
        for name in list(alive):
            result = results[name]
            failures = [failed[(name, length)] for length in lengths if (name, length) in failed]
            if failures:
                result["error"] = f"timing: {failures[0]}"
                result["ms"] = None
                alive.pop(name).close()
                continue
            fill_runtime(result, {length: times[(name, length)] for length in lengths}, bool(w.lengths))
            with contextlib.suppress(VariantFailed):
                result.update(alive[name].request("host_times"))
            print(f"{w.name}: {name}: {json.dumps({k: result.get(k) for k in ('ms', 'compile_s', 'error')})}",
                  flush=True)
        save()
        # Inductor's ATen timings are shared, but not with a variant whose settings change how
        # Inductor's benchmarker times (+noflush, +gated): it times its own, and keeps them.
        aten_cache: AtenTimes = {}
        for v in variants:
            if v.name not in alive:
                continue
            own_timings = bool(BENCHMARKER_SETTINGS & set(v.settings))
            try:
                # A variant's other compiles (--compiles) keep only what they tuned at first run.
                found, cache = alive[v.name].request("profile", {} if own_timings else aten_cache,
                                                     v in args.parsed_variants)
                results[v.name].update(found)
                if not own_timings:
                    aten_cache = cache
            except VariantFailed as e:
                print(f"{w.name}: {v.name}: profile: {e}", flush=True)
        save()
    finally:
        for handle in alive.values():
            handle.close()
    return 0


def fill_runtime(result: dict[str, Any], rounds: dict[str, list[float]], dynamic: bool) -> None:
    """A variant's runtime from its rounds at each sequence length: the median, and for a
    dynamic workload the geomean over its lengths (none for a variant with an error)."""
    first = next(iter(rounds.values()))
    if not first:
        return
    result["rounds_ms"] = list(first)
    if dynamic:
        result["ms_by_length"] = {length: median(times) for length, times in rounds.items()}
    if "error" not in result:
        result["ms"] = summary.geomean(list(result["ms_by_length"].values())) if dynamic else median(first)


def make_tables(args: argparse.Namespace, w: W.Workload, folder: str, tables: dict[Optional[str], str],
                record: dict[str, Any]) -> None:
    """The table variants' tables, exported from the default compile's GEMMs (the default
    policy's is --table where given)."""
    shapeset = os.path.join(folder, "shapeset.json")
    for policy in dict.fromkeys(x.policy for x in args.parsed_variants if x.base == "table"):
        if policy is None and args.table:
            tables[policy] = args.table
            continue
        if not args.mmt:
            continue
        try:
            tables[policy], seconds = export_table(args, shapeset, policy, folder)
            record.setdefault("export_s", {})[policy or "default"] = seconds
        except RuntimeError as e:
            print(f"{w.name}: {e}", flush=True)


def stamp_run(variants: dict[str, dict[str, Any]], run: str) -> None:
    """Marks every variant with this process's run and its default compile's times, so that
    variants measured in different runs compare through their own defaults (summary.compare)."""
    default = variants.get("default", {})
    for result in variants.values():
        result["run"] = run
        if summary.usable(default):
            result["default_ms"], result["default_compile_s"] = default["ms"], default["compile_s"]


def main(argv: Optional[list[str]] = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        if args.child:
            return child_main(args)
        return run_parent(args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
