"""A max-autotune compile that goes on across processes.

A training step's max-autotune compile takes longer than one 10-minute device call (Inductor
spends some 15 s a GEMM benchmarking its choices). Inductor keeps what it measured in its
cache folder: the GEMM timings in `cache/<system hash>` (its local autotune cache) and a
tuned kernel's best config beside the kernel (`*.best_config`). While a variant compiles,
a thread saves those files, with how long this attempt has compiled so far, to one state
file every few seconds. A later attempt of the same variant, workload, GPU and torch
restores them into its fresh cache folder before it compiles: Inductor finds the GEMMs timed
before and times only the rest. Everything else (graphs, kernels) is compiled afresh.

The compile time charged is the sum of the attempts' times, an upper bound of one
uninterrupted compile (work cut off by a kill is done again). The state file is removed once
a compile finishes, so the next measurement starts from nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from matmul_toolkit_inductor.dataset import write_file_atomically

SAVE_EVERY_S = 5.0
FORMAT = "mmt-autotune-state-1"


def kept_files(cache_dir: str) -> dict[str, str]:
    """Inductor's autotuning results under its cache folder, by relative path: the local
    autotune cache (cache/*) and every tuned kernel's *.best_config."""
    return read_files(cache_dir, list((Path(cache_dir) / "cache").glob("*"))) | tuned_configs(cache_dir)


def tuned_configs(cache_dir: str) -> dict[str, str]:
    """The configs a compile kept for the kernels Inductor tuned at their first run (every
    *.best_config under its cache folder), by relative path. Inductor names each after its
    kernel's source, so a compile of the same kernel in another process looks for the same
    path, and with the file in place runs that config instead of tuning again."""
    return read_files(cache_dir, list(Path(cache_dir).rglob("*.best_config")))


def read_files(cache_dir: str, paths: list[Path]) -> dict[str, str]:
    root = Path(cache_dir)
    found: dict[str, str] = {}
    for path in paths:
        if not path.is_file():
            continue
        with contextlib.suppress(OSError, UnicodeDecodeError):
            found[path.relative_to(root).as_posix()] = path.read_text()
    return found


def reuse_of(restored: dict[str, str], after: dict[str, str]) -> dict[str, int]:
    """What a compile did with the tuned configs restored into its cache folder before it
    (`restored`), from those the folder holds after it (`after`, tuned_configs): kept as
    restored (Inductor ran them, or never met their kernel), written again (Inductor tuned
    that kernel anew), and its own (kernels only this compile tuned)."""
    return {"restored": len(restored),
            "unchanged": sum(1 for path, text in restored.items() if after.get(path) == text),
            "rewritten": sum(1 for path, text in restored.items() if path in after and after[path] != text),
            "own": sum(1 for path in after if path not in restored)}


def restore_files(cache_dir: str, files: dict[str, str]) -> int:
    """Writes the kept files back under a cache folder; how many. A path that would leave the
    folder is skipped."""
    root = Path(cache_dir).resolve()
    written = 0
    for relative, text in files.items():
        target = (root / relative).resolve()
        if root not in target.parents:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        write_file_atomically(target, text)
        written += 1
    return written


@dataclass
class Attempt:
    """This compile's place among the attempts: the seconds earlier attempts compiled, and
    the files they left that this one restored."""
    number: int
    earlier_s: float
    restored: int
    note: str = ""


def load_state(path: str, identity: dict[str, Any]) -> tuple[Optional[dict[str, Any]], str]:
    """The state an earlier attempt left at `path` for the same identity; else None and why
    (empty when there is none)."""
    if not os.path.isfile(path):
        return None, ""
    try:
        with open(path) as f:
            state = json.load(f)
    except (OSError, ValueError) as e:
        return None, f"unreadable state {path} ignored ({e})"
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        return None, f"{path} is not an autotune state; ignored"
    if state.get("identity") != identity:
        return None, f"state {path} is of another run ({state.get('identity')}); ignored"
    return state, ""


@contextlib.contextmanager
def resumable_compile(path: str, identity: dict[str, Any], cache_dir: Callable[[], str],
                      every_s: float = SAVE_EVERY_S, clock: Callable[[], float] = time.monotonic
                      ) -> Iterator[Attempt]:
    """Around one compile in a fresh Inductor cache folder (`cache_dir()`): restores an
    earlier attempt's autotuning results, saves this attempt's every `every_s` seconds
    (and when it fails), and removes the state once the compile is over."""
    state, note = load_state(path, identity)
    attempts: list[float] = [float(s) for s in state.get("attempts_s", [])] if state else []
    restored = restore_files(cache_dir(), state.get("files", {})) if state else 0
    attempt = Attempt(number=len(attempts) + 1, earlier_s=sum(attempts), restored=restored, note=note)
    start = clock()
    stop = threading.Event()

    def save() -> None:
        with contextlib.suppress(Exception):  # a failed save must not fail the compile
            document = {"format": FORMAT, "identity": identity, "attempts_s": [*attempts, clock() - start],
                        "files": kept_files(cache_dir())}
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            write_file_atomically(Path(path), json.dumps(document) + "\n")

    def keep_saving() -> None:
        while not stop.wait(every_s):
            save()

    saver = threading.Thread(target=keep_saving, name="autotune-state", daemon=True)
    saver.start()
    finished = False
    try:
        yield attempt
        finished = True
    finally:
        stop.set()
        saver.join()  # the last save is over: only this thread writes the state now
        if finished:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        else:
            save()
