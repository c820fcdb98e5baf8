"""bench/lut_e2e.py's table variants: the --top-k grammar and the export-lut calls it makes
(run against the built binary and the shipped model; the GPU part is not reached)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from test_model_hook import FakeModel, fake_torch, linear, opened  # noqa: F401 (fake_torch: a fixture)

SOURCE_DIR = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("MMT_CLI", SOURCE_DIR / "build" / "src" / "cli" / "matmul_toolkit"))
MODEL = SOURCE_DIR / "data" / "models" / "inductor_h200.pt"
SHAPESET = SOURCE_DIR / "data" / "shapesets" / "transformer_shapes.json"

_spec = importlib.util.spec_from_file_location("lut_e2e", SOURCE_DIR / "bench" / "lut_e2e.py")
assert _spec is not None and _spec.loader is not None
lut_e2e = importlib.util.module_from_spec(_spec)
sys.modules["lut_e2e"] = lut_e2e  # its dataclasses look their module up there
_spec.loader.exec_module(lut_e2e)


@pytest.mark.parametrize("text, expected", [
    ("1", (1, False, [])),
    ("5+aten", (5, True, [])),
    ("1+aten@25", (1, True, ["--aten-within", "25"])),
    ("1+aten@15us", (1, True, ["--aten-from", "15"])),
    ("3+fast5", (3, False, ["--compile-margin", "5"])),
    ("1+aten@15us+fast5+alone100us",
     (1, True, ["--aten-from", "15", "--compile-margin", "5", "--aten-alone-from", "100"])),
    ("1+aten+alone2.5us", (1, True, ["--aten-alone-from", "2.5"])),
    ("1+aten@15us+fast5+alone100us+gemv",
     (1, True, ["--aten-from", "15", "--compile-margin", "5", "--aten-alone-from", "100", "--aten-alone-gemv"])),
    ("1+aten@15us+fast5+alone60us+gemv+runner5",
     (1, True, ["--aten-from", "15", "--compile-margin", "5", "--aten-alone-from", "60", "--aten-alone-gemv",
                "--runner-up-within", "5"])),
    ("1+aten+runner2.5", (1, True, ["--runner-up-within", "2.5"])),
    ("1+aten@10us+fast5+alone100us+gemv+runner5+heavy5",
     (1, True, ["--aten-from", "10", "--compile-margin", "5", "--aten-alone-from", "100", "--aten-alone-gemv",
                "--runner-up-within", "5", "--heavy-pick-alone", "5"])),
    ("1+aten@15us+fast5+paired15+alone100us",
     (1, True, ["--aten-from", "15", "--compile-margin", "5", "--paired-compile-margin", "15", "--aten-alone-from", "100"])),
])
def test_table_size_reads_each_rule(text: str, expected: tuple[int, bool, list[str]]) -> None:
    assert lut_e2e.table_size(text) == expected


@pytest.mark.parametrize("text", ["0", "2+aten@10", "1+alone100us", "5+aten+alone100us", "1+fast", "1+aten@15us+alone1",
                                  "1+alone100us+fast5", "1+paired15", "5+aten+paired15", "1+aten+alone100us+paired15", "1+gemv", "5+aten+gemv", "1+aten+gemv+alone100us",
                                  "1+runner5", "5+aten+runner5", "1+aten+runner5+gemv", "1+aten+runner",
                                  "1+aten+heavy5", "1+heavy5", "1+aten@10us+heavy5+runner5"])
def test_table_size_refuses_malformed_items(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        lut_e2e.table_size(text)


def test_setting_suffixes_patch_inductor_for_that_variant_only() -> None:
    assert lut_e2e.split_settings("1+aten@15us+fast5+noepi") == ("1+aten@15us+fast5", {"benchmark_epilogue_fusion": False})
    assert lut_e2e.split_settings("1+aten@15us") == ("1+aten@15us", None)
    both = {"benchmark_epilogue_fusion": False, "precompile_hits": True}
    assert lut_e2e.split_settings("1+aten@15us+precompile+noepi") == ("1+aten@15us", both)
    assert lut_e2e.split_settings("1+aten@15us+noepi+precompile") == ("1+aten@15us", both)
    # Each suffix once: a repeat is left in the item, which table_size then refuses.
    assert lut_e2e.split_settings("1+noepi+noepi") == ("1+noepi", {"benchmark_epilogue_fusion": False})
    plain = lut_e2e.inductor_patch({"k": []})
    assert "benchmark_epilogue_fusion" not in plain
    assert lut_e2e.inductor_patch({"k": []}, {"benchmark_epilogue_fusion": False})["benchmark_epilogue_fusion"] is False
    # use_table's option is not an Inductor setting
    assert "precompile_hits" not in lut_e2e.inductor_patch({"k": []}, both)
    assert lut_e2e.parse_args(["--mmt", "mmt", "--model", "m.pt", "--log-normal", "3", "--top-k", "1+aten+noepi"]).top_k == ["1+aten+noepi"]
    with pytest.raises(SystemExit):
        lut_e2e.parse_args(["--mmt", "mmt", "--model", "m.pt", "--log-normal", "3", "--top-k", "1+noepi+aten"])


def test_a_table_variants_name_may_carry_settings(tmp_path: Path) -> None:
    table = tmp_path / "t.json"
    table.write_text(json.dumps({"k": [{"template_id": "aten::mm"}]}))
    args = lut_e2e.parse_args(["--shapeset", "s.json", "--table", f"a={table}", "--table", f"a+precompile={table}"])
    variants = lut_e2e.make_variants(args, "s.json")
    assert [(v.name, v.settings) for v in variants] == [("a", None), ("a+precompile", {"precompile_hits": True}),
                                                       (lut_e2e.AUTOTUNE, None)]


@pytest.mark.skipif(not CLI.is_file(), reason=f"no matmul_toolkit binary at {CLI} (build it, or set MMT_CLI)")
def test_export_lut_writes_each_variant(tmp_path: Path) -> None:
    """The recommended table pairs fewer problems than the one before it (ATen alone on the
    large GEMMs), and its kernel picks never carry more accumulator registers."""
    tables = {}
    for item in ("1+aten@15us", "1+aten@15us+fast5+alone100us"):
        out = tmp_path / f"{item}.json"
        lut_e2e.export_lut(str(CLI), str(MODEL), str(SHAPESET), item, str(out), "DEFAULT")
        tables[item] = json.loads(out.read_text())
    before, after = tables["1+aten@15us"], tables["1+aten@15us+fast5+alone100us"]
    assert before.keys() == after.keys()

    def registers(entries: list[dict]) -> int:
        kernel = next((e for e in entries if "BLOCK_M" in e), None)
        return 0 if kernel is None else kernel["BLOCK_M"] * kernel["BLOCK_N"] // (32 * kernel["num_warps"])

    def choices(table: dict) -> int:
        return sum(len(entries) for entries in table.values())

    assert choices(after) < choices(before)
    assert before != after
    for key in before:
        if any("BLOCK_M" in e for e in after[key]) and any("BLOCK_M" in e for e in before[key]):
            assert registers(after[key]) <= registers(before[key]), key


def test_kernel_of_reads_aten_calls_including_bias_addmm() -> None:
    assert lut_e2e.kernel_of(["buf0 = extern_kernels.bias_addmm(arg0_1, arg1_1, arg2_1)"]) == "aten"
    assert lut_e2e.kernel_of(["extern_kernels.mm(arg0_1, arg1_1, out=buf0)"]) == "aten"
    assert lut_e2e.kernel_of(["extern_kernels.mmx(arg0_1)"]) == "other"


def test_a_use_model_variant_compiles_with_the_hook_installed_as_a_user_installs_it(
        fake_torch: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hook decides only while installed: a handler made from it without use_model() left
    every GEMM to Inductor (every decision 'none', 2026-12-06)."""
    torch, config, V = fake_torch
    opened(monkeypatch, FakeModel({}, hardware="NVIDIA H100 80GB HBM3"))  # not this GPU: forced
    with lut_e2e.model_installed("", "graph") as (hook, forced):
        assert hook.installed and hook.policy == "graph" and isinstance(V.choices, config.inductor_choices_class)
        assert forced == "the model was trained on NVIDIA H100 80GB HBM3, this GPU is NVIDIA H200"
        assert lut_e2e.hook_status(hook) == "none"
        V.choices.lookup_template_configs(linear(64, 64, 64), "mm", ["aten::mm", "triton::mm"])
        assert lut_e2e.hook_status(hook) == "hit"
    assert not hook.installed and config.inductor_choices_class is None


def test_an_unknown_use_model_policy_is_refused_before_any_compile(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from test_rank_library import library

    monkeypatch.setenv("MMT_RANK_LIBRARY", str(library()))
    good = lut_e2e.parse_args(["--use-model", "graph", "graph-both-addmm", "graph+pad", "--log-normal", "3",
                               "--out", str(tmp_path)])
    lut_e2e.check_inputs(good)
    bad = lut_e2e.parse_args(["--use-model", "graph", "fast", "--log-normal", "3", "--out", str(tmp_path)])
    with pytest.raises(lut_e2e.UsageError, match="^--use-model: .*unknown policy 'fast'"):
        lut_e2e.check_inputs(bad)


def test_use_model_variants_come_after_the_tables(tmp_path: Path) -> None:
    args = lut_e2e.parse_args(["--use-model", "graph", "isolated", "--log-normal", "3", "--out", str(tmp_path)])
    variants = lut_e2e.make_variants(args, str(tmp_path / "s.json"))
    assert [(v.name, v.hook_policy) for v in variants] == [("use_model/graph", "graph"),
                                                          ("use_model/isolated", "isolated"),
                                                          ("max-autotune", None)]
    with pytest.raises(SystemExit):  # nothing to compare with max-autotune
        lut_e2e.parse_args(["--log-normal", "3"])


def test_resume_keeps_only_a_run_of_the_same_variants_on_the_same_machine(tmp_path: Path) -> None:
    args = lut_e2e.parse_args(["--use-model", "graph", "--log-normal", "3", "--out", str(tmp_path), "--resume"])
    variants = lut_e2e.make_variants(args, str(tmp_path / "s.json"))
    machine = {"device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0", "triton": "3.6.0"}
    record = {"problem": "mm 64x64x64 bf16", "results": {}}
    previous = machine | {"variants": [{"name": v.name} for v in variants], "problems": [record]}
    (tmp_path / lut_e2e.RESULTS_JSON).write_text(json.dumps(previous))
    assert lut_e2e.resumed_records(args, variants, machine) == {"mm 64x64x64 bf16": record}
    # Half the problems timed on an H100 and half on an H200 add up to a total of neither.
    with pytest.raises(lut_e2e.UsageError, match="--resume: measured with device NVIDIA H100 80GB HBM3, "
                                                 "this run has NVIDIA H200"):
        lut_e2e.resumed_records(args, variants, machine | {"device": "NVIDIA H200"})
    with pytest.raises(lut_e2e.UsageError, match="variants differ"):
        lut_e2e.resumed_records(args, variants[1:], machine)


def test_a_use_model_item_may_hand_shape_padding_to_the_model() -> None:
    assert lut_e2e.hook_settings("graph") == {"policy": "graph"}
    assert lut_e2e.hook_settings("graph-both-addmm+pad") == {"policy": "graph-both-addmm", "pad": "model"}
