"""GemmRecorder against a fake AlgorithmSelectorCache: what it records of each selection
(problem, choices, the one kept, Inductor's benchmark times), deferred choices timed later,
the shapeset it writes, and that it leaves the selector as it found it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
from fakes import FakeNode, aten_choice, triton_choice

from matmul_toolkit_inductor.recorder import ATEN, DEFERRED, TRITON, GemmRecorder


class Box:
    """Inductor's TensorBox / StorageBox: a wrapper with .data."""

    def __init__(self, data: Any) -> None:
        self.data = data


class TensorBox(Box):
    pass


class StorageBox(Box):
    pass


class MultiTemplateBuffer:
    pass


class Buffer:
    pass


class FakeSelector:
    """Selects as Inductor does for the recorder's purposes: one choice is returned as is,
    several are benchmarked (feedback savers get the times) unless deferred, which returns a
    MultiTemplateBuffer and benchmarks when `benchmark_deferred` is called."""

    savers: list[Callable[..., None]] = []
    times: dict[str, float] = {}
    defer = False
    deferred: list[tuple[str, list[Any], Any]] = []

    def __call__(self, name: str, choices: list[Any], input_nodes: Any, layout: Any = None) -> Any:
        if len(choices) > 1 and self.defer:
            type(self).deferred.append((name, choices, input_nodes))
            return TensorBox(StorageBox(MultiTemplateBuffer()))
        if len(choices) > 1:
            self.feed(name, choices, input_nodes)
        return TensorBox(StorageBox(Buffer()))

    @classmethod
    def feed(cls, name: str, choices: list[Any], input_nodes: Any) -> None:
        timings = {c: cls.times.get(c.name, 1.0) for c in choices}
        for saver in cls.savers:
            saver(timings, name, input_nodes, choices, None)

    @classmethod
    def benchmark_deferred(cls) -> None:
        for name, choices, input_nodes in cls.deferred:
            cls.feed(name, choices, input_nodes)


@pytest.fixture
def selector() -> Any:
    cls = type("Selector", (FakeSelector,), {"savers": [], "times": {}, "defer": False, "deferred": []})
    return cls


def addmm_inputs(M: int = 64, N: int = 96, K: int = 32) -> list[FakeNode]:
    # bias, mat1, mat2 as a transposed view of an [N, K] weight (layout nt)
    return [FakeNode([N], [1], "torch.bfloat16"), FakeNode([M, K], None, "torch.bfloat16"),
            FakeNode([K, N], [1, K], "torch.bfloat16")]


def started(selector: Any) -> GemmRecorder:
    recorder = GemmRecorder()
    recorder.install(selector, selector.savers.append)
    return recorder


def test_a_default_compile_records_each_gemm_with_its_single_choice(selector: Any) -> None:
    recorder = started(selector)
    selector()("addmm", [aten_choice("addmm")], addmm_inputs())
    selector()("convolution", [aten_choice("convolution")], addmm_inputs())  # not a GEMM of ours
    selector()("bmm", [aten_choice("bmm")], [FakeNode([4, 8, 16]), FakeNode([4, 16, 32])])
    r, b = recorder.records
    assert (r.name, r.op_key, r.offered, r.chosen, r.benchmark_ms) == ("addmm", "addmm_nt", [ATEN], ATEN, {})
    assert (r.shape.M, r.shape.N, r.shape.K, r.shape.M_dtype) == (64, 96, 32, "bfloat16")
    assert (b.op_key, b.shape.B, b.shape.M, b.shape.N, b.shape.K) == ("bmm", 4, 8, 32, 16)
    assert r.problem_label() == "addmm_nt 64x96x32 bfloat16" and b.problem_label() == "bmm 4x8x32x16 float16"


def test_an_autotuning_keeps_the_fastest_kind_and_its_benchmark_times(selector: Any) -> None:
    recorder = started(selector)
    fast, slow = triton_choice(64, 64, 32, index=1), triton_choice(128, 64, 32, index=2)
    selector.times = {fast.name: 0.020, slow.name: 0.050, "mm": 0.030}
    selector()("mm", [aten_choice("mm"), fast, slow], addmm_inputs()[1:])
    (r,) = recorder.records
    assert r.offered == [ATEN, TRITON, TRITON] and r.chosen == TRITON
    assert r.benchmark_ms == {ATEN: 0.030, TRITON: 0.020}


def test_a_deferred_choice_gets_its_times_when_the_scheduler_benchmarks(selector: Any) -> None:
    recorder = started(selector)
    selector.defer = True
    choice = triton_choice(64, 64, 32, index=1)
    selector.times = {choice.name: 0.010, "mm": 0.012}
    selector()("mm", [aten_choice("mm"), choice], addmm_inputs()[1:])
    (r,) = recorder.records
    assert r.chosen == DEFERRED and r.benchmark_ms == {}
    selector.benchmark_deferred()
    assert r.benchmark_ms == {ATEN: 0.012, TRITON: 0.010}


def test_stop_puts_the_selector_back(selector: Any) -> None:
    original = selector.__call__
    recorder = started(selector)
    assert selector.__call__ is not original
    recorder.stop()
    assert selector.__call__ is original
    selector()("mm", [aten_choice("mm")], addmm_inputs()[1:])
    assert recorder.records == []


def test_an_unreadable_gemm_is_recorded_without_a_problem_and_the_compile_goes_on(selector: Any) -> None:
    def broken(op: str, nodes: Any) -> Optional[Any]:
        raise RuntimeError("symbolic size")

    recorder = GemmRecorder(to_problem=broken)
    recorder.install(selector, selector.savers.append)
    out = selector()("mm", [aten_choice("mm")], addmm_inputs()[1:])
    assert isinstance(out, TensorBox)
    (r,) = recorder.records
    assert r.op_key is None and r.shape is None and r.problem_label() == "mm (unreadable)"


def test_the_shapeset_holds_each_problem_once_in_lowering_order(selector: Any, tmp_path: Path) -> None:
    recorder = started(selector)
    for M in (64, 32, 64):
        selector()("addmm", [aten_choice("addmm")], addmm_inputs(M=M))
    selector()("mm", [aten_choice("mm")], addmm_inputs()[1:])
    path = tmp_path / "shapes.json"
    assert recorder.save_shapeset(path) == 3
    document = json.loads(path.read_text())
    assert list(document["operations"]) == ["addmm_nt", "mm_nt"]
    assert [s["M"] for s in document["operations"]["addmm_nt"]["shapes"]] == [64, 32]
    assert document["operations"]["mm_nt"]["shapes"][0] == {
        "version": 1, "B": 1, "M": 64, "M_dtype": "bfloat16", "N": 96, "K": 32, "K_dtype": "bfloat16",
        "out_dtype": "bfloat16", "out_size": [1, 64, 96], "out_stride": [6144, 96, 1]}
