"""Installing an `export-lut --lut-format inductor` table into Inductor.

The table (src/model/lut_export.cpp writes it) maps Inductor's lookup keys,
"[device+]((torch.float16, [M, K], [K, 1]), ...)[+alpha=1&beta=1]+mm", to lists of
template configs: {"template_id": "triton::mm", "BLOCK_M": 128, "BLOCK_N": 64,
"BLOCK_K": 32, "GROUP_M": 8, "num_stages": 3, "num_warps": 4, "EVEN_K": true,
"USE_FAST_ACCUM": false, "ACC_TYPE": "tl.float32"}, or the ATen kernel alone:
{"template_id": "aten::mm"} (aten::bmm, aten::addmm, aten::bias_addmm). With the table installed, a GEMM
compiled with max-autotune whose key is in the table autotunes only the table's configs.

    from matmul_toolkit_inductor import use_table
    use_table("lut.json")
    model = torch.compile(model, mode="max-autotune")
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .dataset import PathLike

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


def install_table(table: LookupTable) -> None:
    """Makes Inductor consult `table` for the rest of the process:
    config.lookup_table.table and a LookupTableChoices choices handler."""
    from torch._inductor import config as inductor_config
    from torch._inductor.lookup_table import LookupTableChoices
    from torch._inductor.virtualized import V

    inductor_config.lookup_table.table = table
    V.set_choices_handler(LookupTableChoices())


def use_table(path: PathLike) -> LookupTable:
    """Loads an `export-lut --lut-format inductor` table and installs it into Inductor;
    returns the table. Only GEMMs compiled with max-autotune on CUDA consult it."""
    table = load_table(path)
    install_table(table)
    return table
