"""Stand-ins for Inductor's objects, with only what choices.py and collector.py read, and
for the few tensor operations of patch_convs' rewrite."""

from __future__ import annotations

import itertools
import math
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


class DenseTensor:
    """A row-major tensor of Python numbers with the few operations conv_as_gemm uses
    (shape, slicing, permute, reshape, t), each returning a fresh dense copy."""

    def __init__(self, values: Sequence[float], shape: Sequence[int]) -> None:
        self.values, self.shape = list(values), tuple(shape)
        assert len(self.values) == math.prod(self.shape), (len(self.values), self.shape)

    def at(self, index: Sequence[int]) -> float:
        return self.values[sum(i * s for i, s in zip(index, contiguous(self.shape)))]

    def __getitem__(self, slices: tuple[slice, ...]) -> "DenseTensor":
        ranges = [range(*s.indices(n)) for s, n in zip(slices, self.shape)]
        return DenseTensor([self.at(i) for i in itertools.product(*ranges)], [len(r) for r in ranges])

    def permute(self, *dims: int) -> "DenseTensor":
        shape = [self.shape[d] for d in dims]
        values = []
        for index in itertools.product(*(range(n) for n in shape)):
            source = [0] * len(dims)
            for position, d in enumerate(dims):
                source[d] = index[position]
            values.append(self.at(source))
        return DenseTensor(values, shape)

    def reshape(self, *shape: int) -> "DenseTensor":
        return DenseTensor(self.values, shape)

    def t(self) -> "DenseTensor":
        return self.permute(1, 0)


def dense_mm(a: DenseTensor, b: DenseTensor, bias: Optional[DenseTensor] = None) -> DenseTensor:
    (m, k), (_, n) = a.shape, b.shape
    return DenseTensor([sum(a.at((i, p)) * b.at((p, j)) for p in range(k)) + (bias.at((j,)) if bias is not None else 0)
                        for i in range(m) for j in range(n)], (m, n))
