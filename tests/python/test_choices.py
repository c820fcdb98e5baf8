"""choices.py: Inductor choices and input nodes read as dataset configs and problems."""

from __future__ import annotations

import pytest

from fakes import FakeChoice, FakeNode, aten_choice, triton_choice
from matmul_toolkit_inductor.choices import (config_from_choice, is_aten_choice, is_triton_choice,
                                             operand_layout, problem_from_nodes, template_of,
                                             tile_shape)
from matmul_toolkit_inductor.dataset import GemmConfig, make_shape


def test_tile_shape_is_read_in_inductors_m_k_n_order() -> None:
    assert tile_shape({"tile_shape": "(128, 32, 64)"}) == (128, 64, 32)  # (block_m, block_n, block_k)


@pytest.mark.parametrize("info", [{}, {"tile_shape": "(-1, -1, -1)"}, {"tile_shape": "garbage"},
                                  {"tile_shape": "(64, 32)"}])
def test_tile_shape_absent_or_unusable(info: dict) -> None:
    assert tile_shape(info) is None


def test_template_names() -> None:
    assert template_of(triton_choice(64, 64, 32, template="mm", index=3)) == "mm"
    assert template_of(triton_choice(64, 64, 32, template="bmm", index=12)) == "bmm"
    assert template_of(triton_choice(128, 128, 64, template="mm_persistent_tma", index=1)) == "persistent_tma"
    assert template_of(triton_choice(64, 64, 32, template="blackwell_ws_persistent_device_tma")) is None
    assert template_of(aten_choice("addmm")) == "aten"
    assert template_of(FakeChoice("decompose_k_mm_4_split", {"backend": "subgraph"})) is None


def test_other_extern_kernels_are_not_the_reference() -> None:
    mm_dtype = FakeChoice("mm_dtype", {"backend": "extern", "kernel_call_name": "extern_kernels.mm_dtype"})
    assert template_of(mm_dtype) is None
    assert template_of(aten_choice("bias_addmm")) == "aten"


def test_group_m_defaults_to_inductors_8_where_the_template_has_none() -> None:
    assert config_from_choice(triton_choice(64, 64, 32, group_m=-1), "mm", K=64).group_m == 8


def test_acc_type_from_the_description() -> None:
    choice = triton_choice(64, 64, 32, acc_type="None", description="ACC_TYPE='tl.int32', BLOCK_K=32")
    assert config_from_choice(choice, "mm", K=64).acc_type == "tl.int32"


def test_choice_kinds() -> None:
    assert is_aten_choice(aten_choice()) and not is_triton_choice(aten_choice())
    assert is_triton_choice(triton_choice(64, 64, 32)) and not is_aten_choice(triton_choice(64, 64, 32))


def test_triton_choice_becomes_the_ops_config() -> None:
    choice = triton_choice(128, 64, 32, num_stages=3, num_warps=8, group_m=8)
    # K = 96 is a multiple of block_k 32: EVEN_K.
    assert config_from_choice(choice, "addmm", K=96) == GemmConfig(
        name="addmm_config", block_m=128, block_n=64, block_k=32, group_m=8, num_stages=3,
        num_warps=8, even_k=True, allow_tf32=False, use_fast_accum=False, acc_type="tl.float32")


def test_even_k_false_when_k_is_not_a_multiple() -> None:
    assert config_from_choice(triton_choice(64, 64, 64), "mm", K=100).even_k is False


def test_description_flags_win_over_the_computed_ones() -> None:
    described = ("ACC_TYPE='tl.float32', ALLOW_TF32=True, BLOCK_K=32, BLOCK_M=64, BLOCK_N=64, "
                 "EVEN_K=False, GROUP_M=8, USE_FAST_ACCUM=True, num_stages=2, num_warps=4")
    config = config_from_choice(triton_choice(64, 64, 32, description=described), "mm", K=64)
    assert (config.even_k, config.use_fast_accum, config.allow_tf32) == (False, True, True)


def test_allow_tf32_and_acc_type_from_log_info() -> None:
    config = config_from_choice(triton_choice(64, 64, 32, allow_tf32="True", acc_type="tl.float32"),
                                "bmm", K=64, dtype="float32")
    assert config.name == "bmm_config"
    assert config.allow_tf32 is True


def test_persistent_tma_config_name() -> None:
    choice = triton_choice(128, 128, 64, template="mm_persistent_tma")
    assert config_from_choice(choice, "mm", K=4096).name == "mm_persistent_tma_config"


def test_aten_choice_is_the_reference_config() -> None:
    # As the C++ side writes references (config_space.cpp reference_config): tile fields 1.
    assert config_from_choice(aten_choice("addmm"), "addmm", K=7) == GemmConfig(
        name="aten_addmm", block_m=1, block_n=1, block_k=1, group_m=1, num_stages=1,
        num_warps=1, acc_type="tl.float32")


def test_int_mm_aten_choice_is_the_int8_reference() -> None:
    # torch._int_mm's ATen kernel is extern_kernels._int_mm; its config accumulates in int32.
    assert config_from_choice(aten_choice("_int_mm"), "mm", K=64, dtype="int8") == GemmConfig(
        name="aten_mm", block_m=1, block_n=1, block_k=1, group_m=1, num_stages=1,
        num_warps=1, acc_type="tl.int32")


def test_unrecorded_choice_gives_no_config() -> None:
    assert config_from_choice(FakeChoice("x", {}), "mm", K=64) is None


def test_mm_problem_from_nodes() -> None:
    nodes = [FakeNode([1000, 300]), FakeNode([300, 50])]
    assert problem_from_nodes("mm", nodes) == ("mm", make_shape(1, 1000, 50, 300, "float16"))


def test_addmm_reads_mat1_and_mat2_after_the_bias() -> None:
    bias = FakeNode([64, 32], [0, 1], dtype="torch.bfloat16")
    nodes = [bias, FakeNode([64, 16], dtype="torch.bfloat16"), FakeNode([16, 32], dtype="torch.bfloat16")]
    assert problem_from_nodes("addmm", nodes) == ("addmm", make_shape(1, 64, 32, 16, "bfloat16"))


def test_bmm_problem_has_its_batch() -> None:
    nodes = [FakeNode([4, 8, 16], dtype="torch.float32"), FakeNode([4, 16, 24], dtype="torch.float32")]
    assert problem_from_nodes("bmm", nodes) == ("bmm", make_shape(4, 8, 24, 16, "float32"))


def test_transposed_operand_goes_into_the_op_key() -> None:
    # B [K, N] = [16, 32] stored as its transpose: strides (1, 16).
    nodes = [FakeNode([64, 16]), FakeNode([16, 32], [1, 16])]
    assert problem_from_nodes("mm", nodes)[0] == "mm_nt"
    nodes = [FakeNode([4, 64, 16], [1024, 1, 64]), FakeNode([4, 16, 32])]
    assert problem_from_nodes("bmm", nodes)[0] == "bmm_tn"


def test_operand_layout_of_vectors_is_n() -> None:
    assert operand_layout([1, 16], [16, 1]) == "n"
    assert operand_layout([16, 1], [1, 1]) == "n"


def test_sizes_that_are_not_ints_use_the_given_hints() -> None:
    class Symbol:
        def __int__(self) -> int:
            raise TypeError("symbolic")

    nodes = [FakeNode([Symbol(), 8], [8, 1]), FakeNode([8, 4], [4, 1])]
    hints = lambda values: tuple(12 if isinstance(v, Symbol) else int(v) for v in values)  # noqa: E731
    assert problem_from_nodes("mm", nodes, to_ints=hints)[1].M == 12


@pytest.mark.parametrize("op, nodes", [
    ("conv", [FakeNode([4, 4]), FakeNode([4, 4])]),
    ("mm", [FakeNode([4, 5]), FakeNode([6, 4])]),        # K differs
    ("mm", [FakeNode([2, 4, 5]), FakeNode([2, 5, 4])]),  # 3-D for mm
    ("mm", [FakeNode([4, 4])]),
    ("mm", [FakeNode([4, 4], dtype="torch.complex64"), FakeNode([4, 4], dtype="torch.complex64")]),
])
def test_nodes_that_are_not_a_gemm(op: str, nodes: list) -> None:
    assert problem_from_nodes(op, nodes) is None
