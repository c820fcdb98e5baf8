"""Reading Inductor's autotuning choices and input nodes as dataset records.

Inductor (torch 2.11) describes a Triton template choice (TritonTemplateCaller) by its
`log_info` / `info_dict()`: "backend": "Triton", "tile_shape": "(BLOCK_M, BLOCK_K, BLOCK_N)"
(that order), "num_stages", "num_warps", "GROUP_M", "allow_tf32" ("True"/"False"),
"acc_type" ("tl.float32"); its `name` is "triton_<template>_<n>" and its `description`
lists the template's keyword arguments ("EVEN_K=True, ..., USE_FAST_ACCUM=False, ...").
An ATen choice (ExternKernelCaller) has info_dict() {"backend": "extern", ...}.

Only duck typing here, no torch import: the collector and the measurement worker both use
these functions, and the tests feed them plain fake objects.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Callable, Optional, Sequence

from .dataset import KNOWN_DTYPES, GemmConfig, MMShape, acc_type_for, op_key, out_dtype_for

OPS = ("mm", "addmm", "bmm")
# Inductor's autotuning names (the feedback saver's `name`) -> the dataset's op: an
# autotuning of torch._int_mm (int8 x int8 -> int32) is an int8 mm.
AUTOTUNED_OPS = {"mm": "mm", "addmm": "addmm", "bmm": "bmm", "int_mm": "mm"}

# Inductor's Triton template name (TritonTemplate(name=...)) -> this project's template
# name (docs/inductor_worker_protocol.md). Other templates (decompose_k, Blackwell
# warp-specialised, scaled mm) have no config of ours and are skipped.
_TEMPLATES = {"mm": "mm", "bmm": "bmm", "mm_persistent_tma": "persistent_tma"}
_ATEN_KERNELS = ("mm", "addmm", "bias_addmm", "bmm", "_int_mm")
_FLAG_RE = re.compile(r"\b(EVEN_K|USE_FAST_ACCUM|ALLOW_TF32)=(True|False)\b")
_ACC_TYPE_RE = re.compile(r"\bACC_TYPE='?(tl\.\w+)'?")


def choice_info(choice: Any) -> dict[str, Any]:
    """The choice's info_dict() (its log_info for Triton choices), or {} when it has none."""
    info_dict = getattr(choice, "info_dict", None)
    if callable(info_dict):
        try:
            info = info_dict()
        except Exception:  # some choice kinds compute it lazily and may fail; not ours then
            return {}
        return info if isinstance(info, dict) else {}
    info = getattr(choice, "log_info", None)
    return info if isinstance(info, dict) else {}


def is_aten_choice(choice: Any) -> bool:
    """True for Inductor's ATen choice of a GEMM (extern_kernels.mm, addmm, bias_addmm,
    bmm, and _int_mm for int8); other extern kernels (mm_dtype, ...) are not this project's
    reference."""
    info = choice_info(choice)
    kernel = str(info.get("kernel_call_name", "")).rpartition(".")[2]
    return info.get("backend") == "extern" and kernel in _ATEN_KERNELS


def is_triton_choice(choice: Any) -> bool:
    """True for a Triton template choice that carries a tile shape."""
    info = choice_info(choice)
    return info.get("backend") == "Triton" and "tile_shape" in info


def template_of(choice: Any) -> Optional[str]:
    """"mm", "bmm", "persistent_tma" or "aten" (the protocol's template names), or None for
    a choice this project does not record."""
    if is_aten_choice(choice):
        return "aten"
    if not is_triton_choice(choice):
        return None
    name = str(getattr(choice, "name", ""))
    match = re.fullmatch(r"triton_(.+)_\d+", name)
    return _TEMPLATES.get(match.group(1)) if match else None


def tile_shape(info: dict[str, Any]) -> Optional[tuple[int, int, int]]:
    """(block_m, block_n, block_k) from log_info's "(BLOCK_M, BLOCK_K, BLOCK_N)" string."""
    try:
        values = ast.literal_eval(str(info["tile_shape"]))
        block_m, block_k, block_n = (int(v) for v in values)
    except (KeyError, ValueError, TypeError, SyntaxError):
        return None
    if min(block_m, block_n, block_k) < 1:
        return None
    return block_m, block_n, block_k


def description_flags(choice: Any) -> dict[str, bool]:
    """EVEN_K, USE_FAST_ACCUM, ALLOW_TF32 as the choice's description states them."""
    text = str(getattr(choice, "description", ""))
    return {name: value == "True" for name, value in _FLAG_RE.findall(text)}


def description_acc_type(choice: Any) -> Optional[str]:
    """ACC_TYPE as the choice's description states it ("tl.float32"), or None."""
    match = _ACC_TYPE_RE.search(str(getattr(choice, "description", "")))
    return match.group(1) if match else None


def config_name(op: str, template: str) -> str:
    """The dataset config name: "mm_config", "addmm_config", "bmm_config" (torch-diode's),
    "<op>_persistent_tma_config" for the persistent TMA template, "aten_<op>" for ATen."""
    if template == "aten":
        return f"aten_{op}"
    if template == "persistent_tma":
        return f"{op}_persistent_tma_config"
    return f"{op}_config"


def _positive_int(value: Any, default: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return number if number >= 1 else default


def config_from_choice(choice: Any, op: str, K: int, dtype: str = "float16") -> Optional[GemmConfig]:
    """The dataset config of one choice of an `op` autotuning with reduction size K, or None
    for a choice that is not recorded. ATen choices get the C++ side's reference config
    (name aten_<op>, every tile field 1); `dtype` only sets their ACC_TYPE."""
    template = template_of(choice)
    if template is None:
        return None
    if template == "aten":
        return GemmConfig(name=config_name(op, template), block_m=1, block_n=1, block_k=1,
                          group_m=1, num_stages=1, num_warps=1, acc_type=acc_type_for(dtype))
    info = choice_info(choice)
    tiles = tile_shape(info)
    if tiles is None:
        return None
    block_m, block_n, block_k = tiles
    # What the template was compiled with (its description) comes first, then log_info.
    flags = description_flags(choice)
    acc_type = description_acc_type(choice) or str(info.get("acc_type", "None"))
    return GemmConfig(
        name=config_name(op, template),
        block_m=block_m, block_n=block_n, block_k=block_k,
        group_m=_positive_int(info.get("GROUP_M"), 8),  # Inductor's default where a template has none
        num_stages=_positive_int(info.get("num_stages"), 1),
        num_warps=_positive_int(info.get("num_warps"), 1),
        even_k=flags.get("EVEN_K", K % block_k == 0),
        allow_tf32=flags.get("ALLOW_TF32", str(info.get("allow_tf32")) == "True"),
        use_fast_accum=flags.get("USE_FAST_ACCUM", False),
        acc_type=acc_type if acc_type != "None" else acc_type_for(dtype),
    )


def dtype_name(dtype: Any) -> str:
    """"float16" for torch.float16 (str() gives "torch.float16")."""
    return str(dtype).removeprefix("torch.")


def static_ints(values: Sequence[Any]) -> tuple[int, ...]:
    """Sizes or strides as ints: int() where they are static, else Inductor's size hints
    for the graph being compiled (dynamic shapes: the example input's values)."""
    try:
        return tuple(int(v) for v in values)
    except (TypeError, ValueError):
        from torch._inductor import config as inductor_config
        from torch._inductor.virtualized import V

        return tuple(int(v) for v in V.graph.sizevars.size_hints(
            values, fallback=inductor_config.unbacked_symint_fallback))


def operand_layout(size: Sequence[int], stride: Sequence[int]) -> str:
    """'t' for a matrix stored column-major (a transposed view of a contiguous tensor), else
    'n' (row-major, or strides that are neither)."""
    rows, cols = size[-2], size[-1]
    row_stride, col_stride = stride[-2], stride[-1]
    if col_stride == 1 or cols == 1:
        return "n"
    return "t" if row_stride == 1 or rows == 1 else "n"


def problem_from_nodes(op: str, input_nodes: Sequence[Any],
                       to_ints: Callable[[Sequence[Any]], tuple[int, ...]] = static_ints
                       ) -> Optional[tuple[str, MMShape]]:
    """(operation key, shape) of an mm/addmm/bmm autotuning from its input nodes (addmm:
    bias, mat1, mat2; mm and bmm: mat1, mat2), or None when they do not look like one. The
    key carries the operands' layout as the C++ side does ("mm_nt": B is a transposed view)."""
    if op not in OPS or len(input_nodes) < 2:
        return None
    mat1, mat2 = input_nodes[-2], input_nodes[-1]
    size1, size2 = to_ints(mat1.get_size()), to_ints(mat2.get_size())
    rank = 3 if op == "bmm" else 2
    if len(size1) != rank or len(size2) != rank:
        return None
    B = size1[0] if op == "bmm" else 1
    M, K = size1[-2], size1[-1]
    K2, N = size2[-2], size2[-1]
    if K != K2 or min(B, M, N, K) < 1:
        return None
    layout = (operand_layout(size1, to_ints(mat1.get_stride()))
              + operand_layout(size2, to_ints(mat2.get_stride())))
    a_dtype, b_dtype = dtype_name(mat1.get_dtype()), dtype_name(mat2.get_dtype())
    if a_dtype not in KNOWN_DTYPES or b_dtype not in KNOWN_DTYPES:
        return None
    shape = MMShape(B=B, M=M, N=N, K=K, M_dtype=a_dtype, K_dtype=b_dtype, out_dtype=out_dtype_for(a_dtype),
                    out_size=(B, M, N), out_stride=(M * N, N, 1))
    return op_key(op, layout), shape
