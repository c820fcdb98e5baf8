// Merging datasets: identical entries keep the median and are counted, hardware stays
// apart, both layouts in and the current layout out, and the inputs a merge reads.

#include "matmul_toolkit/collect/dataset_merge.hpp"

#include <unistd.h>

#include <gtest/gtest.h>

#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/core/meta_sidecar.hpp"

namespace mmt::collect {
namespace {
namespace fs = std::filesystem;

core::GemmConfig tile(int block_m) {
    core::GemmConfig c;
    c.name = "mm";
    c.block_m = block_m;
    return c;
}

core::Dataset one(const std::string& hardware, const core::MMShape& shape, int block_m, double ms) {
    core::Dataset d;
    d.add_timing(hardware, "mm", shape, {tile(block_m), ms, 1});
    return d;
}

double time_of(const core::Dataset& d, const std::string& hardware, const core::MMShape& shape, int block_m) {
    for (const auto& entry : d.to_table()) {
        if (entry.hardware != hardware || entry.shape != shape) continue;
        for (const auto& tc : entry.sorted_configs) {
            if (tc.config.block_m == block_m) return tc.time_ms;
        }
    }
    return -1.0;
}

const core::MMShape kShape = core::make_shape(1, 64, 128, 32, "float32");
const core::MMShape kOther = core::make_shape(1, 256, 128, 32, "float32");

TEST(MergeDatasets, IdenticalEntriesKeepTheMedianAndAreCounted) {
    const auto result = merge_datasets({one("H100", kShape, 64, 3.0), one("H100", kShape, 64, 1.0),
                                        one("H100", kShape, 64, 2.5), one("H100", kShape, 32, 4.0),
                                        one("H100", kShape, 32, 5.0)});
    EXPECT_DOUBLE_EQ(time_of(result.dataset, "H100", kShape, 64), 2.5);  // odd count: the middle one
    EXPECT_DOUBLE_EQ(time_of(result.dataset, "H100", kShape, 32), 4.5);  // even: mean of the middle two
    EXPECT_EQ(result.dataset.num_timings(), 2u);
    EXPECT_EQ(result.summary.entries_read, 5u);
    EXPECT_EQ(result.summary.entries_written, 2u);
    EXPECT_EQ(result.summary.entries_combined, 2u);
    const auto key = core::meta_problem_key("H100", "mm", kShape);
    EXPECT_EQ(result.combined[key]["64x64x32 g8 s2 w4"]["samples"], 3);
    EXPECT_EQ(result.combined[key]["32x64x32 g8 s2 w4"]["times_ms"], (std::vector<double>{4.0, 5.0}));
}

TEST(MergeDatasets, DifferentHardwareIsNeverCombined) {
    const auto result = merge_datasets({one("NVIDIA H100", kShape, 64, 1.0), one("NVIDIA H200", kShape, 64, 3.0),
                                        one("NVIDIA  h100", kShape, 64, 5.0)});
    ASSERT_EQ(result.dataset.hardware().size(), 3u);
    EXPECT_DOUBLE_EQ(time_of(result.dataset, "NVIDIA H100", kShape, 64), 1.0);
    EXPECT_DOUBLE_EQ(time_of(result.dataset, "NVIDIA H200", kShape, 64), 3.0);
    EXPECT_DOUBLE_EQ(time_of(result.dataset, "NVIDIA  h100", kShape, 64), 5.0);
    EXPECT_EQ(result.summary.entries_combined, 0u);
    ASSERT_EQ(result.summary.similar_hardware.size(), 1u);
    EXPECT_EQ(result.summary.similar_hardware[0].second, "NVIDIA  h100");
    const auto text = format_merge_summary(result.summary);
    EXPECT_NE(text.find("kept apart"), std::string::npos) << text;
}

TEST(MergeDatasets, KeepsFirstAppearanceOrderAndPerHardwareCounts) {
    core::Dataset a = one("H100", kOther, 64, 1.0);
    a.add_timing("H200", "mm", kShape, {tile(64), 2.0, 1});
    const auto result = merge_datasets({a, one("H100", kShape, 64, 1.0), one("H100", kOther, 32, 1.0)},
                                       {"a.json", "b.json", "c.json"});
    ASSERT_EQ(result.dataset.hardware().size(), 2u);
    const auto& h100 = result.dataset.hardware()[0];
    EXPECT_EQ(h100.name, "H100");
    ASSERT_EQ(h100.operations[0].problems.size(), 2u);
    EXPECT_EQ(h100.operations[0].problems[0].shape, kOther);
    EXPECT_EQ(h100.operations[0].problems[0].timed_configs.size(), 2u);
    ASSERT_EQ(result.summary.hardware.size(), 2u);
    EXPECT_EQ(result.summary.hardware[0].problems, 2u);
    EXPECT_EQ(result.summary.hardware[0].entries, 3u);
    EXPECT_EQ(result.summary.hardware[0].files, (std::vector<fs::path>{"a.json", "b.json", "c.json"}));
    EXPECT_EQ(result.summary.hardware[1].files, std::vector<fs::path>{"a.json"});
}

class MergeFiles : public ::testing::Test {
protected:
    void SetUp() override {
        m_dir = fs::temp_directory_path() / ("mmt_merge_test_" + std::to_string(::getpid()));
        fs::remove_all(m_dir);
        fs::create_directories(m_dir / "shards");
    }
    void TearDown() override { fs::remove_all(m_dir); }
    fs::path m_dir;
};

TEST_F(MergeFiles, ReadsBothLayoutsAndWritesTheCurrentOneWithASidecar) {
    core::save_dataset(one("H100", kShape, 64, 1.0), m_dir / "shards/a.json", core::DiodeLayout::legacy);
    core::save_dataset(one("H100", kShape, 64, 2.0), m_dir / "shards/b.msgpack", core::DiodeLayout::current);
    const auto files = expand_merge_inputs({m_dir / "shards"}, m_dir / "merged.json");
    ASSERT_EQ(files.size(), 2u);
    const auto result = merge_dataset_files(files);
    save_merge(result, m_dir / "merged.json");

    core::DiodeLayout found = core::DiodeLayout::legacy;
    const auto merged = core::load_dataset(m_dir / "merged.json", found);
    EXPECT_EQ(found, core::DiodeLayout::current);
    EXPECT_DOUBLE_EQ(time_of(merged, "H100", kShape, 64), 1.5);
    const auto meta = core::load_meta_sidecar(m_dir / "merged.json");
    EXPECT_EQ(meta["merge"]["inputs"].size(), 2u);
    EXPECT_EQ(meta["merge"]["entries_combined"], 1);
}

TEST_F(MergeFiles, InputsAreExpandedOnceAndTheOutputIsNeverAnInput) {
    core::save_dataset(one("H100", kShape, 64, 1.0), m_dir / "shards/a.json");
    core::save_dataset(one("H100", kShape, 64, 2.0), m_dir / "shards/merged.json");
    std::vector<fs::path> skipped;
    const auto files = expand_merge_inputs({m_dir / "shards", m_dir / "shards/a.json"},
                                           m_dir / "shards/merged.json", &skipped);
    EXPECT_EQ(files, std::vector<fs::path>{m_dir / "shards/a.json"});
    EXPECT_EQ(skipped, std::vector<fs::path>{m_dir / "shards/merged.json"});

    EXPECT_THROW(expand_merge_inputs({m_dir / "shards/a.json"}, m_dir / "shards/a.json"), core::InputError);
    EXPECT_THROW(expand_merge_inputs({m_dir / "missing.json"}, m_dir / "out.json"), core::InputError);
    fs::create_directories(m_dir / "empty");
    EXPECT_THROW(expand_merge_inputs({m_dir / "empty"}, m_dir / "out.json"), core::InputError);
    EXPECT_THROW(expand_merge_inputs({}, m_dir / "out.json"), core::InputError);
}

}  // namespace
}  // namespace mmt::collect
