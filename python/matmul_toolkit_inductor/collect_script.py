"""Runs a user's script while recording Inductor's GEMM autotuning into a dataset.

    python3 -m matmul_toolkit_inductor.collect_script --output FILE.json -- SCRIPT [ARGS...]

`matmul_toolkit collect-script` starts this. SCRIPT runs as `python3 SCRIPT ARGS...` would
run it (runpy, __name__ == "__main__", sys.argv = [SCRIPT, ARGS...]) inside a
MatmulDatasetCollector; what it compiles with max-autotune lands in FILE, a dataset that
`matmul_toolkit merge`, `stats` and `train` read. Exit codes: 0 done, 1 the script failed
(what was collected before is still saved), 2 bad arguments or no torch, 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from typing import Any, Callable, Optional, Sequence

from .dataset import DatasetError

EXIT_OK = 0
EXIT_SCRIPT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


class ScriptFailed(Exception):
    """The user's script raised or exited with a non-zero status."""


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python3 -m matmul_toolkit_inductor.collect_script",
        description="Run SCRIPT and save Inductor's mm/addmm/bmm autotuning as a dataset.")
    parser.add_argument("--output", required=True, help="dataset file to write (.json)")
    parser.add_argument("--hardware-name", default=None,
                        help="hardware name for the dataset (default: the GPU's name)")
    parser.add_argument("script", help="the Python script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    return parser.parse_args(list(argv))


def run_script(script: str, args: Sequence[str]) -> None:
    """Runs `script` as its own __main__ with sys.argv and sys.path[0] as `python3 script`
    would set them; raises ScriptFailed for an exception or a non-zero sys.exit."""
    saved_argv, saved_path0 = sys.argv, sys.path[0] if sys.path else None
    sys.argv = [script, *args]
    script_dir = os.path.dirname(os.path.abspath(script))
    if sys.path:
        sys.path[0] = script_dir
    else:
        sys.path.append(script_dir)
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            raise ScriptFailed(f"exited with status {e.code}") from None
    except KeyboardInterrupt:
        raise
    except BaseException as e:
        raise ScriptFailed(f"{type(e).__name__}: {e}") from e
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None:
            sys.path[0] = saved_path0


def default_collector(hardware_name: Optional[str]) -> Any:
    """The real collector; raises ImportError when torch is missing."""
    import torch  # noqa: F401  (fail here, before the script runs, when torch is missing)

    from .collector import MatmulDatasetCollector

    return MatmulDatasetCollector(hardware_name=hardware_name)


def collect(script: str, args: Sequence[str], output: str, collector: Any) -> None:
    """Runs the script inside `collector` (an object with start_collection(),
    stop_collection(), get_dataset(), save_to_file()) and saves what it collected, also
    when the script fails (then re-raises ScriptFailed)."""
    collector.start_collection()
    try:
        run_script(script, args)
    finally:
        collector.stop_collection()
        collector.save_to_file(output)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def error(subject: str, what: str) -> None:
    print(f"error: {subject}: {what}", file=sys.stderr)


def main(argv: Optional[Sequence[str]] = None,
         make_collector: Callable[[Optional[str]], Any] = default_collector) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    script_args = args.args[1:] if args.args[:1] == ["--"] else args.args
    if not os.path.isfile(args.script):
        error(args.script, "no such file")
        return EXIT_BAD_INPUT
    if not args.output.endswith(".json"):
        error("--output", f"'{args.output}': the dataset is written as JSON (.json)")
        return EXIT_BAD_INPUT
    try:
        collector = make_collector(args.hardware_name)
    except ImportError as e:
        error("--python", f"torch is not importable here ({e}); run with a Python that has torch")
        return EXIT_BAD_INPUT
    try:
        collect(args.script, script_args, args.output, collector)
    except ScriptFailed as e:
        dataset = collector.get_dataset()
        print(f"collect_script: saved the {plural(dataset.num_problems(), 'problem')} collected "
              f"before the failure to {args.output}", file=sys.stderr)
        error(args.script, str(e))
        return EXIT_SCRIPT_FAILED
    except DatasetError as e:  # the output could not be written
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        error(args.script, f"interrupted; what was collected is saved to {args.output}")
        return EXIT_INTERRUPTED
    dataset = collector.get_dataset()
    print(f"collect_script: {plural(dataset.num_problems(), 'problem')}, "
          f"{plural(dataset.num_timings(), 'timed config')} -> {args.output}", file=sys.stderr)
    if dataset.num_problems() == 0:
        print("collect_script: no mm/addmm/bmm was autotuned: compile with "
              "torch.compile(..., mode=\"max-autotune\") on a CUDA device", file=sys.stderr)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
