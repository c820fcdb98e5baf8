// Shards: a partition of the planned problem list that is disjoint, complete and stable,
// and what a sharded collection writes.

#include "matmul_toolkit/collect/sharding.hpp"

#include <unistd.h>

#include <set>

#include <gtest/gtest.h>

#include "matmul_toolkit/collect/cpu_backend.hpp"
#include "matmul_toolkit/collect/engine.hpp"
#include "matmul_toolkit/collect/problem_generator.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/core/meta_sidecar.hpp"

namespace mmt::collect {
namespace {
namespace fs = std::filesystem;

std::string key(const Problem& p) { return p.op_key() + "|" + core::shape_key(p.shape); }

std::vector<Problem> drawn(int num_shapes, std::uint64_t seed) {
    GeneratorOptions g;
    g.num_shapes = num_shapes;
    g.sizes.min_size = 16;
    g.sizes.max_size = 512;
    return generate_problems(g, seed);
}

TEST(ShardPositions, RoundRobinSlices) {
    EXPECT_EQ(shard_positions(10, {0, 3}), (std::vector<std::size_t>{0, 3, 6, 9}));
    EXPECT_EQ(shard_positions(10, {1, 3}), (std::vector<std::size_t>{1, 4, 7}));
    EXPECT_EQ(shard_positions(10, {2, 3}), (std::vector<std::size_t>{2, 5, 8}));
    EXPECT_EQ(shard_positions(2, {3, 4}), std::vector<std::size_t>{});
    EXPECT_EQ(shard_positions(3, {0, 1}), (std::vector<std::size_t>{0, 1, 2}));
}

TEST(ShardPositions, DisjointCompleteAndBalancedForManySplits) {
    for (std::size_t total : {0u, 1u, 7u, 64u, 101u}) {
        for (int count : {1, 2, 3, 8, 13}) {
            std::vector<int> owner(total, -1);
            std::size_t smallest = total, largest = 0;
            for (int index = 0; index < count; ++index) {
                const auto positions = shard_positions(total, {index, count});
                smallest = std::min(smallest, positions.size());
                largest = std::max(largest, positions.size());
                for (const auto i : positions) {
                    ASSERT_LT(i, total);
                    EXPECT_EQ(owner[i], -1) << "position " << i << " is in two shards";
                    owner[i] = index;
                }
            }
            for (std::size_t i = 0; i < total; ++i) EXPECT_NE(owner[i], -1) << "position " << i << " is in no shard";
            EXPECT_LE(largest - std::min(smallest, largest), 1u);
        }
    }
}

TEST(ShardProblems, UnionOfShardsIsTheUnshardedListAndStableAcrossRuns) {
    const auto all = drawn(40, 7);
    std::set<std::string> seen;
    for (int index = 0; index < 4; ++index) {
        const auto first = shard_problems(drawn(40, 7), {index, 4});
        const auto again = shard_problems(drawn(40, 7), {index, 4});
        ASSERT_EQ(first.size(), again.size());
        for (std::size_t i = 0; i < first.size(); ++i) EXPECT_EQ(key(first[i]), key(again[i]));
        for (const auto& p : first) EXPECT_TRUE(seen.insert(key(p)).second) << key(p);
    }
    std::set<std::string> expected;
    for (const auto& p : all) expected.insert(key(p));
    EXPECT_EQ(seen, expected);
}

TEST(ShardOutputPath, SuffixBeforeTheExtension) {
    EXPECT_EQ(shard_output_path("out/data.json", {2, 8}), fs::path("out/data_shard2of8.json"));
    EXPECT_EQ(shard_output_path("data.msgpack", {0, 3}), fs::path("data_shard0of3.msgpack"));
    EXPECT_EQ(shard_output_path("data.json", {0, 1}), fs::path("data.json"));
}

TEST(ValidateShard, NamesTheOption) {
    try {
        validate_shard({0, 0});
        FAIL() << "accepted --num-shards 0";
    } catch (const core::InputError& e) {
        EXPECT_EQ(e.subject(), "--num-shards");
    }
    for (const Shard bad : {Shard{3, 3}, Shard{-1, 2}}) {
        try {
            validate_shard(bad);
            FAIL() << "accepted shard " << bad.index << " of " << bad.count;
        } catch (const core::InputError& e) {
            EXPECT_EQ(e.subject(), "--shard-index");
        }
    }
}

class ShardedCollection : public ::testing::Test {
protected:
    void SetUp() override {
        m_dir = fs::temp_directory_path() / ("mmt_sharding_test_" + std::to_string(::getpid()));
        fs::remove_all(m_dir);
        fs::create_directories(m_dir);
    }
    void TearDown() override { fs::remove_all(m_dir); }

    CollectOptions tiny() const {
        CollectOptions o;
        o.generator.num_shapes = 5;
        o.generator.sizes.min_size = 16;
        o.max_size = 48;
        o.warmup = 0;
        o.repeat = 1;
        o.time_reference = false;
        o.output = m_dir / "data.json";
        return o;
    }

    CpuBackend m_backend;
    fs::path m_dir;
};

std::set<std::string> problem_keys(const core::Dataset& dataset) {
    std::set<std::string> keys;
    for (const auto& hw : dataset.hardware())
        for (const auto& op : hw.operations)
            for (const auto& p : op.problems) keys.insert(op.name + "|" + core::shape_key(p.shape));
    return keys;
}

TEST_F(ShardedCollection, ShardsWriteTheirOwnFilesAndTogetherHoldTheUnshardedProblems) {
    auto whole = tiny();
    whole.output = "";  // in memory
    const auto expected = problem_keys(run_collection(whole, m_backend).dataset);
    ASSERT_EQ(expected.size(), 5u);

    std::set<std::string> together;
    std::size_t planned = 0;
    for (int index = 0; index < 2; ++index) {
        auto o = tiny();
        o.shard = {index, 2};
        const auto summary = run_collection(o, m_backend);
        planned += summary.problems_planned;
        const fs::path file = m_dir / ("data_shard" + std::to_string(index) + "of2.json");
        ASSERT_EQ(summary.files, std::vector<fs::path>{file});
        const auto keys = problem_keys(core::load_dataset(file));
        for (const auto& k : keys) EXPECT_TRUE(together.insert(k).second) << k << " collected twice";
        EXPECT_EQ(core::load_meta_sidecar(file)["run"]["shard"]["count"], 2);
    }
    EXPECT_EQ(planned, 5u);
    EXPECT_EQ(together, expected);
    EXPECT_FALSE(fs::exists(m_dir / "data.json"));
}

TEST_F(ShardedCollection, ShardResumesAndChunksLikeAnyRun) {
    auto o = tiny();
    o.shard = {1, 2};
    o.chunk_size = 1;
    const auto first = run_collection(o, m_backend);
    EXPECT_EQ(first.problems_collected, 2u);
    EXPECT_TRUE(fs::exists(m_dir / "data_shard1of2_1.json"));
    EXPECT_TRUE(fs::exists(m_dir / "data_shard1of2_2.json"));
    const auto again = run_collection(o, m_backend);
    EXPECT_EQ(again.problems_resumed, 2u);
    EXPECT_EQ(again.problems_collected, 0u);
}

}  // namespace
}  // namespace mmt::collect
