"""A stand-in for torch (see ../../README.md)."""

from . import cuda  # noqa: F401

__version__ = "0.0+fake"
