"""dataset.py against the C++ reader and writer: files written here are read by
`matmul_toolkit stats` and `merge`, and `merge` writes them back byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from matmul_toolkit_inductor.dataset import Dataset, GemmConfig, make_shape

SOURCE_DIR = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("MMT_CLI", SOURCE_DIR / "build" / "src" / "cli" / "matmul_toolkit"))
if not CLI.is_file():
    pytest.skip(f"no matmul_toolkit binary at {CLI} (build it, or set MMT_CLI)", allow_module_level=True)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *args], capture_output=True, text=True)


def sample() -> Dataset:
    """Two hardware names (one not ASCII), a layout key, an ATen reference, odd floats."""
    dataset = Dataset()
    mm = make_shape(1, 1000, 512, 333, "bfloat16")
    dataset.add("NVIDIA H100 80GB HBM3", "mm", mm,
                GemmConfig(name="mm_config", block_m=128, block_n=64, block_k=64, num_stages=4), 0.0123456789)
    dataset.add("NVIDIA H100 80GB HBM3", "mm", mm,
                GemmConfig(name="aten_mm", block_m=1, block_n=1, block_k=1, group_m=1, num_stages=1,
                           num_warps=1), 1e-05)
    dataset.add("NVIDIA H100 80GB HBM3", "bmm_nt", make_shape(4, 64, 64, 64, "float32"),
                GemmConfig(name="bmm_config", allow_tf32=True, even_k=True), 100.0)
    dataset.add("Ryzen\u2122 9", "addmm", make_shape(1, 7, 9, 11, "float32"), GemmConfig(name="addmm_config"), 3)
    return dataset


def test_stats_reads_a_python_written_dataset(tmp_path: Path) -> None:
    path = tmp_path / "py.json"
    sample().save(path)
    result = cli("stats", str(path), "--json")
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert (stats["hardware_count"], stats["operations"], stats["problems"], stats["timed_configs"]) == (2, 3, 3, 4)


def test_merge_writes_a_python_written_dataset_back_byte_for_byte(tmp_path: Path) -> None:
    path, merged = tmp_path / "py.json", tmp_path / "merged.json"
    sample().save(path)
    result = cli("merge", "--inputs", str(path), "--output", str(merged))
    assert result.returncode == 0, result.stderr
    assert merged.read_bytes() == path.read_bytes()


def test_merge_combines_python_written_shards(tmp_path: Path) -> None:
    shape = make_shape(1, 64, 64, 64, "float16")
    for i, time_ms in enumerate((1.0, 3.0, 2.0)):
        shard = Dataset()
        shard.add("GPU", "mm", shape, GemmConfig(), time_ms)
        shard.save(tmp_path / "shards" / f"s{i}.json")
    result = cli("merge", "--inputs", str(tmp_path / "shards"), "--output", str(tmp_path / "merged.json"))
    assert result.returncode == 0, result.stderr
    merged = Dataset.load(tmp_path / "merged.json")
    assert [t.time_ms for t in merged.hardware["GPU"]["mm"][shape]] == [2.0]  # the median


def test_the_cpp_conversion_of_the_legacy_layout_equals_ours(tmp_path: Path) -> None:
    legacy = SOURCE_DIR / "tests" / "data" / "dataset_legacy.json"
    result = cli("convert", "--input-files", str(legacy), "--output-dir", str(tmp_path),
                 "--diode-layout", "current", "--format", "json")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / legacy.name).read_text(encoding="utf-8") == Dataset.load(legacy).to_json()
