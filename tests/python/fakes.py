"""Stand-ins for Inductor's objects, with only what choices.py and collector.py read."""

from __future__ import annotations

from typing import Any, Optional, Sequence


class FakeDevice:
    def __init__(self, kind: str = "cuda") -> None:
        self.type = kind


class FakeNode:
    """An input node: sizes, strides, a dtype that prints as torch's does, a device."""

    def __init__(self, size: Sequence[Any], stride: Optional[Sequence[Any]] = None,
                 dtype: str = "torch.float16", device: str = "cuda") -> None:
        self.size = list(size)
        self.stride = list(stride) if stride is not None else contiguous(self.size)
        self.dtype = dtype
        self.device = FakeDevice(device)

    def get_size(self) -> list[Any]:
        return self.size

    def get_stride(self) -> list[Any]:
        return self.stride

    def get_dtype(self) -> str:
        return self.dtype

    def get_device(self) -> FakeDevice:
        return self.device


def contiguous(size: Sequence[int]) -> list[int]:
    stride, step = [], 1
    for dim in reversed(size):
        stride.insert(0, step)
        step *= dim
    return stride


class FakeChoice:
    """A ChoiceCaller: a name, info_dict() and a description."""

    def __init__(self, name: str, info: dict[str, Any], description: str = "") -> None:
        self.name = name
        self.info = info
        self.description = description

    def info_dict(self) -> dict[str, Any]:
        return self.info

    def __repr__(self) -> str:
        return f"FakeChoice({self.name})"


def triton_choice(block_m: int, block_n: int, block_k: int, num_stages: int = 2, num_warps: int = 4,
                  group_m: int = 8, template: str = "mm", index: int = 0, allow_tf32: str = "False",
                  acc_type: str = "tl.float32", description: str = "") -> FakeChoice:
    """A TritonTemplateCaller as torch 2.11 fills log_info (tile_shape is M, K, N)."""
    return FakeChoice(f"triton_{template}_{index}", {
        "backend": "Triton", "tile_shape": str((block_m, block_k, block_n)),
        "num_stages": num_stages, "num_warps": num_warps, "GROUP_M": group_m,
        "allow_tf32": allow_tf32, "acc_type": acc_type, "matrix_instr_nonkdim": 0,
        "waves_per_eu": 0, "kpack": 2,
    }, description)


def aten_choice(name: str = "mm") -> FakeChoice:
    return FakeChoice(name, {"backend": "extern", "kernel_call_name": f"extern_kernels.{name}"})
