"""bench/models/autotune_state.py: a max-autotune compile cut off in one process goes on in
the next from the GEMMs it had timed, and is charged the time of both (no torch needed)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

SOURCE_DIR = Path(__file__).resolve().parents[2]
SUITE_DIR = SOURCE_DIR / "bench" / "models"
sys.path.insert(0, str(SOURCE_DIR / "python"))


def load(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, SUITE_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


A = load("autotune_state")
IDENTITY = {"workload": "llama_train", "variant": "max_autotune", "device": "NVIDIA H200", "torch": "2.11.0"}
TIMINGS = '{"mm": {"key": {"highest": {"triton_mm_1": 0.031, "aten": 0.040}}}}'

# A compile that times one GEMM, tunes one kernel, and is killed while it goes on.
CUT_OFF_COMPILE = textwrap.dedent("""
    import os, sys, time
    sys.path[:0] = [{python!r}, {suite!r}]
    import autotune_state
    cache, state = sys.argv[1], sys.argv[2]
    with autotune_state.resumable_compile(state, {identity!r}, lambda: cache, every_s=0.02):
        os.makedirs(os.path.join(cache, "cache"), exist_ok=True)
        open(os.path.join(cache, "cache", "systemhash"), "w").write({timings!r})
        os.makedirs(os.path.join(cache, "ab"), exist_ok=True)
        open(os.path.join(cache, "ab", "kernel.best_config"), "w").write('{{"XBLOCK": 128}}')
        open(os.path.join(cache, "ab", "kernel.py"), "w").write("compiled afresh, never kept")
        time.sleep(60)
""")


def cut_off_attempt(tmp_path: Path, state: Path, least_s: float) -> None:
    """Runs CUT_OFF_COMPILE and kills it (SIGKILL, as a device call's limit does) once its
    saved state holds its files and at least `least_s` seconds."""
    script = tmp_path / "compile.py"
    script.write_text(CUT_OFF_COMPILE.format(python=str(SOURCE_DIR / "python"), suite=str(SUITE_DIR),
                                             identity=IDENTITY, timings=TIMINGS))
    process = subprocess.Popen([sys.executable, str(script), str(tmp_path / "first_cache"), str(state)])
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            try:
                saved = json.loads(state.read_text())
                if len(saved["files"]) == 2 and saved["attempts_s"][-1] >= least_s:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
        else:
            pytest.fail("the compile saved no state in 30 s")
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()


def test_a_compile_killed_midway_goes_on_from_what_it_timed(tmp_path: Path) -> None:
    state = tmp_path / "state" / "llama_train.max_autotune.json"
    cut_off_attempt(tmp_path, state, least_s=0.2)

    fresh = tmp_path / "second_cache"
    fresh.mkdir()
    with A.resumable_compile(str(state), IDENTITY, lambda: str(fresh), every_s=60) as attempt:
        restored = {p.relative_to(fresh).as_posix(): p.read_text() for p in fresh.rglob("*") if p.is_file()}

    assert (attempt.number, attempt.restored, attempt.note) == (2, 2, "")
    assert attempt.earlier_s >= 0.2
    assert restored == {"cache/systemhash": TIMINGS, "ab/kernel.best_config": '{"XBLOCK": 128}'}
    assert not state.exists(), "a finished compile leaves no state for the next measurement"


def test_a_first_attempt_restores_nothing_and_a_finished_one_leaves_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    cache = tmp_path / "cache"
    with A.resumable_compile(str(state), IDENTITY, lambda: str(cache), every_s=0.01) as attempt:
        cache.joinpath("cache").mkdir(parents=True)
        cache.joinpath("cache", "h").write_text(TIMINGS)
        time.sleep(0.1)
        assert json.loads(state.read_text())["files"] == {"cache/h": TIMINGS}
    assert (attempt.number, attempt.earlier_s, attempt.restored) == (1, 0.0, 0)
    assert not state.exists()


def test_a_compile_that_fails_keeps_its_state_for_the_next_attempt(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    cache = tmp_path / "cache"
    ticks = iter([100.0, 107.5])
    with pytest.raises(RuntimeError, match="out of memory"):
        with A.resumable_compile(str(state), IDENTITY, lambda: str(cache), every_s=60, clock=lambda: next(ticks)):
            cache.joinpath("cache").mkdir(parents=True)
            cache.joinpath("cache", "h").write_text(TIMINGS)
            raise RuntimeError("out of memory")
    saved = json.loads(state.read_text())
    assert saved["attempts_s"] == [7.5]
    assert saved["files"] == {"cache/h": TIMINGS}


def test_another_gpus_state_is_ignored_and_said(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    other = dict(IDENTITY, device="NVIDIA H100 80GB HBM3")
    state.write_text(json.dumps({"format": A.FORMAT, "identity": other, "attempts_s": [300.0],
                                 "files": {"cache/h": TIMINGS}}))
    cache = tmp_path / "cache"
    cache.mkdir()
    with A.resumable_compile(str(state), IDENTITY, lambda: str(cache), every_s=60) as attempt:
        pass
    assert (attempt.number, attempt.earlier_s, attempt.restored) == (1, 0.0, 0)
    assert "another run" in attempt.note and "H100" in attempt.note
    assert not (cache / "cache" / "h").exists()


def test_an_unreadable_state_is_ignored_and_said(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text("{truncated")
    with A.resumable_compile(str(state), IDENTITY, lambda: str(tmp_path / "cache"), every_s=60) as attempt:
        pass
    assert attempt.number == 1 and "unreadable" in attempt.note


def test_a_kept_path_that_leaves_the_cache_folder_is_not_written(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    written = A.restore_files(str(cache), {"../outside": "x", "cache/h": TIMINGS})
    assert written == 1
    assert not (tmp_path / "outside").exists() and (cache / "cache" / "h").read_text() == TIMINGS


def test_only_autotuning_results_are_kept(tmp_path: Path) -> None:
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "h").write_text(TIMINGS)
    (tmp_path / "xy").mkdir()
    (tmp_path / "xy" / "k.best_config").write_text("{}")
    (tmp_path / "xy" / "k.py").write_text("kernel source")
    (tmp_path / "fxgraph").mkdir()
    (tmp_path / "fxgraph" / "graph").write_text("a compiled graph")
    assert A.kept_files(str(tmp_path)) == {"cache/h": TIMINGS, "xy/k.best_config": "{}"}


def test_tuned_configs_travel_to_another_compile_and_say_what_it_did_with_them(tmp_path: Path) -> None:
    default, variant = tmp_path / "default", tmp_path / "variant"
    for folder, kept in (("ab", '{"XBLOCK": 512}'), ("cd", '{"XBLOCK": 1024}')):
        (default / folder).mkdir(parents=True)
        (default / folder / f"k{folder}.best_config").write_text(kept)
    (default / "cache").mkdir()
    (default / "cache" / "h").write_text(TIMINGS)  # GEMM timings: not a runtime-tuned config
    configs = A.tuned_configs(str(default))
    assert configs == {"ab/kab.best_config": '{"XBLOCK": 512}', "cd/kcd.best_config": '{"XBLOCK": 1024}'}
    assert A.restore_files(str(variant), configs) == 2
    # The variant's compile ran one as put, tuned the other again, and tuned a kernel of its own.
    (variant / "cd" / "kcd.best_config").write_text('{"XBLOCK": 256}')
    (variant / "ef").mkdir()
    (variant / "ef" / "kef.best_config").write_text('{"XBLOCK": 64}')
    assert A.reuse_of(configs, A.tuned_configs(str(variant))) == {"restored": 2, "unchanged": 1, "rewritten": 1,
                                                                   "own": 1}
