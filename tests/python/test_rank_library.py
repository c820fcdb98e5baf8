"""The package's torch-free side over the built libmmt_rank.so: `python3 -m
matmul_toolkit_inductor.recommend --json` prints what `matmul_toolkit recommend --json
--no-prune` prints, its decisions are export-lut's tables, bad model files are one error line.
Skipped, visibly, where the library or the binary is not built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from matmul_toolkit_inductor import rank_library
from matmul_toolkit_inductor.rank_library import RankLibraryError, RankModel

SOURCE_DIR = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("MMT_CLI", SOURCE_DIR / "build" / "src" / "cli" / "matmul_toolkit"))
MODEL = SOURCE_DIR / "data" / "models" / "inductor_h200.pt"
SHAPESETS = [SOURCE_DIR / "data" / "shapesets" / name for name in ("model_suite.json", "transformer_shapes.json")]


def library() -> Path:
    found = next((p for p in rank_library.library_candidates() if p.is_file()), None)
    if found is None:
        pytest.skip(f"{rank_library.LIBRARY_NAME} is not built (looked at "
                    f"{', '.join(map(str, rank_library.library_candidates()))})")
    if not CLI.is_file():
        pytest.skip(f"{CLI} is not built")
    return found


def without_timing(document: dict[str, Any]) -> dict[str, Any]:
    for problem in document["problems"]:
        problem.pop("ranking_ms")
    return document


def run_module(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(SOURCE_DIR / "python"), MMT_RANK_LIBRARY=str(library()))
    code = ("import sys, runpy; sys.argv = ['recommend'] + sys.argv[1:]; "
            "runpy.run_module('matmul_toolkit_inductor.recommend', run_name='__main__', alter_sys=True)")
    guard = "import sys; sys.modules['torch'] = None; " + code  # any import of torch fails
    return subprocess.run([sys.executable, "-c", guard, *args], env=env, capture_output=True, text=True)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), "recommend", *args], capture_output=True, text=True)


@pytest.mark.parametrize("args", [
    ["--m", "1024", "--n", "4096", "--k", "4096", "--dtype", "bfloat16"],
    ["--op", "bmm", "--batch", "8", "--m", "512", "--n", "64", "--k", "512", "--dtype", "float16", "--layout", "nt",
     "--top-k", "3", "--search-space", "EXHAUSTIVE"],
    ["--shapeset", str(SHAPESETS[0]), "--top-k", "2"],
    ["--shapeset", str(SHAPESETS[1]), "--top-k", "1"],
])
def test_the_torch_free_recommend_prints_what_the_binary_prints(args: list[str]) -> None:
    library()
    ours = run_module("--model", str(MODEL), "--json", *args)
    theirs = run_cli("--model", str(MODEL), "--json", "--no-prune", *args)
    assert ours.returncode == 0, ours.stderr
    assert theirs.returncode == 0, theirs.stderr
    assert without_timing(json.loads(ours.stdout)) == without_timing(json.loads(theirs.stdout))


def test_bad_input_is_the_binarys_error_line() -> None:
    library()
    ours, theirs = run_module("--n", "64", "--k", "64"), run_cli("--n", "64", "--k", "64")
    assert ours.returncode == 2 and theirs.returncode == 2
    assert ours.stderr.strip().splitlines()[-1] == "error: --m: required (or give --shapeset)"


def test_a_file_that_is_no_model_is_one_error(tmp_path: Path) -> None:
    library()
    for content in (b"", b"PK\x03\x04 truncated", json.dumps({"hardware": {}}).encode()):
        path = tmp_path / "bad.pt"
        path.write_bytes(content)
        with pytest.raises(RankLibraryError) as caught:
            RankModel.open(path)
        assert caught.value.status == rank_library.BAD_INPUT
        assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)
    result = run_module("--model", str(tmp_path / "missing.pt"), "--m", "8", "--n", "8", "--k", "8")
    assert result.returncode == 2 and result.stderr.startswith(f"error: {tmp_path / 'missing.pt'}")


def test_decisions_are_the_tables_export_lut_writes(tmp_path: Path) -> None:
    library()
    shapeset = SHAPESETS[0]
    with RankModel.open(MODEL) as model:
        for policy in ("graph", "graph-both-addmm", "isolated"):
            table_path = tmp_path / f"{policy}.json"
            done = subprocess.run([str(CLI), "export-lut", "--model", str(MODEL), "--shapeset", str(shapeset),
                                   "--policy", policy, "--output", str(table_path)], capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            table = json.loads(table_path.read_text())
            operations = json.loads(shapeset.read_text())["operations"]
            decided = []
            for op, entry in operations.items():
                for shape in entry["shapes"]:
                    answer = model.decide({"op": op, "shape": shape, "policy": policy})
                    decided.append(answer["entries"])
                    assert len(answer["predicted_ms"]) == len(answer["entries"])
            # every decision is the table entry of its problem's own key (the table also holds
            # the problems' other forms: padded, batch-1 bmm as mm)
            assert all(entries in table.values() for entries in decided)


def test_the_hook_decides_through_the_library_as_export_lut_does() -> None:
    library()
    from test_model_hook import linear

    from matmul_toolkit_inductor.model_hook import ModelHook

    with RankModel.open(MODEL) as model:
        hook = ModelHook(model)  # the default policy: graph
        # Llama's gate/up projection: ATen alone in the graph policy's table (model_suite.json)
        assert hook.lookup(linear(2048, 5632, 2048), "mm", ["aten::mm", "triton::mm"]) == {"aten::mm": [{}]}
        addmm = hook.lookup(linear(4096, 3072, 768, bias=True), "addmm",
                            ["aten::bias_addmm", "aten::addmm", "triton::mm"])
        assert list(addmm) in (["aten::bias_addmm"], ["triton::mm"])
        info = model.info()
        assert info["hardware"] == "NVIDIA H200" and len(info["sha256"]) == 64
    assert "fallback" not in hook.explain()
