// Search spaces: the exact DEFAULT list, the EXHAUSTIVE grid and the per-problem fields.

#include "matmul_toolkit/collect/config_space.hpp"

#include <array>
#include <set>
#include <tuple>
#include <unordered_set>

#include <gtest/gtest.h>

#include "matmul_toolkit/collect/problem_generator.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect {
namespace {

using Tuple = std::array<int, 5>;  // block_m, block_n, block_k, num_stages, num_warps

Tuple tuple_of(const core::GemmConfig& c) {
    return {c.block_m, c.block_n, c.block_k, c.num_stages, c.num_warps};
}

TEST(DefaultConfigs, AreExactlyInductorsTwentyMmConfigsInOrder) {
    // The list from the issue (PyTorch Inductor's CUDA mm configs).
    const std::vector<Tuple> expected = {
        {32, 32, 16, 1, 2},   {32, 32, 128, 2, 4},  {32, 64, 32, 5, 8},   {64, 32, 32, 5, 8},
        {64, 32, 128, 5, 4},  {64, 64, 16, 2, 4},   {64, 64, 32, 2, 4},   {64, 64, 64, 3, 8},
        {64, 64, 128, 5, 4},  {64, 128, 32, 3, 4},  {64, 128, 32, 4, 8},  {64, 128, 64, 3, 4},
        {64, 128, 128, 4, 4}, {128, 64, 32, 3, 4},  {128, 64, 32, 4, 8},  {128, 128, 32, 2, 8},
        {128, 128, 32, 3, 4}, {128, 128, 64, 3, 4}, {128, 128, 64, 5, 8}, {128, 128, 128, 4, 8},
    };
    const auto configs = default_configs();
    ASSERT_EQ(configs.size(), 20u);
    for (std::size_t i = 0; i < configs.size(); ++i) {
        EXPECT_EQ(tuple_of(configs[i]), expected[i]) << "config " << i;
        EXPECT_EQ(configs[i].group_m, 8);
    }
}

TEST(ExhaustiveConfigs, Has1875DistinctConfigsOverTheGrid) {
    const auto configs = exhaustive_configs();
    ASSERT_EQ(configs.size(), 1875u);  // 5 * 5 * 5 block sizes * 5 stages * 3 warps
    std::unordered_set<core::GemmConfig, core::GemmConfigHash> distinct(configs.begin(), configs.end());
    EXPECT_EQ(distinct.size(), 1875u);
    const std::set<int> blocks{16, 32, 64, 128, 256}, stages{1, 2, 3, 4, 5}, warps{2, 4, 8};
    for (const auto& c : configs) {
        EXPECT_TRUE(blocks.count(c.block_m) && blocks.count(c.block_n) && blocks.count(c.block_k));
        EXPECT_TRUE(stages.count(c.num_stages));
        EXPECT_TRUE(warps.count(c.num_warps));
        EXPECT_EQ(c.group_m, 8);
    }
}

TEST(ExpandGrid, CrossesEveryAxisWithTheLastAxisInnermost) {
    ConfigAxes axes;
    axes.block_m = {16, 32};
    axes.block_n = {64};
    axes.block_k = {8};
    axes.group_m = {4};
    axes.num_stages = {1};
    axes.num_warps = {2, 4};
    const auto configs = expand_grid(axes);
    const std::vector<Tuple> expected = {
        {16, 64, 8, 1, 2}, {16, 64, 8, 1, 4}, {32, 64, 8, 1, 2}, {32, 64, 8, 1, 4}};
    ASSERT_EQ(configs.size(), expected.size());
    for (std::size_t i = 0; i < configs.size(); ++i) EXPECT_EQ(tuple_of(configs[i]), expected[i]);
}

TEST(ExpandGrid, AnEmptyAxisGivesNoConfigsAndABadValueIsRejected) {
    ConfigAxes axes = exhaustive_axes();
    axes.num_warps.clear();
    EXPECT_TRUE(expand_grid(axes).empty());
    axes = exhaustive_axes();
    axes.block_k = {32, 0};
    EXPECT_THROW(expand_grid(axes), core::InputError);
}

TEST(SpecializeConfig, SetsNameEvenKTf32AndAccTypeAsInductorDoes) {
    const auto base = default_configs()[1];  // block_k 128
    const auto fp32 = make_problem("addmm", "nn", 1, 100, 50, 256, "float32");
    const auto c = specialize_config(base, fp32, /*allow_tf32=*/true);
    EXPECT_EQ(c.name, "addmm_config");
    EXPECT_TRUE(c.even_k);  // 256 % 128 == 0
    EXPECT_TRUE(c.allow_tf32);
    EXPECT_EQ(c.acc_type, "tl.float32");
    EXPECT_EQ(c.block_k, 128);
    EXPECT_EQ(c.num_stages, 2);

    const auto odd_k = make_problem("mm", "nn", 1, 100, 50, 200, "float32");
    EXPECT_FALSE(specialize_config(base, odd_k, true).even_k);  // 200 % 128 != 0
    EXPECT_FALSE(specialize_config(base, odd_k, false).allow_tf32);

    const auto half = make_problem("bmm", "nn", 2, 64, 64, 64, "float16");
    EXPECT_FALSE(specialize_config(base, half, true).allow_tf32);  // TF32 is for float32 only
    const auto int8 = make_problem("mm", "nn", 1, 64, 64, 64, "int8");
    EXPECT_EQ(specialize_config(base, int8, false).acc_type, "tl.int32");
}

TEST(ReferenceConfig, IsNamedAsInductorsExternChoice) {
    const auto p = make_problem("bmm", "tn", 4, 64, 64, 64, "float32");
    const auto ref = reference_config(p);
    EXPECT_EQ(ref.name, "aten_bmm");
    EXPECT_TRUE(is_reference_config(ref));
    EXPECT_FALSE(is_reference_config(specialize_config(default_configs()[0], p, false)));
    EXPECT_EQ(describe_config(ref), "aten_bmm");
    EXPECT_EQ(describe_config(default_configs()[7]), "64x64x64 g8 s3 w8");
    auto tma = default_configs()[7];
    tma.name = "mm_persistent_tma_config";  // Inductor's persistent TMA template, same tile
    EXPECT_EQ(describe_config(tma), "64x64x64 g8 s3 w8 tma");
}

TEST(InductorScaledConfigs, LargeProblemsKeepTheDefaultList) {
    const auto configs = default_configs();
    EXPECT_EQ(inductor_scaled_configs(configs, core::make_shape(1, 4096, 4096, 4096, "float16")), configs);
    // 129 rounds up to 256: no block of the list is larger.
    EXPECT_EQ(inductor_scaled_configs(configs, core::make_shape(1, 129, 129, 129, "float16")), configs);
}

TEST(InductorScaledConfigs, SmallDimensionsShrinkTilesAndWarpsAndMergeRepeats) {
    // M = 1: every tile is 16 rows (Inductor's floor); N = 100 caps block_n at 128.
    const auto scaled = inductor_scaled_configs(default_configs(), core::make_shape(1, 1, 100, 4096, "float16"));
    ASSERT_FALSE(scaled.empty());
    EXPECT_LT(scaled.size(), default_configs().size());  // 64x64 and 128x64 become one tile
    std::set<std::tuple<int, int, int, int, int, int>> distinct;
    for (const auto& c : scaled) {
        EXPECT_EQ(c.block_m, 16);
        EXPECT_LE(c.block_n, 128);
        EXPECT_LE(c.num_warps, c.block_m * c.block_n / 256);  // one 16x16 tile per warp at most
        distinct.insert({c.block_m, c.block_n, c.block_k, c.group_m, c.num_stages, c.num_warps});
    }
    EXPECT_EQ(distinct.size(), scaled.size());
    // 64x32x32 s5 w8 for M = 1: 16x32, 2 warps.
    const auto k = inductor_scaled_configs({default_configs()[3]}, core::make_shape(1, 1, 4096, 4096, "float16"));
    ASSERT_EQ(k.size(), 1u);
    EXPECT_EQ(std::make_tuple(k[0].block_m, k[0].block_n, k[0].block_k, k[0].num_stages, k[0].num_warps),
              std::make_tuple(16, 32, 32, 5, 2));
    // K = 20 rounds up to 32: block_k 128 becomes 32, 16 stays 16.
    for (const auto& c : inductor_scaled_configs(default_configs(), core::make_shape(1, 512, 512, 20, "float16"))) {
        EXPECT_LE(c.block_k, 32);
    }
}

TEST(InductorScaledConfigs, TilesThatWouldSpillTheirAccumulatorAreDropped) {
    // 256x256 with 2 warps: 1024 accumulator registers a thread, more than 255.
    const auto scaled = inductor_scaled_configs(exhaustive_configs(), core::make_shape(1, 4096, 4096, 4096, "float16"));
    EXPECT_LT(scaled.size(), exhaustive_configs().size());
    for (const auto& c : scaled) EXPECT_LE(c.block_m * c.block_n / (32 * c.num_warps), 255);
}

TEST(InductorSharedMemory, IsStagesTimesTheOperandTiles) {
    auto c = default_configs()[19];  // 128x128x128, 4 stages
    EXPECT_EQ(inductor_shared_memory_bytes(c, 2), 4 * 128 * 256 * 2);
    EXPECT_EQ(inductor_shared_memory_bytes(c, 4), 4 * 128 * 256 * 4);
}

TEST(SearchSpaceNames, ParseInAnyCaseAndRejectUnknownNames) {
    EXPECT_EQ(parse_search_space("DEFAULT"), SearchSpace::default_space);
    EXPECT_EQ(parse_search_space("exhaustive"), SearchSpace::exhaustive);
    EXPECT_EQ(search_space_name(SearchSpace::exhaustive), "EXHAUSTIVE");
    EXPECT_EQ(configs_for(SearchSpace::default_space).size(), 20u);
    try {
        parse_search_space("FAST");
        FAIL() << "FAST was accepted";
    } catch (const core::InputError& e) {
        EXPECT_EQ(e.subject(), "--search-space");
    }
}

}  // namespace
}  // namespace mmt::collect
