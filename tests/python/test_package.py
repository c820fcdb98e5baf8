"""The package imports without torch; torch is imported only when it is used."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parents[2]

CHECK = """
import sys
import matmul_toolkit_inductor as m
from matmul_toolkit_inductor import (choices, collect_script, collector, dataset, lut, model_hook, protocol,
                                     rank_library, recommend, recorder, timing)
assert m.MatmulDatasetCollector is collector.MatmulDatasetCollector
assert m.use_table is lut.use_table
assert m.use_model is model_hook.use_model and m.GemmRecorder is recorder.GemmRecorder
# the README's torch.compile options, torch-free (the whole-model suite's ours compiles with them)
assert m.compile_options() == {"max_autotune_gemm": True, "triton.autotune_pointwise": False,
                               "triton.cudagraphs": True}
assert m.compile_options(cudagraphs=False) == {"max_autotune_gemm": True, "triton.autotune_pointwise": False}
assert "torch" not in sys.modules, "torch was imported"
print("ok")
"""


def test_modules_import_without_torch() -> None:
    env = dict(os.environ, PYTHONPATH=str(SOURCE_DIR / "python"))
    result = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"


def test_unknown_attribute_is_an_attribute_error() -> None:
    import matmul_toolkit_inductor

    try:
        matmul_toolkit_inductor.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("expected AttributeError")
