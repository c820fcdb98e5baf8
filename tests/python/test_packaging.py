"""`pip install ./python` works offline: the in-tree build backend needs nothing from an index,
and the installed package imports without torch."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

SOURCE_DIR = Path(__file__).resolve().parents[2]

CHECK = """
import sys
import matmul_toolkit_inductor as m
from matmul_toolkit_inductor import recommend, rank_library
assert m.__file__.startswith(sys.argv[1]), m.__file__
assert callable(m.use_model) and callable(m.use_table)
assert "torch" not in sys.modules
print("ok")
"""


def pip_available() -> bool:
    return subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode == 0


@pytest.mark.skipif(not pip_available(), reason="pip is not installed for this Python")
def test_pip_installs_the_package_offline(tmp_path: Path) -> None:
    target = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-cache-dir",
                           "--disable-pip-version-check", "--target", str(target), str(SOURCE_DIR / "python")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    env = dict(os.environ, PYTHONPATH=str(target))
    result = subprocess.run([sys.executable, "-c", CHECK, str(target)], env=env, capture_output=True, text=True,
                            cwd=tmp_path)
    assert result.stdout == "ok\n", result.stderr


def test_a_folder_with_the_library_makes_a_platform_wheel_that_carries_it(tmp_path: Path) -> None:
    folder = tmp_path / "python"
    shutil.copytree(SOURCE_DIR / "python", folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "matmul_toolkit_inductor" / "libmmt_rank.so").write_bytes(b"\x7fELF not really")
    sys.path.insert(0, str(folder))
    try:
        import importlib

        backend = importlib.import_module("_mmt_build")
        importlib.reload(backend)  # this copy's, not another test's
        name = backend.build_wheel(str(tmp_path))
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("_mmt_build", None)
    assert name.startswith("matmul_toolkit_inductor-0.1.0-py3-none-linux_")
    with zipfile.ZipFile(tmp_path / name) as wheel:
        names = wheel.namelist()
        record = wheel.read("matmul_toolkit_inductor-0.1.0.dist-info/RECORD").decode()
    assert "matmul_toolkit_inductor/libmmt_rank.so" in names and "matmul_toolkit_inductor/model_hook.py" in names
    assert "matmul_toolkit_inductor/libmmt_rank.so,sha256=" in record
