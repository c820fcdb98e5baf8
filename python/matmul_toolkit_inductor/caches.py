"""Empty Inductor and Triton caches for each of several compiles in one process, shared
with Inductor's compile worker processes (benchmarks that time compiles from scratch).

Inductor's own `fresh_cache` points this process's environment at new cache dirs, but the
compile workers keep the environment they were started with: a kernel a worker compiles
for autotuning lands in the first dirs, and this process compiles it again when it
benchmarks or runs it. A user's process never sees that (its workers and it share one
cache), so a compile timed under `fresh_cache` costs more than it does for a user.

Here the two cache dirs are links, set before the workers start (`SharedFreshCaches()`),
that each `fresh()` re-points to new empty dirs; this process and the workers follow the
links alike. Old dirs stay until `close()`, since workers may still be writing there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Iterator, Optional

LINKS = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton"}


class SharedFreshCaches:
    """Create before torch starts compiling (the workers read the environment once)."""

    def __init__(self, parent: Optional[str] = None) -> None:
        self.root = tempfile.mkdtemp(prefix="mmt_caches_", dir=parent)
        self._point_links_at(os.path.join(self.root, "initial"))
        for variable, name in LINKS.items():
            os.environ[variable] = os.path.join(self.root, name)

    def _point_links_at(self, target: str) -> None:
        for name in LINKS.values():
            os.makedirs(os.path.join(target, name))
            link = os.path.join(self.root, name)
            os.symlink(os.path.join(target, name), link + ".new")
            os.replace(link + ".new", link)  # atomic: a reader sees the old or the new dir

    @contextlib.contextmanager
    def fresh(self) -> Iterator[None]:
        """One compile's empty caches: on disk (the links re-pointed) and in Inductor's memory."""
        from torch._inductor.utils import clear_inductor_caches

        self._point_links_at(tempfile.mkdtemp(prefix="compile_", dir=self.root))
        clear_inductor_caches()
        try:
            yield
        finally:
            clear_inductor_caches()

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
