// Dataset statistics over a small dataset whose counts and fastest configs are known by hand.

#include "matmul_toolkit/core/dataset_stats.hpp"

#include <string>

#include <gtest/gtest.h>

namespace mmt::core {
namespace {

GemmConfig config(int bm, int bn, int bk, int gm, int stages, int warps) {
    GemmConfig c;
    c.block_m = bm;
    c.block_n = bn;
    c.block_k = bk;
    c.group_m = gm;
    c.num_stages = stages;
    c.num_warps = warps;
    return c;
}

class DatasetStatsTest : public ::testing::Test {
protected:
    void SetUp() override {
        c1 = config(64, 64, 32, 8, 2, 4);
        c2 = config(128, 64, 32, 8, 3, 8);
        c2.even_k = true;
        c3 = config(32, 32, 16, 1, 1, 2);
        c3.allow_tf32 = true;
        c3.acc_type = "tl.int32";
        const auto a = make_shape(1, 32, 32, 32, "float16");
        const auto b = make_shape(2, 64, 16, 8, "bfloat16");
        const auto c = make_shape(1, 16, 16, 16, "float32");
        dataset.add_timing("gpu", "mm", a, {c1, 0.3, 1});
        dataset.add_timing("gpu", "mm", a, {c2, 0.1, 1});
        dataset.add_timing("gpu", "mm", a, {c3, 0.2, 1});
        dataset.add_timing("gpu", "mm", b, {c1, 1.5, 1});
        dataset.add_timing("gpu", "mm", b, {c2, 1.5, 1});
        dataset.add_timing("gpu", "addmm", c, {c3, 0.05, 1});
    }

    GemmConfig c1, c2, c3;
    Dataset dataset;
};

TEST_F(DatasetStatsTest, CountsEveryLevel) {
    const auto stats = compute_stats(dataset);
    EXPECT_EQ(stats.hardware.size(), 1u);
    EXPECT_EQ(stats.num_operations, 2u);
    EXPECT_EQ(stats.num_problems, 3u);
    EXPECT_EQ(stats.num_timed_configs, 6u);
    const auto& mm = stats.hardware[0].operations[0];
    EXPECT_EQ(mm.op, "mm");
    EXPECT_EQ(mm.problems.size(), 2u);
    EXPECT_EQ(mm.num_timed_configs, 5u);
    EXPECT_EQ(mm.num_distinct_configs, 3u);
}

TEST_F(DatasetStatsTest, PicksTheFastestConfigAndTheFirstOnATie) {
    const auto stats = compute_stats(dataset);
    const auto& mm = stats.hardware[0].operations[0];
    EXPECT_EQ(mm.problems[0].fastest.config, c2);
    EXPECT_DOUBLE_EQ(mm.problems[0].fastest.time_ms, 0.1);
    EXPECT_EQ(mm.problems[1].fastest.config, c1);
}

TEST(StatsLabels, DescribeShapesDtypesAndConfigs) {
    auto shape = make_shape(1, 32, 64, 16, "float16");
    EXPECT_EQ(shape_label(shape), "M=32 N=64 K=16");
    EXPECT_EQ(dtype_label(shape), "float16");
    shape.B = 3;
    shape.out_dtype = "float32";
    EXPECT_EQ(shape_label(shape), "B=3 M=32 N=64 K=16");
    EXPECT_EQ(dtype_label(shape), "float16/float16->float32");
    GemmConfig c;
    c.use_fast_accum = true;
    EXPECT_EQ(config_label(c), "64x64x32 g8 s2 w4 FAST_ACCUM");
    c.name = "aten_bmm";
    EXPECT_EQ(config_label(c), "aten_bmm");
}

TEST_F(DatasetStatsTest, FormatsATablePerOperation) {
    const std::string expected =
        "dataset: demo.json\n"
        "hardware: 1, operations: 2, problems: 3, timed configs: 6\n"
        "\n"
        "hardware 'gpu'\n"
        "  mm: 2 problems, 5 timed configs (3 distinct)\n"
        "    problem            dtype     configs  fastest ms  fastest config\n"
        "    M=32 N=32 K=32     float16         3         0.1  128x64x32 g8 s3 w8 EVEN_K\n"
        "    B=2 M=64 N=16 K=8  bfloat16        2         1.5  64x64x32 g8 s2 w4\n"
        "  addmm: 1 problem, 1 timed config (1 distinct)\n"
        "    problem         dtype    configs  fastest ms  fastest config\n"
        "    M=16 N=16 K=16  float32        1        0.05  32x32x16 g1 s1 w2 TF32 tl.int32\n";
    EXPECT_EQ(format_stats_text(compute_stats(dataset), "demo.json"), expected);
}

TEST_F(DatasetStatsTest, DocumentCarriesTheSameFacts) {
    const auto doc = stats_to_document(compute_stats(dataset), "demo.json");
    EXPECT_EQ(doc["source"], "demo.json");
    EXPECT_EQ(doc["problems"], 3);
    EXPECT_EQ(doc["timed_configs"], 6);
    const auto& addmm = doc["hardware"][0]["operations"][1];
    EXPECT_EQ(addmm["op"], "addmm");
    EXPECT_EQ(addmm["problem_stats"][0]["dtype"], "float32");
    EXPECT_EQ(addmm["problem_stats"][0]["fastest_time_ms"], 0.05);
    EXPECT_EQ(addmm["problem_stats"][0]["fastest_config"]["block_k"], 16);
}

TEST(DatasetStatsEmpty, HasNoSections) {
    EXPECT_EQ(format_stats_text(compute_stats(Dataset{}), "e.json"),
              "dataset: e.json\nhardware: 0, operations: 0, problems: 0, timed configs: 0\n");
}

}  // namespace
}  // namespace mmt::core
