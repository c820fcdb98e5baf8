"""Compiles a problem's Triton template kernels in a pool of processes before Inductor does.

Inductor precompiles its choices on threads of one process, and they take turns on
Python's lock: about one core, so EXHAUSTIVE's 500-1400 choices (0.3-0.6 s of a core
each) take minutes. Its own process pool (compile_threads > 1) compiled each kernel again at its
first benchmark. Here spawned processes load each choice's generated module and compile it
with `precompile(warm_cache_only=True)`, which only fills Triton's on-disk cache (they
share TRITON_CACHE_DIR with this process). A kernel compiled there is loaded from that
cache at its first benchmark here, in milliseconds; one that failed or was not reached is
left to Inductor's precompile, which records why it fails.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import multiprocessing
import os
from typing import Optional

# (path of the generated module, name of the kernel object in it)
Job = tuple[str, str]


def compile_processes() -> int:
    """MMT_INDUCTOR_COMPILE_PROCESSES (collect --workers-per-device sets it to
    2 x cores / workers); default: every core. 1 turns the pool off."""
    value = os.environ.get("MMT_INDUCTOR_COMPILE_PROCESSES")
    if not value:
        return max(1, os.cpu_count() or 1)
    try:
        return max(1, int(value))
    except ValueError:
        raise ValueError(f"MMT_INDUCTOR_COMPILE_PROCESSES: {value!r} is not a whole number") from None


def _start_process() -> None:
    # Import Triton and Inductor's runtime once per process, not in its first job.
    try:
        import torch._inductor.runtime.triton_heuristics  # noqa: F401
    except Exception:  # noqa: BLE001 -- a job that needs it reports the failure itself
        pass


def _compile_module(job: Job) -> None:
    """Runs in a pool process: compiles one kernel into Triton's cache."""
    path, kernel_name = job
    spec = importlib.util.spec_from_file_location(f"mmt_kernel_{abs(hash(path))}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    getattr(module, kernel_name).precompile(warm_cache_only=True)


class ParallelCompiler:
    """A pool of compile processes, started at the first compile and kept for the next."""

    def __init__(self, processes: int, timeout_s: float) -> None:
        self.processes = processes
        self.timeout_s = timeout_s
        self._pool: Optional[concurrent.futures.ProcessPoolExecutor] = None

    def compile(self, jobs: list[Job]) -> dict[Job, str]:
        """Compiles the jobs; for each, '' when its kernel is in Triton's cache, else why not.
        A process that dies fails every job not done by then (the pool breaks); jobs not
        done within the timeout (for the whole batch) fail, and their processes are stopped.
        Either way the next batch starts a fresh pool."""
        unique = list(dict.fromkeys(jobs))
        if not unique:
            return {}
        pool = self._started_pool()
        futures = {pool.submit(_compile_module, job): job for job in unique}
        _, pending = concurrent.futures.wait(futures, timeout=self.timeout_s)
        outcome: dict[Job, str] = {}
        broken = bool(pending)
        for future, job in futures.items():
            if future in pending:
                outcome[job] = f"not compiled within {self.timeout_s:.0f} s"
                continue
            error = future.exception()
            if isinstance(error, concurrent.futures.process.BrokenProcessPool):
                broken = True
                outcome[job] = "its compile process died"
            elif error is not None:
                outcome[job] = f"{type(error).__name__}: {str(error).strip()[:200]}"
            else:
                outcome[job] = ""
        if broken:
            self.close()  # the next problem starts a fresh pool
        return outcome

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        # A hung compile would keep shutdown waiting: its processes are killed first.
        for process in list(getattr(pool, "_processes", {}).values()):
            if process.is_alive():
                process.kill()
        pool.shutdown(wait=True, cancel_futures=True)

    def _started_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._pool is None:
            # spawn: a fork of this process would copy its CUDA context and threads.
            context = multiprocessing.get_context("spawn")
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=self.processes, mp_context=context, initializer=_start_process)
        return self._pool
