"""matmul_toolkit's Python side: what only Python reaches (PyTorch Inductor).

- MatmulDatasetCollector (collector.py): records Inductor's mm/addmm/bmm autotuning as a
  matmul_toolkit / torch-diode dataset.
- use_table (lut.py): installs an `export-lut --lut-format inductor` table into Inductor.
- dataset.py: the dataset file encoder/decoder (standard library only).
- collect_script.py, worker.py: the processes `matmul_toolkit` starts.

Importing the package imports no torch; the names above load their module on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "MatmulDatasetCollector": "collector",
    "use_table": "lut",
    "load_table": "lut",
    "Dataset": "dataset",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
