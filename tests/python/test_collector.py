"""collector.py: autotunings become dataset entries; the feedback saver is registered and
removed (against tests/cli/fake_torch/working, a stand-in for torch's registry)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

from fakes import FakeChoice, FakeNode, aten_choice, triton_choice
from matmul_toolkit_inductor.collector import MatmulDatasetCollector, timed_configs
from matmul_toolkit_inductor.dataset import Dataset, make_shape

SOURCE_DIR = Path(__file__).resolve().parents[2]
FAKE_TORCH = SOURCE_DIR / "tests" / "cli" / "fake_torch" / "working"


def mm_nodes(M: int = 64, N: int = 32, K: int = 96) -> list[FakeNode]:
    return [FakeNode([M, K]), FakeNode([K, N])]


def collector() -> MatmulDatasetCollector:
    return MatmulDatasetCollector(hardware_name="Test GPU")


def test_an_mm_autotuning_becomes_one_problem() -> None:
    c = collector()
    fast, slow = triton_choice(64, 32, 32, index=1), triton_choice(128, 32, 32, index=2)
    added = c.record_autotuning({slow: 0.03, fast: 0.01, aten_choice(): 0.02}, "mm", mm_nodes())
    assert added == 3
    timed = c.get_dataset().hardware["Test GPU"]["mm"][make_shape(1, 64, 32, 96, "float16")]
    assert [(t.config.name, t.config.block_m, t.time_ms) for t in timed] == [
        ("mm_config", 128, 0.03), ("mm_config", 64, 0.01), ("aten_mm", 1, 0.02)]


def test_an_int_mm_autotuning_is_an_int8_mm() -> None:
    c = collector()
    nodes = [FakeNode([64, 96], dtype="torch.int8"), FakeNode([96, 32], dtype="torch.int8")]
    added = c.record_autotuning({triton_choice(64, 32, 32): 0.01, aten_choice("_int_mm"): 0.02}, "int_mm", nodes)
    assert added == 2
    shape = make_shape(1, 64, 32, 96, "int8")
    assert shape.out_dtype == "int32"
    timed = c.get_dataset().hardware["Test GPU"]["mm"][shape]
    assert [(t.config.name, t.time_ms) for t in timed] == [("mm_config", 0.01), ("aten_mm", 0.02)]


def test_failed_choices_are_left_out() -> None:
    c = collector()
    c.record_autotuning({triton_choice(64, 32, 32): float("inf"), triton_choice(32, 32, 32, index=1): float("nan"),
                         aten_choice(): 0.5}, "mm", mm_nodes())
    assert c.get_dataset().num_timings() == 1


def test_same_config_twice_keeps_the_fastest() -> None:
    # addmm's ATen choices (aten_addmm, aten_bias_addmm) are one reference config.
    entries = timed_configs({aten_choice("addmm"): 0.4, aten_choice("bias_addmm"): 0.3}, "addmm", 64, "float16")
    assert [(c.name, t) for c, t in entries] == [("aten_addmm", 0.3)]


def test_other_ops_and_unreadable_nodes_are_skipped() -> None:
    c = collector()
    assert c.record_autotuning({aten_choice(): 0.1}, "convolution", mm_nodes()) == 0
    assert c.record_autotuning({aten_choice(): 0.1}, "mm", [FakeNode([4, 5]), FakeNode([6, 4])]) == 0
    assert c.skipped == 2
    assert c.get_dataset().num_problems() == 0


def test_gemms_off_cuda_are_skipped() -> None:
    c = collector()
    nodes = [FakeNode([8, 8], device="cpu"), FakeNode([8, 8], device="cpu")]
    assert c.record_autotuning({aten_choice(): 0.1}, "mm", nodes) == 0
    assert c.get_dataset().num_problems() == 0


def test_a_problem_seen_again_is_not_added_twice() -> None:
    c = collector()
    c.record_autotuning({aten_choice(): 0.1}, "mm", mm_nodes())
    assert c.record_autotuning({aten_choice(): 0.2}, "mm", mm_nodes()) == 0
    assert c.get_dataset().num_timings() == 1


def test_hardware_name_comes_from_the_device_of_the_inputs() -> None:
    c = MatmulDatasetCollector(device_name=lambda node: f"GPU of {node.get_device().type}")
    c.record_autotuning({aten_choice("bmm"): 0.1}, "bmm", [FakeNode([2, 4, 4]), FakeNode([2, 4, 4])])
    assert list(c.get_dataset().hardware) == ["GPU of cuda"]


def test_feedback_errors_never_reach_the_compilation() -> None:
    c = collector()

    class Broken:
        def get_size(self) -> list:
            raise RuntimeError("boom")

    c._feedback({aten_choice(): 0.1}, "mm", [Broken(), Broken()])
    assert c.skipped == 1


def test_table_rows_fastest_first_per_problem(tmp_path: Path) -> None:
    c = collector()
    c.record_autotuning({triton_choice(128, 32, 32): 0.03, triton_choice(64, 32, 32, index=1): 0.01},
                        "mm", mm_nodes())
    c.record_autotuning({aten_choice("bmm"): 0.5}, "bmm", [FakeNode([2, 8, 4]), FakeNode([2, 4, 8])])
    rows = c.to_table()
    assert [(r["op"], r["block_m"], r["time_ms"]) for r in rows] == [("mm", 64, 0.01), ("mm", 128, 0.03),
                                                                     ("bmm", 1, 0.5)]
    assert rows[0]["hardware"] == "Test GPU" and (rows[0]["M"], rows[0]["N"], rows[0]["K"]) == (64, 32, 96)
    path = tmp_path / "table.csv"
    c.save_table_to_file(path)
    with open(path, newline="") as f:
        read = list(csv.DictReader(f))
    assert [r["time_ms"] for r in read] == ["0.01", "0.03", "0.5"]
    assert read[2]["name"] == "aten_bmm"


def test_save_and_load(tmp_path: Path) -> None:
    c = collector()
    c.record_autotuning({triton_choice(64, 32, 32): 0.01}, "mm", mm_nodes())
    c.save_to_file(tmp_path / "d.json")
    other = collector()
    other.load_from_file(tmp_path / "d.json")
    assert other.get_dataset() == c.get_dataset()
    assert Dataset.load(tmp_path / "d.json").num_timings() == 1


REGISTRATION_CHECK = """
from torch._inductor import config, select_algorithm
from matmul_toolkit_inductor.collector import MatmulDatasetCollector

def theirs(*args):
    pass

select_algorithm.add_feedback_saver(theirs)
with MatmulDatasetCollector(hardware_name="Fake") as c:
    assert len(select_algorithm.get_algorithm_selector_cache().feedback_saver_fns) == 2
    assert config.force_disable_caches is True
    c.start_collection()  # a second start registers nothing more
    assert len(select_algorithm.get_algorithm_selector_cache().feedback_saver_fns) == 2
assert select_algorithm.get_algorithm_selector_cache().feedback_saver_fns == [theirs]
assert config.force_disable_caches is False
print("ok")
"""


def test_start_and_stop_register_only_our_saver() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SOURCE_DIR / "python"), str(FAKE_TORCH)]))
    result = subprocess.run([sys.executable, "-c", REGISTRATION_CHECK], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"
