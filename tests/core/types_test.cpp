// Core value types: equality, hashing, shapes, dtypes and operation keys.

#include "matmul_toolkit/core/types.hpp"

#include <unordered_set>

#include <gtest/gtest.h>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::core {
namespace {

TEST(GemmConfig, DefaultsMatchTorchDiodesOptionalFields) {
    const GemmConfig c;
    EXPECT_FALSE(c.even_k);
    EXPECT_FALSE(c.allow_tf32);
    EXPECT_FALSE(c.use_fast_accum);
    EXPECT_EQ(c.acc_type, "tl.float32");
    EXPECT_EQ(c.version, 1);
}

TEST(GemmConfig, EveryFieldTakesPartInEqualityAndHashing) {
    const GemmConfig a;
    GemmConfig b;
    EXPECT_EQ(a, b);
    EXPECT_EQ(GemmConfigHash{}(a), GemmConfigHash{}(b));
    b.num_stages = 3;
    EXPECT_NE(a, b);
    GemmConfig c;
    c.acc_type = "tl.float16";
    EXPECT_NE(a, c);
    std::unordered_set<GemmConfig, GemmConfigHash> set{a, b, c, GemmConfig{}};
    EXPECT_EQ(set.size(), 3u);
}

TEST(MakeShape, BuildsAContiguousRowMajorOutput) {
    const auto s = make_shape(2, 3, 5, 7, "bfloat16");
    EXPECT_EQ(s.out_size, (std::array<std::int64_t, 3>{2, 3, 5}));
    EXPECT_EQ(s.out_stride, (std::array<std::int64_t, 3>{15, 5, 1}));
    EXPECT_EQ(s.M_dtype, "bfloat16");
    EXPECT_EQ(s.out_dtype, "bfloat16");
    EXPECT_EQ(s, make_shape(2, 3, 5, 7, "bfloat16"));
    EXPECT_NE(s, make_shape(2, 3, 5, 8, "bfloat16"));
    EXPECT_EQ(MMShapeHash{}(s), MMShapeHash{}(make_shape(2, 3, 5, 7, "bfloat16")));
}

TEST(Dtypes, KnowTheirSizes) {
    EXPECT_EQ(dtype_size("float16"), 2);
    EXPECT_EQ(dtype_size("float32"), 4);
    EXPECT_EQ(dtype_size("int8"), 1);
    EXPECT_TRUE(is_known_dtype("bfloat16"));
    EXPECT_FALSE(is_known_dtype("float17"));
    EXPECT_THROW(dtype_size("float17"), InputError);
    EXPECT_EQ(acc_type_for("int8"), "tl.int32");
    EXPECT_EQ(acc_type_for("float16"), "tl.float32");
}

TEST(OpKey, CarriesTheLayout) {
    EXPECT_EQ(op_key("mm", "nn"), "mm");
    EXPECT_EQ(op_key("bmm", "nt"), "bmm_nt");
    EXPECT_EQ(parse_op_key("mm"), (std::pair<std::string, std::string>{"mm", "nn"}));
    EXPECT_EQ(parse_op_key("addmm_tt"), (std::pair<std::string, std::string>{"addmm", "tt"}));
    EXPECT_THROW(parse_op_key("conv"), InputError);
    EXPECT_THROW(parse_op_key("mm_xx"), InputError);
    EXPECT_TRUE(is_known_op("bmm"));
    EXPECT_FALSE(is_known_op("mm_nt"));
}

}  // namespace
}  // namespace mmt::core
