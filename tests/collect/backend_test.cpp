// Problem: operation keys, operand strides per layout, flop counts.

#include "matmul_toolkit/collect/backend.hpp"

#include <gtest/gtest.h>

#include "matmul_toolkit/collect/problem_generator.hpp"

namespace mmt::collect {
namespace {

using Stride = std::array<std::int64_t, 3>;

TEST(Problem, RowMajorOperandsForNn) {
    const auto p = make_problem("bmm", "nn", 2, 3, 5, 7, "float32");  // A [2,3,7], B [2,7,5]
    EXPECT_EQ(p.op_key(), "bmm");
    EXPECT_EQ(p.a_stride(), (Stride{21, 7, 1}));
    EXPECT_EQ(p.b_stride(), (Stride{35, 5, 1}));
}

TEST(Problem, TransposedOperandsAreColumnMajorViews) {
    const auto p = make_problem("mm", "tt", 1, 3, 5, 7, "float32");
    EXPECT_EQ(p.op_key(), "mm_tt");
    EXPECT_EQ(p.a_stride(), (Stride{21, 1, 3}));  // A = (row-major [7, 3])ᵀ
    EXPECT_EQ(p.b_stride(), (Stride{35, 1, 7}));  // B = (row-major [5, 7])ᵀ
    const auto nt = make_problem("addmm", "nt", 1, 3, 5, 7, "float32");
    EXPECT_EQ(nt.op_key(), "addmm_nt");
    EXPECT_EQ(nt.a_stride(), (Stride{21, 7, 1}));
    EXPECT_EQ(nt.b_stride(), (Stride{35, 1, 7}));
}

TEST(Problem, FlopsCountTwoPerMultiplyAdd) {
    EXPECT_DOUBLE_EQ(make_problem("bmm", "nn", 4, 10, 20, 30, "float16").flops(), 2.0 * 4 * 10 * 20 * 30);
}

TEST(Problem, OutputIsContiguousRowMajor) {
    const auto p = make_problem("bmm", "tn", 4, 10, 20, 30, "float16");
    EXPECT_EQ(p.shape.out_size, (Stride{4, 10, 20}));
    EXPECT_EQ(p.shape.out_stride, (Stride{200, 20, 1}));
    EXPECT_EQ(p.dtype(), "float16");
}

}  // namespace
}  // namespace mmt::collect
