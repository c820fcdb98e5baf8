"""collector.py and lut.py against the real torch (skips without torch; the compile tests
skip without a CUDA device). On the GPU machine:
    python3 -m pytest -q tests/python/test_inductor_torch.py"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

torch = pytest.importorskip("torch")

from matmul_toolkit_inductor.collector import MatmulDatasetCollector  # noqa: E402
from matmul_toolkit_inductor.dataset import Dataset, make_shape  # noqa: E402
from matmul_toolkit_inductor.lut import use_table  # noqa: E402

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")

# mm of [64, 128] x [128, 256] float16, both contiguous: the key export-lut writes for it.
MM_KEY = "((torch.float16, [64, 128], [128, 1]), (torch.float16, [128, 256], [256, 1]))+mm"
TABLE_CONFIGS = [(32, 64, 32, 2, 4), (64, 32, 64, 3, 4)]  # BLOCK_M, BLOCK_N, BLOCK_K, stages, warps


def table_entry(block_m: int, block_n: int, block_k: int, num_stages: int, num_warps: int) -> dict:
    return {"template_id": "triton::mm", "BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k,
            "GROUP_M": 8, "num_stages": num_stages, "num_warps": num_warps, "EVEN_K": True,
            "USE_FAST_ACCUM": False, "ACC_TYPE": "tl.float32"}


@pytest.fixture
def restore_inductor() -> Iterator[None]:
    from torch._inductor import config
    from torch._inductor.choices import InductorChoices
    from torch._inductor.virtualized import V

    yield
    config.lookup_table.table = None
    V.set_choices_handler(InductorChoices())
    torch._dynamo.reset()


def test_collector_registers_and_removes_only_its_saver() -> None:
    from torch._inductor import config, select_algorithm

    cache = select_algorithm.get_algorithm_selector_cache()

    def theirs(*args: object) -> None:
        pass

    select_algorithm.add_feedback_saver(theirs)
    before = list(cache.feedback_saver_fns)
    caches_were = config.force_disable_caches
    try:
        with MatmulDatasetCollector(hardware_name="x"):
            assert len(cache.feedback_saver_fns) == len(before) + 1
            assert config.force_disable_caches is True
        assert cache.feedback_saver_fns == before
        assert config.force_disable_caches == caches_were
    finally:
        cache.feedback_saver_fns = [fn for fn in cache.feedback_saver_fns if fn is not theirs]


def test_use_table_installs_the_table_and_the_lookup_handler(tmp_path: Path, restore_inductor: None) -> None:
    from torch._inductor import config
    from torch._inductor.lookup_table import LookupTableChoices
    from torch._inductor.virtualized import V

    path = tmp_path / "lut.json"
    path.write_text(json.dumps({MM_KEY: [table_entry(*TABLE_CONFIGS[0])]}))
    table = use_table(path)
    assert config.lookup_table.table == table
    assert isinstance(V.choices, LookupTableChoices)


def compile_mm_with_max_autotune() -> None:
    a = torch.randn(64, 128, device="cuda", dtype=torch.float16)
    b = torch.randn(128, 256, device="cuda", dtype=torch.float16)
    from torch._inductor import config

    with config.patch({"max_autotune": True, "max_autotune_gemm_backends": "TRITON,ATEN"}):
        out = torch.compile(lambda x, y: x @ y, dynamic=False)(a, b)
    torch.testing.assert_close(out, a @ b, rtol=2e-2, atol=2e-2)


@needs_cuda
def test_collects_a_max_autotune_mm(tmp_path: Path, restore_inductor: None) -> None:
    torch._dynamo.reset()
    with MatmulDatasetCollector() as collector:
        compile_mm_with_max_autotune()
    dataset = collector.get_dataset()
    shape = make_shape(1, 64, 256, 128, "float16")
    timed = dataset.hardware[torch.cuda.get_device_name()]["mm"][shape]
    names = {t.config.name for t in timed}
    assert "mm_config" in names and "aten_mm" in names, names
    assert all(t.time_ms > 0 for t in timed)
    assert all(t.config.even_k == (128 % t.config.block_k == 0) for t in timed if t.config.name == "mm_config")
    collector.save_to_file(tmp_path / "d.json")
    assert Dataset.load(tmp_path / "d.json") == dataset


@needs_cuda
def test_a_table_from_use_table_is_what_inductor_autotunes(tmp_path: Path, restore_inductor: None) -> None:
    path = tmp_path / "lut.json"
    path.write_text(json.dumps({MM_KEY: [table_entry(*c) for c in TABLE_CONFIGS]}))
    use_table(path)
    torch._dynamo.reset()
    with MatmulDatasetCollector() as collector:
        compile_mm_with_max_autotune()
    timed = collector.get_dataset().hardware[torch.cuda.get_device_name()]["mm"][make_shape(1, 64, 256, 128, "float16")]
    triton = sorted((t.config.block_m, t.config.block_n, t.config.block_k, t.config.num_stages, t.config.num_warps)
                    for t in timed if t.config.name == "mm_config")
    assert triton == sorted(TABLE_CONFIGS)


@needs_cuda
@pytest.mark.parametrize("precompile_hits", [False, True])
def test_a_paired_hit_is_not_precompiled_unless_asked(tmp_path: Path, restore_inductor: None,
                                                      precompile_hits: bool) -> None:
    from torch._inductor import config

    from matmul_toolkit_inductor import lut

    path = tmp_path / "lut.json"
    path.write_text(json.dumps({MM_KEY: [table_entry(*TABLE_CONFIGS[0]), {"template_id": "aten::mm"}]}))
    use_table(path, precompile_hits=precompile_hits)
    skipped = lut.TABLE_HITS.precompiles_skipped
    torch._dynamo.reset()
    with config.patch({"fx_graph_cache": False, "autotune_local_cache": False}):  # lower it here, now
        compile_mm_with_max_autotune()
    assert lut.TABLE_HITS.precompiles_skipped == skipped + (0 if precompile_hits else 1)
