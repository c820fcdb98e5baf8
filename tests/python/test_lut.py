"""lut.py: reading and checking an `export-lut --lut-format inductor` table (no torch);
installing it needs torch (test_inductor_torch.py), but its hooks are tested here on stand-ins."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from matmul_toolkit_inductor import lut
from matmul_toolkit_inductor.lut import LookupTableError, check_table, load_table

MM_KEY = "((torch.float16, [64, 128], [128, 1]), (torch.float16, [128, 256], [256, 1]))+mm"
ADDMM_KEY = ("NVIDIA H100+((torch.float16, [128, 256], [0, 1]), (torch.float16, [128, 64], [64, 1]), "
             "(torch.float16, [64, 256], [256, 1]))+alpha=1&beta=1+addmm")


def entry(**overrides: Any) -> dict[str, Any]:
    """One entry as src/model/inference/lut_export.cpp writes it."""
    base = {"template_id": "triton::mm", "BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8,
            "num_stages": 3, "num_warps": 4, "EVEN_K": True, "USE_FAST_ACCUM": False,
            "ACC_TYPE": "tl.float32"}
    base.update(overrides)
    return base


def write(tmp_path: Path, table: Any) -> Path:
    path = tmp_path / "lut.json"
    path.write_text(json.dumps(table, indent=2) + "\n")
    return path


def test_a_table_of_export_lut_loads(tmp_path: Path) -> None:
    table = {MM_KEY: [entry(), entry(BLOCK_M=128)], ADDMM_KEY: [entry(EVEN_K=False)]}
    assert load_table(write(tmp_path, table)) == table


def test_an_aten_entry_needs_no_config(tmp_path: Path) -> None:
    table = {MM_KEY: [{"template_id": "aten::mm"}],
             ADDMM_KEY: [{"template_id": "aten::bias_addmm"}, {"template_id": "aten::addmm"}]}
    assert load_table(write(tmp_path, table)) == table
    with pytest.raises(LookupTableError, match="BLOCK_M must be a positive integer"):
        check_table({MM_KEY: [{"template_id": "triton::mm"}]})


@pytest.mark.parametrize("table, message", [
    ({}, "non-empty JSON object"),
    ([], "non-empty JSON object"),
    ({"mm": [entry()]}, "does not look like an Inductor lookup key"),
    ({MM_KEY: []}, "non-empty list"),
    ({MM_KEY: [entry(template_id="")]}, "template_id"),
    ({MM_KEY: [entry(BLOCK_K=0)]}, "BLOCK_K must be a positive integer"),
    ({MM_KEY: [entry(num_warps=True)]}, "num_warps must be a positive integer"),
    ({MM_KEY: [entry(EVEN_K="yes")]}, "EVEN_K must be true or false"),
    ({MM_KEY: ["not a dict"]}, "expected an object"),
])
def test_bad_tables_name_the_key_and_field(tmp_path: Path, table: Any, message: str) -> None:
    with pytest.raises(LookupTableError, match=message):
        load_table(write(tmp_path, table))


def test_missing_file_and_bad_json(tmp_path: Path) -> None:
    with pytest.raises(LookupTableError, match="No such file"):
        load_table(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(LookupTableError, match="invalid JSON"):
        load_table(tmp_path / "bad.json")


def test_check_table_names_the_subject() -> None:
    with pytest.raises(LookupTableError, match=r"^mine: key"):
        check_table({MM_KEY: [entry(GROUP_M=-1)]}, "mine")


# ------------------------------------------------ no precompile of table hits (install_table)
class FakeLookupTableChoices:
    """Inductor's LookupTableChoices as far as hit_noting_choices reads it: a lookup that
    hits for the ops in `hits`."""

    hits = {"mm", "addmm"}

    def lookup_template_configs(self, kernel_inputs: Any, op_name: str, template_uids: list[str],
                                template_hash_map: Any = None) -> dict[str, list[dict[str, Any]]]:
        return {"triton::mm": [entry()]} if op_name in self.hits else {}


class FakeSelector:
    """AlgorithmSelectorCache.make_precompile_fn's signature; records the timeout it got."""

    def __init__(self) -> None:
        self.timeouts: list[Any] = []

    def make_precompile_fn(self, choices: Any, name: str, inputs_key: str,
                           precompilation_timeout_seconds: Any = 3600) -> str:
        self.timeouts.append(precompilation_timeout_seconds)
        return "precompile"


@pytest.fixture
def hits(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fresh TABLE_HITS and a FakeSelector class of this test's own."""
    state = lut.TableHits()
    state.skip_precompile = True
    monkeypatch.setattr(lut, "TABLE_HITS", state)
    selector = type("Selector", (FakeSelector,), {})
    lut.skip_precompile_of_hits(selector)
    return state, lut.hit_noting_choices(FakeLookupTableChoices)(), selector()


def test_the_autotuning_after_a_hit_skips_the_precompile(hits: Any) -> None:
    state, choices, selector = hits
    assert choices.lookup_template_configs(None, "mm", ["triton::mm"]) == {"triton::mm": [entry()]}
    assert selector.make_precompile_fn([], "mm", "key", precompilation_timeout_seconds=300) == "precompile"
    choices.lookup_template_configs(None, "bmm", ["triton::bmm"])  # a miss
    selector.make_precompile_fn([], "bmm", "key", precompilation_timeout_seconds=300)
    assert selector.timeouts == [0, 300]
    assert state.precompiles_skipped == 1


def test_only_the_autotuning_of_the_hit_op_right_after_it_is_affected(hits: Any) -> None:
    state, choices, selector = hits
    choices.lookup_template_configs(None, "addmm", ["triton::mm"])
    selector.make_precompile_fn([], "flex_attention", "key", precompilation_timeout_seconds=300)
    selector.make_precompile_fn([], "addmm", "key", precompilation_timeout_seconds=300)  # no lookup before it
    choices.lookup_template_configs(None, "addmm", ["triton::mm"])
    selector.make_precompile_fn([], "addmm", "key", 300)  # the timeout passed by position
    assert selector.timeouts == [300, 300, 0]
    assert state.precompiles_skipped == 1


def test_the_tables_choices_keep_default_layouts_for_aten_as_use_model_does() -> None:
    from matmul_toolkit_inductor.handlers import DefaultLayoutForAten

    assert issubclass(lut.hit_noting_choices(FakeLookupTableChoices), DefaultLayoutForAten)


def test_precompile_hits_keeps_inductors_precompile(hits: Any) -> None:
    state, choices, selector = hits
    state.skip_precompile = False
    choices.lookup_template_configs(None, "mm", ["triton::mm"])
    selector.make_precompile_fn([], "mm", "key", precompilation_timeout_seconds=300)
    assert selector.timeouts == [300]
    assert state.precompiles_skipped == 0


def test_the_precompile_is_wrapped_once() -> None:
    selector = type("Selector", (FakeSelector,), {})
    lut.skip_precompile_of_hits(selector)
    wrapped = selector.make_precompile_fn
    lut.skip_precompile_of_hits(selector)
    assert selector.make_precompile_fn is wrapped
    assert wrapped.__wrapped__ is FakeSelector.make_precompile_fn


def test_a_torch_without_the_precompile_hook_keeps_its_precompile_with_a_warning() -> None:
    with pytest.warns(UserWarning, match="no make_precompile_fn"):
        lut.skip_precompile_of_hits(type("Selector", (), {}))


def test_lookups_are_counted_and_the_first_misses_kept(hits: Any) -> None:
    state, choices, _ = hits
    choices.lookup_template_configs(None, "mm", ["triton::mm"])
    for _ in range(state.MAX_MISSED + 3):
        choices.lookup_template_configs(None, "bmm", ["triton::bmm"])
    assert state.hits == 1 and state.misses == state.MAX_MISSED + 3
    assert len(state.missed) == state.MAX_MISSED and state.missed[0] == "bmm: None"


# --------------------------------------------- using_table: installed for a block, then undone
@pytest.fixture
def fake_inductor(monkeypatch: pytest.MonkeyPatch) -> Any:
    """torch._inductor's config, choices handler and selector, as far as install_table
    touches them."""
    import sys
    import types

    config = types.SimpleNamespace(lookup_table=types.SimpleNamespace(table="before"))
    handlers: list[Any] = []

    class InductorChoices:
        pass

    class FakeV:  # one handler (this test's thread); starts with the user's
        @property
        def choices(self) -> Any:
            return handlers[-1] if handlers else "the user's handler"

        def set_choices_handler(self, handler: Any) -> None:
            handlers.append(handler)

    V = FakeV()
    modules = {
        "torch": types.ModuleType("torch"), "torch._inductor": types.ModuleType("torch._inductor"),
        "torch._inductor.config": config,
        "torch._inductor.lookup_table": types.SimpleNamespace(LookupTableChoices=FakeLookupTableChoices),
        "torch._inductor.select_algorithm": types.SimpleNamespace(AlgorithmSelectorCache=type("S", (FakeSelector,), {})),
        "torch._inductor.virtualized": types.SimpleNamespace(V=V),
        "torch._inductor.choices": types.SimpleNamespace(InductorChoices=InductorChoices),
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(modules["torch._inductor"], "config", config, raising=False)
    return config, handlers


def test_using_table_installs_the_table_and_puts_back_what_was_there(fake_inductor: Any, tmp_path: Path) -> None:
    config, handlers = fake_inductor
    table = {MM_KEY: [entry()]}
    with lut.using_table(write(tmp_path, table)) as installed:
        assert installed == table and config.lookup_table.table == table
        assert type(handlers[-1]).__name__ == "HitNotingChoices"
    assert config.lookup_table.table == "before" and handlers[-1] == "the user's handler"
    with pytest.raises(LookupTableError):
        with lut.using_table({"not a key": []}):
            pass
    assert config.lookup_table.table == "before"
    lut.uninstall_table()  # nothing installed: nothing happens
    assert config.lookup_table.table == "before"
