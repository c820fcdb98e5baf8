"""collect_script.py: runs a script inside a collector and saves what it collected, with a
fake collector (no torch); without torch it fails with one error line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

from matmul_toolkit_inductor import collect_script
from matmul_toolkit_inductor.dataset import Dataset, GemmConfig, make_shape

SOURCE_DIR = Path(__file__).resolve().parents[2]


class FakeCollector:
    """Records one mm timing when collection starts, as if the script had compiled one."""

    def __init__(self, hardware_name: Optional[str]) -> None:
        self.dataset = Dataset()
        self.hardware_name = hardware_name or "Fake GPU"
        self.events: list[str] = []

    def start_collection(self) -> None:
        self.events.append("start")
        self.dataset.add(self.hardware_name, "mm", make_shape(1, 8, 8, 8, "float16"), GemmConfig(), 0.5)

    def stop_collection(self) -> None:
        self.events.append("stop")

    def get_dataset(self) -> Dataset:
        return self.dataset

    def save_to_file(self, path: str) -> None:
        self.events.append("save")
        self.dataset.save(path)


def script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "user_script.py"
    path.write_text(body)
    return str(path)


def run(argv: list[str]) -> tuple[int, list[FakeCollector]]:
    made: list[FakeCollector] = []

    def make(hardware_name: Optional[str]) -> FakeCollector:
        made.append(FakeCollector(hardware_name))
        return made[-1]

    return collect_script.main(argv, make_collector=make), made


def test_runs_the_script_as_main_with_its_arguments_and_saves(tmp_path: Path) -> None:
    marker = tmp_path / "argv.txt"
    path = script(tmp_path, "import sys\n"
                            f"if __name__ == '__main__':\n    open({str(marker)!r}, 'w').write(repr(sys.argv))\n")
    output = tmp_path / "out.json"
    code, made = run(["--output", str(output), "--hardware-name", "H", "--", path, "a", "--b"])
    assert code == 0
    assert marker.read_text() == repr([path, "a", "--b"])
    assert made[0].events == ["start", "stop", "save"]
    assert list(Dataset.load(output).hardware) == ["H"]


def test_a_script_that_raises_fails_with_its_error_and_keeps_the_data(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = script(tmp_path, "raise ValueError('bad shape')\n")
    output = tmp_path / "out.json"
    code, made = run(["--output", str(output), path])
    assert code == 1
    assert capsys.readouterr().err.splitlines()[-1] == f"error: {path}: ValueError: bad shape"
    assert made[0].events == ["start", "stop", "save"]
    assert Dataset.load(output).num_problems() == 1


def test_sys_exit_zero_is_success_and_nonzero_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--output", str(tmp_path / "a.json"), script(tmp_path, "import sys; sys.exit(0)\n")])[0] == 0
    code, _ = run(["--output", str(tmp_path / "b.json"), script(tmp_path, "import sys; sys.exit(3)\n")])
    assert code == 1
    assert capsys.readouterr().err.splitlines()[-1].endswith(": exited with status 3")


def test_sys_argv_and_path_are_restored(tmp_path: Path) -> None:
    argv, path0 = list(sys.argv), sys.path[0]
    run(["--output", str(tmp_path / "a.json"), script(tmp_path, "x = 1\n"), "arg"])
    assert sys.argv == argv and sys.path[0] == path0


def test_missing_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, made = run(["--output", str(tmp_path / "a.json"), str(tmp_path / "none.py")])
    assert code == 2 and not made
    assert capsys.readouterr().err == f"error: {tmp_path / 'none.py'}: no such file\n"


def test_output_must_be_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run(["--output", str(tmp_path / "a.msgpack"), script(tmp_path, "")])
    assert code == 2
    assert capsys.readouterr().err.startswith("error: --output: ")


def test_without_torch_one_error_line(tmp_path: Path) -> None:
    # tests/cli/fake_torch/missing: a torch whose import fails, even where torch is installed.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SOURCE_DIR / "python"),
                                                       str(SOURCE_DIR / "tests/cli/fake_torch/missing")]))
    result = subprocess.run([sys.executable, "-m", "matmul_toolkit_inductor.collect_script",
                             "--output", str(tmp_path / "a.json"), "--", script(tmp_path, "")],
                            env=env, capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.startswith("error: --python: torch is not importable here")
    assert len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "a.json").exists()
