"""The Inductor measurement worker: `python3 -m matmul_toolkit_inductor.worker`.

Started by `matmul_toolkit collect --backend inductor`, one per device. It answers the
parent's hello with the GPU and the torch/Triton versions, then measures one problem per
`measure` request, or profiles one per `profile` request (docs/inductor_worker_protocol.md). stdout carries protocol messages
only: whatever torch, Triton or a compiler prints goes to stderr.

MMT_INDUCTOR_MEASURER=module:attribute replaces the measurer (a callable taking the device
index and returning an object with hello() and measure(request)); the tests use it to run
this very loop without torch.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from typing import IO, Any, Callable

from . import protocol

EXIT_NO_TORCH = 3


def _protocol_stream() -> IO[str]:
    """A private copy of stdout for protocol messages; fd 1 then points at stderr, so
    anything else that writes to stdout (Triton, ptxas, print) cannot corrupt the stream."""
    sys.stdout.flush()
    private = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(private, "w", buffering=1)


def _measurer_factory() -> Callable[[int], Any]:
    spec = os.environ.get("MMT_INDUCTOR_MEASURER")
    if spec:
        module_name, _, attribute = spec.partition(":")
        return getattr(importlib.import_module(module_name), attribute or "Measurer")
    from .measure import InductorMeasurer

    return InductorMeasurer


def serve(requests: IO[str], replies: IO[str], factory: Callable[[int], Any]) -> int:
    """Runs the protocol until `requests` ends; returns the process exit code."""
    messages = protocol.read_messages(requests)
    try:
        hello = next(messages)
    except StopIteration:
        return 0
    if hello.get("type") != "hello":
        protocol.write_message(replies, protocol.error_message("the first message must be hello"))
        return 2
    if hello.get("protocol") != protocol.PROTOCOL_VERSION:
        protocol.write_message(replies, protocol.error_message(
            f"protocol {hello.get('protocol')!r} is not spoken here (this worker: {protocol.PROTOCOL_VERSION})"))
        return 2
    try:
        measurer = factory(int(hello.get("device_index", 0)))
        answer = measurer.hello()
    except Exception as e:  # torch missing, no GPU, wrong device index
        protocol.write_message(replies, protocol.error_message(f"{type(e).__name__}: {e}"))
        return EXIT_NO_TORCH
    protocol.write_message(replies, {"type": "hello", "protocol": protocol.PROTOCOL_VERSION, **answer})

    for request in messages:
        request_id = request.get("id")
        kind = request.get("type")
        if kind not in ("measure", "profile"):
            protocol.write_message(replies, protocol.error_message(
                f"unknown request type {kind!r}", request_id))
            continue
        try:
            protocol.check_problem(request.get("problem"))
            if kind == "profile":
                protocol.check_profile(request)
                reply = measurer.profile(request)
                protocol.write_message(replies, {"type": "profile", "id": request_id, **reply})
                continue
            for config in request.get("configs") or []:
                protocol.check_config(config)
            reply = measurer.measure(request)
        except protocol.ProtocolError as e:
            protocol.write_message(replies, protocol.error_message(f"bad request: {e}", request_id))
            continue
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            first_line = str(e).strip().splitlines()[0] if str(e).strip() else ""
            protocol.write_message(replies, protocol.error_message(
                f"{type(e).__name__}: {first_line}"[:500], request_id))
            continue
        protocol.write_message(replies, {"type": "measure", "id": request_id, **reply})
    return 0


def main() -> int:
    replies = _protocol_stream()
    try:
        return serve(sys.stdin, replies, _measurer_factory())
    except protocol.ProtocolError as e:
        protocol.write_message(replies, protocol.error_message(f"bad message: {e}"))
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
