"""Installing an `export-lut --lut-format inductor` table into Inductor.

The table (src/model/inference/lut_export.cpp writes it) maps Inductor's lookup keys,
"[device+]((torch.float16, [M, K], [K, 1]), ...)[+alpha=1&beta=1]+mm", to lists of
template configs: {"template_id": "triton::mm", "BLOCK_M": 128, "BLOCK_N": 64,
"BLOCK_K": 32, "GROUP_M": 8, "num_stages": 3, "num_warps": 4, "EVEN_K": true,
"USE_FAST_ACCUM": false, "ACC_TYPE": "tl.float32"}, or the ATen kernel alone:
{"template_id": "aten::mm"} (aten::bmm, aten::addmm, aten::bias_addmm). With the table installed, a GEMM
compiled with max-autotune whose key is in the table autotunes only the table's configs.

    from matmul_toolkit_inductor import use_table
    use_table("lut.json")
    model = torch.compile(model, mode="max-autotune")

Where a hit offers Inductor two choices (a kernel and ATen), Inductor compiles the kernel
in its worker pool before timing the two, again in the process at the benchmark and once
more for the final code. use_table skips that first, parallel precompile for table hits
only (a table's few choices gain nothing from it): a paired pick then compiles twice. Misses
and every other autotuning keep Inductor's precompile.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Union

from .dataset import PathLike
from .handlers import DefaultLayoutForAten, install_layer

LookupTable = dict[str, list[dict[str, Any]]]

_INT_FIELDS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_stages", "num_warps")
_BOOL_FIELDS = ("EVEN_K", "USE_FAST_ACCUM")
_KEY_RE = re.compile(r"^(?:[^(]+\+)?\(\(.*\)\)(?:\+[^+]+)?\+(?:mm|addmm|bmm)$")


class LookupTableError(ValueError):
    """A table that is not what export-lut --lut-format inductor writes."""


def check_entry(entry: Any, where: str) -> None:
    """Raises LookupTableError unless `entry` is a template config Inductor can use."""
    if not isinstance(entry, dict):
        raise LookupTableError(f"{where}: expected an object, got {type(entry).__name__}")
    if not isinstance(entry.get("template_id"), str) or not entry["template_id"]:
        raise LookupTableError(f"{where}: missing or empty 'template_id'")
    if entry["template_id"].startswith("aten::"):
        return  # an ATen kernel has no config
    for name in _INT_FIELDS:
        value = entry.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise LookupTableError(f"{where}: {name} must be a positive integer, got {value!r}")
    for name in _BOOL_FIELDS:
        if name in entry and not isinstance(entry[name], bool):
            raise LookupTableError(f"{where}: {name} must be true or false, got {entry[name]!r}")
    if "ACC_TYPE" in entry and not isinstance(entry["ACC_TYPE"], str):
        raise LookupTableError(f"{where}: ACC_TYPE must be a string, got {entry['ACC_TYPE']!r}")


def check_table(table: Any, subject: str = "lookup table") -> LookupTable:
    """Returns `table` after checking its keys and entries; raises LookupTableError naming
    the first key or entry that is wrong."""
    if not isinstance(table, dict) or not table:
        raise LookupTableError(f"{subject}: expected a non-empty JSON object of lookup keys")
    for key, entries in table.items():
        where = f"{subject}: key '{key}'"
        if not _KEY_RE.match(key):
            raise LookupTableError(f"{where}: does not look like an Inductor lookup key "
                                   "([device+]((dtype, size, stride), ...)[+scalars]+op)")
        if not isinstance(entries, list) or not entries:
            raise LookupTableError(f"{where}: expected a non-empty list of configs")
        for i, entry in enumerate(entries):
            check_entry(entry, f"{where} > [{i}]")
    return table


def load_table(path: PathLike) -> LookupTable:
    """Reads and checks a table file (no torch needed)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise LookupTableError(f"{path}: {e.strerror or e}") from None
    try:
        table = json.loads(text)
    except ValueError as e:
        raise LookupTableError(f"{path}: invalid JSON: {e}") from None
    return check_table(table, str(path))


def install_table(table: LookupTable, precompile_hits: bool = False) -> None:
    """Makes Inductor consult `table` for the rest of the process:
    config.lookup_table.table and, in every thread that compiles (handlers.py), a
    LookupTableChoices choices handler that notes each hit, and (unless precompile_hits) no
    parallel precompile of a hit's choices."""
    from torch._inductor import config as inductor_config
    from torch._inductor.lookup_table import LookupTableChoices
    from torch._inductor.select_algorithm import AlgorithmSelectorCache

    skip_precompile_of_hits(AlgorithmSelectorCache)
    _PREVIOUS.append(install_layer(hit_noting_choices(LookupTableChoices),
                                   [(inductor_config.lookup_table, "table", lambda _: table)]))
    TABLE_HITS.skip_precompile = not precompile_hits
    TABLE_HITS.op = None


# The undo of each install_table, so that uninstall_table can put back what it replaced.
_PREVIOUS: list[Callable[[], None]] = []


def uninstall_table() -> None:
    """Puts back the table and choices handler the last install_table replaced (no-op when
    none is installed)."""
    if not _PREVIOUS:
        return
    _PREVIOUS.pop()()
    TABLE_HITS.skip_precompile = False
    TABLE_HITS.op = None


@contextlib.contextmanager
def using_table(table: Union[LookupTable, Any], precompile_hits: bool = False) -> Iterator[LookupTable]:
    """use_table for a `with` block: the table (a path or an already loaded table) is
    installed on entry and Inductor's previous table and choices handler are back on exit."""
    loaded = check_table(table) if isinstance(table, dict) else load_table(table)
    install_table(loaded, precompile_hits)
    try:
        yield loaded
    finally:
        uninstall_table()


class TableHits:
    """The GEMM whose lookup the table just served. Inductor looks a GEMM up and then, at
    once, autotunes its choices under the same name ("mm", "addmm", "bmm"): that tells the
    precompile of a hit apart from any other autotuning."""

    def __init__(self) -> None:
        self.op: str | None = None
        self.skip_precompile = False
        self.precompiles_skipped = 0
        self.hits = 0
        self.misses = 0
        self.missed: list[str] = []  # the first MAX_MISSED lookups that missed, as "op: key"

    MAX_MISSED = 20

    def count(self, op_name: str, hit: bool, key: Optional[str]) -> None:
        self.op = op_name if hit else None
        if hit:
            self.hits += 1
            return
        self.misses += 1
        if len(self.missed) < self.MAX_MISSED:
            self.missed.append(f"{op_name}: {key}")


TABLE_HITS = TableHits()


def hit_noting_choices(base: type) -> type:
    """A subclass of Inductor's LookupTableChoices `base` that notes in TABLE_HITS whether
    each lookup hit (a GEMM its table leaves to ATen keeps default torch.compile's output
    layout, as with use_model)."""

    class HitNotingChoices(DefaultLayoutForAten, base):  # type: ignore[misc, valid-type]
        def lookup_template_configs(self, kernel_inputs: Any, op_name: str, template_uids: list[str],
                                    template_hash_map: dict[str, str | None] | None = None
                                    ) -> dict[str, list[dict[str, Any]]]:
            found = super().lookup_template_configs(kernel_inputs, op_name, template_uids, template_hash_map)
            key = None
            if not found:
                try:
                    key = self.make_lookup_key(kernel_inputs, op_name)
                except Exception:  # only for the report
                    key = None
            TABLE_HITS.count(op_name, bool(found), key)
            return found

    return HitNotingChoices


def skip_precompile_of_hits(selector: type) -> None:
    """Wraps `selector.make_precompile_fn` (Inductor's AlgorithmSelectorCache) once: while
    TABLE_HITS.skip_precompile, the autotuning that follows a hit gets a precompile timeout
    of 0, which Inductor takes as "no precompile" (it compiles each choice at its benchmark).
    A torch without that method keeps its precompile, with a warning."""
    original: Optional[Callable[..., Any]] = getattr(selector, "make_precompile_fn", None)
    if original is None:
        warnings.warn("this torch's AlgorithmSelectorCache has no make_precompile_fn: Inductor will "
                      "precompile the table's hits (a paired kernel compiles three times)", stacklevel=3)
        return
    if getattr(original, "skips_table_hits", False):
        return

    @functools.wraps(original)
    def make_precompile_fn(self: Any, choices: Any, name: str, inputs_key: str, *args: Any, **kwargs: Any) -> Any:
        hit, TABLE_HITS.op = TABLE_HITS.op, None
        if TABLE_HITS.skip_precompile and hit == name:
            TABLE_HITS.precompiles_skipped += 1
            if args:
                args = (0,) + args[1:]
            else:
                kwargs["precompilation_timeout_seconds"] = 0
        assert original is not None
        return original(self, choices, name, inputs_key, *args, **kwargs)

    make_precompile_fn.skips_table_hits = True  # type: ignore[attr-defined]
    setattr(selector, "make_precompile_fn", make_precompile_fn)


def use_table(path: PathLike, precompile_hits: bool = False) -> LookupTable:
    """Loads an `export-lut --lut-format inductor` table and installs it into Inductor;
    returns the table. Only GEMMs compiled with max-autotune on CUDA consult it.
    precompile_hits=True keeps Inductor's parallel precompile for table hits too."""
    table = load_table(path)
    install_table(table, precompile_hits)
    return table
