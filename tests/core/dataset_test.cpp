// The in-memory dataset: insertion order, merging, filtering, tables and fastest configs.

#include "matmul_toolkit/core/dataset.hpp"

#include <gtest/gtest.h>

namespace mmt::core {
namespace {

GemmConfig config_with_block_m(int block_m) {
    GemmConfig c;
    c.block_m = block_m;
    return c;
}

TimedConfig timed(int block_m, double ms) { return TimedConfig{config_with_block_m(block_m), ms, 1}; }

class DatasetTest : public ::testing::Test {
protected:
    const MMShape small = make_shape(1, 16, 16, 16, "float16");
    const MMShape large = make_shape(1, 512, 512, 512, "float16");
};

TEST_F(DatasetTest, KeepsInsertionOrderAtEveryLevel) {
    Dataset d;
    d.add_timing("b-gpu", "mm", large, timed(64, 2.0));
    d.add_timing("a-gpu", "bmm", small, timed(32, 1.0));
    d.add_timing("b-gpu", "addmm", small, timed(32, 1.0));
    d.add_timing("b-gpu", "mm", small, timed(16, 1.0));
    d.add_timing("b-gpu", "mm", large, timed(128, 1.5));

    ASSERT_EQ(d.hardware().size(), 2u);
    EXPECT_EQ(d.hardware()[0].name, "b-gpu");
    EXPECT_EQ(d.hardware()[0].operations[0].name, "mm");
    EXPECT_EQ(d.hardware()[0].operations[1].name, "addmm");
    EXPECT_EQ(d.hardware()[0].operations[0].problems[0].shape, large);
    EXPECT_EQ(d.hardware()[0].operations[0].problems[0].timed_configs.size(), 2u);
    EXPECT_EQ(d.num_problems(), 4u);
    EXPECT_EQ(d.num_timings(), 5u);
}

TEST_F(DatasetTest, MergeAppendsTimingsToExistingProblems) {
    Dataset a;
    a.add_timing("gpu", "mm", small, timed(16, 1.0));
    Dataset b;
    b.add_timing("gpu", "mm", small, timed(32, 0.5));
    b.add_timing("gpu", "mm", large, timed(64, 3.0));
    a.merge(b);
    EXPECT_EQ(a.num_problems(), 2u);
    EXPECT_EQ(a.num_timings(), 3u);
    EXPECT_TRUE(a.contains("gpu", "mm", large));
    EXPECT_FALSE(a.contains("gpu", "bmm", large));
}

TEST_F(DatasetTest, FilterByHardwareAndOpKeepsAllLayoutsOfABareOp) {
    Dataset d;
    d.add_timing("gpu", "mm", small, timed(16, 1.0));
    d.add_timing("gpu", "mm_nt", small, timed(16, 1.0));
    d.add_timing("gpu", "bmm", small, timed(16, 1.0));
    d.add_timing("cpu", "mm", small, timed(16, 1.0));

    EXPECT_EQ(d.filter(std::string("gpu"), std::string("mm")).num_timings(), 2u);
    EXPECT_EQ(d.filter(std::nullopt, std::string("mm_nt")).num_timings(), 1u);
    EXPECT_EQ(d.filter(std::string("cpu"), std::nullopt).num_timings(), 1u);
    EXPECT_EQ(d.filter(std::nullopt, std::nullopt).num_timings(), 4u);
}

TEST_F(DatasetTest, TableSortsFastestFirstAndFastestFindsTheMinimum) {
    Dataset d;
    d.add_timing("gpu", "mm", small, timed(16, 3.0));
    d.add_timing("gpu", "mm", small, timed(32, 1.0));
    d.add_timing("gpu", "mm", small, timed(64, 2.0));
    d.add_timing("gpu", "mm", small, timed(128, 1.0));

    const auto table = d.to_table();
    ASSERT_EQ(table.size(), 1u);
    ASSERT_EQ(table[0].sorted_configs.size(), 4u);
    EXPECT_EQ(table[0].sorted_configs[0].config.block_m, 32);   // 1.0, added first
    EXPECT_EQ(table[0].sorted_configs[1].config.block_m, 128);  // 1.0, added later
    EXPECT_EQ(table[0].sorted_configs[2].config.block_m, 64);
    EXPECT_EQ(table[0].sorted_configs[3].config.block_m, 16);
    EXPECT_EQ(d.fastest("gpu", "mm", small)->config.block_m, 32);
    EXPECT_FALSE(d.fastest("gpu", "mm", large).has_value());
}

TEST(OperationShapeSetTest, GroupsShapesByOp) {
    OperationShapeSet set;
    set.add_shape("mm", make_shape(1, 8, 8, 8, "float16"));
    set.add_shape("bmm", make_shape(2, 8, 8, 8, "float16"));
    set.add_shape("mm", make_shape(1, 16, 8, 8, "float16"));
    ASSERT_EQ(set.operations.size(), 2u);
    EXPECT_EQ(set.operations[0].shapes.size(), 2u);
    EXPECT_EQ(set.num_shapes(), 3u);
}

TEST(SolutionTest, PerOpListsFallBackToTheFlatList) {
    Solution s;
    s.configs = {config_with_block_m(16)};
    EXPECT_FALSE(s.is_per_op());
    EXPECT_EQ(s.configs_for("mm")[0].block_m, 16);
    s.per_op = {{"mm", {config_with_block_m(32), config_with_block_m(64)}}};
    EXPECT_TRUE(s.is_per_op());
    EXPECT_EQ(s.configs_for("mm").size(), 2u);
    EXPECT_EQ(s.configs_for("bmm")[0].block_m, 16);
}

}  // namespace
}  // namespace mmt::core
