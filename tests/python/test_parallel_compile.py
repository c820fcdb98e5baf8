"""The compile process pool (parallel_compile.py) on fake kernel modules: no torch needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from matmul_toolkit_inductor.parallel_compile import ParallelCompiler, compile_processes

# A generated module as Inductor writes it, reduced to what the pool uses: a kernel object
# whose precompile(warm_cache_only=True) compiles into a cache (here: writes a marker file).
KERNEL = """
import os, time
class Kernel:
    def precompile(self, warm_cache_only=False):
        assert warm_cache_only, "the pool only fills the cache"
        {body}
        with open(__file__ + ".compiled", "w") as f:
            f.write(str(os.getpid()))
triton_mm_0 = Kernel()
"""


def kernel_module(directory: Path, name: str, body: str = "pass") -> tuple[str, str]:
    path = directory / f"{name}.py"
    path.write_text(KERNEL.format(body=body))
    return str(path), "triton_mm_0"


def compiled(job: tuple[str, str]) -> bool:
    return Path(job[0] + ".compiled").exists()


def test_every_kernel_is_compiled_once_and_failures_keep_their_reason(tmp_path: Path) -> None:
    good = [kernel_module(tmp_path, f"k{i}") for i in range(6)]
    bad = kernel_module(tmp_path, "bad", "raise ValueError('out of registers')")
    compiler = ParallelCompiler(processes=2, timeout_s=60)
    try:
        outcome = compiler.compile(good + [bad] + good[:2])  # repeats are compiled once
    finally:
        compiler.close()
    assert set(outcome) == set(good) | {bad}
    assert all(outcome[job] == "" and compiled(job) for job in good)
    assert outcome[bad] == "ValueError: out of registers"
    assert not compiled(bad)


def test_a_missing_kernel_name_fails_that_job_only(tmp_path: Path) -> None:
    good = kernel_module(tmp_path, "good")
    wrong_name = (kernel_module(tmp_path, "other")[0], "triton_bmm_7")
    compiler = ParallelCompiler(processes=2, timeout_s=60)
    try:
        outcome = compiler.compile([good, wrong_name])
    finally:
        compiler.close()
    assert outcome[good] == ""
    assert outcome[wrong_name].startswith("AttributeError")


def test_a_dead_process_fails_its_jobs_and_the_next_compile_gets_a_fresh_pool(tmp_path: Path) -> None:
    crash = kernel_module(tmp_path, "crash", "os._exit(7)")
    compiler = ParallelCompiler(processes=2, timeout_s=60)
    try:
        first = compiler.compile([crash])
        assert first[crash] == "its compile process died"
        later = kernel_module(tmp_path, "later")
        assert compiler.compile([later]) == {later: ""}
    finally:
        compiler.close()
    assert compiled(later)


def test_a_hung_compile_times_out_and_is_stopped(tmp_path: Path) -> None:
    hung = kernel_module(tmp_path, "hung", "time.sleep(600)")
    quick = kernel_module(tmp_path, "quick")
    compiler = ParallelCompiler(processes=2, timeout_s=120)
    try:
        # Both processes are started first: where torch is installed, each takes seconds
        # to import it, which the short timeout below must not include.
        starters = [kernel_module(tmp_path, f"start{i}", "time.sleep(1)") for i in range(2)]
        assert compiler.compile(starters) == {job: "" for job in starters}
        compiler.timeout_s = 5
        outcome = compiler.compile([hung, quick])
        assert outcome[hung] == "not compiled within 5 s"
        assert outcome[quick] == ""
        compiler.timeout_s = 120
        after = kernel_module(tmp_path, "after")
        assert compiler.compile([after]) == {after: ""}  # a fresh pool answers
    finally:
        compiler.close()
    assert not compiled(hung)


def test_processes_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMT_INDUCTOR_COMPILE_PROCESSES", "3")
    assert compile_processes() == 3
    monkeypatch.setenv("MMT_INDUCTOR_COMPILE_PROCESSES", "0")
    assert compile_processes() == 1
    monkeypatch.setenv("MMT_INDUCTOR_COMPILE_PROCESSES", "many")
    with pytest.raises(ValueError, match="MMT_INDUCTOR_COMPILE_PROCESSES: 'many' is not a whole number"):
        compile_processes()
    monkeypatch.delenv("MMT_INDUCTOR_COMPILE_PROCESSES")
    assert compile_processes() >= 1
