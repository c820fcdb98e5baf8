"""SharedFreshCaches: each compile gets empty cache dirs behind the same paths."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest

from matmul_toolkit_inductor.caches import SharedFreshCaches


@pytest.fixture
def fake_inductor(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """torch._inductor.utils with a clear_inductor_caches that counts its calls."""
    cleared: list[int] = []
    utils = types.ModuleType("torch._inductor.utils")
    utils.clear_inductor_caches = lambda: cleared.append(1)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    monkeypatch.setitem(sys.modules, "torch._inductor", types.ModuleType("torch._inductor"))
    monkeypatch.setitem(sys.modules, "torch._inductor.utils", utils)
    for variable in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.delenv(variable, raising=False)
    return cleared


def test_each_compile_sees_empty_dirs_behind_the_same_paths(tmp_path: Path, fake_inductor: list[int]) -> None:
    caches = SharedFreshCaches(str(tmp_path))
    inductor, triton = os.environ["TORCHINDUCTOR_CACHE_DIR"], os.environ["TRITON_CACHE_DIR"]
    Path(triton, "before").write_text("x")
    seen = []
    for _ in range(2):
        with caches.fresh():
            # The environment never changes: a worker started before reads the same paths.
            assert (os.environ["TORCHINDUCTOR_CACHE_DIR"], os.environ["TRITON_CACHE_DIR"]) == (inductor, triton)
            assert os.listdir(triton) == [] and os.listdir(inductor) == []
            Path(triton, "kernel").write_text("x")
            seen.append(os.path.realpath(triton))
    assert seen[0] != seen[1]
    assert Path(seen[0], "kernel").exists()  # an old dir stays for workers still writing
    assert len(fake_inductor) == 4  # in-memory caches cleared before and after each compile
    caches.close()
    assert not Path(caches.root).exists()
