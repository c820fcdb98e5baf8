"""use_model(): the model picks every GEMM inside torch.compile, with no table and no shapes
known ahead.

    import matmul_toolkit_inductor as mmt
    mmt.use_model()
    model = torch.compile(model, options=mmt.compile_options())

Inductor (torch 2.11) asks its choices handler for each GEMM's candidates
(InductorChoices.get_template_configs -> _finalize_template_configs). use_model installs a
subclass of Inductor's LookupTableChoices whose lookup asks the model instead of a table: the
GEMM's problem (op, layout from the strides, sizes, dtypes) goes to libmmt_rank.so's decision
policy, the one `export-lut` writes tables with, and its entries come back as the lookup's
hit. Per GEMM that is ATen alone, one Triton config (compiled, never benchmarked), or a few
entries with ATen that Inductor benchmarks, as the policy decides.
- Ops: mm, addmm (its ATen choice as aten::bias_addmm where the policy says so), bmm,
  baddbmm (ranked as the bmm it is), int_mm (an int8 mm), in every layout.
- What the model does not rank runs its ATen choices alone, as default torch.compile runs
  it: max_autotune_gemm is on for the model's picks, not to autotune the rest. A GEMM of the
  ops above whose dtypes the model has no rows for gets the lookup's ATen entries; another
  autotuning with ATen choices (grouped mm, mm_plus_mm, scaled mm: Inductor builds their
  choices without asking the handler) keeps only those, through a wrapper of
  AlgorithmSelectorCache.__call__. Grouped mm's lowering does not even build its template
  choices (some 40 Triton kernels a grouped mm, rendered only to be dropped): its module's
  template gates answer no. Convolutions keep ATen by
  config.max_autotune_conv_backends = "ATEN". `unranked="inductor"` leaves all of them to
  Inductor's own autotuning.
- Symbolic sizes are ranked at Inductor's size hints, the example inputs' sizes.
- The Triton templates are offered only with `max_autotune_gemm` (or mode max-autotune). Without
  them the hook finds no kernel to pick, and Inductor's own choices (ATen) stay.
  compile_options() gives that option with the others the whole-model suite found best.
- The handler is set for every thread that compiles, those that compiled before too (the
  autograd thread lowers a training step's backward graph): handlers.py.
- Shape padding: Inductor's pad_mm pass pads a misaligned M, N or K of a compute-bound GEMM
  where its own timing of cuBLAS, padded against as given, taken while compiling, has padding
  ahead by 10 %; on close calls that timing falls either way from one compile to the next.
  With `pad="model"` the model decides it instead: the predicted time of its decision for the
  padded problem against the problem as given, by the same 10 % (pad_mm's other rules stay).
- The hook's identity (the model's sha256, and the policy, search space, unranked and pad
  where not the defaults) goes into torch.compiler.config.cache_key_tag and names its choices class
  (handlers.py), which Inductor's FX graph cache pickles into each graph's key. So a graph
  cached with other picks is not reused, and one cached with these is. A cached graph skips
  lowering, and with it the hook: explain() lists the GEMMs lowered in this process.

Nothing here may break a user's compile: any error in the hook falls back to Inductor's own
choices for that GEMM and warns once. What cannot work is refused at use_model():
- a missing, corrupt or foreign model file is one clear error there;
- a GPU other than the model's hardware gets a warning and Inductor's defaults, unless
  force=True.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .choices import choice_info, dtype_name, operand_layout
from .dataset import KNOWN_DTYPES, op_key
from .handlers import DefaultLayoutForAten, Setting, class_name, install_layer
from .rank_library import RankLibraryError, RankModel

log = logging.getLogger(__name__)

# Inductor's op names -> the model's op (baddbmm is a bmm plus a bias; int_mm an int8 mm).
GEMM_OPS = {"mm": "mm", "addmm": "addmm", "bmm": "bmm", "baddbmm": "bmm", "int_mm": "mm"}
# The ATen choice of an op whose extern kernel is not the model's op's.
ATEN_UIDS = {"baddbmm": {"aten::bmm": "aten::baddbmm"}, "int_mm": {"aten::mm": "aten::_int_mm"}}
# What a GEMM the model does not rank gets: its ATen choice alone, or Inductor's own choices.
UNRANKED = ("aten", "inductor")
# The hooks installed, oldest first: the newest decides what an unranked autotuning keeps.
_INSTALLED: list[ModelHook] = []
# Who decides whether Inductor pads a misaligned GEMM: its timing while compiling, or the model.
PADS = ("inductor", "model")
# How far ahead the padded problem must be to pad: pad_mm's own factor for its timings.
PAD_MARGIN = 1.1


class ModelHookError(ValueError):
    """use_model() cannot install the model: the message says why, in one line."""


@dataclass
class Decision:
    """What the hook answered for one GEMM."""
    op_name: str                    # Inductor's: mm, addmm, bmm, baddbmm, int_mm
    problem: str                    # "mm_nt 2048x5632x2048 bfloat16"
    decision: str                   # the policy's ("kernel", "aten", "pair"), "unranked" or "fallback"
    entries: list[dict[str, Any]] = field(default_factory=list)
    predicted_ms: list[float] = field(default_factory=list)
    why: str = ""                   # a fallback's reason

    def line(self) -> str:
        if self.decision in ("pad", "as given"):
            given, padded = self.predicted_ms
            return (f"{self.op_name} {self.problem}: {self.decision} (predicted {given:.4g} ms as given, "
                    f"{padded:.4g} ms padded)")
        if self.decision == "fallback":
            return f"{self.op_name} {self.problem}: Inductor's own choices ({self.why})"
        if self.decision == "unranked":
            uids = ", ".join(e["template_id"] for e in self.entries)
            return f"{self.op_name} {self.problem}: unranked: {uids} alone ({self.why})"
        parts = []
        predicted: list[Optional[float]] = list(self.predicted_ms) if self.predicted_ms else [None] * len(self.entries)
        for entry, ms in zip(self.entries, predicted):
            config = entry["template_id"]
            if "BLOCK_M" in entry:
                config += (f" {entry['BLOCK_M']}x{entry['BLOCK_N']}x{entry['BLOCK_K']} g{entry.get('GROUP_M')} "
                           f"s{entry['num_stages']} w{entry['num_warps']}")
            parts.append(config + ("" if ms is None else f" ({ms:.4g} ms)"))
        return f"{self.op_name} {self.problem}: {self.decision}: {', '.join(parts)}"


def problem_of(kernel_inputs: Any, op_name: str) -> Optional[tuple[str, dict[str, Any]]]:
    """(the model's op key with its layout, a shapeset shape) of one GEMM from Inductor's
    MMKernelInputs, at Inductor's size hints; None for an op or dtype the model has no rows for."""
    op = GEMM_OPS.get(op_name)
    if op is None:
        return None
    shapes, strides = kernel_inputs.shapes_hinted(), kernel_inputs.strides_hinted()
    dtypes = kernel_inputs.dtypes()
    i1, i2 = getattr(kernel_inputs, "_mat1_idx", -2), getattr(kernel_inputs, "_mat2_idx", -1)
    size1, size2 = [int(v) for v in shapes[i1]], [int(v) for v in shapes[i2]]
    rank = 3 if op == "bmm" else 2
    if len(size1) != rank or len(size2) != rank:
        return None
    B = size1[0] if op == "bmm" else 1
    M, K, N = size1[-2], size1[-1], size2[-1]
    a_dtype, b_dtype = dtype_name(dtypes[i1]), dtype_name(dtypes[i2])
    out_dtype = dtype_name(kernel_inputs.out_dtype())
    if op_name == "int_mm":
        if (a_dtype, b_dtype) != ("int8", "int8"):
            return None
    elif a_dtype != b_dtype:
        return None
    if a_dtype not in KNOWN_DTYPES or min(B, M, N, K) < 1:
        return None
    layout = (operand_layout(size1, [int(v) for v in strides[i1]])
              + operand_layout(size2, [int(v) for v in strides[i2]]))
    return op_key(op, layout), gemm_shape(B, M, N, K, a_dtype, b_dtype, out_dtype)


def gemm_shape(B: int, M: int, N: int, K: int, a_dtype: str, b_dtype: str, out_dtype: str) -> dict[str, Any]:
    """A shapeset shape of a GEMM with a contiguous output, as the model's requests take it."""
    return {"version": 1, "B": B, "M": M, "M_dtype": a_dtype, "N": N, "K": K, "K_dtype": b_dtype,
            "out_dtype": out_dtype, "out_size": [B, M, N], "out_stride": [M * N, N, 1]}


def padding_problems(pad_mm: Any, mat1: Any, mat2: Any, op: Any
                     ) -> Optional[tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, Any]]]]:
    """The model's problems of a GEMM that Inductor's pad_mm pass (module `pad_mm`) may pad:
    (as given, padded), each (op key, shape), from its operands (fake tensors, sizes read at
    Inductor's hints) and aten op; None where nothing is to pad or the model has no rows. An
    operand pad_mm pads becomes a new row-major tensor."""
    name = str(getattr(op, "_qualified_op_name", op)).replace("::", ".").split(".")[-1]
    if name not in ("mm", "addmm", "bmm"):
        return None
    hint = getattr(pad_mm, "hint_symbols", lambda values: [int(v) for v in values])
    size1, size2 = [int(v) for v in hint(mat1.shape)], [int(v) for v in hint(mat2.shape)]
    stride1, stride2 = [int(v) for v in hint(mat1.stride())], [int(v) for v in hint(mat2.stride())]
    rank = 3 if name == "bmm" else 2
    dtype = dtype_name(mat1.dtype)
    if len(size1) != rank or len(size2) != rank or dtype != dtype_name(mat2.dtype) or dtype not in KNOWN_DTYPES:
        return None
    B = size1[0] if rank == 3 else 1
    M, K, N = size1[-2], size1[-1], size2[-1]
    pad_m = pad_mm.get_padded_length(M, pad_mm.get_alignment_size(mat1))
    pad_k = pad_mm.get_padded_length(K, pad_mm.get_alignment_size(mat1))
    pad_n = pad_mm.get_padded_length(N, pad_mm.get_alignment_size(mat2))
    if pad_m == pad_k == pad_n == 0:
        return None
    layout1, layout2 = operand_layout(size1, stride1), operand_layout(size2, stride2)
    padded_layout = ("n" if pad_m or pad_k else layout1) + ("n" if pad_k or pad_n else layout2)
    return ((op_key(name, layout1 + layout2), gemm_shape(B, M, N, K, dtype, dtype, dtype)),
            (op_key(name, padded_layout), gemm_shape(B, M + pad_m, N + pad_n, K + pad_k, dtype, dtype, dtype)))


def expected_ms(answer: dict[str, Any]) -> Optional[float]:
    """The predicted time of what a decision writes: its entry's, or the fastest of a pair's
    (Inductor times them and keeps the faster)."""
    times = [float(t) for t in answer.get("predicted_ms") or [] if isinstance(t, (int, float))]
    return min(times) if times else None


def inputs_label(kernel_inputs: Any) -> str:
    """The operands' sizes, for a GEMM that has no problem of the model's."""
    try:
        return ", ".join("x".join(str(int(v)) for v in size) for size in kernel_inputs.shapes_hinted())
    except Exception:
        return "?"


def label(key: str, shape: dict[str, Any]) -> str:
    dims = (f"{shape['B']}x" if shape["B"] > 1 else "") + f"{shape['M']}x{shape['N']}x{shape['K']}"
    return f"{key} {dims} {shape['M_dtype']}"


class ModelHook:
    """The model's answers to Inductor, and what it answered (explain()). A context manager:
    leaving the block uninstalls it."""

    def __init__(self, model: Any, policy: Optional[str] = None, search_space: str = "DEFAULT",
                 unranked: str = "aten", pad: str = "inductor", patchify: bool = True) -> None:
        if unranked not in UNRANKED:
            raise ModelHookError(f"unranked: '{unranked}' is not one of {', '.join(UNRANKED)}")
        if pad not in PADS:
            raise ModelHookError(f"pad: '{pad}' is not one of {', '.join(PADS)}")
        self.model = model
        self.policy = policy
        self.search_space = search_space
        self.unranked = unranked
        self.pad = pad
        self.patchify = patchify
        self.decisions: list[Decision] = []
        self.installed = False
        self._answers: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._warned = False
        self._undo: list[Callable[[], None]] = []

    # --- what Inductor calls (through ModelChoices.lookup_template_configs) ------------

    def lookup(self, kernel_inputs: Any, op_name: str, template_uids: list[str]) -> dict[str, list[dict[str, Any]]]:
        """The model's entries for one GEMM by template uid, as a lookup-table hit; for what
        the model does not rank, the ATen choice alone (or {} with unranked="inductor"); {} (a
        miss: Inductor's own choices) on any error."""
        try:
            problem = problem_of(kernel_inputs, op_name)
            if problem is None:
                return self._unranked(kernel_inputs, op_name, template_uids)
            key, shape = problem
            answer = self._decide(key, shape)
            rename = ATEN_UIDS.get(op_name, {})
            found: dict[str, list[dict[str, Any]]] = {}
            for entry in answer["entries"]:
                uid = rename.get(entry["template_id"], entry["template_id"])
                if uid not in template_uids:
                    self._note(Decision(op_name, label(key, shape), "fallback",
                                        why=f"{uid} is not offered (GEMM autotuning off: max_autotune_gemm)"))
                    return {}
                found.setdefault(uid, []).append({k: v for k, v in entry.items() if k != "template_id"})
            self._note(Decision(op_name, label(key, shape), answer.get("decision", "?"),
                                [dict(e, template_id=rename.get(e["template_id"], e["template_id"]))
                                 for e in answer["entries"]], list(answer.get("predicted_ms", []))))
            return found
        except Exception as e:  # a user's compile must never fail here
            self._fallback_warning(op_name, e)
            return {}

    def _unranked(self, kernel_inputs: Any, op_name: str, template_uids: list[str]) -> dict[str, list[dict[str, Any]]]:
        aten = [uid for uid in template_uids if uid.startswith("aten::")]
        why = "an op or dtype the model has no rows for"
        if self.unranked == "inductor" or not aten:
            self._note(Decision(op_name, inputs_label(kernel_inputs), "fallback", why=why))
            return {}
        self._note(Decision(op_name, inputs_label(kernel_inputs), "unranked",
                            [{"template_id": uid} for uid in aten], why=why))
        return {uid: [{}] for uid in aten}

    def keep_aten(self, name: str, choices: list[Any]) -> list[Any]:
        """The choices of an autotuning called `name` that the hook does not decide: only the
        extern (ATen) ones where it has both kinds (unranked="aten"); else all of them."""
        if self.unranked != "aten" or name in GEMM_OPS:
            return choices
        extern = [c for c in choices if choice_info(c).get("backend") == "extern"
                  or type(c).__name__ == "ExternKernelCaller"]
        if not extern or len(extern) == len(choices):
            return choices
        self._note(Decision(name, f"{len(choices)} choices", "unranked",
                            [{"template_id": str(getattr(c, "name", "extern"))} for c in extern],
                            why="an autotuning the model does not decide"))
        return extern

    def pad_verdict(self, pad_mm: Any, mat1: Any, mat2: Any, op: Any) -> Optional[tuple[bool, Decision]]:
        """pad="model": whether pad_mm should pad this GEMM, by the predicted time of the
        decision for the padded problem against the problem as given (padded ahead by more than
        PAD_MARGIN), with what explain() is to list; None where the model does not answer."""
        problems = padding_problems(pad_mm, mat1, mat2, op)
        if problems is None:
            return None
        (given_key, given), (padded_key, padded) = problems
        given_ms, padded_ms = expected_ms(self._decide(given_key, given)), expected_ms(self._decide(padded_key, padded))
        if given_ms is None or padded_ms is None:
            return None
        verdict = given_ms > PAD_MARGIN * padded_ms
        return verdict, Decision(given_key.split("_")[0], label(given_key, given), "pad" if verdict else "as given",
                                 predicted_ms=[given_ms, padded_ms])

    def _decide(self, key: str, shape: dict[str, Any]) -> dict[str, Any]:
        request: dict[str, Any] = {"op": key, "shape": shape, "search_space": self.search_space}
        if self.policy:
            request["policy"] = self.policy
        cache_key = json.dumps(request, sort_keys=True)
        with self._lock:
            answer = self._answers.get(cache_key)
        if answer is None:
            answer = self.model.decide(request)
            with self._lock:
                self._answers[cache_key] = answer
        return answer

    def _note(self, decision: Decision) -> None:
        with self._lock:
            self.decisions.append(decision)

    def _fallback_warning(self, op_name: str, error: Exception) -> None:
        self._note(Decision(op_name, "?", "fallback", why=f"{type(error).__name__}: {error}"))
        with self._lock:
            warned, self._warned = self._warned, True
        if not warned:
            warnings.warn(f"matmul_toolkit: use_model could not decide a GEMM ({type(error).__name__}: {error}); "
                          "Inductor's own choices are used where that happens (explain() lists them)",
                          RuntimeWarning, stacklevel=2)
        log.debug("use_model: fallback for %s", op_name, exc_info=True)

    # --- for the user --------------------------------------------------------------------

    def identity(self) -> str:
        """What its decisions depend on: "mmt-" and the model's sha256 (16 digits), then the
        policy, search space, unranked, pad and patchify where they are not the defaults. It goes
        into the compile cache key (cache_key_tag, the choices class's name)."""
        digest = str(self.model.info().get("sha256", ""))[:16]
        parts = [f"mmt-{digest}", self.policy or "",
                 "" if self.search_space == "DEFAULT" else self.search_space,
                 "" if self.unranked == "aten" else f"unranked={self.unranked}",
                 "" if self.pad == "inductor" else f"pad={self.pad}",
                 "" if self.patchify else "nopatchify"]
        return "-".join(p for p in parts if p)

    def explain(self) -> str:
        """Every decision so far, one line each: the problem, the entries, predicted times."""
        with self._lock:
            decisions = list(self.decisions)
        if not decisions:
            return "use_model: no GEMM decided yet"
        counts: dict[str, int] = {}
        for d in decisions:
            counts[d.decision] = counts.get(d.decision, 0) + 1
        head = "use_model: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        return "\n".join([head, *(d.line() for d in decisions)])

    def uninstall(self) -> None:
        """Puts back Inductor's choices handler, choices class and cache key tag."""
        while self._undo:
            self._undo.pop()()
        self.installed = False

    def __enter__(self) -> ModelHook:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.uninstall()


def model_choices_class(base: type, hook: ModelHook) -> type:
    """A subclass of Inductor's LookupTableChoices `base` whose lookup asks `hook` (a GEMM
    it leaves to ATen keeps default torch.compile's output layout)."""

    class ModelChoices(DefaultLayoutForAten, base):  # type: ignore[misc, valid-type]
        def lookup_template_configs(self, kernel_inputs: Any, op_name: str, template_uids: list[str],
                                    template_hash_map: Optional[dict[str, Optional[str]]] = None
                                    ) -> dict[str, list[dict[str, Any]]]:
            if not hook.installed:  # a thread's handler kept after uninstall(): Inductor's lookup
                return super().lookup_template_configs(kernel_inputs, op_name, template_uids, template_hash_map)
            return hook.lookup(kernel_inputs, op_name, template_uids)

    ModelChoices.hook = hook  # type: ignore[attr-defined]
    return ModelChoices


def aten_only_for_unranked(selector: type) -> None:
    """Wraps `selector.__call__` (Inductor's AlgorithmSelectorCache, what every autotuning
    goes through) once: while a hook is installed, the newest one's keep_aten filters the
    choices of an autotuning the hook does not decide. Any error keeps them all."""
    original = selector.__call__
    if getattr(original, "keeps_aten_for_unranked", False):
        return

    @functools.wraps(original)
    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        hook = _INSTALLED[-1] if _INSTALLED else None
        if hook is not None:
            try:
                if len(args) >= 2:
                    args = (args[0], hook.keep_aten(str(args[0]), list(args[1])), *args[2:])
                elif "name" in kwargs and "choices" in kwargs:
                    kwargs["choices"] = hook.keep_aten(str(kwargs["name"]), list(kwargs["choices"]))
            except Exception as e:  # a user's compile must never fail here
                hook._fallback_warning(str(args[0]) if args else "?", e)
        return original(self, *args, **kwargs)

    __call__.keeps_aten_for_unranked = True  # type: ignore[attr-defined]
    setattr(selector, "__call__", __call__)


# Where Inductor (torch/_inductor/kernel/mm_grouped.py) asks whether to build grouped mm's
# template choices; those this torch does not have are left alone.
GROUPED_MM_GATES = ("use_triton_template", "use_gluon_template", "use_nv_universal_gemm_template",
                    "use_blackwell_cutedsl_grouped_mm")


def closed_while_aten(name: str, gate: Callable[..., Any]) -> Callable[..., Any]:
    """`gate`, answering False while the newest hook runs what it does not rank on ATen and
    Inductor offers the ATen choice (else the templates are all there is); each time that
    keeps templates from being built, explain() says so."""
    @functools.wraps(gate)
    def closed(*args: Any, **kwargs: Any) -> Any:
        hook = _INSTALLED[-1] if _INSTALLED else None
        if hook is None or hook.unranked != "aten" or not aten_offered():
            return gate(*args, **kwargs)
        try:
            if gate(*args, **kwargs):
                hook._note(Decision("grouped_mm", f"{name} closed", "unranked", [{"template_id": "ATen"}],
                                    why="an autotuning the model does not decide: no templates built"))
        except Exception:  # the gate's own answer only decides what explain() says
            pass
        return False

    return closed


def aten_offered() -> bool:
    """Whether Inductor's GEMM backends include ATen (max_autotune_gemm_backends)."""
    try:
        from torch._inductor.utils import use_aten_gemm_kernels

        return bool(use_aten_gemm_kernels())
    except Exception:
        return False


def grouped_mm_gates() -> list[Setting]:
    """Settings that close grouped mm's template gates (none where the module is missing)."""
    try:
        from torch._inductor.kernel import mm_grouped
    except Exception:
        return []
    return [(mm_grouped, name, functools.partial(closed_while_aten, name))
            for name in GROUPED_MM_GATES if callable(getattr(mm_grouped, name, None))]


def padding_settings(hook: ModelHook) -> list[Setting]:
    """pad="model": settings that put the model's verdict where pad_mm looks up a timing it
    took before (get_cached_should_pad), for the GEMM its _should_pad is deciding, so that
    pad_mm's other rules (compute bound, force_shape_pad) stay its own and no timing is
    taken. None where this torch's pad_mm lacks those functions; any error in the hook leaves
    that GEMM to pad_mm's timing, with one warning. Nothing is written to pad_mm's cache of
    timings, and a GEMM the model decides skips the memoizer around _should_pad (where it
    exposes the function it wraps), which would keep the verdict for compiles without the hook."""
    try:
        from torch._inductor.fx_passes import pad_mm
    except Exception:
        return []
    if not all(callable(getattr(pad_mm, name, None))
               for name in ("_should_pad", "get_cached_should_pad", "should_pad_bench_key", "get_padded_length",
                            "get_alignment_size")):
        return []
    deciding = threading.local()  # the GEMM of this thread's _should_pad: (its key, verdict, Decision)

    def decided_by_model(should_pad: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(should_pad)
        def decided(match: Any, mat1: Any, mat2: Any, op: Any, input: Any = None) -> Any:
            verdict = None
            if hook.installed:
                try:
                    found = hook.pad_verdict(pad_mm, mat1, mat2, op)
                    if found is not None:
                        verdict = (pad_mm.should_pad_bench_key(match, mat1, mat2, op, input), *found)
                except Exception as e:  # a user's compile must never fail here
                    hook._fallback_warning("pad_mm", e)
            deciding.verdict = verdict
            decide = getattr(should_pad, "__wrapped__", should_pad) if verdict is not None else should_pad
            try:
                return decide(match, mat1, mat2, op, input)
            finally:
                deciding.verdict = None

        return decided

    def answered_by_model(lookup: Callable[[str], Any]) -> Callable[[str], Any]:
        @functools.wraps(lookup)
        def cached(key: str) -> Any:
            verdict = getattr(deciding, "verdict", None)
            if verdict is not None and verdict[0] == key:
                hook._note(verdict[2])  # pad_mm took the model's verdict (it got this far)
                return verdict[1]
            return lookup(key)

        return cached

    return [(pad_mm, "_should_pad", decided_by_model), (pad_mm, "get_cached_should_pad", answered_by_model)]


def install(hook: ModelHook) -> None:
    """Makes Inductor ask `hook` in every thread, keeps convolutions on ATen (unless
    unranked="inductor"), tags the compile cache."""
    import torch
    from torch._inductor import config as inductor_config
    from torch._inductor.lookup_table.choices import LookupTableChoices
    from torch._inductor.select_algorithm import AlgorithmSelectorCache

    identity = hook.identity()
    settings: list[Setting] = [(torch.compiler.config, "cache_key_tag",
                                lambda before: f"{before}+{identity}" if before else identity)]
    if hook.unranked == "aten":
        if hasattr(inductor_config, "max_autotune_conv_backends"):
            settings.append((inductor_config, "max_autotune_conv_backends", lambda _: "ATEN"))
        settings += grouped_mm_gates()
    if hook.pad == "model":
        padding = padding_settings(hook)
        if not padding:
            warnings.warn("matmul_toolkit: use_model(pad='model'): this torch's pad_mm pass is not the one the hook "
                          "knows; Inductor decides shape padding by its own timing", RuntimeWarning, stacklevel=3)
        settings += padding
    if hook.patchify:
        from .patch_convs import settings as patch_settings

        settings += patch_settings()
    hook._undo.append(install_layer(model_choices_class(LookupTableChoices, hook), settings,
                                    name=class_name("ModelChoices", identity)))
    aten_only_for_unranked(AlgorithmSelectorCache)
    _INSTALLED.append(hook)
    hook._undo.append(lambda: _INSTALLED.remove(hook) if hook in _INSTALLED else None)
    hook.installed = True


def gpu_mismatch(info: dict[str, Any]) -> Optional[str]:
    """Why the model should not pick for this process's GPU, or None."""
    import torch

    if not torch.cuda.is_available():
        return None  # Inductor asks for CUDA GEMMs only; nothing will be decided
    device = torch.cuda.get_device_name()
    trained_on = [name.strip() for name in str(info.get("hardware", "")).split(",")]
    if device in trained_on:
        return None
    return f"the model was trained on {info.get('hardware')}, this GPU is {device}"


def compile_options(cudagraphs: bool = True) -> dict[str, Any]:
    """The torch.compile options to compile with under use_model() (or use_table), those the
    whole-model suite (bench/models) measured best:
    - max_autotune_gemm: Inductor offers its Triton templates, so that the model's picks can
      run (where the policy leaves one choice, Inductor benchmarks nothing);
    - triton.autotune_pointwise off: each pointwise kernel runs Inductor's heuristic block
      size. With it on, Inductor times two block sizes at the kernel's first run, with L2
      flushed, and keeps the faster; that draw between near-equal timings kept, from one
      compile to the next, block sizes that ran a GELU up to 1.4x slower in the graph, where
      its input sits in L2, and moved whole models by 1-3 % (2026-12-06 record);
    - triton.cudagraphs (`cudagraphs`): CUDA graphs, as the suite runs every variant.
    Pass them as `torch.compile(model, options=compile_options())`."""
    options: dict[str, Any] = {"max_autotune_gemm": True, "triton.autotune_pointwise": False}
    if cudagraphs:
        options["triton.cudagraphs"] = True
    return options


def use_model(path: Optional[str] = None, *, policy: Optional[str] = None, search_space: str = "DEFAULT",
              unranked: str = "aten", pad: str = "inductor", patchify: bool = True, force: bool = False,
              library: Optional[Any] = None) -> ModelHook:
    """Makes the model (default: the shipped one) pick the GEMMs of every later compile in this
    process; returns the hook (explain(), uninstall(), or use it as a context manager).
    `policy`: the decision policy (export-lut --policy; default: export-lut's default).
    `unranked`: "aten" (default) runs what the model does not rank, convolutions included, on
    its ATen choice alone, as default torch.compile does; "inductor" leaves it to Inductor's
    own autotuning.
    `pad`: who decides whether Inductor pads a misaligned GEMM: "inductor" (default: its timing
    while compiling) or "model" (the predicted times of the padded and the given problem; a
    candidate, not yet measured end to end).
    `patchify` (default on): convolutions whose stride equals their kernel (patch embeddings,
    ConvNeXt's stem and downsampling) become a GEMM that the model decides (patch_convs.py;
    what it gains: docs/experiments/2026-12-06-patch-convolutions-as-gemms.md).
    `force`: install it on a GPU the model was not trained on. Raises ModelHookError when the
    model cannot be opened or the policy is unknown."""
    try:
        model = RankModel.open(path or "", library)
        info = model.info()
        hook = ModelHook(model, policy, search_space, unranked, pad, patchify)
        probe = probe_problem()
        model.decide({"op": probe[0], "shape": probe[1], "search_space": search_space,
                      **({"policy": policy} if policy else {})})
    except RankLibraryError as e:
        raise ModelHookError(str(e)) from None
    mismatch = gpu_mismatch(info)
    if mismatch and not force:
        warnings.warn(f"matmul_toolkit: use_model not installed: {mismatch}; Inductor's own choices stay "
                      "(use_model(force=True) installs it anyway)", RuntimeWarning, stacklevel=2)
        return hook
    install(hook)
    return hook


def probe_problem() -> tuple[str, dict[str, Any]]:
    """A small problem decided once at use_model(), so a bad policy or space fails there."""
    return "mm", {"version": 1, "B": 1, "M": 64, "M_dtype": "float16", "N": 64, "K": 64, "K_dtype": "float16",
                  "out_dtype": "float16", "out_size": [1, 64, 64], "out_stride": [4096, 64, 1]}
