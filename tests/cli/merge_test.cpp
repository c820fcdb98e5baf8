// `merge` through the binary: shard files of a sharded `collect` merge back into the
// unsharded problem list; duplicates keep the median; bad input is one error line.

#include <set>

#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/meta_sidecar.hpp"

namespace mmt::testing {
namespace {
namespace fs = std::filesystem;

std::set<std::string> problems_of(const core::Dataset& dataset) {
    std::set<std::string> keys;
    for (const auto& hw : dataset.hardware())
        for (const auto& op : hw.operations)
            for (const auto& p : op.problems) keys.insert(op.name + core::shape_key(p.shape));
    return keys;
}

class MergeCli : public ::testing::Test {
protected:
    void SetUp() override { dir = fresh_temp_dir("mmt_cli_merge"); }
    void TearDown() override { fs::remove_all(dir); }

    CliResult collect(const std::vector<std::string>& extra, const fs::path& output) {
        std::vector<std::string> args{"--device", "cpu", "--seed", "5", "collect", "--num-shapes", "5",
                                      "--min-size", "16", "--max-size", "48", "--warmup", "0",
                                      "--repeat", "1", "--no-reference", "--quiet", "--output", output.string()};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_cli(args, dir / "logs");
    }

    fs::path dir;
};

TEST_F(MergeCli, ShardsMergeBackIntoTheUnshardedProblemList) {
    ASSERT_EQ(collect({}, dir / "whole.json").exit_code, 0);
    for (const char* index : {"0", "1", "2"}) {
        const auto r = collect({"--shard-index", index, "--num-shards", "3"}, dir / "shards" / "data.json");
        ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    EXPECT_TRUE(fs::exists(dir / "shards" / "data_shard2of3.json"));

    const auto r = run_cli({"merge", "--inputs", (dir / "shards").string(), "--output", (dir / "merged.json").string()},
                           dir / "logs");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("inputs: 3 files"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("0 combined"), std::string::npos) << r.out;
    EXPECT_EQ(problems_of(core::load_dataset(dir / "merged.json")), problems_of(core::load_dataset(dir / "whole.json")));
}

TEST_F(MergeCli, RepeatedRunsOfOneFileKeepTheMedianAndSayHowMany) {
    core::Dataset d;
    core::GemmConfig c;
    const auto shape = core::make_shape(1, 32, 32, 32, "float32");
    for (const auto& [name, ms] : std::vector<std::pair<std::string, double>>{{"a.json", 1.0}, {"b.json", 7.0}, {"c.msgpack", 2.0}}) {
        core::Dataset one;
        one.add_timing("cpu", "mm", shape, {c, ms, 1});
        core::save_dataset(one, dir / name, name == "a.json" ? core::DiodeLayout::legacy : core::DiodeLayout::current);
    }
    const auto r = run_cli({"merge", "--inputs", (dir / "a.json").string(), (dir / "b.json").string(),
                            (dir / "c.msgpack").string(), "--output", (dir / "out" / "m").string()},
                           dir / "logs");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("3 read, 1 written, 1 combined"), std::string::npos) << r.out;
    const auto merged = core::load_dataset(dir / "out" / "m.json");
    EXPECT_DOUBLE_EQ(merged.fastest("cpu", "mm", shape)->time_ms, 2.0);
    EXPECT_EQ(core::load_meta_sidecar(dir / "out" / "m.json")["merge"]["entries_combined"], 1);
}

TEST_F(MergeCli, FilesTimedDifferentWaysAreMergedWithAWarningThatNamesThem) {
    core::Dataset one;
    one.add_timing("NVIDIA H200", "mm", core::make_shape(1, 64, 64, 64, "bfloat16"), {core::GemmConfig{}, 0.01, 1});
    for (const char* timing : {"padding on", "padding off"}) {
        const auto file = dir / (std::string(timing) == "padding on" ? "old.json" : "new.json");
        core::save_dataset(one, file);
        core::save_meta_sidecar(file, {{"run", {{"backend", "inductor"}, {"environment", {{"timing", timing}}}}}});
    }
    const auto r = run_cli({"merge", "--inputs", (dir / "new.json").string(), (dir / "old.json").string(), "--output",
                            (dir / "m.json").string()},
                           dir / "logs");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("timed different ways"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("\"padding on\": " + (dir / "old.json").string()), std::string::npos) << r.err;
}

TEST_F(MergeCli, BadInputIsOneErrorLine) {
    auto r = run_cli({"merge", "--inputs", (dir / "absent.json").string(), "--output", (dir / "m.json").string()},
                     dir / "logs");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "error: " + (dir / "absent.json").string() + ": no such file or directory\n");
    EXPECT_FALSE(fs::exists(dir / "m.json"));

    r = run_cli({"merge", "--dataset", dir.string(), "--output", (dir / "m.txt").string()}, dir / "logs");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("m.txt"), std::string::npos) << r.err;

    // --inputs is the old spelling of --dataset: alone it works (above), with it an error.
    r = run_cli({"merge", "--dataset", dir.string(), "--inputs", dir.string(), "--output", (dir / "m.json").string()},
                dir / "logs");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "error: --inputs: the old spelling of --dataset: give one of them\n");
    r = run_cli({"merge", "--output", (dir / "m.json").string()}, dir / "logs");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("error: --dataset"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mmt::testing
