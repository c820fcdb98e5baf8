"""GemmRecorder: the GEMMs Inductor lowers while it compiles, with or without autotuning.

Every mm, addmm, bmm and int_mm Inductor lowers goes through one selection
(torch._inductor.select_algorithm.AlgorithmSelectorCache.__call__), also in a default
compile where ATen is the only choice. While recording, that call is wrapped: each GEMM
becomes a GemmRecord (its problem as the dataset names it, the kinds of choices offered, the
one kept, and Inductor's benchmark times where it benchmarked). A default compile costs no
autotuning, so this is the cheap way to learn a model's GEMM shapes (MatmulDatasetCollector
needs max-autotune's timings).

    with GemmRecorder() as recorder:
        torch.compile(model)(x)
    recorder.save_shapeset("shapes.json")   # what `export-lut --shapeset` and `collect-shapeset --shapeset` read

torch is imported only when recording starts.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from .choices import AUTOTUNED_OPS, problem_from_nodes, template_of
from .dataset import MMShape, PathLike, shapeset_document, write_file_atomically

log = logging.getLogger(__name__)

ATEN = "aten"
TRITON = "triton"
# A choice Inductor left to its scheduler (epilogue-fusion benchmarking picks at fusion time).
DEFERRED = "deferred"


def choice_kind(choice: Any) -> str:
    """"aten", "triton" (a Triton GEMM template) or the choice's own name for anything else
    (decompose_k, a subgraph, ...)."""
    template = template_of(choice)
    if template == ATEN:
        return ATEN
    if template is not None:
        return TRITON
    return str(getattr(choice, "name", type(choice).__name__))


def innermost(node: Any) -> Any:
    """The buffer behind Inductor's TensorBox / StorageBox wrappers."""
    while type(node).__name__ in ("TensorBox", "StorageBox") and getattr(node, "data", None) is not None:
        node = node.data
    return node


@dataclass
class GemmRecord:
    """One GEMM as Inductor lowered it."""
    name: str                        # Inductor's op name: mm, addmm, bmm, int_mm
    op_key: Optional[str]            # the dataset's op key with its layout ("addmm_nt"); None if unreadable
    shape: Optional[MMShape]
    offered: list[str]               # kind of every choice offered
    chosen: Optional[str] = None     # "aten", "triton", "deferred", another kind, or None (unknown)
    # Inductor's benchmark time of each kind's fastest choice, where it benchmarked (ms).
    benchmark_ms: dict[str, float] = field(default_factory=dict)
    # id() of the input node list Inductor selected with: a deferred choice is benchmarked
    # later with the same list.
    input_nodes_id: int = field(default=0, repr=False, compare=False)

    def problem_label(self) -> str:
        if self.shape is None:
            return f"{self.name} (unreadable)"
        s = self.shape
        dims = (f"{s.B}x" if s.B > 1 else "") + f"{s.M}x{s.N}x{s.K}"
        return f"{self.op_key} {dims} {s.M_dtype}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "op": self.op_key, "shape": self.shape.to_dict() if self.shape else None,
                "offered": self.offered, "chosen": self.chosen, "benchmark_ms": self.benchmark_ms}


class GemmRecorder:
    """Records the GEMMs lowered while active (a context manager, or start() / stop())."""

    def __init__(self, to_problem: Callable[[str, Sequence[Any]], Optional[tuple[str, MMShape]]] = problem_from_nodes
                 ) -> None:
        self.records: list[GemmRecord] = []
        self._to_problem = to_problem
        self._selector: Any = None
        self._original: Any = None
        self._saver: Optional[Callable[..., None]] = None
        self._pending: list[GemmRecord] = []
        # Records whose choice Inductor deferred to its scheduler, by their input nodes: the
        # scheduler benchmarks their choices later, with the same input node list.
        self._deferred: dict[int, GemmRecord] = {}

    # --- recording --------------------------------------------------------------------

    def start(self) -> None:
        if self._selector is not None:
            return
        from torch._inductor import select_algorithm

        self.install(select_algorithm.AlgorithmSelectorCache, select_algorithm.add_feedback_saver)

    def install(self, selector: type, add_feedback_saver: Callable[[Callable[..., None]], None]) -> None:
        """Wraps `selector.__call__` (Inductor's AlgorithmSelectorCache) and registers a
        feedback saver for the benchmark times (start() passes Inductor's own)."""
        original = selector.__call__
        recorder = self

        def call(this: Any, name: str, choices: list[Any], input_nodes: Any, *args: Any, **kwargs: Any) -> Any:
            record = recorder._begin(name, choices, input_nodes)
            try:
                result = original(this, name, choices, input_nodes, *args, **kwargs)
            finally:
                if record is not None:
                    recorder._pending.remove(record)
            if record is not None:
                recorder._finish(record, choices, result)
            return result

        def saver(timings: dict[Any, float], name: str, input_nodes: Any = None, *_: Any) -> None:
            recorder._feedback(timings, name, input_nodes)

        self._selector, self._original, self._saver = selector, original, saver
        setattr(selector, "__call__", call)
        add_feedback_saver(saver)

    def stop(self) -> None:
        if self._selector is None:
            return
        self._selector.__call__ = self._original
        try:
            from torch._inductor import select_algorithm

            cache = select_algorithm.get_algorithm_selector_cache()
            cache.feedback_saver_fns = [fn for fn in cache.feedback_saver_fns if fn is not self._saver]
        except Exception:  # no torch (tests) or an older Inductor: nothing registered there
            pass
        self._selector = self._original = self._saver = None
        self._deferred.clear()

    def __enter__(self) -> GemmRecorder:
        self.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    # Runs inside the user's compilation: nothing here may fail it.
    def _begin(self, name: str, choices: Sequence[Any], input_nodes: Sequence[Any]) -> Optional[GemmRecord]:
        op = AUTOTUNED_OPS.get(name)
        if op is None:
            return None
        try:
            problem = self._to_problem(op, input_nodes)
            offered = [choice_kind(c) for c in choices]
        except Exception:
            log.warning("matmul_toolkit: could not read the GEMM %s", name, exc_info=True)
            problem, offered = None, []
        op_key, shape = problem if problem else (None, None)
        record = GemmRecord(name=name, op_key=op_key, shape=shape, offered=offered, input_nodes_id=id(input_nodes))
        self._pending.append(record)
        return record

    def _feedback(self, timings: dict[Any, float], name: str, input_nodes: Any = None) -> None:
        record = next((r for r in reversed(self._pending) if r.name == name), None)
        if record is None:
            record = self._deferred.get(id(input_nodes))
        if record is None or record.name != name:
            return
        for choice, time_ms in timings.items():
            try:
                value = float(time_ms)
            except (TypeError, ValueError):
                continue
            if not math.isfinite(value):
                continue
            kind = choice_kind(choice)
            if kind not in record.benchmark_ms or value < record.benchmark_ms[kind]:
                record.benchmark_ms[kind] = value

    def _finish(self, record: GemmRecord, choices: Sequence[Any], result: Any) -> None:
        try:
            if type(innermost(result)).__name__ == "MultiTemplateBuffer":
                record.chosen = DEFERRED
                self._deferred[record.input_nodes_id] = record
            elif len(choices) == 1:
                record.chosen = choice_kind(choices[0])
            elif record.benchmark_ms:
                record.chosen = min(record.benchmark_ms, key=record.benchmark_ms.__getitem__)
        except Exception:
            log.warning("matmul_toolkit: could not read the choice of %s", record.name, exc_info=True)
        self.records.append(record)

    # --- results ----------------------------------------------------------------------

    def problems(self) -> list[tuple[str, MMShape]]:
        """The distinct readable problems, in the order first lowered."""
        seen: dict[tuple[str, MMShape], None] = {}
        for r in self.records:
            if r.op_key is not None and r.shape is not None:
                seen.setdefault((r.op_key, r.shape))
        return list(seen)

    def save_shapeset(self, path: PathLike) -> int:
        """Writes the distinct problems as a shapeset file (atomically); returns their number."""
        problems = self.problems()
        write_file_atomically(Path(path), json.dumps(shapeset_document(problems), indent=1) + "\n")
        return len(problems)
