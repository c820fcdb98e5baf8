"""The Python encoder and decoder of matmul_toolkit's dataset files (torch-diode's layout).

Writes exactly what the C++ side writes (src/core/dataset_io.cpp): the current torch-diode
layout, JSON with an indent of 2, fields in the same order, shape keys in Python's
`json.dumps` spacing, so a file written here is byte for byte what `matmul_toolkit merge`
would write for the same entries. Reads the current and the legacy layout (config as a
JSON string, `name` fields), validating as the C++ reader does. Standard library only.
"""

from __future__ import annotations

import json
import math
import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Union

KNOWN_DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16",
                "int32", "int64", "float8_e4m3fn", "float8_e5m2")
KNOWN_OPS = ("mm", "addmm", "bmm")
KNOWN_LAYOUTS = ("nn", "nt", "tn", "tt")

_CONFIG_KEYS = ("ACC_TYPE", "ALLOW_TF32", "EVEN_K", "USE_FAST_ACCUM", "block_k", "block_m",
                "block_n", "grid", "group_m", "name", "num_stages", "num_warps", "version")
_SHAPE_KEYS = ("version", "B", "M", "M_dtype", "N", "K", "K_dtype", "out_dtype", "out_size",
               "out_stride")

PathLike = Union[str, "os.PathLike[str]"]

_temp_counter = itertools.count()


class DatasetError(ValueError):
    """A dataset that does not follow the format; the message names the file and field."""


def op_key(op: str, layout: str = "nn") -> str:
    """The dataset's operation key: "mm" for layout nn, "mm_nt" for nt, and so on."""
    return op if layout == "nn" else f"{op}_{layout}"


def parse_op_key(key: str) -> tuple[str, str]:
    """Splits an operation key into (op, layout); raises DatasetError on an unknown one."""
    op, _, layout = key.rpartition("_") if "_" in key else (key, "", "nn")
    if op not in KNOWN_OPS or layout not in KNOWN_LAYOUTS:
        raise DatasetError(f"unknown operation '{key}' (expected mm, addmm or bmm, "
                           "optionally followed by _nt, _tn or _tt)")
    return op, layout


def acc_type_for(dtype: str) -> str:
    """Triton's accumulator type for a dtype, as the C++ side writes it."""
    return "tl.int32" if dtype in ("int8", "uint8") else "tl.float32"


@dataclass
class GemmConfig:
    """A Triton-style GEMM config (torch-diode's TritonGEMMConfig)."""

    name: str = "mm_config"
    grid: int = 1
    block_m: int = 64
    block_n: int = 64
    block_k: int = 32
    group_m: int = 8
    num_stages: int = 2
    num_warps: int = 4
    even_k: bool = False
    allow_tf32: bool = False
    use_fast_accum: bool = False
    acc_type: str = "tl.float32"
    version: int = 1

    def to_dict(self) -> dict[str, Any]:
        """The file's config object, keys in the C++ writer's order."""
        return {
            "ACC_TYPE": self.acc_type, "ALLOW_TF32": self.allow_tf32, "EVEN_K": self.even_k,
            "USE_FAST_ACCUM": self.use_fast_accum, "block_k": self.block_k,
            "block_m": self.block_m, "block_n": self.block_n, "grid": self.grid,
            "group_m": self.group_m, "name": self.name, "num_stages": self.num_stages,
            "num_warps": self.num_warps, "version": self.version,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "config") -> GemmConfig:
        _check_object(data, where, _CONFIG_KEYS)
        config = cls(
            name=_string(_required(data, "name", where), f"{where} > name"),
            grid=_integer(_required(data, "grid", where), f"{where} > grid", minimum=None),
            block_m=_integer(_required(data, "block_m", where), f"{where} > block_m"),
            block_n=_integer(_required(data, "block_n", where), f"{where} > block_n"),
            block_k=_integer(_required(data, "block_k", where), f"{where} > block_k"),
            group_m=_integer(_required(data, "group_m", where), f"{where} > group_m"),
            num_stages=_integer(_required(data, "num_stages", where), f"{where} > num_stages"),
            num_warps=_integer(_required(data, "num_warps", where), f"{where} > num_warps"),
        )
        if "EVEN_K" in data:
            config.even_k = _boolean(data["EVEN_K"], f"{where} > EVEN_K")
        if "ALLOW_TF32" in data:
            config.allow_tf32 = _boolean(data["ALLOW_TF32"], f"{where} > ALLOW_TF32")
        if "USE_FAST_ACCUM" in data:
            config.use_fast_accum = _boolean(data["USE_FAST_ACCUM"], f"{where} > USE_FAST_ACCUM")
        if "ACC_TYPE" in data:
            config.acc_type = _string(data["ACC_TYPE"], f"{where} > ACC_TYPE")
        if "version" in data:
            config.version = _integer(data["version"], f"{where} > version", minimum=None)
        return config


@dataclass(frozen=True)
class MMShape:
    """One GEMM problem as torch-diode keys it; dtypes are torch dtype names ("float16")."""

    B: int
    M: int
    N: int
    K: int
    M_dtype: str
    K_dtype: str
    out_dtype: str
    out_size: tuple[int, int, int]
    out_stride: tuple[int, int, int]
    version: int = 1

    def to_dict(self) -> dict[str, Any]:
        """The shape object, keys in the C++ writer's order."""
        return {
            "version": self.version, "B": self.B, "M": self.M, "M_dtype": self.M_dtype,
            "N": self.N, "K": self.K, "K_dtype": self.K_dtype, "out_dtype": self.out_dtype,
            "out_size": list(self.out_size), "out_stride": list(self.out_stride),
        }

    def key(self) -> str:
        """The solution key: the shape as one-line JSON, spaced as Python's json.dumps."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Any, where: str = "shape") -> MMShape:
        _check_object(data, where, _SHAPE_KEYS)
        return cls(
            B=_integer(_required(data, "B", where), f"{where} > B"),
            M=_integer(_required(data, "M", where), f"{where} > M"),
            N=_integer(_required(data, "N", where), f"{where} > N"),
            K=_integer(_required(data, "K", where), f"{where} > K"),
            M_dtype=_dtype(_required(data, "M_dtype", where), f"{where} > M_dtype"),
            K_dtype=_dtype(_required(data, "K_dtype", where), f"{where} > K_dtype"),
            out_dtype=_dtype(_required(data, "out_dtype", where), f"{where} > out_dtype"),
            out_size=_triple(_required(data, "out_size", where), f"{where} > out_size", 1),
            out_stride=_triple(_required(data, "out_stride", where), f"{where} > out_stride", 0),
            version=_integer(data.get("version", 1), f"{where} > version", minimum=None),
        )

    @classmethod
    def from_key(cls, key: str, where: str = "shape key") -> MMShape:
        try:
            data = json.loads(key)
        except ValueError:
            raise DatasetError(f"{where}: shape key is not a JSON object: '{key}'") from None
        return cls.from_dict(data, where)


def make_shape(B: int, M: int, N: int, K: int, dtype: str) -> MMShape:
    """A shape with a contiguous row-major [B, M, N] output, as torch returns it
    (int8 x int8 gives int32, as torch._int_mm does)."""
    return MMShape(B=B, M=M, N=N, K=K, M_dtype=dtype, K_dtype=dtype, out_dtype=out_dtype_for(dtype),
                   out_size=(B, M, N), out_stride=(M * N, N, 1))


def shapeset_document(problems: Iterable[tuple[str, MMShape]]) -> dict[str, Any]:
    """A shapeset as `export-lut --shapeset` and `collect-shapeset --shapeset` read it:
    {"operations": {OP_KEY: {"shapes": [shape, ...]}}}, op keys in first-seen order."""
    operations: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for op, shape in problems:
        parse_op_key(op)
        operations.setdefault(op, {"shapes": []})["shapes"].append(shape.to_dict())
    return {"operations": operations}


def out_dtype_for(dtype: str) -> str:
    """The output dtype of a GEMM of `dtype` operands: int32 for int8, else the same."""
    return "int32" if dtype == "int8" else dtype


@dataclass
class TimedConfig:
    """A config and its measured time in milliseconds."""

    config: GemmConfig
    time_ms: float
    version: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "time": float(self.time_ms), "version": self.version}


@dataclass
class Dataset:
    """hardware -> operation key -> shape -> timed configs, in insertion order."""

    hardware: dict[str, dict[str, dict[MMShape, list[TimedConfig]]]] = field(default_factory=dict)

    def add(self, hardware: str, op: str, shape: MMShape, config: GemmConfig, time_ms: float) -> None:
        """Records one timing; `op` is an operation key ("mm", "bmm_nt", ...)."""
        parse_op_key(op)
        time_ms = float(time_ms)
        if not math.isfinite(time_ms) or time_ms < 0:
            raise DatasetError(f"time of {config.name} on {op}: must be a finite non-negative "
                               f"number of milliseconds, got {time_ms}")
        problems = self.hardware.setdefault(hardware, {}).setdefault(op, {})
        problems.setdefault(shape, []).append(TimedConfig(config, time_ms))

    def merge(self, other: Dataset) -> None:
        for hardware, op, shape, timed in other.problems():
            for entry in timed:
                self.add(hardware, op, shape, entry.config, entry.time_ms)

    def problems(self) -> Iterator[tuple[str, str, MMShape, list[TimedConfig]]]:
        """Every (hardware, op, shape, timed configs), in file order."""
        for hardware, operations in self.hardware.items():
            for op, problems in operations.items():
                for shape, timed in problems.items():
                    yield hardware, op, shape, timed

    def num_problems(self) -> int:
        return sum(1 for _ in self.problems())

    def num_timings(self) -> int:
        return sum(len(timed) for *_, timed in self.problems())

    def to_dict(self) -> dict[str, Any]:
        """The document in torch-diode's current layout."""
        hardware: dict[str, Any] = {}
        for hw_name, operations in self.hardware.items():
            ops: dict[str, Any] = {}
            for op, problems in operations.items():
                solutions = {shape.key(): {"timed_configs": [t.to_dict() for t in timed], "version": 1}
                             for shape, timed in problems.items()}
                ops[op] = {"solution": solutions, "version": 1}
            hardware[hw_name] = {"operation": ops, "version": 1}
        return {"hardware": hardware, "version": 1}

    def to_json(self) -> str:
        """The file's text, as the C++ writer produces it (indent 2, no final newline)."""
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)

    @classmethod
    def from_dict(cls, document: Any, subject: str = "dataset") -> Dataset:
        """Reads either torch-diode layout; raises DatasetError naming `subject` and the field."""
        try:
            return _dataset_from_document(document)
        except DatasetError as e:
            raise DatasetError(f"{subject}: {e}") from None

    def save(self, path: PathLike) -> None:
        """Writes the JSON file atomically (temporary file, then rename)."""
        path = Path(path)
        if path.suffix != ".json":
            raise DatasetError(f"{path}: the Python writer writes .json files only "
                               "(`matmul_toolkit convert` makes msgpack)")
        write_file_atomically(path, self.to_json())

    @classmethod
    def load(cls, path: PathLike) -> Dataset:
        path = Path(path)
        if path.suffix != ".json":
            raise DatasetError(f"{path}: the Python reader reads .json files only")
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise DatasetError(f"{path}: {e.strerror or e}") from None
        try:
            document = json.loads(text)
        except ValueError as e:
            raise DatasetError(f"{path}: invalid JSON: {e}") from None
        return cls.from_dict(document, str(path))


def write_file_atomically(path: Path, text: str) -> None:
    """Writes `text` to `<path>.tmp<pid>_<n>`, syncs it and renames it over `path` (the
    temporary name is the one the C++ writer uses and cleans up after a killed writer)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        raise DatasetError(f"{path}: is a directory, expected a file")
    # The rename would replace a read-only file (root ignores modes), so it is refused here.
    if path.exists() and (not os.access(path, os.W_OK) or path.stat().st_mode & 0o222 == 0):
        raise DatasetError(f"{path}: is read-only; not overwriting it")
    temp = path.with_name(f"{path.name}.tmp{os.getpid()}_{next(_temp_counter)}")
    try:
        with open(temp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except OSError as e:
        temp.unlink(missing_ok=True)
        raise DatasetError(f"{path}: cannot write: {e.strerror or e}") from None


def _dataset_from_document(document: Any) -> Dataset:
    if not isinstance(document, dict):
        raise DatasetError(f"expected an object at the top level, got {_type_name(document)}")
    if "hardware" not in document:
        raise DatasetError("missing field 'hardware' (not a torch-diode dataset)")
    _check_object(document, "", ("hardware", "version"))
    dataset = Dataset()
    hardware = _object(document["hardware"], "hardware")
    for hw_name, hw in hardware.items():
        hw_where = f"hardware '{hw_name}'"
        _check_object(hw, hw_where, ("operation", "version"))
        operations = _object(_required(hw, "operation", hw_where), f"{hw_where} > operation")
        for op, operation in operations.items():
            op_where = f"{hw_where} > operation '{op}'"
            try:
                parse_op_key(op)
            except DatasetError as e:
                raise DatasetError(f"{op_where}: {e}") from None
            _check_object(operation, op_where, ("name", "solution", "version"))
            solutions = _object(_required(operation, "solution", op_where), f"{op_where} > solution")
            for index, (key, solution) in enumerate(solutions.items()):
                sol_where = f"{op_where} > solution[{index}]"
                shape = MMShape.from_key(key, f"{sol_where} > shape key")
                _check_object(solution, sol_where, ("name", "timed_configs", "version"))
                timed = _required(solution, "timed_configs", sol_where)
                if not isinstance(timed, list):
                    raise DatasetError(f"{sol_where} > timed_configs: expected a list, got {_type_name(timed)}")
                for i, entry in enumerate(timed):
                    tc_where = f"{sol_where} > timed_configs[{i}]"
                    _check_object(entry, tc_where, ("config", "time", "version"))
                    config = _config(_required(entry, "config", tc_where), f"{tc_where} > config")
                    time_ms = _required(entry, "time", tc_where)
                    if isinstance(time_ms, bool) or not isinstance(time_ms, (int, float)):
                        raise DatasetError(f"{tc_where} > time: expected a number, got {_type_name(time_ms)}")
                    if not math.isfinite(time_ms) or time_ms < 0:
                        raise DatasetError(f"{tc_where} > time: must be a finite non-negative number of milliseconds")
                    dataset.add(hw_name, op, shape, config, time_ms)
    return dataset


def _config(value: Any, where: str) -> GemmConfig:
    if isinstance(value, str):  # the legacy layout: the config as a JSON string
        try:
            value = json.loads(value)
        except ValueError:
            raise DatasetError(f"{where}: config string is not valid JSON") from None
    return GemmConfig.from_dict(value, where)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _join(where: str, what: str) -> str:
    return f"{where}: {what}" if where else what


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DatasetError(_join(where, f"expected an object, got {_type_name(value)}"))
    return value


def _check_object(value: Any, where: str, allowed: tuple[str, ...]) -> None:
    _object(value, where)
    for key in value:
        if key not in allowed:
            raise DatasetError(_join(where, f"unknown field '{key}'"))


def _required(data: dict[str, Any], key: str, where: str) -> Any:
    if key not in data:
        raise DatasetError(_join(where, f"missing field '{key}'"))
    return data[key]


def _integer(value: Any, where: str, minimum: Optional[int] = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DatasetError(f"{where}: expected an integer, got {_type_name(value)}")
    if minimum is not None and value < minimum:
        what = f"must be positive, got {value}" if minimum == 1 else f"must be at least {minimum}, got {value}"
        raise DatasetError(f"{where}: {what}")
    return value


def _boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise DatasetError(f"{where}: expected true or false, got {_type_name(value)}")
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise DatasetError(f"{where}: expected a string, got {_type_name(value)}")
    return value


def _dtype(value: Any, where: str) -> str:
    name = _string(value, where)
    if name not in KNOWN_DTYPES:
        raise DatasetError(f"{where}: unknown dtype '{name}' (known: {', '.join(KNOWN_DTYPES)})")
    return name


def _triple(value: Any, where: str, minimum: int) -> tuple[int, int, int]:
    if not isinstance(value, list):
        raise DatasetError(f"{where}: expected a list, got {_type_name(value)}")
    if len(value) != 3:
        raise DatasetError(f"{where}: expected 3 integers, got a list of {len(value)}")
    a, b, c = (_integer(v, f"{where}[{i}]", minimum) for i, v in enumerate(value))
    return (a, b, c)
