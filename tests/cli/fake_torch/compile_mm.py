"""The "user script" of cli_collect_script_test: one mm of [64, 96] x [96, 32] float16
autotuned over a Triton config (BLOCK_M 64, BLOCK_K 16, BLOCK_N 32: 0.01 ms), ATen
(0.02 ms) and a config that failed (inf). With --fail it raises after the autotuning."""

import sys

from torch._inductor import select_algorithm


class Device:
    type = "cuda"


class Node:
    def __init__(self, size, stride):
        self.size, self.stride = size, stride

    def get_size(self):
        return self.size

    def get_stride(self):
        return self.stride

    def get_dtype(self):
        return "torch.float16"

    def get_device(self):
        return Device()


class Choice:
    def __init__(self, name, info, description=""):
        self.name, self.info, self.description = name, info, description

    def info_dict(self):
        return self.info


triton = Choice("triton_mm_1", {"backend": "Triton", "tile_shape": "(64, 16, 32)", "num_stages": 3,
                                "num_warps": 4, "GROUP_M": 8, "allow_tf32": "False",
                                "acc_type": "tl.float32"})
aten = Choice("mm", {"backend": "extern", "kernel_call_name": "extern_kernels.mm"})
failed = Choice("triton_mm_2", {"backend": "Triton", "tile_shape": "(128, 32, 128)", "num_stages": 5,
                                "num_warps": 8, "GROUP_M": 8, "allow_tf32": "False",
                                "acc_type": "tl.float32"})
nodes = [Node([64, 96], [96, 1]), Node([96, 32], [32, 1])]
select_algorithm.fake_autotune("mm", nodes, {triton: 0.01, aten: 0.02, failed: float("inf")})
if "--fail" in sys.argv[1:]:
    raise RuntimeError("the model diverged")
