"""Measures one GEMM problem the way Inductor's max-autotune does.

Per problem the operands are built with the problem's sizes, strides, dtype and layout
(seeded, uniform in [0.1, 1.1]; int8: non-zero integers in [-4, 4], the op torch._int_mm,
checked exactly) and the op is compiled by torch.compile with max-autotune:
Inductor builds its own Triton template choices (mm / addmm / bmm, and the persistent TMA
template where it offers one) and the ATen choice, precompiles them in parallel, and
benchmarks them as its own benchmarker does (L2 flushed before every timed run, CUDA events;
here with every timed run enqueued before the GPU starts it: timing.GatedTimer), on the
problem as given: Inductor's shape padding (pad_mm) is off.
A feedback saver collects every choice's time. Around that, this module adds what a
dataset needs: each choice's output is checked against a float32 torch result before its
time counts, the benchmarker's timed runs are kept (for the spread), and compile failures
are recorded per config. Nothing is cached across problems, so every problem is tuned anew.

With `search_space` null the choices are exactly the request's configs, installed as a
lookup table (the mechanism `use_table` and `export-lut` rely on).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from typing import Any, Callable, Iterator, Optional

from .choices import AUTOTUNED_OPS, config_from_choice, template_of
from .parallel_compile import ParallelCompiler, compile_processes
from .timing import GatedTimer

# Relative error (Frobenius norm) a correct kernel stays under, by operand dtype; int8
# (int32 sums of small integers) must be exact.
TOLERANCE = {"float16": 2e-2, "bfloat16": 2e-2, "float32": 5e-3, "int8": 0.0}
ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "int8": 1}

# Inductor stops waiting for its parallel precompile after this (its default: 1 h) and
# compiles what is left at each choice's first benchmark, one at a time. EXHAUSTIVE's
# hundreds of choices take minutes, longer with several workers per GPU sharing the cores.
PRECOMPILE_TIMEOUT_S = 1800

# How the times were taken, in every dataset's sidecar (the worker's hello).
TIMING_METHOD = ("CUDA events, L2 flushed before each run, runs enqueued behind a GPU spin before the first starts; "
                 "Inductor's shape padding off")

# Below this many Triton choices (DEFAULT has tens) Inductor's own precompile is quick
# enough; above it (EXHAUSTIVE: hundreds) they are compiled on the process pool first.
PARALLEL_COMPILE_MIN_CHOICES = 64

PROTOCOL_FIELDS = ("block_m", "block_n", "block_k", "group_m", "num_stages", "num_warps",
                   "even_k", "allow_tf32", "use_fast_accum", "acc_type")


def config_of(choice: Any, problem: dict[str, Any]) -> dict[str, Any]:
    """A Triton template choice's config with the protocol's field names."""
    config = config_from_choice(choice, problem["op"], problem["K"], problem["dtype"])
    if config is None:
        raise ValueError(f"choice {getattr(choice, 'name', choice)!r} has no GEMM config")
    return {field: getattr(config, field) for field in PROTOCOL_FIELDS}


def config_key(config: dict[str, Any]) -> tuple[int, ...]:
    return tuple(int(config[f]) for f in ("block_m", "block_n", "block_k", "group_m", "num_stages", "num_warps"))


def _relative_error(torch: Any, out: Any, ref: Any) -> float:
    out = out.float()
    if not bool(torch.isfinite(out).all()):
        return math.inf
    norm = float(torch.linalg.vector_norm(ref))
    return float(torch.linalg.vector_norm(out - ref)) / max(norm, 1e-30)


class BenchmarkLock:
    """The GPU's turn to benchmark, shared by the workers of one device
    (collect --workers-per-device): their compiles overlap, their timed runs never do.
    An flock on a file, so a worker that dies releases it. No path: no lock."""

    def __init__(self, path: Optional[str]) -> None:
        self.path = path
        self._fd: Optional[int] = None

    def acquire(self) -> None:
        if self.path is None or self._fd is not None:
            return
        import fcntl

        fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        import fcntl

        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


def benchmark_lock_path(device_index: int) -> Optional[str]:
    """MMT_INDUCTOR_BENCHMARK_LOCK (set by collect --workers-per-device) + the device."""
    base = os.environ.get("MMT_INDUCTOR_BENCHMARK_LOCK")
    return f"{base}.gpu{device_index}" if base else None


class _Recorder:
    """What the patched Inductor hooks saw during one compile."""

    def __init__(self) -> None:
        self.samples: dict[int, list[float]] = {}
        self.errors: dict[int, str] = {}
        self.choices: dict[int, Any] = {}
        self.timings: dict[int, float] = {}
        self.autotuned_inputs: list[list[int]] = []
        self.autotuned_op = ""
        self.benchmark_seconds = 0.0
        self.current: Optional[int] = None
        # id(autotune_args) -> (autotune_args, reference): holding the arguments keeps their
        # id from being reused by a later autotuning round of the same compile.
        self.reference: dict[int, tuple[Any, Any]] = {}
        self.wrong_reported = False
        self.layout_reported = False
        # The kernels' own layout (their tensor metadata) -> (operands, reference), shared
        # by every choice of the problem that needs the check on it.
        self.layout_operands: dict[tuple[Any, ...], tuple[list[Any], Any]] = {}


class InductorMeasurer:
    """One GPU, one torch; measure() per problem."""

    def __init__(self, device_index: int) -> None:
        import torch
        import triton  # noqa: F401  (a missing Triton must fail the hello)

        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        if device_index >= torch.cuda.device_count():
            raise RuntimeError(f"device {device_index} does not exist ({torch.cuda.device_count()} devices)")
        torch.cuda.set_device(device_index)
        self.torch = torch
        self.device = torch.device("cuda", device_index)
        self._lock = threading.Lock()
        self._recorder: Optional[_Recorder] = None
        self._problem: dict[str, Any] = {}
        self._shared_memory_limit = int(torch.cuda.get_device_properties(self.device).shared_memory_per_block_optin)
        self._benchmark_lock = BenchmarkLock(benchmark_lock_path(device_index))
        self._compiler = ParallelCompiler(compile_processes(), PRECOMPILE_TIMEOUT_S)
        self.timer = GatedTimer(torch, self.device)
        self._install_hooks()

    # -- hello ---------------------------------------------------------------------------
    def hello(self) -> dict[str, Any]:
        import platform

        import triton

        torch = self.torch
        props = torch.cuda.get_device_properties(self.device)
        return {
            "hardware": torch.cuda.get_device_name(self.device),
            "sm_count": props.multi_processor_count,
            "versions": {"python": platform.python_version(), "torch": torch.__version__,
                         "triton": triton.__version__, "cuda": str(torch.version.cuda),
                         # Datasets timed before the launch was hidden are not comparable.
                         "timing": TIMING_METHOD},
        }

    # -- hooks into Inductor ----------------------------------------------------------------
    def _install_hooks(self) -> None:
        from torch._inductor import select_algorithm
        from torch._inductor.runtime import benchmarking

        measurer = self
        selector = select_algorithm.AlgorithmSelectorCache
        original_benchmark_choice = selector.benchmark_choice
        original_precompile = select_algorithm.TritonTemplateCaller.precompile
        bench = benchmarking.benchmarker
        original_benchmark_gpu = bench.benchmark_gpu

        def benchmark_gpu(_callable: Callable[[], Any], **kwargs: Any) -> Any:
            recorder = measurer._recorder
            if recorder is None or recorder.current is None or kwargs.get("return_mode", "min") != "min":
                return original_benchmark_gpu(_callable, **kwargs)
            samples = measurer.timer.timed_runs(_callable)
            recorder.samples[recorder.current] = samples
            return min(samples)

        def benchmark_choice(cls: Any, choice: Any, autotune_args: Any) -> float:
            recorder = measurer._recorder
            if recorder is None:
                return original_benchmark_choice(choice, autotune_args)
            key = id(choice)
            recorder.choices[key] = choice
            too_big = measurer._exceeds_shared_memory(choice)
            if too_big:
                # Triton refuses such a kernel only when it is launched, after a compile of
                # ~10 s per config; the estimate is exactly the amount Triton reports.
                recorder.errors[key] = too_big
                return math.inf
            # Held from the problem's first timed choice to the end of its compile.
            measurer._benchmark_lock.acquire()
            recorder.current = key
            start = time.perf_counter()
            try:
                timing = original_benchmark_choice(choice, autotune_args)
            except Exception as e:
                recorder.errors[key] = f"launch failed: {type(e).__name__}: {str(e).strip()[:200]}"
                raise
            finally:
                recorder.current = None
                elapsed = time.perf_counter() - start
                recorder.benchmark_seconds += elapsed
                if elapsed > 2.0:  # a compile deferred to the first launch; worth knowing
                    print(f"matmul_toolkit_inductor: choice {getattr(choice, 'description', choice)} "
                          f"took {elapsed:.1f} s to benchmark ({recorder.errors.get(key, 'no error')})",
                          file=sys.stderr)
            if math.isfinite(timing):
                wrong = measurer._check_output(choice, autotune_args, recorder)
                if wrong:
                    recorder.errors[key] = wrong
                    return math.inf
            return timing

        original_make_precompile_fn = selector.make_precompile_fn

        def make_precompile_fn(self: Any, choices: Any, *args: Any, **kwargs: Any) -> Any:
            # A tile over the shared-memory limit cannot launch; compiling it first costs
            # seconds (EXHAUSTIVE's 256-wide, 5-stage tiles), so only its reason is kept
            # (benchmark_choice records it).
            if measurer._recorder is not None:
                choices = [c for c in choices if not measurer._exceeds_shared_memory(c)]
                choices = measurer._compile_in_processes(choices)
            return original_make_precompile_fn(self, choices, *args, **kwargs)

        def precompile(choice: Any) -> Any:
            try:
                return original_precompile(choice)
            except Exception as e:
                recorder = measurer._recorder
                if recorder is not None:
                    recorder.choices[id(choice)] = choice
                    recorder.errors[id(choice)] = f"compile failed: {type(e).__name__}: {str(e).strip()[:200]}"
                raise

        def feedback(timings: dict[Any, float], name: str, input_nodes: Any, choices: Any,
                     profiler_bench_function: Any = None, precompile_times: Any = None) -> None:
            recorder = measurer._recorder
            # Inductor may autotune the problem under another op (an addmm as mm + add);
            # torch._int_mm autotunes as "int_mm".
            if recorder is None or name not in AUTOTUNED_OPS:
                return
            recorder.autotuned_op = AUTOTUNED_OPS[name]
            for choice, timing in timings.items():
                recorder.choices[id(choice)] = choice
                recorder.timings[id(choice)] = float(timing)
            recorder.autotuned_inputs = [[int(s) for s in node.get_size()] for node in input_nodes]

        bench.benchmark_gpu = benchmark_gpu
        selector.benchmark_choice = classmethod(benchmark_choice)
        select_algorithm.TritonTemplateCaller.precompile = precompile
        selector.make_precompile_fn = make_precompile_fn
        select_algorithm.add_feedback_saver(feedback)

    def _compile_in_processes(self, choices: list[Any]) -> list[Any]:
        """Compiles the Triton choices into Triton's cache on the process pool when there
        are enough to pay for it (parallel_compile.py); returns the choices left for
        Inductor's own precompile: the others and those the pool did not compile."""
        jobs: dict[int, tuple[str, str]] = {}
        for choice in choices:
            request = getattr(choice, "bmreq", None)
            path, name = getattr(request, "module_path", None), getattr(request, "kernel_name", None)
            if type(choice).__name__ == "TritonTemplateCaller" and path and name:
                jobs[id(choice)] = (str(path), str(name))
        if len(jobs) < PARALLEL_COMPILE_MIN_CHOICES or self._compiler.processes < 2:
            return choices
        start = time.perf_counter()
        outcome = self._compiler.compile(list(jobs.values()))
        failed = [error for error in outcome.values() if error]
        print(f"matmul_toolkit_inductor: {len(outcome) - len(failed)} of {len(outcome)} kernels compiled "
              f"on {self._compiler.processes} processes in {time.perf_counter() - start:.1f} s"
              + (f"; left to Inductor: {len(failed)}, e.g. {failed[0]}" if failed else ""), file=sys.stderr)
        return [c for c in choices if id(c) not in jobs or outcome[jobs[id(c)]]]

    def _exceeds_shared_memory(self, choice: Any) -> str:
        """Why a Triton mm/bmm template choice cannot launch for lack of shared memory, or ''."""
        if template_of(choice) not in ("mm", "bmm"):
            return ""
        config = config_of(choice, self._problem)
        element = ELEMENT_BYTES[self._problem["dtype"]]
        tile = config["block_k"] * (config["block_m"] + config["block_n"]) * element
        required = config["num_stages"] * tile
        if required > self._shared_memory_limit:
            return (f"compile failed: out of resource: shared memory {required} bytes "
                    f"> {self._shared_memory_limit}")
        return ""

    def _check_output(self, choice: Any, autotune_args: Any, recorder: _Recorder) -> str:
        """'' when the choice's output matches a float32 torch result on the autotuning
        inputs, else why not."""
        torch = self.torch
        extern = type(choice).__name__ != "TritonTemplateCaller"
        inputs, output = autotune_args.get_benchmark_tensors(extern).unpack()
        held = recorder.reference.get(id(autotune_args))
        reference = held[1] if held is not None and held[0] is autotune_args else None
        if reference is None:
            triton_inputs, _ = autotune_args.get_benchmark_tensors(False).unpack()
            reference = self._template_reference(triton_inputs)
            recorder.reference[id(autotune_args)] = (autotune_args, reference)
        if tuple(output.shape) != tuple(reference.shape):
            return ""  # not a plain GEMM output (never for the templates recorded here)
        error = _relative_error(torch, output, reference)
        if error <= TOLERANCE[self._problem["dtype"]]:
            return ""
        if not extern:
            # Inductor builds the autotuning tensors from the input buffers' layouts as
            # frozen after the choices were generated: a padded buffer (K 2894 -> 2896 with
            # rows 2944 apart) then reaches a kernel compiled for rows 2896 apart, and every
            # choice reads the wrong elements. The time is what Inductor itself measures; the
            # kernel is checked on tensors laid out as it was compiled for.
            own_layout = self._check_on_kernel_layout(choice, recorder)
            if own_layout is not None:
                if own_layout[0] <= TOLERANCE[self._problem["dtype"]]:
                    if not recorder.layout_reported:
                        recorder.layout_reported = True
                        print(f"matmul_toolkit_inductor: the autotuning tensors' layout is not the kernels' "
                              f"({own_layout[1]}); kernels checked on their own layout", file=sys.stderr)
                    return ""
                error = own_layout[0]
        if not recorder.wrong_reported:  # the first per problem, with what was compared
            recorder.wrong_reported = True
            operands = ", ".join(f"{list(t.shape)}/{list(t.stride())}" for t in inputs)
            print(f"matmul_toolkit_inductor: {getattr(choice, 'description', choice)}: relative error "
                  f"{error:.3g}; output {list(output.shape)}/{list(output.stride())}, inputs {operands}, "
                  f"{len(recorder.reference)} autotuning rounds", file=sys.stderr)
        return f"wrong result: relative error {error:.3g}"

    def _template_reference(self, inputs: list[Any]) -> Any:
        """What a template choice must compute from its inputs ([bias,] a, b), in float32
        (float64 for int8, whose products and sums it holds exactly)."""
        torch = self.torch
        widen = (lambda t: t.double()) if self._problem["dtype"] == "int8" else (lambda t: t.float())
        a, b = widen(inputs[-2]), widen(inputs[-1])
        product = torch.bmm(a, b) if a.dim() == 3 else a @ b
        # What Inductor autotunes, not the problem's op: it may lower an addmm as an mm
        # and a pointwise add; only a template given the bias (3 inputs) adds it.
        if len(inputs) == 3:
            product = self._problem.get("beta", 1.0) * widen(inputs[0]) + self._problem.get("alpha", 1.0) * product
        return product

    def _check_on_kernel_layout(self, choice: Any, recorder: _Recorder) -> Optional[tuple[float, str]]:
        """(relative error, the layouts) of a Triton choice run once on tensors with the
        sizes, strides and offsets its kernel was generated for (its benchmark request's
        tensor metadata); None when those are not known."""
        torch = self.torch
        request = getattr(choice, "bmreq", None)
        metas = list(getattr(request, "input_tensor_meta", None) or [])
        out_meta = getattr(request, "output_tensor_meta", None)
        if request is None or len(metas) < 2 or out_meta is None or not hasattr(request, "make_run_fn"):
            return None
        layout = tuple((tuple(m.sizes), tuple(m.strides), int(m.offset), str(m.dtype)) for m in metas)
        if layout not in recorder.layout_operands:
            inputs = [self._strided_operand(m) for m in metas]
            recorder.layout_operands[layout] = (inputs, self._template_reference(inputs))
        inputs, reference = recorder.layout_operands[layout]
        output = torch.empty_strided(tuple(out_meta.sizes), tuple(out_meta.strides), dtype=out_meta.dtype,
                                     device=self.device)
        run = request.make_run_fn(*inputs, out=output)
        try:
            run()
            torch.cuda.synchronize(self.device)
        finally:
            request.cleanup_run_fn()
        layouts = "; ".join(f"{list(m.sizes)}/{list(m.strides)}+{m.offset}" for m in metas)
        return _relative_error(torch, output, reference), f"kernels compiled for {layouts}"

    def _strided_operand(self, meta: Any) -> Any:
        """A tensor with a TensorMeta's sizes, strides and offset, values as the problem's."""
        torch = self.torch
        sizes, strides = [int(s) for s in meta.sizes], [int(s) for s in meta.strides]
        span = int(meta.offset) + 1 + sum((n - 1) * st for n, st in zip(sizes, strides) if n > 0)
        if meta.dtype == torch.int8:
            storage = torch.randint(1, 5, (span,), device=self.device, dtype=torch.int8)
        else:
            storage = torch.rand(span, device=self.device, dtype=torch.float32).add_(0.1).to(meta.dtype)
        return torch.as_strided(storage, sizes, strides, int(meta.offset))

    # -- one problem ---------------------------------------------------------------------------
    def _operands(self, problem: dict[str, Any], seed: int) -> list[Any]:
        torch = self.torch
        dtype = getattr(torch, problem["dtype"])
        generator = torch.Generator(device=self.device)
        generator.manual_seed(seed)
        batch = [problem["B"]] if problem["op"] == "bmm" else []

        def uniform(*shape: int) -> Any:
            if dtype == torch.int8:  # non-zero, small enough that no sum leaves int32
                magnitude = torch.randint(1, 5, shape, generator=generator, device=self.device, dtype=torch.int8)
                sign = torch.randint(0, 2, shape, generator=generator, device=self.device, dtype=torch.int8)
                return magnitude * (sign * 2 - 1)
            values = torch.rand(*shape, generator=generator, device=self.device, dtype=torch.float32)
            return values.add_(0.1).to(dtype)

        def matrix(rows: int, cols: int, transposed: bool) -> Any:
            if transposed:  # a transposed view of contiguous storage, as BLAS's 't'
                return uniform(*batch, cols, rows).transpose(-1, -2)
            return uniform(*batch, rows, cols)

        layout = problem.get("layout", "nn")
        a = matrix(problem["M"], problem["K"], layout[0] == "t")
        b = matrix(problem["K"], problem["N"], layout[1] == "t")
        if problem["op"] == "addmm":
            return [uniform(problem["N"]), a, b]
        return [a, b]

    def _function(self, problem: dict[str, Any]) -> Callable[..., Any]:
        torch = self.torch
        if problem["dtype"] == "int8":  # int8 x int8 -> int32 (mm only)
            return lambda a, b: torch._int_mm(a, b)
        if problem["op"] == "mm":
            return lambda a, b: torch.mm(a, b)
        if problem["op"] == "bmm":
            return lambda a, b: torch.bmm(a, b)
        alpha, beta = problem.get("alpha", 1.0), problem.get("beta", 1.0)
        return lambda bias, a, b: torch.addmm(bias, a, b, beta=beta, alpha=alpha)

    @contextlib.contextmanager
    def _lookup_table(self, problem: dict[str, Any], configs: list[dict[str, Any]],
                      reference: bool) -> Iterator[None]:
        """Installs exactly `configs` (and the ATen choice) as Inductor's choices for the
        op compiled next."""
        from torch._inductor import config as inductor_config
        from torch._inductor.choices import InductorChoices
        from torch._inductor.kernel import bmm as bmm_kernels
        from torch._inductor.kernel import mm as mm_kernels
        from torch._inductor.lookup_table.choices import LookupTableChoices
        from torch._inductor.virtualized import V

        op = problem["op"]
        int8 = problem["dtype"] == "int8"
        template = bmm_kernels.bmm_template if op == "bmm" else mm_kernels.mm_template
        entries = [{
            "template_id": template.uid, "BLOCK_M": c["block_m"], "BLOCK_N": c["block_n"],
            "BLOCK_K": c["block_k"], "GROUP_M": c["group_m"], "num_stages": c["num_stages"],
            "num_warps": c["num_warps"], "EVEN_K": bool(c.get("even_k", problem["K"] % c["block_k"] == 0)),
            "USE_FAST_ACCUM": bool(c.get("use_fast_accum", False)),
            "ACC_TYPE": c.get("acc_type", "tl.int32" if int8 else "tl.float32"),
        } for c in configs]
        externs = {"mm": [mm_kernels.aten_mm], "bmm": [bmm_kernels.aten_bmm],
                   "addmm": [mm_kernels.aten_addmm, mm_kernels.aten_bias_addmm]}[op]
        if int8:  # torch._int_mm looks its choices up as "int_mm"
            op, externs = "int_mm", [mm_kernels.aten__int_mm]
        # ATen stays a choice even without a reference: it is what Inductor falls back to
        # when every template fails, and the compile must not fail then.
        entries += [{"template_id": extern.uid} for extern in externs]

        class OneProblemTable(LookupTableChoices):
            def make_lookup_key_variants(self, kernel_inputs: Any, op_name: str) -> tuple[Optional[str], Optional[str]]:
                return None, op_name

        previous_table = inductor_config.lookup_table.table
        inductor_config.lookup_table.table = {op: entries}
        V.set_choices_handler(OneProblemTable())
        try:
            yield
        finally:
            inductor_config.lookup_table.table = previous_table
            V.set_choices_handler(InductorChoices())

    def measure(self, request: dict[str, Any]) -> dict[str, Any]:
        torch = self.torch
        from torch._inductor import config as inductor_config

        problem = request["problem"]
        space = request.get("search_space")
        configs = request.get("configs") or []
        want_reference = bool(request.get("reference", True))
        self.timer.repeat = max(1, int(request.get("repeat", 100)))
        self._problem = problem

        operands = self._operands(problem, int(request.get("seed", 0)))
        function = self._function(problem)
        patches = {
            "max_autotune": True,
            "max_autotune_gemm": True,
            "max_autotune_gemm_backends": "TRITON,ATEN",
            "max_autotune_gemm_search_space": space if space in ("DEFAULT", "EXHAUSTIVE") else "DEFAULT",
            "autotune_in_subproc": False,
            "autotune_local_cache": False,
            "autotune_remote_cache": False,
            "fx_graph_cache": False,
            "fx_graph_remote_cache": False,
            "precompilation_timeout_seconds": PRECOMPILE_TIMEOUT_S,
            # pad_mm pads a misaligned M, N or K where its own timing of cuBLAS says it
            # pays, and Inductor then autotunes the padded problem: a coin toss on close
            # calls, so the same problem was timed padded (mm 2608x537x4096 bf16: ATen
            # 24 us) in one collection and as given (135 us) in the next. The padded
            # problem is a problem of its own (export-lut ranks it as one).
            "shape_padding": False,
        }
        patches["compile_threads"] = compile_threads()
        if problem["dtype"] == "float32":
            torch.backends.cuda.matmul.allow_tf32 = bool(request.get("allow_tf32", False))

        recorder = _Recorder()
        torch._dynamo.reset()
        timer = self.timer
        gates_before, slow_before = timer.gates_reopened, timer.slow_clock_groups
        start = time.perf_counter()
        with self._lock:
            self._recorder = recorder
            try:
                table = (self._lookup_table(problem, configs, want_reference) if space is None
                         else contextlib.nullcontext())
                with inductor_config.patch(patches), table:
                    compiled = torch.compile(function, dynamic=False, fullgraph=True)
                    result = compiled(*operands)
                    torch.cuda.synchronize()
                wall = time.perf_counter() - start
                # Still the GPU's turn: another worker's timed runs must not share the GPU
                # with this reference product.
                expected = _reference(torch, problem, operands).to(result.dtype)
                torch.cuda.synchronize()
            finally:
                self._recorder = None
                self._benchmark_lock.release()
        if timer.gates_reopened > gates_before:
            print(f"matmul_toolkit_inductor: {timer.gates_reopened - gates_before} groups of timed runs "
                  f"enqueued again behind a longer GPU spin (the host was slower than the spin)", file=sys.stderr)
        if timer.slow_clock_groups > slow_before:
            print(f"matmul_toolkit_inductor: {timer.slow_clock_groups - slow_before} groups of timed runs "
                  f"timed again: SM clock down to {timer.slowest_clock_mhz:.0f} MHz "
                  f"(top {timer.top_clock_mhz:.0f} MHz)", file=sys.stderr)
            timer.slowest_clock_mhz = math.inf

        final_error = _relative_error(torch, result, expected.double())
        if final_error > TOLERANCE[problem["dtype"]]:
            raise RuntimeError(f"the compiled op's result is wrong (relative error {final_error:.3g})")

        entries = self._entries(problem, recorder, want_reference)
        if space is None:
            entries += self._missing(problem, configs, entries)
        autotuned = recorder.autotuned_inputs
        shape = _autotuned_shape(problem["op"], autotuned)
        if shape is not None and shape != [problem["B"], problem["M"], problem["N"], problem["K"]]:
            raise RuntimeError(f"Inductor autotuned [B, M, N, K] = {shape}, not the problem's")
        return {
            "entries": entries,
            "compile_seconds": round(max(wall - recorder.benchmark_seconds, 0.0), 4),
            "benchmark_seconds": round(recorder.benchmark_seconds, 4),
            "autotuned_shape": shape,
            "autotuned_op": recorder.autotuned_op,
        }

    def profile(self, request: dict[str, Any]) -> dict[str, Any]:
        """The problem's eager op under torch.profiler (profiling.py)."""
        from .profiling import profile_problem

        return profile_problem(self, request)

    def _entries(self, problem: dict[str, Any], recorder: _Recorder, want_reference: bool) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        best_aten: Optional[dict[str, Any]] = None
        seen: set[tuple[str, tuple[int, ...]]] = set()
        for key, choice in recorder.choices.items():
            template = template_of(choice)
            if template is None:
                continue
            timing = recorder.timings.get(key, math.inf)
            error = recorder.errors.get(key)
            samples = recorder.samples.get(key, [])
            if template == "aten":
                if want_reference and error is None and math.isfinite(timing):
                    if best_aten is None or timing < best_aten["time_ms"]:
                        best_aten = {"template": "aten", "config": None, "time_ms": timing, "samples_ms": samples}
                continue
            config = config_of(choice, problem)
            identity = (template, config_key(config))
            if identity in seen:
                continue
            seen.add(identity)
            entry: dict[str, Any] = {"template": template, "config": config}
            if error is None and not math.isfinite(timing):
                error = "benchmark failed: Inductor timed it as infinite" if key in recorder.timings \
                    else "compile failed: Inductor dropped it before benchmarking"
            if error is not None:
                entry["error"] = error
            else:
                entry["time_ms"] = timing
                entry["samples_ms"] = samples
            entries.append(entry)
        if want_reference:
            entries.append(best_aten if best_aten is not None else
                           {"template": "aten", "config": None, "error": "reference failed: no ATen timing"})
        return entries

    def _missing(self, problem: dict[str, Any], configs: list[dict[str, Any]],
                 entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A requested config Inductor never built is a failed entry, not a silent gap."""
        built = {config_key(e["config"]) for e in entries if e.get("config")}
        template = "bmm" if problem["op"] == "bmm" else "mm"
        return [{"template": template, "config": c,
                 "error": "not built: Inductor made no choice of this config"}
                for c in configs if config_key(c) not in built]


def compile_threads() -> int:
    """Inductor's compile_threads (MMT_INDUCTOR_COMPILE_THREADS overrides; default 1).

    1 makes Inductor precompile its choices on threads of this process, each compiled once.
    More starts its process pool, which compiles in parallel but leaves every kernel to be
    compiled again here at its first benchmark: DEFAULT (H200) 4-10 s a problem against
    3-9.5 s on threads; EXHAUSTIVE (H100, fp32 addmm) 2-6.7 s a choice at its benchmark, one
    problem unfinished after 433 s. The threads serialise on Python's lock, so EXHAUSTIVE's
    many choices are compiled on this package's own process pool first
    (parallel_compile.py)."""
    override = os.environ.get("MMT_INDUCTOR_COMPILE_THREADS")
    return max(1, int(override)) if override else 1


def _reference(torch: Any, problem: dict[str, Any], operands: list[Any]) -> Any:
    """The problem's op in float64 (exact for int8's integer sums)."""
    wide = [o.double() for o in operands]
    if problem["op"] == "addmm":
        bias, a, b = wide
        return torch.addmm(bias, a, b, beta=problem.get("beta", 1.0), alpha=problem.get("alpha", 1.0))
    return torch.bmm(*wide) if problem["op"] == "bmm" else torch.mm(*wide)


def _autotuned_shape(op: str, inputs: list[list[int]]) -> Optional[list[int]]:
    """[B, M, N, K] of the matrices Inductor autotuned (after any padding)."""
    if len(inputs) < 2:
        return None
    a, b = inputs[-2], inputs[-1]
    batch = a[0] if op == "bmm" and len(a) == 3 else 1
    return [batch, a[-2], b[-1], a[-1]]
