"""use_model() inside the real torch.compile (skips without torch, a CUDA device, or
libmmt_rank.so and the shipped model). On the GPU machine, after building mmt_rank:
    MMT_RANK_LIBRARY=build-gpu/src/cli/libmmt_rank.so python3 -m pytest -q tests/python/test_model_hook_torch.py"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any, Iterator

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: these run on the GPU machine")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device: use_model's compile tests run on the GPU machine", allow_module_level=True)

from matmul_toolkit_inductor.model_hook import ModelHook, ModelHookError, compile_options, use_model  # noqa: E402


@pytest.fixture
def fresh_compile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Empty Inductor caches, Dynamo reset before and after; yields Dynamo's counters."""
    from torch._dynamo.utils import counters

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    torch._dynamo.reset()
    counters.clear()
    yield counters
    torch._dynamo.reset()


def installed() -> ModelHook:
    try:
        return use_model(force=True)  # force: the shipped model's GPU may not be this one
    except ModelHookError as e:
        pytest.skip(f"use_model cannot open the shipped model here: {e}")


def test_a_compiled_mm_is_decided_by_the_model_and_its_graph_is_cached(fresh_compile: Any) -> None:
    counters = fresh_compile
    # Sizes that are multiples of 8: Inductor's pad_mm leaves them as they are.
    a = torch.randn(1000, 3000, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(3000, 712, device="cuda", dtype=torch.bfloat16)
    with installed() as hook:
        f = torch.compile(lambda x, y: x @ y, options={"max_autotune_gemm": True})
        torch.testing.assert_close(f(a, b), a @ b, rtol=2e-2, atol=1.0)
        lines = hook.explain().splitlines()
        assert any(line.startswith("mm mm 1000x712x3000 bfloat16: ") for line in lines), lines
        assert not any(": Inductor's own choices" in line for line in lines), lines
        # Inductor pickles the choices class into the FX graph's cache key: no bypass.
        assert counters["inductor"]["fxgraph_cache_bypass"] == 0, dict(counters["inductor"])
        assert counters["inductor"]["fxgraph_cache_miss"] >= 1, dict(counters["inductor"])
        torch._dynamo.reset()
        g = torch.compile(lambda x, y: x @ y, options={"max_autotune_gemm": True})
        torch.testing.assert_close(g(a, b), a @ b, rtol=2e-2, atol=1.0)
        hits = counters["inductor"]["fxgraph_cache_hit"] + counters["aot_autograd"]["autograd_cache_hit"]
        assert hits >= 1, (dict(counters["inductor"]), dict(counters["aot_autograd"]))


def test_grouped_mm_keeps_its_aten_kernel_and_builds_no_templates(fresh_compile: Any) -> None:
    groups, k, n = 4, 256, 512
    offs = torch.arange(64, 64 * groups + 1, 64, device="cuda", dtype=torch.int32)
    a = torch.randn(64 * groups, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(groups, n, k, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
    try:
        expected = torch._grouped_mm(a, b, offs=offs)
    except (AttributeError, RuntimeError) as e:
        pytest.skip(f"this torch or GPU has no eager grouped mm: {e}")
    with installed() as hook:
        f = torch.compile(lambda x, y, o: torch._grouped_mm(x, y, offs=o), options={"max_autotune_gemm": True})
        torch.testing.assert_close(f(a, b, offs), expected, rtol=2e-2, atol=1.0)
        assert "grouped_mm use_triton_template closed: unranked: ATen alone" in hook.explain(), hook.explain()


def test_one_dynamic_compile_serves_every_length(fresh_compile: Any) -> None:
    """Symbolic sizes are decided at Inductor's hints; later lengths reuse the graph."""
    counters = fresh_compile
    w = torch.randn(1024, 2048, device="cuda", dtype=torch.bfloat16)
    with installed() as hook:
        f = torch.compile(lambda x: torch.relu(x @ w), dynamic=True, options={"max_autotune_gemm": True})
        for m in (128, 384, 1000):
            x = torch.randn(m, 1024, device="cuda", dtype=torch.bfloat16)
            torch.testing.assert_close(f(x), torch.relu(x @ w), rtol=2e-2, atol=1.0)
        assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
        assert any(line.startswith("mm ") for line in hook.explain().splitlines()[1:]), hook.explain()


def test_pad_model_decides_shape_padding_without_timing_it(fresh_compile: Any) -> None:
    """mm 4096x4093x4096: N misaligned and the GEMM compute bound, so pad_mm asks; with
    pad="model" the model's verdict stands where pad_mm's timing would have been."""
    counters = fresh_compile
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4093, device="cuda", dtype=torch.bfloat16)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            hook = use_model(force=True, pad="model")
    except ModelHookError as e:
        pytest.skip(f"use_model cannot open the shipped model here: {e}")
    assert not [w for w in caught if "pad_mm" in str(w.message)], [str(w.message) for w in caught]
    with hook:
        f = torch.compile(lambda x, y: x @ y, options={"max_autotune_gemm": True})
        torch.testing.assert_close(f(a, b), a @ b, rtol=2e-2, atol=2.0)
        lines = hook.explain().splitlines()
        assert any(line.startswith(("mm mm 4096x4093x4096 bfloat16: pad (",
                                    "mm mm 4096x4093x4096 bfloat16: as given (")) for line in lines), lines
        assert counters["inductor"]["pad_mm_bench"] == 0, dict(counters["inductor"])


def test_the_recommended_options_are_inductors_and_keep_pointwise_kernels_untuned(fresh_compile: Any) -> None:
    # An option Inductor does not know fails torch.compile: these are real config names.
    x = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    with installed():
        f = torch.compile(lambda a, b: torch.nn.functional.gelu(a @ b), options=compile_options(cudagraphs=False))
        torch.testing.assert_close(f(x, w), torch.nn.functional.gelu(x @ w), rtol=2e-2, atol=1.0)
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    tuned = list(Path(cache_dir()).rglob("*.best_config"))
    assert tuned == [], tuned  # no pointwise kernel was timed at its first run


@pytest.mark.parametrize("bias,channels_last", [(True, False), (False, False), (True, True)])
def test_patchify_computes_a_patch_convolution_as_a_gemm_the_model_decides(fresh_compile: Any, bias: bool,
                                                                          channels_last: bool,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """ViT's patch embedding at a small size (and on a channels-last input, as ConvNeXt's
    downsampling reads its LayerNorm's output): the compiled program runs no convolution, the
    model decided the GEMM in its place, its patches follow the input's layout, and the output
    is the convolution's."""
    from torch._inductor.utils import run_and_get_code

    from matmul_toolkit_inductor import patch_convs

    counters = fresh_compile
    orders: list[bool] = []
    rewrite = patch_convs.conv_as_gemm

    def recorded(*args: Any) -> Any:  # the pattern pass looks conv_as_gemm up when it rewrites
        orders.append(args[5])
        return rewrite(*args)

    monkeypatch.setattr(patch_convs, "conv_as_gemm", recorded)
    conv = torch.nn.Conv2d(3, 256, kernel_size=16, stride=16, bias=bias).to("cuda", torch.bfloat16)
    # 232 is not a multiple of 16: the last 8 rows and columns are read by no patch.
    x = torch.randn(4, 3, 232, 232, device="cuda", dtype=torch.bfloat16)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    try:
        hook = use_model(force=True)  # patchify: the default
    except ModelHookError as e:
        pytest.skip(f"use_model cannot open the shipped model here: {e}")
    with hook, torch.no_grad():
        f = torch.compile(lambda t: conv(t).flatten(2).transpose(1, 2), options=compile_options(cudagraphs=False))
        out, code = run_and_get_code(f, x)
        torch.testing.assert_close(out, conv(x).flatten(2).transpose(1, 2), rtol=3e-2, atol=3e-2)
    program = "\n".join(code)
    # (its comments still say aten.convolution: Inductor names what it generates by the ops replaced)
    assert "extern_kernels.convolution(" not in program, program[:3000]
    assert orders and set(orders) == {channels_last}, orders
    assert re.search(r"extern_kernels\.\w*mm\(|triton_tem_", program), program[:3000]
    lines = hook.explain().splitlines()
    op = "addmm" if bias else "mm"
    assert any(line.startswith(f"{op} ") and "784x256x768" in line for line in lines), lines
    assert counters["inductor"]["fxgraph_cache_bypass"] == 0, dict(counters["inductor"])
