"""dataset.py: the encoder writes what the C++ writer writes; the decoder reads both
torch-diode layouts and names what is wrong in a bad file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from matmul_toolkit_inductor.dataset import (Dataset, DatasetError, GemmConfig, MMShape,
                                             make_shape, parse_op_key)

DATA = Path(__file__).resolve().parents[1] / "data"


def test_shape_key_is_spaced_like_the_cpp_writer() -> None:
    shape = make_shape(1, 32, 32, 32, "float16")
    assert shape.key() == ('{"version": 1, "B": 1, "M": 32, "M_dtype": "float16", "N": 32, '
                           '"K": 32, "K_dtype": "float16", "out_dtype": "float16", '
                           '"out_size": [1, 32, 32], "out_stride": [1024, 32, 1]}')


def test_make_shape_is_a_contiguous_batched_output() -> None:
    shape = make_shape(8, 128, 64, 32, "bfloat16")
    assert shape.out_size == (8, 128, 64)
    assert shape.out_stride == (128 * 64, 64, 1)


def test_config_fields_in_the_cpp_writers_order() -> None:
    config = GemmConfig(name="bmm_config", block_m=128, block_n=64, block_k=32, group_m=8,
                        num_stages=3, num_warps=8, even_k=True)
    assert list(config.to_dict()) == ["ACC_TYPE", "ALLOW_TF32", "EVEN_K", "USE_FAST_ACCUM",
                                      "block_k", "block_m", "block_n", "grid", "group_m", "name",
                                      "num_stages", "num_warps", "version"]


def test_current_layout_file_reads_and_writes_back_byte_for_byte() -> None:
    path = DATA / "dataset_current.json"
    dataset = Dataset.load(path)
    # tests/data/dataset_current.json: 2 hardware, 4 problems, 8 timings (see stats_test.cpp).
    assert list(dataset.hardware) == ["NVIDIA H100", "Ryzen\u2122 9 cpu"]
    assert dataset.num_problems() == 4
    assert dataset.num_timings() == 8
    assert dataset.to_json() == path.read_text(encoding="utf-8")


def test_current_layout_file_values() -> None:
    dataset = Dataset.load(DATA / "dataset_current.json")
    problems = {(hw, op, shape.M, shape.N, shape.K): timed for hw, op, shape, timed in dataset.problems()}
    bmm = problems[("Ryzen\u2122 9 cpu", "bmm_nt", 128, 128, 64)]
    assert [t.time_ms for t in bmm] == [1.5, 2.0]
    assert bmm[0].config == GemmConfig(name="bmm_config", block_m=32, block_n=32, block_k=32,
                                       group_m=1, num_stages=1, num_warps=4)
    addmm = problems[("NVIDIA H100", "addmm", 64, 64, 64)]
    assert addmm[0].config.allow_tf32 is True


def test_legacy_layout_reads_as_the_same_entries() -> None:
    dataset = Dataset.load(DATA / "dataset_legacy.json")
    _, op, shape, timed = next(dataset.problems())
    assert op == "mm"
    assert shape == make_shape(1, 32, 32, 32, "float16")
    assert timed[0].config.block_k == 16
    assert timed[0].time_ms == 0.02611199952661991
    assert "\"name\"" not in dataset.to_json().split("\"config\"")[0]  # written in the current layout


def test_minimal_file_gets_the_defaults() -> None:
    dataset = Dataset.load(DATA / "dataset_minimal.json")
    _, _, _, timed = next(dataset.problems())
    assert timed[0].config.acc_type == "tl.float32"
    assert timed[0].config.even_k is False
    assert timed[0].time_ms == 2.0


@pytest.mark.parametrize("name, message", [
    ("missing_time.json", "missing field 'time'"),
    ("unknown_field.json", "unknown field"),
    ("unknown_dtype.json", "unknown dtype"),
    ("unknown_op.json", "unknown operation"),
    ("negative_dim.json", "must be positive"),
    ("zero_dim.json", "must be positive"),
    ("wrong_type_block.json", "expected an integer"),
    ("wrong_type_time.json", "expected a number"),
    ("config_not_object.json", "config"),
    ("truncated.json", "invalid JSON"),
    ("garbled.json", "invalid JSON"),
])
def test_bad_files_name_the_file_and_the_problem(name: str, message: str) -> None:
    path = DATA / "bad" / name
    with pytest.raises(DatasetError) as caught:
        Dataset.load(path)
    assert str(caught.value).startswith(str(path) + ": ")
    assert message in str(caught.value)


def test_add_groups_by_hardware_op_and_shape() -> None:
    dataset = Dataset()
    shape = make_shape(1, 64, 64, 64, "float16")
    dataset.add("H100", "mm", shape, GemmConfig(block_m=64), 0.5)
    dataset.add("H100", "mm", make_shape(1, 64, 64, 64, "float16"), GemmConfig(block_m=128), 0.25)
    dataset.add("H100", "mm_nt", shape, GemmConfig(), 1.0)
    assert dataset.num_problems() == 2
    assert [t.time_ms for t in dataset.hardware["H100"]["mm"][shape]] == [0.5, 0.25]


@pytest.mark.parametrize("time_ms", [float("inf"), float("nan"), -1.0])
def test_add_refuses_times_the_reader_refuses(time_ms: float) -> None:
    with pytest.raises(DatasetError, match="finite non-negative"):
        Dataset().add("H100", "mm", make_shape(1, 8, 8, 8, "float16"), GemmConfig(), time_ms)


def test_add_refuses_an_unknown_operation() -> None:
    with pytest.raises(DatasetError, match="unknown operation 'conv'"):
        Dataset().add("H100", "conv", make_shape(1, 8, 8, 8, "float16"), GemmConfig(), 1.0)


def test_op_keys() -> None:
    assert parse_op_key("mm") == ("mm", "nn")
    assert parse_op_key("bmm_tn") == ("bmm", "tn")
    with pytest.raises(DatasetError):
        parse_op_key("mm_xx")


def test_save_is_atomic_and_load_round_trips(tmp_path: Path) -> None:
    dataset = Dataset()
    dataset.add("GPU", "addmm", make_shape(1, 100, 200, 300, "float32"),
                GemmConfig(name="addmm_config", allow_tf32=True), 0.123456789)
    path = tmp_path / "sub" / "d.json"
    dataset.save(path)
    dataset.save(path)  # replaces the file
    assert os.listdir(path.parent) == ["d.json"]  # no temporary file left behind
    assert Dataset.load(path) == dataset
    assert json.loads(path.read_text())["hardware"]["GPU"]["operation"]["addmm"]["version"] == 1


def test_save_refuses_a_read_only_file(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text("{}")
    path.chmod(0o444)
    with pytest.raises(DatasetError, match="read-only"):
        Dataset().save(path)


def test_save_writes_json_only(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=".json files only"):
        Dataset().save(tmp_path / "d.msgpack")


def test_shape_from_a_key_with_a_wrong_field() -> None:
    with pytest.raises(DatasetError, match="out_size: expected 3 integers"):
        MMShape.from_key('{"B": 1, "M": 2, "N": 2, "K": 2, "M_dtype": "float16", "K_dtype": "float16", '
                         '"out_dtype": "float16", "out_size": [2, 2], "out_stride": [2, 1, 1]}')


def test_make_shape_gives_int8_an_int32_output_like_the_binary() -> None:
    shape = make_shape(1, 2, 3, 4, "int8")
    assert (shape.M_dtype, shape.K_dtype, shape.out_dtype) == ("int8", "int8", "int32")
    assert make_shape(1, 2, 3, 4, "bfloat16").out_dtype == "bfloat16"
