"""Inductor's feedback-saver registry, and fake_autotune() to call the savers."""

from __future__ import annotations

from typing import Any, Callable


class _Cache:
    def __init__(self) -> None:
        self.feedback_saver_fns: list[Callable[..., None]] = []


_CACHE = _Cache()


def get_algorithm_selector_cache() -> _Cache:
    return _CACHE


def add_feedback_saver(fn: Callable[..., None]) -> None:
    _CACHE.feedback_saver_fns.append(fn)


def fake_autotune(name: str, input_nodes: list[Any], timings: dict[Any, float]) -> None:
    """What AlgorithmSelectorCache does after benchmarking: every saver gets the timings."""
    for fn in _CACHE.feedback_saver_fns:
        fn(timings, name, input_nodes, list(timings), lambda: timings, {})
