"""A PEP 517 build backend for matmul_toolkit_inductor, standard library only: a wheel is a zip
of the package's modules (and libmmt_rank.so where the folder holds one) with its metadata, so
`pip install ./python` builds offline, in pip's isolated environment, without setuptools."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import zipfile
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
PACKAGE = "matmul_toolkit_inductor"
LIBRARY = "libmmt_rank.so"


def _project() -> dict[str, Any]:
    """pyproject.toml's [project] table (tomllib where Python has it, 3.11 on)."""
    text = (HERE / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib
    except ImportError:  # the flat string fields this file uses
        table = text.split("[project]", 1)[1].split("\n[", 1)[0]
        fields: dict[str, Any] = dict(re.findall(r'^(\w[\w-]*)\s*=\s*"([^"]*)"', table, re.M))
        fields["license"] = {"text": re.search(r'license\s*=\s*\{text\s*=\s*"([^"]*)"', table).group(1)}
        return fields
    return tomllib.loads(text)["project"]


def _files() -> list[Path]:
    """The package's modules, and the C library when this folder has one."""
    package = HERE / PACKAGE
    files = sorted(p for p in package.glob("*.py"))
    if (package / LIBRARY).is_file():
        files.append(package / LIBRARY)
    return files


def _tag() -> str:
    """py3-none-any, or the platform's tag when the wheel carries the C library."""
    if not (HERE / PACKAGE / LIBRARY).is_file():
        return "py3-none-any"
    return f"py3-none-linux_{os.uname().machine}"


def _metadata(project: dict[str, Any]) -> str:
    return (f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
            f"Summary: {project['description']}\nRequires-Python: {project['requires-python']}\n"
            f"License: {project['license']['text']}\n")


def _dist_info(project: dict[str, Any]) -> str:
    return f"{project['name']}-{project['version']}.dist-info"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings: Optional[dict[str, Any]] = None) -> list[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict[str, Any]] = None) -> list[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Optional[dict[str, Any]] = None) -> str:
    project = _project()
    folder = Path(metadata_directory) / _dist_info(project)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "METADATA").write_text(_metadata(project))
    (folder / "WHEEL").write_text(_wheel_file(_tag()))
    return folder.name


def _wheel_file(tag: str) -> str:
    return f"Wheel-Version: 1.0\nGenerator: _mmt_build\nRoot-Is-Purelib: {'true' if tag.endswith('any') else 'false'}\nTag: {tag}\n"


def _write_wheel(wheel_directory: str, entries: list[tuple[str, bytes]]) -> str:
    project, tag = _project(), _tag()
    name = f"{project['name']}-{project['version']}-{tag}.whl"
    dist_info = _dist_info(project)
    entries = entries + [(f"{dist_info}/METADATA", _metadata(project).encode()),
                         (f"{dist_info}/WHEEL", _wheel_file(tag).encode())]
    record = [_record_line(n, d) for n, d in entries] + [f"{dist_info}/RECORD,,"]
    entries.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    path = Path(wheel_directory) / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for entry, data in entries:
            info = zipfile.ZipInfo(entry, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if entry.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    return name


def build_wheel(wheel_directory: str, config_settings: Optional[dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, [(f"{PACKAGE}/{p.name}", p.read_bytes()) for p in _files()])


def build_editable(wheel_directory: str, config_settings: Optional[dict[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    """An editable install: a .pth file that puts this folder on sys.path."""
    return _write_wheel(wheel_directory, [(f"{PACKAGE}.pth", (str(HERE) + "\n").encode())])
