"""The model's ranking and decision policy through libmmt_rank.so (include/matmul_toolkit/mmt_rank.h).

The C library is the project's C++ ranker, decision policy and table writer without LibTorch,
so a process that brings its own torch (a user's torch.compile) or none at all (the
torch-free `recommend`) decides exactly as `matmul_toolkit recommend` and `export-lut` do.
Requests and answers are JSON documents; this module only moves them across ctypes.

    model = RankModel.open("data/models/inductor_h200.pt")
    model.decide({"op": "mm_nt", "shape": {...}, "policy": "graph"})

The library is looked up in this order: $MMT_RANK_LIBRARY; next to this package (where the
build copies the package and the library, beside the binary, and where they are installed);
next to the package copy of a `matmul_toolkit` binary on PATH. Standard library only.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any, Optional

API_VERSION = 1
LIBRARY_NAME = "libmmt_rank.so"
OK, ERROR, BAD_INPUT, BUFFER_TOO_SMALL = 0, 1, 2, 3
ERROR_BYTES = 1024
FIRST_ANSWER_BYTES = 1 << 16


class RankLibraryError(RuntimeError):
    """The library is missing or refused a request; the message is its one line."""

    def __init__(self, message: str, status: int = ERROR) -> None:
        super().__init__(message)
        self.status = status


def library_candidates() -> list[Path]:
    """Where the library is looked for, first match wins."""
    candidates = []
    named = os.environ.get("MMT_RANK_LIBRARY")
    if named:
        return [Path(named)]
    candidates.append(Path(__file__).resolve().parent / LIBRARY_NAME)
    binary = shutil.which("matmul_toolkit")
    if binary:
        here = Path(binary).resolve().parent
        candidates += [here / "python" / "matmul_toolkit_inductor" / LIBRARY_NAME,
                       here.parent / "share" / "matmul_toolkit" / "python" / "matmul_toolkit_inductor" / LIBRARY_NAME]
    return candidates


_LOADED: dict[str, Any] = {}
_LOAD_LOCK = threading.Lock()


def load_library(path: Optional[Path] = None) -> Any:
    """The C library (loaded once per path), its API version checked."""
    candidates = [path] if path is not None else library_candidates()
    found = next((p for p in candidates if p.is_file()), None)
    if found is None:
        raise RankLibraryError(f"{LIBRARY_NAME}: not found (looked at {', '.join(str(p) for p in candidates)}; "
                               "build it with the project, or set MMT_RANK_LIBRARY)", BAD_INPUT)
    key = str(found)
    with _LOAD_LOCK:
        if key in _LOADED:
            return _LOADED[key]
        try:
            lib = ctypes.CDLL(key)
        except OSError as e:
            raise RankLibraryError(f"{found}: cannot be loaded: {e}", BAD_INPUT) from None
        char_p, size = ctypes.c_char_p, ctypes.c_size_t
        lib.mmt_rank_api_version.restype = ctypes.c_int
        lib.mmt_rank_open.argtypes = [char_p, ctypes.c_char_p, size]
        lib.mmt_rank_open.restype = ctypes.c_void_p
        lib.mmt_rank_close.argtypes = [ctypes.c_void_p]
        lib.mmt_rank_close.restype = None
        answer_args: list[Any] = [ctypes.c_void_p, ctypes.c_char_p, size, ctypes.POINTER(size), ctypes.c_char_p, size]
        lib.mmt_rank_info.argtypes = answer_args
        for name in ("mmt_rank_recommend", "mmt_rank_decide"):
            getattr(lib, name).argtypes = [ctypes.c_void_p, char_p, *answer_args[1:]]
        for name in ("mmt_rank_info", "mmt_rank_recommend", "mmt_rank_decide"):
            getattr(lib, name).restype = ctypes.c_int
        version = lib.mmt_rank_api_version()
        if version != API_VERSION:
            raise RankLibraryError(f"{found}: API version {version}, this package speaks {API_VERSION}", BAD_INPUT)
        _LOADED[key] = lib
        return lib


class RankModel:
    """One opened model; safe to use from several threads (the library is)."""

    def __init__(self, lib: Any, handle: int, path: str) -> None:
        self._lib = lib
        self._handle: Optional[int] = handle
        self.path = path
        self._info: Optional[dict[str, Any]] = None

    @classmethod
    def open(cls, path: os.PathLike[str] | str, library: Optional[Path] = None) -> RankModel:
        """Opens a checkpoint; RankLibraryError with the library's line when it is not one."""
        lib = load_library(library)
        error = ctypes.create_string_buffer(ERROR_BYTES)
        handle = lib.mmt_rank_open(os.fsencode(os.fspath(path)), error, ERROR_BYTES)
        if not handle:
            raise RankLibraryError(error.value.decode(errors="replace") or f"{path}: cannot be opened", BAD_INPUT)
        return cls(lib, handle, os.fspath(path))

    def close(self) -> None:
        if self._handle is not None:
            self._lib.mmt_rank_close(self._handle)
            self._handle = None

    def __enter__(self) -> RankModel:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass

    def info(self) -> dict[str, Any]:
        """The model's description (hardware, sha256, features, ...), read once."""
        if self._info is None:
            self._info = self._answer(lambda *rest: self._lib.mmt_rank_info(self._live(), *rest))
        return self._info

    def recommend(self, request: dict[str, Any]) -> dict[str, Any]:
        """What `matmul_toolkit recommend --json` prints for the request's problems."""
        text = json.dumps(request).encode()
        return self._answer(lambda *rest: self._lib.mmt_rank_recommend(self._live(), text, *rest))

    def decide(self, request: dict[str, Any]) -> dict[str, Any]:
        """The decision policy's table for one problem (entries as export-lut writes them)."""
        text = json.dumps(request).encode()
        return self._answer(lambda *rest: self._lib.mmt_rank_decide(self._live(), text, *rest))

    def _live(self) -> int:
        if self._handle is None:
            raise RankLibraryError(f"{self.path}: the model is closed", BAD_INPUT)
        return self._handle

    def _answer(self, call: Any) -> dict[str, Any]:
        size = FIRST_ANSWER_BYTES
        for _ in range(3):  # a second try always fits: the first says how much it needs
            out = ctypes.create_string_buffer(size)
            needed = ctypes.c_size_t(0)
            error = ctypes.create_string_buffer(ERROR_BYTES)
            status = call(out, size, ctypes.byref(needed), error, ERROR_BYTES)
            if status == OK:
                return json.loads(out.value.decode())
            if status == BUFFER_TOO_SMALL and needed.value > size:
                size = needed.value
                continue
            raise RankLibraryError(error.value.decode(errors="replace") or f"status {status}", status)
        raise RankLibraryError(f"{self.path}: the answer kept growing past {size} bytes")
