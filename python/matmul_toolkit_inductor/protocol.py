"""The line-JSON protocol between `matmul_toolkit` and its Inductor workers.

docs/inductor_worker_protocol.md is the contract; this module reads and writes its
messages. It imports nothing beyond the standard library, so tests and a fake worker
can use it without torch.
"""

from __future__ import annotations

import json
from typing import IO, Any, Iterator, Optional

PROTOCOL_VERSION = 1

CONFIG_FIELDS = ("block_m", "block_n", "block_k", "group_m", "num_stages", "num_warps")
FLAG_FIELDS = ("even_k", "allow_tf32", "use_fast_accum")


class ProtocolError(ValueError):
    """A message that does not follow the protocol."""


def read_messages(stream: IO[str]) -> Iterator[dict[str, Any]]:
    """Yields each non-empty line of `stream` as a JSON object."""
    for line in stream:
        line = line.strip()
        if not line:
            continue
        try:
            message = json.loads(line)
        except json.JSONDecodeError as e:
            raise ProtocolError(f"not JSON: {e}") from None
        if not isinstance(message, dict) or "type" not in message:
            raise ProtocolError("a message must be an object with a 'type'")
        yield message


def write_message(stream: IO[str], message: dict[str, Any]) -> None:
    """Writes one message as one line and flushes it (the parent waits on it)."""
    stream.write(json.dumps(message, separators=(",", ":"), allow_nan=False) + "\n")
    stream.flush()


def error_message(error: str, request_id: Optional[int] = None) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "error", "error": error}
    if request_id is not None:
        message["id"] = request_id
    return message


def check_problem(problem: Any) -> dict[str, Any]:
    """Returns the request's problem after checking its fields, or raises ProtocolError."""
    if not isinstance(problem, dict):
        raise ProtocolError("'problem' must be an object")
    op = problem.get("op")
    if op not in ("mm", "addmm", "bmm"):
        raise ProtocolError(f"unknown op {op!r}")
    layout = problem.get("layout", "nn")
    if layout not in ("nn", "nt", "tn", "tt"):
        raise ProtocolError(f"unknown layout {layout!r}")
    for dim in ("B", "M", "N", "K"):
        value = problem.get(dim)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ProtocolError(f"{dim} must be a positive integer, got {value!r}")
    if op != "bmm" and problem["B"] != 1:
        raise ProtocolError(f"{op} has B = 1, got {problem['B']}")
    if problem.get("dtype") not in ("float16", "bfloat16", "float32", "int8"):
        raise ProtocolError(f"unsupported dtype {problem.get('dtype')!r}")
    if problem["dtype"] == "int8" and op != "mm":
        raise ProtocolError(f"int8 is torch._int_mm: mm only, got {op}")
    return problem


def check_profile(request: dict[str, Any]) -> None:
    """Checks a profile request's folder and schedule, or raises ProtocolError."""
    if not isinstance(request.get("out_dir"), str) or not request["out_dir"]:
        raise ProtocolError("a profile request needs out_dir, a folder")
    for field, least in (("wait", 0), ("warmup", 0), ("active", 1), ("repeat", 1)):
        value = request.get(field)
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ProtocolError(f"{field} must be an integer >= {least}, got {value!r}")


def check_config(config: Any) -> dict[str, Any]:
    """Returns a request's config after checking its fields, or raises ProtocolError."""
    if not isinstance(config, dict):
        raise ProtocolError("a config must be an object")
    for field in CONFIG_FIELDS:
        value = config.get(field)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ProtocolError(f"config field {field} must be a positive integer, got {value!r}")
    return config
