"""Puts python/ (the matmul_toolkit_inductor package) on sys.path for every test here."""

from __future__ import annotations

import sys
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parents[2]
PACKAGE_DIR = SOURCE_DIR / "python"
if str(PACKAGE_DIR) not in sys.path:
    sys.path.insert(0, str(PACKAGE_DIR))
