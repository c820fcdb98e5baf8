"""MatmulDatasetCollector: records Inductor's own GEMM autotuning as a dataset.

torch-diode's collector API over this project's dataset encoder. While collecting, a
feedback saver registered with Inductor (torch._inductor.select_algorithm.add_feedback_saver)
receives every autotuning's timings; each mm, addmm and bmm becomes one problem whose
entries are the Triton template choices (mm_config, addmm_config, bmm_config) and the ATen
choice (aten_<op>, as the C++ side records its reference). Choices that failed (infinite
time) are left out.

    with MatmulDatasetCollector() as collector:
        torch.compile(model, mode="max-autotune")(x)
    collector.save_to_file("inductor.json")

torch is imported only when collection starts.
"""

from __future__ import annotations

import csv
import logging
import math
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from .choices import AUTOTUNED_OPS, config_from_choice, problem_from_nodes
from .dataset import Dataset, GemmConfig, PathLike

log = logging.getLogger(__name__)

TABLE_COLUMNS = ("hardware", "op", "B", "M", "N", "K", "M_dtype", "K_dtype", "out_dtype",
                 "name", "block_m", "block_n", "block_k", "group_m", "num_stages", "num_warps",
                 "even_k", "allow_tf32", "use_fast_accum", "acc_type", "time_ms")


def on_cuda(node: Any) -> bool:
    """True when an input node lives on a CUDA device (or does not say where it lives)."""
    device = node.get_device() if hasattr(node, "get_device") else None
    return device is None or getattr(device, "type", "cuda") == "cuda"


def cuda_device_name(node: Any) -> Optional[str]:
    """torch.cuda.get_device_name() of the device an input node lives on."""
    import torch

    return torch.cuda.get_device_name(node.get_device() if hasattr(node, "get_device") else None)


def timed_configs(timings: dict[Any, float], op: str, K: int, dtype: str) -> list[tuple[GemmConfig, float]]:
    """The recordable choices of one autotuning and their times in ms: failed choices
    (infinite or NaN time) left out, and of choices with the same config (addmm's two ATen
    kernels) the fastest kept."""
    best: dict[str, tuple[GemmConfig, float]] = {}
    for choice, time_ms in timings.items():
        try:
            time_ms = float(time_ms)
        except (TypeError, ValueError):
            continue
        if not math.isfinite(time_ms) or time_ms < 0:
            continue
        config = config_from_choice(choice, op, K, dtype)
        if config is None:
            continue
        label = repr(config)
        if label not in best or time_ms < best[label][1]:
            best[label] = (config, time_ms)
    return list(best.values())


class MatmulDatasetCollector:
    """Collects mm/addmm/bmm autotuning results while active (a context manager, or
    start_collection() / stop_collection())."""

    def __init__(self, hardware_name: Optional[str] = None, fresh: bool = True,
                 device_name: Callable[[Any], Optional[str]] = cuda_device_name) -> None:
        """`hardware_name` overrides the GPU name written into the dataset. `fresh` turns
        Inductor's caches off while collecting (torch.compiler.config.force_disable_caches):
        a cached compiled graph would skip autotuning, and so its timings."""
        self.hardware_name = hardware_name
        self.fresh = fresh
        self._device_name = device_name
        self._dataset = Dataset()
        self._saver: Optional[Callable[..., None]] = None
        self._previous_force_disable_caches: Optional[bool] = None
        self.skipped = 0  # autotunings seen that were not mm/addmm/bmm or not readable

    # --- collection -------------------------------------------------------------------

    def start_collection(self) -> None:
        """Registers the feedback saver with Inductor (again calls are no-ops)."""
        if self._saver is not None:
            return
        from torch._inductor import config as inductor_config
        from torch._inductor import select_algorithm

        if self.fresh:
            self._previous_force_disable_caches = inductor_config.force_disable_caches
            inductor_config.force_disable_caches = True

        def saver(timings: dict[Any, float], name: str, input_nodes: list[Any],
                  choices: list[Any], *_: Any) -> None:
            self._feedback(timings, name, input_nodes)

        self._saver = saver
        select_algorithm.add_feedback_saver(saver)

    def stop_collection(self) -> None:
        """Removes this collector's feedback saver, and only it."""
        if self._saver is None:
            return
        from torch._inductor import config as inductor_config
        from torch._inductor import select_algorithm

        cache = select_algorithm.get_algorithm_selector_cache()
        cache.feedback_saver_fns = [fn for fn in cache.feedback_saver_fns if fn is not self._saver]
        self._saver = None
        if self._previous_force_disable_caches is not None:
            inductor_config.force_disable_caches = self._previous_force_disable_caches
            self._previous_force_disable_caches = None

    @property
    def collecting(self) -> bool:
        return self._saver is not None

    def __enter__(self) -> MatmulDatasetCollector:
        self.start_collection()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop_collection()

    def _feedback(self, timings: dict[Any, float], name: str, input_nodes: Sequence[Any]) -> None:
        # Runs inside the user's compilation: a failure here must not fail their model.
        try:
            self.record_autotuning(timings, name, input_nodes)
        except Exception:
            self.skipped += 1
            log.warning("matmul_toolkit: could not record the autotuning of %s", name, exc_info=True)

    def record_autotuning(self, timings: dict[Any, float], name: str, input_nodes: Sequence[Any]) -> int:
        """Adds one autotuning's results to the dataset; returns the number of entries added.
        A problem already in the dataset (the same GEMM compiled again) is not added twice."""
        op_name = AUTOTUNED_OPS.get(name)
        if op_name is None:
            self.skipped += 1
            return 0
        problem = problem_from_nodes(op_name, input_nodes)
        if problem is None:
            self.skipped += 1
            return 0
        op, shape = problem
        if not on_cuda(input_nodes[-1]):  # Inductor's CPU GEMMs are not Triton configs
            self.skipped += 1
            return 0
        hardware = self.hardware_name or self._device_name(input_nodes[-1])
        if not hardware:
            self.skipped += 1
            return 0
        if shape in self._dataset.hardware.get(hardware, {}).get(op, {}):
            return 0
        entries = timed_configs(timings, op_name, shape.K, shape.M_dtype)
        for config, time_ms in entries:
            self._dataset.add(hardware, op, shape, config, time_ms)
        return len(entries)

    # --- results ----------------------------------------------------------------------

    def get_dataset(self) -> Dataset:
        return self._dataset

    def to_table(self) -> list[dict[str, Any]]:
        """One row per timed config (TABLE_COLUMNS), problems in collection order, each
        problem's configs fastest first."""
        rows: list[dict[str, Any]] = []
        for hardware, op, shape, timed in self._dataset.problems():
            for entry in sorted(timed, key=lambda t: t.time_ms):
                c = entry.config
                rows.append({
                    "hardware": hardware, "op": op, "B": shape.B, "M": shape.M, "N": shape.N,
                    "K": shape.K, "M_dtype": shape.M_dtype, "K_dtype": shape.K_dtype,
                    "out_dtype": shape.out_dtype, "name": c.name, "block_m": c.block_m,
                    "block_n": c.block_n, "block_k": c.block_k, "group_m": c.group_m,
                    "num_stages": c.num_stages, "num_warps": c.num_warps, "even_k": c.even_k,
                    "allow_tf32": c.allow_tf32, "use_fast_accum": c.use_fast_accum,
                    "acc_type": c.acc_type, "time_ms": entry.time_ms,
                })
        return rows

    def save_to_file(self, path: PathLike) -> None:
        """Writes the dataset (JSON, atomically); `matmul_toolkit merge` / `train` read it."""
        self._dataset.save(path)

    def load_from_file(self, path: PathLike) -> None:
        """Replaces the collected data with a dataset file's."""
        self._dataset = Dataset.load(path)

    def save_table_to_file(self, path: PathLike) -> None:
        """Writes to_table() as CSV with a header row."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=TABLE_COLUMNS)
            writer.writeheader()
            writer.writerows(self.to_table())
