"""use_model() against a fake Inductor (choices handler, config, cache key tag, CUDA) and a fake
model: what the hook returns for each GEMM, its fallbacks and warnings, installation in other
threads, and that uninstalling puts everything back. The real library and torch are tested
where present (test_rank_library.py, the GPU machine)."""

from __future__ import annotations

import itertools
import math
import sys
import threading
import types
import warnings
from typing import Any, Optional

import pytest
from fakes import DenseTensor, dense_mm

from matmul_toolkit_inductor import model_hook, patch_convs
from matmul_toolkit_inductor.model_hook import ModelHook, ModelHookError, problem_of
from matmul_toolkit_inductor.rank_library import RankLibraryError

TRITON = {"template_id": "triton::mm", "BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8,
          "num_stages": 3, "num_warps": 4, "EVEN_K": True, "USE_FAST_ACCUM": False, "ACC_TYPE": "tl.float32"}


class FakeInputs:
    """MMKernelInputs as the hook reads it: hinted shapes and strides, dtypes, out dtype."""

    def __init__(self, shapes: list[tuple[int, ...]], strides: list[tuple[int, ...]], dtype: str = "torch.bfloat16",
                 out_dtype: Optional[str] = None) -> None:
        self._shapes, self._strides, self._dtype = shapes, strides, dtype
        self._out = out_dtype or dtype

    def shapes_hinted(self) -> tuple[tuple[int, ...], ...]:
        return tuple(self._shapes)

    def strides_hinted(self) -> tuple[tuple[int, ...], ...]:
        return tuple(self._strides)

    def dtypes(self) -> tuple[str, ...]:
        return tuple(self._dtype for _ in self._shapes)

    def out_dtype(self) -> str:
        return self._out


def linear(M: int, N: int, K: int, bias: bool = False, **kwargs: Any) -> FakeInputs:
    """x @ W.T: mat2 is a transposed view of an [N, K] weight (layout nt)."""
    shapes, strides = [(M, K), (K, N)], [(K, 1), (1, K)]
    if bias:
        shapes, strides = [(M, N)] + shapes, [(0, 1)] + strides
    return FakeInputs(shapes, strides, **kwargs)


class FakeModel:
    """RankModel's interface: info() and decide(), answering from `answers` by op key."""

    def __init__(self, answers: dict[str, dict[str, Any]], hardware: str = "NVIDIA H200") -> None:
        self.answers = answers
        self.hardware = hardware
        self.requests: list[dict[str, Any]] = []

    def info(self) -> dict[str, Any]:
        return {"hardware": self.hardware, "sha256": "0123456789abcdef0123456789abcdef"}

    def decide(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        answer = self.answers.get(request["op"])
        if isinstance(answer, Exception):
            raise answer
        return answer or {"decision": "aten", "entries": [{"template_id": "aten::mm"}], "predicted_ms": [0.01]}


def test_the_problem_is_read_at_inductors_hints_with_its_layout() -> None:
    assert problem_of(linear(2048, 5632, 2048), "mm") == ("mm_nt", {
        "version": 1, "B": 1, "M": 2048, "M_dtype": "bfloat16", "N": 5632, "K": 2048, "K_dtype": "bfloat16",
        "out_dtype": "bfloat16", "out_size": [1, 2048, 5632], "out_stride": [2048 * 5632, 5632, 1]})
    assert problem_of(linear(64, 96, 32, bias=True), "addmm")[0] == "addmm_nt"
    bmm = FakeInputs([(8, 64, 32), (8, 32, 16)], [(2048, 32, 1), (512, 16, 1)])
    assert problem_of(bmm, "bmm")[1]["B"] == 8 and problem_of(bmm, "baddbmm")[0] == "bmm"
    int8 = FakeInputs([(64, 32), (32, 16)], [(32, 1), (16, 1)], "torch.int8", "torch.int32")
    assert problem_of(int8, "int_mm") == ("mm", problem_of(int8, "int_mm")[1])
    assert problem_of(int8, "int_mm")[1]["out_dtype"] == "int32"
    # ops and dtypes the model has no rows for
    assert problem_of(linear(64, 64, 64), "scaled_mm") is None
    assert problem_of(linear(64, 64, 64, dtype="torch.float8_e4m3fnuz"), "mm") is None
    assert problem_of(FakeInputs([(64, 32), (32, 16)], [(32, 1), (16, 1)], "torch.bfloat16", None), "mm") is not None


def test_each_decision_comes_back_as_a_lookup_hit() -> None:
    model = FakeModel({
        "mm_nt": {"decision": "kernel", "entries": [TRITON], "predicted_ms": [0.020]},
        "addmm_nt": {"decision": "aten", "entries": [{"template_id": "aten::bias_addmm"}], "predicted_ms": [0.03]},
        "bmm": {"decision": "pair", "entries": [dict(TRITON, template_id="triton::bmm"), {"template_id": "aten::bmm"}],
                "predicted_ms": [0.01, 0.011]},
    })
    hook = ModelHook(model, policy="graph")
    mm = hook.lookup(linear(2048, 5632, 2048), "mm", ["aten::mm", "triton::mm"])
    assert mm == {"triton::mm": [{k: v for k, v in TRITON.items() if k != "template_id"}]}
    addmm = hook.lookup(linear(2048, 768, 3072, bias=True), "addmm", ["aten::bias_addmm", "aten::addmm", "triton::mm"])
    assert addmm == {"aten::bias_addmm": [{}]}
    bmm = FakeInputs([(8, 64, 32), (8, 32, 16)], [(2048, 32, 1), (512, 16, 1)])
    assert set(hook.lookup(bmm, "baddbmm", ["aten::baddbmm", "triton::bmm"])) == {"triton::bmm", "aten::baddbmm"}
    assert model.requests[0] == {"op": "mm_nt", "shape": problem_of(linear(2048, 5632, 2048), "mm")[1],
                                 "search_space": "DEFAULT", "policy": "graph"}
    text = hook.explain().splitlines()
    assert text[0] == "use_model: 1 aten, 1 kernel, 1 pair"
    assert text[1] == "mm mm_nt 2048x5632x2048 bfloat16: kernel: triton::mm 64x128x32 g8 s3 w4 (0.02 ms)"
    assert text[3].startswith("baddbmm bmm 8x64x16x32 bfloat16: pair: triton::bmm") and "aten::baddbmm" in text[3]


def test_a_problem_is_decided_once() -> None:
    model = FakeModel({})
    hook = ModelHook(model)
    for _ in range(4):  # four layers, one shape
        assert hook.lookup(linear(16, 2048, 2048), "mm", ["aten::mm", "triton::mm"]) == {"aten::mm": [{}]}
    assert len(model.requests) == 1 and len(hook.decisions) == 4


def test_what_the_model_does_not_rank_runs_its_aten_choice_alone() -> None:
    model = FakeModel({"mm_nt": {"decision": "kernel", "entries": [TRITON], "predicted_ms": [0.02]}})
    hook = ModelHook(model)
    grouped = ["aten::_grouped_mm", "triton::grouped_mm"]
    assert hook.lookup(linear(64, 64, 64), "grouped_mm", grouped) == {"aten::_grouped_mm": [{}]}
    fp8 = linear(64, 64, 64, dtype="torch.float8_e4m3fnuz")
    assert hook.lookup(fp8, "mm", ["aten::mm", "triton::mm"]) == {"aten::mm": [{}]}
    assert hook.lookup(linear(64, 64, 64), "odd_op", ["triton::odd"]) == {}  # no ATen choice: Inductor's
    assert model.requests == []
    lines = hook.explain().splitlines()
    assert lines[1] == "grouped_mm 64x64, 64x64: unranked: aten::_grouped_mm alone (an op or dtype the model has no rows for)"
    assert "Inductor's own choices" in lines[3]
    # unranked="inductor": Inductor autotunes them as it would without the model
    assert ModelHook(model, unranked="inductor").lookup(linear(64, 64, 64), "grouped_mm", grouped) == {}
    with pytest.raises(ModelHookError, match="unranked: 'triton' is not one of aten, inductor"):
        ModelHook(model, unranked="triton")


def test_what_inductor_does_not_offer_stays_inductors() -> None:
    hook = ModelHook(FakeModel({"mm_nt": {"decision": "kernel", "entries": [TRITON], "predicted_ms": [0.02]}}))
    # GEMM autotuning off: no Triton template is offered, so no kernel can be picked
    assert hook.lookup(linear(64, 64, 64), "mm", ["aten::mm"]) == {}
    assert "triton::mm is not offered" in hook.explain()


def test_an_error_falls_back_to_inductor_with_one_warning() -> None:
    hook = ModelHook(FakeModel({"mm_nt": RankLibraryError("request > shape: broken")}))
    with pytest.warns(RuntimeWarning, match="could not decide a GEMM") as caught:
        assert hook.lookup(linear(64, 64, 64), "mm", ["aten::mm", "triton::mm"]) == {}
        assert hook.lookup(linear(128, 64, 64), "mm", ["aten::mm", "triton::mm"]) == {}
    assert len(caught) == 1
    broken = FakeInputs([(64,)], [(1,)])  # not a matrix at all: still no exception
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert hook.lookup(broken, "mm", ["aten::mm"]) == {}
    assert hook.explain().startswith("use_model: 3 fallback")


# ------------------------------------------------------------------ installing into Inductor
@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> Any:
    """torch's CUDA query, compiler config, and Inductor's config, V and LookupTableChoices."""
    handlers = threading.local()
    config = types.SimpleNamespace(inductor_choices_class=None, max_autotune_conv_backends="ATEN,TRITON",
                                   max_autotune_gemm_backends="ATEN,TRITON")

    class InductorChoices:
        pass

    class FakeV:
        @property
        def choices(self) -> Any:  # Inductor's lazy default, kept per thread: the configured class, else its own
            if not hasattr(handlers, "h"):
                handlers.h = config.inductor_choices_class() if config.inductor_choices_class else InductorChoices()
            return handlers.h

        def set_choices_handler(self, handler: Any) -> None:
            handlers.h = handler

    class LookupTableChoices:
        def lookup_template_configs(self, *args: Any) -> dict[str, Any]:
            return {"inductor's": "table lookup"}

        def _need_to_fix_layout(self, adjusted_choices: list[Any], op_name: str) -> bool:
            return True  # Inductor under max_autotune_gemm (without flexible layouts): always

    class ExternKernelChoice:
        pass

    class AlgorithmSelectorCache:  # what autotuning is handed: the choices it times
        def __call__(self, name: str, choices: list[Any], *args: Any, **kwargs: Any) -> Any:
            return [c.name for c in choices]

    utils = types.SimpleNamespace(use_aten_gemm_kernels=lambda: "ATEN" in config.max_autotune_gemm_backends)
    kernel, mm_grouped = types.ModuleType("torch._inductor.kernel"), types.ModuleType("torch._inductor.kernel.mm_grouped")
    mm_grouped.use_triton_template = lambda layout: layout == "cuda"  # type: ignore[attr-defined]
    kernel.mm_grouped = mm_grouped  # type: ignore[attr-defined]
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_available=lambda: True, get_device_name=lambda: "NVIDIA H200")  # type: ignore[attr-defined]
    torch.compiler = types.SimpleNamespace(config=types.SimpleNamespace(cache_key_tag="user"))  # type: ignore[attr-defined]
    modules = {"torch": torch, "torch._inductor": types.ModuleType("torch._inductor"),
               "torch._inductor.config": config,
               "torch._inductor.lookup_table": types.ModuleType("torch._inductor.lookup_table"),
               "torch._inductor.lookup_table.choices": types.SimpleNamespace(LookupTableChoices=LookupTableChoices),
               "torch._inductor.choices": types.SimpleNamespace(InductorChoices=InductorChoices),
               "torch._inductor.select_algorithm": types.SimpleNamespace(AlgorithmSelectorCache=AlgorithmSelectorCache,
                                                                         ExternKernelChoice=ExternKernelChoice),
               "torch._inductor.virtualized": types.SimpleNamespace(V=FakeV()),
               "torch._inductor.kernel": kernel, "torch._inductor.kernel.mm_grouped": mm_grouped,
               "torch._inductor.utils": utils}
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(modules["torch._inductor"], "config", config, raising=False)
    return torch, config, modules["torch._inductor.virtualized"].V


def opened(monkeypatch: pytest.MonkeyPatch, model: Any) -> None:
    monkeypatch.setattr(model_hook.RankModel, "open", classmethod(lambda cls, path, library=None: model))


def test_use_model_installs_for_every_thread_and_uninstalls(fake_torch: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    torch, config, V = fake_torch
    opened(monkeypatch, FakeModel({}))
    with model_hook.use_model() as hook:
        assert hook.installed and isinstance(V.choices, config.inductor_choices_class)
        assert V.choices.hook is hook
        assert torch.compiler.config.cache_key_tag == "user+mmt-0123456789abcdef"
        seen: list[Any] = []
        thread = threading.Thread(target=lambda: seen.append(V.choices))
        thread.start()
        thread.join()
        assert isinstance(seen[0], config.inductor_choices_class)  # a compile thread of Inductor's
        answer = V.choices.lookup_template_configs(linear(64, 64, 64), "mm", ["aten::mm", "triton::mm"])
        assert answer == {"aten::mm": [{}]}
    assert not hook.installed and config.inductor_choices_class is None
    assert type(V.choices).__name__ == "InductorChoices" and torch.compiler.config.cache_key_tag == "user"


def test_the_compile_cache_key_names_the_model_and_what_the_picks_depend_on(fake_torch: Any,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Inductor's FX graph cache pickles the choices class into each graph's key: it must
    pickle, by a name that changes with the model and the policy."""
    import pickle

    torch, config, V = fake_torch
    opened(monkeypatch, FakeModel({}))
    with model_hook.use_model(policy="isolated", unranked="inductor"):
        assert torch.compiler.config.cache_key_tag == "user+mmt-0123456789abcdef-isolated-unranked=inductor"
        installed = config.inductor_choices_class
        assert installed.__name__ == "ModelChoices_mmt_0123456789abcdef_isolated_unranked_inductor"
        assert pickle.loads(pickle.dumps(installed)) is installed
    with model_hook.use_model():
        assert config.inductor_choices_class.__name__ == "ModelChoices_mmt_0123456789abcdef"


def test_a_gemm_left_to_aten_keeps_the_layout_default_torch_compile_gives_it(fake_torch: Any,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    torch, config, V = fake_torch
    extern = sys.modules["torch._inductor.select_algorithm"].ExternKernelChoice()
    cuda = types.SimpleNamespace(device_type="cuda")

    def ktc(template: Any, inputs: Any = cuda) -> Any:
        return types.SimpleNamespace(template=template, inputs=inputs)

    opened(monkeypatch, FakeModel({}))
    with model_hook.use_model():
        fix = V.choices._need_to_fix_layout
        # ATen alone: mm and addmm stay flexible, other ops fixed, as without max_autotune_gemm ...
        assert not fix([ktc(extern)], "mm") and not fix([ktc(extern), ktc(extern)], "addmm")
        assert fix([ktc(extern)], "bmm")
        config.max_autotune_allow_flexible_layouts = True
        assert not fix([ktc(extern)], "bmm")
        # ... a Triton candidate, or another device, is Inductor's to decide.
        assert fix([ktc(extern), ktc(object())], "mm")
        assert fix([ktc(extern, types.SimpleNamespace(device_type="mps"))], "mm")
        assert fix([], "mm")


def test_a_thread_that_compiled_before_use_model_gets_the_model_too(fake_torch: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The autograd engine's thread lowers backward graphs; it may hold Inductor's handler
    from a compile before use_model()."""
    torch, config, V = fake_torch
    opened(monkeypatch, FakeModel({}))
    steps = [threading.Event() for _ in range(4)]
    answers: list[Any] = []

    def autograd_thread() -> None:
        answers.append(type(V.choices).__name__)  # its first lowering: Inductor's own handler
        steps[0].set()
        steps[1].wait(10)
        answers.append(V.choices.lookup_template_configs(linear(64, 64, 64), "mm", ["aten::mm", "triton::mm"]))
        steps[2].set()
        steps[3].wait(10)
        answers.append(type(V.choices).__name__)

    thread = threading.Thread(target=autograd_thread, daemon=True)
    thread.start()
    steps[0].wait(10)
    hook = model_hook.use_model()
    steps[1].set()
    steps[2].wait(10)
    hook.uninstall()
    steps[3].set()
    thread.join()
    assert answers == ["InductorChoices", {"aten::mm": [{}]}, "InductorChoices"]
    assert "mm mm_nt 64x64x64 bfloat16: aten: aten::mm" in hook.explain()


def test_a_handler_kept_after_uninstall_answers_as_inductor(fake_torch: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    torch, config, V = fake_torch
    opened(monkeypatch, FakeModel({}))
    hook = model_hook.use_model()
    kept = V.choices
    hook.uninstall()
    assert kept.lookup_template_configs(linear(64, 64, 64), "mm", ["aten::mm"], None) == {"inductor's": "table lookup"}


def test_convolutions_stay_on_aten_while_installed(fake_torch: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    torch, config, V = fake_torch
    opened(monkeypatch, FakeModel({}))
    with model_hook.use_model():
        assert config.max_autotune_conv_backends == "ATEN"
    assert config.max_autotune_conv_backends == "ATEN,TRITON"
    with model_hook.use_model(unranked="inductor"):
        assert config.max_autotune_conv_backends == "ATEN,TRITON"


def test_patchify_chains_its_graph_pass_to_the_users_and_takes_it_away(fake_torch: Any,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    torch, config, V = fake_torch
    opened(monkeypatch, FakeModel({}))
    seen: list[str] = []

    class CustomGraphPass:  # Inductor's base class of a pass with a cache key
        pass

    class UsersPass(CustomGraphPass):
        def __call__(self, graph: Any) -> None:
            seen.append(f"user's on {graph}")

        def uuid(self) -> str:
            return "users-1"

    monkeypatch.setitem(sys.modules, "torch._inductor.custom_graph_pass",
                        types.SimpleNamespace(CustomGraphPass=CustomGraphPass))
    config.post_grad_custom_pre_pass = users = UsersPass()
    with model_hook.use_model(patchify=False) as hook:
        assert config.post_grad_custom_pre_pass is users  # not asked for
        assert hook.identity().endswith("-nopatchify")
    with model_hook.use_model() as hook:
        installed = config.post_grad_custom_pre_pass
        assert isinstance(installed, CustomGraphPass) and installed is not users
        assert installed.uuid() == f"matmul_toolkit.patch_convs-{patch_convs.VERSION}-users-1"
        assert "patchify" not in hook.identity()  # the default
        # The pattern pass itself needs the real Inductor: failing here, it leaves the graph
        # to Inductor with one warning, and the user's pass still runs.
        with pytest.warns(RuntimeWarning, match="patch convolutions left to Inductor"):
            installed("g1")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            installed("g2")
        assert seen == ["user's on g1", "user's on g2"]
    assert config.post_grad_custom_pre_pass is users
    # A pass of the user's without a uuid: no caching, as Inductor would do for it alone.
    assert patch_convs.graph_pass(lambda graph: None).uuid() is None
    assert patch_convs.graph_pass(None).uuid() == f"matmul_toolkit.patch_convs-{patch_convs.VERSION}"


def test_a_patch_convolution_is_stride_equal_to_kernel_without_padding_dilation_or_groups() -> None:
    def patch(x: list[Any], w: list[Any], stride: list[int], padding: tuple[int, int] = (0, 0),
              dilation: tuple[int, int] = (1, 1), transposed: bool = False, groups: int = 1) -> Any:
        return patch_convs.patch_of(x, w, stride, padding, dilation, transposed, (0, 0), groups)

    assert patch([16, 3, 224, 224], [768, 3, 16, 16], [16, 16]) == (16, 16)  # ViT-B/16's patch embedding
    assert patch(["s0", 96, 56, 56], [192, 96, 2, 2], [2, 2]) == (2, 2)  # a symbolic batch is fine
    assert patch([8, 3, 30, 30], [64, 3, 4, 4], [4, 4]) == (4, 4)  # the last 2 rows and columns unread
    assert patch([8, 3, 224, 224], [64, 3, 7, 7], [2, 2]) is None  # overlapping windows
    assert patch([8, 3, 224, 224], [64, 3, 4, 4], [4, 4], padding=(1, 1)) is None
    assert patch([8, 3, 224, 224], [64, 3, 4, 4], [4, 4], dilation=(2, 2)) is None
    assert patch([8, 3, 224, 224], [64, 3, 4, 4], [4, 4], transposed=True) is None
    assert patch([8, 96, 56, 56], [96, 1, 2, 2], [2, 2], groups=96) is None  # depthwise
    assert patch([8, 96, 56, 56], [96, 96, 1, 1], [1, 1]) is None  # 1x1: a GEMM only after a layout copy
    assert patch([8, 3, "s1", 224], [64, 3, 4, 4], [4, 4]) is None  # symbolic sizes
    assert patch([8, 3, 2, 2], [64, 3, 4, 4], [4, 4]) is None  # no whole patch
    assert patch([8, 3, 64], [64, 3, 4], [4]) is None  # 1-D


def test_a_patch_is_ordered_along_the_inputs_contiguous_dimension() -> None:
    # ConvNeXt's downsampling input, a LayerNorm's (N, H, W, C) output viewed as NCHW
    assert patch_convs.channels_innermost([32, 96, 56, 56], [301056, 1, 5376, 96])
    assert patch_convs.channels_innermost(["s0", 96, 56, 56], ["s1", 1, 5376, 96])  # symbolic batch
    assert not patch_convs.channels_innermost([16, 3, 224, 224], [150528, 50176, 224, 1])  # an NCHW image
    assert not patch_convs.channels_innermost([16, 1, 224, 224], [50176, 1, 224, 1])  # one channel: either
    assert not patch_convs.channels_innermost([16, 96, 224], [21504, 1, 96])  # not 4-D


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("channels_last", [False, True])
def test_the_patch_gemm_computes_the_convolution_in_either_patch_order(bias: bool, channels_last: bool,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # conv_as_gemm on a stand-in torch: its slicing, permutes and reshapes against the
    # convolution's definition. 2 images of 3 channels, 5x7, 2x2 patches into 4 channels
    # (the last row and column read by no patch).
    n, c, h, w, c_out, k = 2, 3, 5, 7, 4, 2
    x = DenseTensor([(i * 7) % 11 - 5 for i in range(n * c * h * w)], (n, c, h, w))
    weight = DenseTensor([(i * 5) % 13 - 6 for i in range(c_out * c * k * k)], (c_out, c, k, k))
    b = DenseTensor([10, -20, 30, -40], (c_out,)) if bias else None
    torch = types.ModuleType("torch")
    torch.mm = dense_mm  # type: ignore[attr-defined]
    torch.addmm = lambda bias, a, m: dense_mm(a, m, bias)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)

    out = patch_convs.conv_as_gemm(x, weight, b, k, k, channels_last)
    assert out.shape == (n, c_out, h // k, w // k)
    for image, o, row, col in itertools.product(range(n), range(c_out), range(h // k), range(w // k)):
        expected = sum(x.at((image, ci, row * k + p, col * k + q)) * weight.at((o, ci, p, q))
                       for ci in range(c) for p in range(k) for q in range(k)) + (b.at((o,)) if b is not None else 0)
        assert out.at((image, o, row, col)) == expected, (image, o, row, col)


def test_another_gpu_gets_a_warning_and_inductors_defaults_unless_forced(fake_torch: Any,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    torch, config, V = fake_torch
    opened(monkeypatch, FakeModel({}, hardware="NVIDIA H100 80GB HBM3"))
    with pytest.warns(RuntimeWarning, match="trained on NVIDIA H100 80GB HBM3, this GPU is NVIDIA H200"):
        hook = model_hook.use_model()
    assert not hook.installed and config.inductor_choices_class is None
    hook = model_hook.use_model(force=True)
    assert hook.installed
    hook.uninstall()


def test_a_model_or_policy_that_cannot_work_is_refused_at_use_model(fake_torch: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(cls: Any, path: Any, library: Any = None) -> Any:
        raise RankLibraryError("/tmp/x.pt: not a matmul_toolkit checkpoint: not a zip archive", 2)

    monkeypatch.setattr(model_hook.RankModel, "open", classmethod(refuse))
    with pytest.raises(ModelHookError, match=r"^/tmp/x.pt: not a matmul_toolkit checkpoint"):
        model_hook.use_model("/tmp/x.pt")
    opened(monkeypatch, FakeModel({"mm": RankLibraryError("--policy: unknown policy 'fast'", 2)}))
    with pytest.raises(ModelHookError, match="unknown policy 'fast'"):
        model_hook.use_model(policy="fast")
    assert fake_torch[1].inductor_choices_class is None


class Choice:
    def __init__(self, name: str, backend: str) -> None:
        self.name, self.backend = name, backend

    def info_dict(self) -> dict[str, str]:
        return {"backend": self.backend}


def test_an_autotuning_the_hook_does_not_decide_keeps_its_aten_choices(fake_torch: Any,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Inductor builds grouped mm's choices itself and hands them to AlgorithmSelectorCache."""
    select = sys.modules["torch._inductor.select_algorithm"].AlgorithmSelectorCache()
    grouped = [Choice("_grouped_mm", "extern"), Choice("triton_grouped_mm_0", "Triton"),
               Choice("triton_grouped_mm_1", "Triton")]
    only_triton = [Choice("triton_flex_attention_0", "Triton")]
    mm = [Choice("mm", "extern"), Choice("triton_mm_0", "Triton")]
    opened(monkeypatch, FakeModel({}))
    with model_hook.use_model() as hook:
        assert select("grouped_mm", grouped, [], None) == ["_grouped_mm"]
        assert select("flex_attention", only_triton, [], None) == ["triton_flex_attention_0"]  # no ATen: all
        assert select("mm", mm, [], None) == ["mm", "triton_mm_0"]  # the hook decided it already
        assert "grouped_mm 3 choices: unranked: _grouped_mm alone" in hook.explain()
    assert select("grouped_mm", grouped, [], None) == ["_grouped_mm", "triton_grouped_mm_0", "triton_grouped_mm_1"]
    with model_hook.use_model(unranked="inductor"):
        assert len(select("grouped_mm", grouped, [], None)) == 3


def test_grouped_mm_builds_no_templates_while_the_hook_runs_it_on_aten(fake_torch: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Grouped mm's lowering asks its module's template gates (kernel/mm_grouped.py) before it
    renders dozens of Triton choices that keep_aten would drop."""
    mm_grouped = sys.modules["torch._inductor.kernel.mm_grouped"]
    original = mm_grouped.use_triton_template
    opened(monkeypatch, FakeModel({}))
    with model_hook.use_model() as hook:
        assert mm_grouped.use_triton_template("cuda") is False
        assert mm_grouped.use_triton_template("cpu") is False
        assert not hasattr(mm_grouped, "use_gluon_template")  # a gate this torch lacks stays absent
        assert hook.explain().splitlines()[1:] == [
            "grouped_mm use_triton_template closed: unranked: ATen alone "
            "(an autotuning the model does not decide: no templates built)"]  # noted where it was open
        with model_hook.use_model(unranked="inductor"):  # the newest hook decides
            assert mm_grouped.use_triton_template("cuda") is True
        assert mm_grouped.use_triton_template("cuda") is False
        config = sys.modules["torch._inductor.config"]
        config.max_autotune_gemm_backends = "TRITON"  # no ATen choice: the templates are all there is
        assert mm_grouped.use_triton_template("cuda") is True
        config.max_autotune_gemm_backends = "ATEN,TRITON"
    assert mm_grouped.use_triton_template is original
    with model_hook.use_model(unranked="inductor"):
        assert mm_grouped.use_triton_template is original


# ------------------------------------------------------------- shape padding (pad="model")
class ShapeModel(FakeModel):
    """Answers ATen alone, predicted from the problem's N: `times[N]` ms."""

    def __init__(self, times: dict[int, Any]) -> None:
        super().__init__({})
        self.times = times

    def decide(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        ms = self.times.get(request["shape"]["N"], 0.01)
        if isinstance(ms, Exception):
            raise ms
        return {"decision": "aten", "entries": [{"template_id": "aten::mm"}], "predicted_ms": [ms]}


def operand(*size: int, transposed: bool = False, dtype: str = "torch.bfloat16") -> Any:
    """A fake tensor of pad_mm's: sizes, strides (row-major, or a transposed view), dtype."""
    stride = (1, size[0]) if transposed else tuple(int(math.prod(size[i + 1:])) for i in range(len(size)))
    return types.SimpleNamespace(shape=size, dtype=dtype, stride=lambda: stride)


MM = types.SimpleNamespace(_qualified_op_name="aten::mm")


@pytest.fixture
def pad_mm(fake_torch: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Inductor's pad_mm as far as the hook meets it: _should_pad times padded against as
    given unless its cache lookup (a module global) answers, and never for a GEMM it finds
    memory bound."""
    module = types.ModuleType("torch._inductor.fx_passes.pad_mm")
    module.timed = []  # type: ignore[attr-defined]

    def should_pad(match: Any, mat1: Any, mat2: Any, op: Any, input: Any = None) -> bool:
        if match == "memory bound":
            return False
        cached = module.get_cached_should_pad(module.should_pad_bench_key(match, mat1, mat2, op, input))
        if cached is not None:
            return bool(cached)
        module.timed.append(mat2.shape)  # type: ignore[attr-defined]
        return True

    memo: dict[str, bool] = {}

    def memoized(match: Any, mat1: Any, mat2: Any, op: Any, input: Any = None) -> bool:
        key = str((mat1.shape, mat2.shape))
        if key not in memo:  # Inductor's persistent memoizer: kept for later compiles too
            memo[key] = should_pad(match, mat1, mat2, op, input)
        return memo[key]

    memoized.__wrapped__ = should_pad  # type: ignore[attr-defined]
    module.memo = memo  # type: ignore[attr-defined]
    module._should_pad = memoized  # type: ignore[attr-defined]
    module.get_cached_should_pad = lambda key: None  # type: ignore[attr-defined]
    module.should_pad_bench_key = lambda match, a, b, op, input=None: str((a.shape, a.stride(), b.shape, b.stride()))  # type: ignore[attr-defined]
    module.get_alignment_size = lambda t: 8 if t.dtype in ("torch.bfloat16", "torch.float16") else 4  # type: ignore[attr-defined]
    module.get_padded_length = lambda x, align: 0 if x % align == 0 or x == 1 else (x // align + 1) * align - x  # type: ignore[attr-defined]
    passes = types.ModuleType("torch._inductor.fx_passes")
    passes.pad_mm = module  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch._inductor.fx_passes", passes)
    monkeypatch.setitem(sys.modules, "torch._inductor.fx_passes.pad_mm", module)
    return module


def test_the_model_decides_shape_padding_where_asked(pad_mm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    original = pad_mm._should_pad, pad_mm.get_cached_should_pad
    model = ShapeModel({109: 0.0628, 112: 0.0194, 203: 0.020, 208: 0.019})
    opened(monkeypatch, model)
    with model_hook.use_model(pad="model") as hook:
        assert "pad=model" in hook.identity()
        # mm 4096x109x4096: predicted 3.2x faster padded, so padded, and nothing timed
        assert pad_mm._should_pad("match", operand(4096, 4096), operand(4096, 109), MM) is True
        # a close call (0.020 against 0.019 ms) stays as given
        assert pad_mm._should_pad("match", operand(512, 4096), operand(4096, 203), MM) is False
        # pad_mm's own rules come first: a memory-bound GEMM is not padded, and not listed
        assert pad_mm._should_pad("memory bound", operand(4096, 4096), operand(4096, 109), MM) is False
        assert pad_mm.timed == [] and pad_mm.memo == {}  # the model's verdicts stay out of Inductor's memo
        given, padded = model.requests[1:3]  # after use_model()'s probe
        assert (given["op"], given["shape"]["N"], padded["op"], padded["shape"]["N"]) == ("mm", 109, "mm", 112)
        lines = hook.explain().splitlines()
        assert lines == ["use_model: 1 as given, 1 pad",
                         "mm mm 4096x109x4096 bfloat16: pad (predicted 0.0628 ms as given, 0.0194 ms padded)",
                         "mm mm 512x203x4096 bfloat16: as given (predicted 0.02 ms as given, 0.019 ms padded)"]
        # padding N of a transposed B (a weight's view) makes a row-major copy
        # (the row-major padded problem was decided above)
        assert pad_mm._should_pad("match", operand(4096, 4096), operand(4096, 109, transposed=True), MM) is True
        assert model.requests[-1]["op"] == "mm_nt" and len(model.requests) == 6
        assert hook.explain().splitlines()[-1].startswith("mm mm_nt 4096x109x4096 bfloat16: pad")
    assert (pad_mm._should_pad, pad_mm.get_cached_should_pad) == original


def test_shape_padding_stays_inductors_by_default_and_wherever_the_model_fails(pad_mm: Any,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    original = pad_mm._should_pad
    opened(monkeypatch, ShapeModel({109: RankLibraryError("request > shape: broken")}))
    with model_hook.use_model():
        assert pad_mm._should_pad is original  # pad="inductor": pad_mm times as it always has
    with model_hook.use_model(pad="model") as hook:
        with pytest.warns(RuntimeWarning, match="could not decide a GEMM"):
            assert pad_mm._should_pad("match", operand(4096, 4096), operand(4096, 109), MM) is True
        assert pad_mm.timed == [(4096, 109)]  # pad_mm's own timing decided
        # aligned sizes, an op pad_mm does not pad, a dtype without rows: nothing to decide
        assert pad_mm._should_pad("match", operand(64, 64), operand(64, 64), MM) is True
        assert hook.pad_verdict(pad_mm, operand(64, 60), operand(60, 64), types.SimpleNamespace()) is None
        assert hook.pad_verdict(pad_mm, operand(64, 60, dtype="torch.int8"), operand(60, 64, dtype="torch.int8"),
                                MM) is None
    with pytest.raises(ModelHookError, match="pad: 'always' is not one of inductor, model"):
        model_hook.use_model(pad="always")
    # A pad_mm without the functions the hook knows (another torch): said once, Inductor's.
    del pad_mm.get_cached_should_pad
    with pytest.warns(RuntimeWarning, match="pad_mm pass is not the one the hook knows"):
        model_hook.use_model(pad="model").uninstall()
