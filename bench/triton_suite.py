#!/usr/bin/env python3
"""Inductor's Triton GEMM kernels against cuBLAS on the issue's fixed suite (GPU machine).

For each problem of the suite (the problems `cuda_gemm_bench suite` measures: bf16 and fp16
mm at 4096^3, 8192^3, 2552x10616x7616, 256x4096x4096, 1376x80x216, addmm 4096^3 bf16 with a
1-D bias, bmm 32x1024^3 bf16) this times
  - cuBLAS, through torch.mm / torch.addmm / torch.bmm;
  - Inductor's Triton GEMM template: torch.compile of the same op with max-autotune over
    Triton only (max_autotune_gemm_backends="TRITON", no CUDA graphs), reporting the
    config Inductor chose (read from the generated code, else from its AUTOTUNE log).
Timing follows cuda_gemm_bench: CUDA events around each timed call only, a write of
2 x L2 before every timed call (cold L2), median of --repeat runs after --warmup calls.
After the flush the GPU spins for a few hundred microseconds (torch.cuda._sleep) so the
host's dispatch overhead of the compiled wrapper never shows up as GPU idle time inside
the events (cuda_gemm_bench launches with cuLaunchKernel, whose host cost stays hidden
behind the flush).

Outputs under --out (default $OUT, else out/): triton_suite.md and triton_suite.json,
rewritten after every problem so a run cut short keeps what it measured. With
--ours SUITE_CSV (suite.csv from `cuda_gemm_bench suite --out DIR`) a combined
ours / Triton / cuBLAS table is added (triton_vs_ours.md); --ours with --report-only
rebuilds the tables from an existing triton_suite.json without a GPU.

  python3 bench/triton_suite.py --out "$OUT/triton" [--shapes 4096,256x4096x4096] \
      [--budget 480] [--ours out/gpu/suite.csv]
"""

import argparse
import contextlib
import csv
import io
import json
import math
import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))

from matmul_toolkit_inductor.dataset import write_file_atomically  # noqa: E402

# (op, batch, M, N, K, dtype): the order cuda_gemm_bench's suite uses for its shape names;
# bf16 first so a run cut short by --budget keeps the headline numbers.
SUITE = [
    ("mm", 1, 4096, 4096, 4096, "bf16"),
    ("mm", 1, 8192, 8192, 8192, "bf16"),
    ("mm", 1, 2552, 10616, 7616, "bf16"),
    ("mm", 1, 256, 4096, 4096, "bf16"),
    ("mm", 1, 1376, 80, 216, "bf16"),
    ("addmm", 1, 4096, 4096, 4096, "bf16"),
    ("bmm", 32, 1024, 1024, 1024, "bf16"),
    ("mm", 1, 4096, 4096, 4096, "fp16"),
    ("mm", 1, 8192, 8192, 8192, "fp16"),
    ("mm", 1, 2552, 10616, 7616, "fp16"),
    ("mm", 1, 256, 4096, 4096, "fp16"),
    ("mm", 1, 1376, 80, 216, "fp16"),
]


def shape_text(op, batch, m, n, k, dtype):
    """The name cuda_gemm_bench's suite gives the problem ("bmm 32x1024x1024x1024 bf16")."""
    dims = (f"{batch}x" if batch > 1 else "") + f"{m}x{n}x{k}"
    return f"{op} {dims} {dtype}"


def flops(batch, m, n, k):
    return 2.0 * batch * m * n * k


def tflops(problem, ms):
    _, batch, m, n, k, _ = problem
    return flops(batch, m, n, k) / (ms * 1e-3) / 1e12 if ms and ms > 0 else None


def select_shapes(spec):
    """--shapes: comma-separated filters; a problem is kept when any filter is a substring
    of its name ("4096x4096x4096", "bmm", "fp16", "mm 256x4096x4096 bf16")."""
    if not spec:
        return list(SUITE)
    filters = [f.strip() for f in spec.split(",") if f.strip()]
    chosen = [p for p in SUITE if any(f in shape_text(*p) for f in filters)]
    if not chosen:
        names = "; ".join(shape_text(*p) for p in SUITE)
        fail(f"--shapes: '{spec}' matches no problem of the suite ({names})")
    return chosen


PROBLEM = re.compile(r"^(mm|addmm|bmm) (?:(\d+)x)?(\d+)x(\d+)x(\d+) (bf16|fp16)$")


def parse_problems(spec):
    """--problems: ';'-separated names as cuda_gemm_bench's --problem takes them ("mm
    256x4096x1024 bf16", "bmm 8x512x512x512 fp16"), measured instead of the suite."""
    problems = []
    for text in (t.strip() for t in spec.split(";")):
        if not text:
            continue
        m = PROBLEM.match(text)
        if not m:
            fail(f"--problems: '{text}': want 'OP [Bx]MxNxK DTYPE' (OP mm/addmm/bmm, DTYPE bf16/fp16)")
        op, batch, mm, nn, kk, dtype = m.groups()
        problems.append((op, int(batch or 1), int(mm), int(nn), int(kk), dtype))
    return problems


def fail(message, code=2):
    """One line on stderr and a non-zero exit: 2 for bad input, 1 when nothing can run."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def fmt(value, digits=1):
    return "-" if value is None else f"{value:.{digits}f}"


# ----------------------------------------------------------------------------- timing
class ColdTimer:
    """CUDA-event timing with L2 flushed before every timed call."""

    def __init__(self, torch, warmup, repeat, sleep_cycles, warm_l2=False):
        self.torch = torch
        self.warm_l2 = warm_l2
        self.warmup = warmup
        self.repeat = repeat
        props = torch.cuda.get_device_properties(0)
        l2 = int(getattr(props, "L2_cache_size", 0) or 0) or 64 << 20
        self.l2_bytes = l2
        # Written before each timed call: twice the L2, as cuda_gemm_bench's memset.
        self.flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
        self.sleep_cycles = sleep_cycles if hasattr(torch.cuda, "_sleep") else 0

    def time(self, fn):
        torch = self.torch
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(self.repeat)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(self.repeat)]
        for i in range(self.repeat):
            if not self.warm_l2:
                self.flush.zero_()
            if self.sleep_cycles:
                torch.cuda._sleep(self.sleep_cycles)
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        samples = [s.elapsed_time(e) for s, e in zip(starts, ends)]
        return {
            "median_ms": statistics.median(samples),
            "min_ms": min(samples),
            "max_ms": max(samples),
            "samples_ms": samples,
        }


# ------------------------------------------------------------------------ Inductor
class TeeStderr:
    """Keeps what Inductor writes to sys.stderr (its AUTOTUNE table) and passes it on;
    everything else (fileno, encoding, isatty) is the real stream's."""

    def __init__(self, stream):
        self.stream = stream
        self.buffer_text = io.StringIO()

    def write(self, text):
        self.buffer_text.write(text)
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


def inductor_options(torch, search_space, tma, fresh_cache):
    """The torch.compile options: max-autotune over Triton only, no CUDA graphs. Keys this
    torch does not know are left out (and listed), so an option rename cannot abort a run."""
    config = torch._inductor.config
    wanted = {
        "max_autotune": True,
        "max_autotune_gemm": True,
        "max_autotune_gemm_backends": "TRITON",
        "max_autotune_gemm_search_space": search_space,
        "triton.cudagraphs": False,
    }
    if tma:
        wanted["triton.enable_persistent_tma_matmul"] = True
    options, missing = {}, []
    if fresh_cache:
        # A cached graph or autotune result hides the AUTOTUNE table and may hide the code.
        # Set globally: torch.compile's options reject this key (torch 2.11).
        if hasattr(config, "force_disable_caches"):
            config.force_disable_caches = True
        else:
            missing.append("force_disable_caches")
    for key, value in wanted.items():
        owner, name = config, key
        if "." in key:
            head, name = key.split(".", 1)
            owner = getattr(config, head, None)
        if owner is not None and hasattr(owner, name):
            options[key] = value
        else:
            missing.append(key)
    return options, missing


CONSTEXPR = re.compile(r"\b(BLOCK_M|BLOCK_N|BLOCK_K|GROUP_M|EVEN_K)\s*:\s*tl\.constexpr\s*=\s*(\w+)")
LAUNCH = re.compile(r"\b(num_stages|num_warps)\s*=\s*(\d+)")


def config_from_code(codes):
    """The config of the first Triton template kernel in Inductor's output code: the
    constexpr block after its `def`, num_stages / num_warps from the decorator before it."""
    for code in codes:
        at = code.find("def triton_tem_")
        if at < 0:  # older Inductor names the def triton_ and the kernel in its metadata
            at = code.find("triton_tem_")
            if at < 0:
                continue
            at = code.find("def triton_", at)
            if at < 0:
                continue
        values = {}
        for name, value in CONSTEXPR.findall(code[at:at + 4000]):
            values.setdefault(name, value)
        for name, value in LAUNCH.findall(code[max(0, at - 30000):at]):
            values[name] = value  # the last ones: the decorator closest to the def
        if "BLOCK_M" in values:
            return (f"{values.get('BLOCK_M')}x{values.get('BLOCK_N')}x{values.get('BLOCK_K')}"
                    f" g{values.get('GROUP_M', '?')} s{values.get('num_stages', '?')} w{values.get('num_warps', '?')}")
    return None


def kernel_kind(codes):
    text = "\n".join(codes)
    if "triton_tem_" in text:
        return "triton template"
    if re.search(r"extern_kernels\.(mm|addmm|bmm|baddbmm)", text):
        return "extern (ATen)"
    return "unknown" if text else "not captured"


def config_from_log(text):
    """The winner of Inductor's AUTOTUNE table: its first choice line."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("AUTOTUNE "):
            continue
        for choice in lines[i + 1:]:
            if choice.startswith(("strides:", "dtypes:")):
                continue
            if not choice.startswith("  "):
                break
            fields = dict(re.findall(r"(BLOCK_[MNK]|GROUP_M|num_stages|num_warps)=(\d+)", choice))
            name = choice.split()[0]
            if "BLOCK_M" in fields:
                return (f"{fields['BLOCK_M']}x{fields.get('BLOCK_N')}x{fields.get('BLOCK_K')} "
                        f"g{fields.get('GROUP_M', '?')} s{fields.get('num_stages', '?')} "
                        f"w{fields.get('num_warps', '?')} ({name})")
            return name
    return None


# --------------------------------------------------------------------------- problems
def make_operands(torch, problem, seed):
    op, batch, m, n, k, dtype = problem
    dt = torch.bfloat16 if dtype == "bf16" else torch.float16
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def uniform(*shape):
        # Uniform in [0.1, 1.1] like the CUDA backend's operands: no zeros to exploit.
        return (torch.rand(*shape, generator=gen, device="cuda", dtype=torch.float32) + 0.1).to(dt)

    if op == "bmm":
        return uniform(batch, m, k), uniform(batch, k, n)
    if op == "addmm":
        return uniform(n), uniform(m, k), uniform(k, n)
    return uniform(m, k), uniform(k, n)


def eager_op(torch, op):
    return {"mm": torch.mm, "bmm": torch.bmm, "addmm": torch.addmm}[op]


def relative_error(torch, out, ref):
    diff = (out.float() - ref.float()).abs().max().item()
    scale = ref.float().abs().max().item()
    return diff / scale if scale > 0 else diff


def measure(torch, problem, timer, options, seed, want_triton):
    op = problem[0]
    args = make_operands(torch, problem, seed)
    eager = eager_op(torch, op)
    row = {"shape": shape_text(*problem), "op": op, "dtype": problem[5],
           "B": problem[1], "M": problem[2], "N": problem[3], "K": problem[4]}

    ref = eager(*args)
    cublas = timer.time(lambda: eager(*args))
    row["cublas_ms"] = cublas["median_ms"]
    row["cublas_spread"] = (cublas["max_ms"] - cublas["min_ms"]) / cublas["median_ms"]
    row["cublas_tflops"] = tflops(problem, cublas["median_ms"])
    if not want_triton:
        return row

    torch._dynamo.reset()
    # A fresh function per problem and static shapes: one compile, tuned for this shape.
    def body(*xs):
        return eager(*xs)

    compiled = torch.compile(body, dynamic=False, fullgraph=True, options=options)
    tee = TeeStderr(sys.stderr)
    start = time.monotonic()
    codes = []
    try:
        with contextlib.redirect_stderr(tee):
            try:
                from torch._inductor.utils import run_and_get_code

                out, codes = run_and_get_code(compiled, *args)
            except ImportError:
                out = compiled(*args)
        torch.cuda.synchronize()
    except Exception as e:  # no valid Triton choice, compile error: report, go on
        row["triton_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
        row["compile_s"] = time.monotonic() - start
        return row
    row["compile_s"] = time.monotonic() - start
    codes = [c for c in codes if isinstance(c, str)]
    row["triton_kind"] = kernel_kind(codes)
    row["triton_config"] = config_from_code(codes) or config_from_log(tee.buffer_text.getvalue())
    row["triton_max_rel_error"] = relative_error(torch, out, ref)
    # Both round the same float32 sums to bf16/fp16: more than a few output ulps apart is a
    # wrong kernel, whose time would not count.
    row["triton_wrong"] = row["triton_max_rel_error"] > (3e-2 if problem[5] == "bf16" else 5e-3)
    triton = timer.time(lambda: compiled(*args))
    row["triton_ms"] = triton["median_ms"]
    row["triton_spread"] = (triton["max_ms"] - triton["min_ms"]) / triton["median_ms"]
    row["triton_tflops"] = tflops(problem, triton["median_ms"])
    row["triton_over_cublas"] = cublas["median_ms"] / triton["median_ms"]
    return row


# ---------------------------------------------------------------------------- reports
def markdown(result):
    lines = [f"# Inductor Triton GEMM vs cuBLAS on {result['device']}", ""]
    lines.append(f"torch {result['torch']}, triton {result['triton']}, CUDA {result['cuda']}; "
                 f"Inductor max-autotune, backends TRITON, search space {result['search_space']}"
                 f"{', persistent TMA template on' if result.get('tma') else ''}; "
                 + ("WARM L2 (no flush)" if result.get("warm_l2") else
                    f"cold L2 ({result['flush_bytes'] >> 20} MiB written before each run)")
                 + f", median of {result['repeat']} "
                 f"runs after {result['warmup']} warmup calls.")
    lines.append("")
    lines.append("| shape | dtype | cuBLAS TFLOP/s | Triton TFLOP/s | Triton/cuBLAS | Triton config | compile s |")
    lines.append("|---|---|---|---|---|---|---|")
    for r in result["rows"]:
        shape = r["shape"].rsplit(" ", 1)[0]
        if "triton_error" in r:
            triton, ratio, config = "failed", "-", r["triton_error"].replace("|", "/")
        elif "triton_ms" in r:
            triton, ratio = fmt(r["triton_tflops"]), fmt(r["triton_over_cublas"], 2)
            config = r.get("triton_config") or "-"
            if r.get("triton_kind") not in (None, "triton template"):
                config += f" [{r['triton_kind']}]"
            if r.get("triton_wrong"):
                config += f" [WRONG: max rel. error {r['triton_max_rel_error']:.1e}]"
        else:
            triton, ratio, config = "skipped", "-", r.get("skipped", "-")
        lines.append(f"| {shape} | {r['dtype']} | {fmt(r.get('cublas_tflops'))} | {triton} | {ratio} | {config} | "
                     f"{fmt(r.get('compile_s'))} |")
    lines.append("")
    lines.append("Triton/cuBLAS = cuBLAS time / Triton time (> 1: Triton faster).")
    for note in result.get("notes", []):
        lines.append(f"- {note}")
    return "\n".join(lines) + "\n"


def read_ours(path):
    """suite.csv of `cuda_gemm_bench suite`: problem name -> its row."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    if not rows or "problem" not in rows[0] or "best_ms" not in rows[0]:
        fail(f"{path}: not a cuda_gemm_bench suite.csv (no problem/best_ms columns)")
    return {r["problem"].strip(): r for r in rows}


def combined_markdown(result, ours, ours_path):
    def number(row, key):
        try:
            value = float(row.get(key, ""))
        except ValueError:
            return None
        return value if value > 0 and math.isfinite(value) else None

    lines = [f"# Ours vs Inductor Triton vs cuBLAS on {result['device']}", "",
             f"Ours: {ours_path} (cuda_gemm_bench suite: best EXHAUSTIVE config, best DEFAULT config, its own "
             "cublasLt reference). Triton and cuBLAS (torch): this script. All cold L2, medians.", "",
             "| shape | dtype | cuBLAS (torch) TFLOP/s | cuBLAS (ours' run) TFLOP/s | Triton TFLOP/s | ours best "
             "TFLOP/s | ours best config | ours DEFAULT TFLOP/s | ours/Triton | ours/cuBLAS |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        o = ours.get(r["shape"])
        problem = (r["op"], r["B"], r["M"], r["N"], r["K"], r["dtype"])
        best_ms = number(o, "best_ms") if o else None
        default_ms = number(o, "default_ms") if o else None
        ref_ms = number(o, "cublas_ms") if o else None
        triton_ms = r.get("triton_ms")
        vs_triton = triton_ms / best_ms if best_ms and triton_ms else None
        vs_cublas = r["cublas_ms"] / best_ms if best_ms and r.get("cublas_ms") else None
        lines.append(
            f"| {r['shape'].rsplit(' ', 1)[0]} | {r['dtype']} | {fmt(r.get('cublas_tflops'))} | "
            f"{fmt(tflops(problem, ref_ms))} | {fmt(r.get('triton_tflops'))} | {fmt(tflops(problem, best_ms))} | "
            f"{(o or {}).get('best_config', '-') or '-'} | {fmt(tflops(problem, default_ms))} | "
            f"{fmt(vs_triton, 2)} | {fmt(vs_cublas, 2)} |")
    missing = [name for name in ours if name not in {r["shape"] for r in result["rows"]}]
    lines.append("")
    lines.append("ours/Triton = Triton time / our best time (> 1: ours faster); ours/cuBLAS against torch's cuBLAS "
                 "timing from this script. '-': not measured in one of the two runs.")
    if missing:
        lines.append(f"Only in {ours_path}: {', '.join(missing)}.")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------- main
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT") or "out", help="output directory (default $OUT or out/)")
    p.add_argument("--shapes", default="", help="comma-separated substrings selecting suite problems "
                   "(e.g. '4096x4096x4096,bmm'); default: all")
    p.add_argument("--problems", default="", help="';'-separated problems instead of the suite, named as "
                   "cuda_gemm_bench's --problem takes them (e.g. 'mm 256x4096x1024 bf16;mm 256x4096x8192 bf16')")
    p.add_argument("--warmup", type=int, default=5, help="untimed calls before timing (default 5)")
    p.add_argument("--repeat", type=int, default=20, help="timed runs per kernel, median reported (default 20)")
    p.add_argument("--budget", type=float, default=480.0,
                   help="seconds for the whole run; problems not started by then are reported as skipped "
                        "(default 480; one Inductor max-autotune compile can take a minute)")
    p.add_argument("--search-space", default="DEFAULT", choices=["DEFAULT", "EXHAUSTIVE"],
                   help="Inductor's max_autotune_gemm_search_space (default DEFAULT, the issue's reference)")
    p.add_argument("--tma", action="store_true", help="also enable Inductor's persistent TMA matmul template "
                   "(triton.enable_persistent_tma_matmul; off in Inductor's defaults)")
    p.add_argument("--fresh-cache", action="store_true", help="compile and autotune from scratch "
                   "(force_disable_caches), so the chosen config is always reported")
    p.add_argument("--cublas-only", action="store_true", help="time cuBLAS only (no compiles)")
    p.add_argument("--sleep-cycles", type=int, default=1_000_000,
                   help="GPU spin after each flush so host dispatch never lands inside the events (default 1e6, "
                        "~0.5 ms; 0 disables)")
    p.add_argument("--warm-l2", action="store_true",
                   help="no L2 flush before timed calls (diagnostics; as cuda_gemm_bench --warm-l2)")
    p.add_argument("--seed", type=int, default=42, help="operand seed (default 42)")
    p.add_argument("--ours", default="", help="cuda_gemm_bench suite.csv: also write a combined table")
    p.add_argument("--report-only", action="store_true",
                   help="no GPU: rebuild the tables from --from (with --ours for the combined one) into --out")
    p.add_argument("--from", dest="from_json", default="",
                   help="--report-only: the triton_suite.json to read (default OUT/triton_suite.json)")
    args = p.parse_args(argv)
    for name in ("warmup", "repeat"):
        if getattr(args, name) < (1 if name == "repeat" else 0):
            p.error(f"--{name} is too small")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.makedirs(args.out, exist_ok=True)
    json_path = os.path.join(args.out, "triton_suite.json")
    ours = read_ours(args.ours) if args.ours else None

    if args.report_only:
        json_path = args.from_json or json_path
        try:
            with open(json_path) as f:
                result = json.load(f)
        except (OSError, ValueError) as e:
            fail(f"{json_path}: {e}")
    else:
        result = run_suite(args, json_path)

    write_file_atomically(Path(args.out, "triton_suite.md"), markdown(result))
    print(markdown(result))
    if ours is not None:
        text = combined_markdown(result, ours, args.ours)
        write_file_atomically(Path(args.out, "triton_vs_ours.md"), text)
        print(text)
    written = ["triton_suite.md"] + ([] if args.report_only else ["triton_suite.json"]) + (["triton_vs_ours.md"] if ours else [])
    print(f"(written under {args.out}: {', '.join(written)})")
    return 0


def run_suite(args, json_path):
    problems = parse_problems(args.problems) if args.problems else select_shapes(args.shapes)
    try:
        import torch
        import triton
    except ImportError as e:
        fail(f"python: {e} (this benchmark needs torch with triton)", 1)
    if not torch.cuda.is_available():
        fail("cuda: no CUDA device: nothing to measure", 1)
    import torch._inductor.config  # noqa: F401  (torch.compile options are checked against it)

    torch.manual_seed(args.seed)
    timer = ColdTimer(torch, args.warmup, args.repeat, args.sleep_cycles, args.warm_l2)
    options, missing = inductor_options(torch, args.search_space, args.tma, args.fresh_cache)
    result = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": getattr(triton, "__version__", "?"),
        "cuda": torch.version.cuda,
        "search_space": args.search_space,
        "tma": args.tma,
        "inductor_options": options,
        "warmup": args.warmup,
        "repeat": args.repeat,
        "flush_bytes": timer.flush.numel() * 4,
        "sleep_cycles": timer.sleep_cycles,
        "warm_l2": args.warm_l2,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": [],
        "notes": [],
    }
    if missing:
        result["notes"].append(f"Inductor options unknown to this torch, not set: {', '.join(missing)}")
    print(f"device: {result['device']} (torch {result['torch']}, triton {result['triton']}); "
          f"{len(problems)} problems, budget {args.budget:.0f} s", flush=True)

    start = time.monotonic()
    for i, problem in enumerate(problems):
        name = shape_text(*problem)
        elapsed = time.monotonic() - start
        if elapsed > args.budget:
            result["rows"].append({"shape": name, "op": problem[0], "dtype": problem[5], "B": problem[1],
                                   "M": problem[2], "N": problem[3], "K": problem[4],
                                   "skipped": f"time budget ({args.budget:.0f} s) spent"})
            print(f"[{i + 1}/{len(problems)}] {name}: skipped (budget spent)", flush=True)
            continue
        print(f"[{i + 1}/{len(problems)}] {name}: compiling with max-autotune ({elapsed:.0f} s elapsed)...",
              flush=True)
        row = measure(torch, problem, timer, options, args.seed + i, not args.cublas_only)
        result["rows"].append(row)
        if "triton_ms" in row:
            print(f"[{i + 1}/{len(problems)}] {name}: cuBLAS {row['cublas_tflops']:.1f} TFLOP/s, Triton "
                  f"{row['triton_tflops']:.1f} TFLOP/s ({row['triton_over_cublas']:.2f}x) "
                  f"{row.get('triton_config') or ''} [{row['triton_kind']}; max rel. error "
                  f"{row['triton_max_rel_error']:.1e}; compile {row['compile_s']:.0f} s]", flush=True)
        else:
            print(f"[{i + 1}/{len(problems)}] {name}: cuBLAS {row['cublas_tflops']:.1f} TFLOP/s"
                  f"{'; Triton failed: ' + row['triton_error'] if 'triton_error' in row else ''}", flush=True)
        # Rewritten after every problem: a run cut short keeps what it measured.
        write_file_atomically(Path(json_path), json.dumps(result, indent=1) + "\n")
        write_file_atomically(Path(args.out, "triton_suite.md"), markdown(result))
    result["wall_s"] = time.monotonic() - start
    write_file_atomically(Path(json_path), json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    sys.exit(main())
