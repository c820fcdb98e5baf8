"""matmul_toolkit's Python side: what only Python reaches (PyTorch Inductor).

- use_model (model_hook.py): the model picks every GEMM inside torch.compile, through
  libmmt_rank.so (rank_library.py), in programs compiled with compile_options();
  `python3 -m matmul_toolkit_inductor.recommend` ranks with it, no torch needed; patch
  convolutions become GEMMs for it to decide (patch_convs.py).
- MatmulDatasetCollector (collector.py): records Inductor's mm/addmm/bmm autotuning as a
  matmul_toolkit / torch-diode dataset; GemmRecorder (recorder.py): the GEMMs any compile
  lowers, as a shapeset.
- use_table, using_table (lut.py): install an `export-lut --lut-format inductor` table.
- dataset.py: the dataset file encoder/decoder (standard library only).
- collect_script.py, worker.py: the processes `matmul_toolkit` starts.

Importing the package imports no torch; the names above load their module on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "use_model": "model_hook",
    "compile_options": "model_hook",
    "ModelHook": "model_hook",
    "RankModel": "rank_library",
    "MatmulDatasetCollector": "collector",
    "GemmRecorder": "recorder",
    "use_table": "lut",
    "using_table": "lut",
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
