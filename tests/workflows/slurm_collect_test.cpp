// workflows/slurm_collect.sh without SLURM: the dry run prints one collect per array task
// with its shard index, and running the task and merge modes by hand (as the array and
// the merge job would) gives the unsharded problem list.

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "script_runner.hpp"

namespace {
namespace fs = std::filesystem;

using mmt::testing::ScriptResult;
using mmt::testing::slurp;

std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

// The problem keys of a current- or legacy-layout JSON dataset (hardware|op|shape).
std::set<std::string> problems_in(const fs::path& file) {
    std::set<std::string> keys;
    const auto doc = nlohmann::json::parse(slurp(file));
    for (const auto& [hw, hw_doc] : doc.at("hardware").items())
        for (const auto& [op, op_doc] : hw_doc.at("operation").items())
            for (const auto& [shape, unused] : op_doc.at("solution").items()) keys.insert(hw + "|" + op + "|" + shape);
    return keys;
}

class SlurmCollect : public mmt::testing::ScriptTest {
protected:
    SlurmCollect() : ScriptTest("mmt_slurm") {}

    ScriptResult run(const std::string& env, const std::string& args) {
        return run_script("workflows/slurm_collect.sh", "DEVICE=cpu DATA_DIR='" + dir.string() + "' " + env, args);
    }
};

const std::string kCollect = "-- --num-shapes 7 --min-size 16 --max-size 48 --warmup 0 --repeat 1 --no-reference";

TEST_F(SlurmCollect, DryRunPrintsTheArrayTheMergeJobAndOneCollectPerShard) {
    const auto r = run("NUM_SHARDS=5 SBATCH_ARGS='--partition=gpu --gres=gpu:1'", "--dry-run " + kCollect);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("sbatch --parsable --array=0-4 "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--partition=gpu --gres=gpu:1"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--dependency=afterok:ARRAY_JOB_ID"), std::string::npos) << r.out;
    for (int i = 0; i < 5; ++i) {
        EXPECT_EQ(count(r.out, "collect --shard-index " + std::to_string(i) + " --num-shards 5 "), 1u) << r.out;
    }
    EXPECT_EQ(count(r.out, "--shard-index 5"), 0u);
    EXPECT_EQ(count(r.out, " merge --dataset "), 1u);
    EXPECT_FALSE(fs::exists(dir / "shards"));  // nothing ran
}

TEST_F(SlurmCollect, TasksRunByHandThenMergeGiveTheUnshardedProblems) {
    for (int i = 0; i < 3; ++i) {
        const auto r = run("NUM_SHARDS=3 SLURM_ARRAY_TASK_ID=" + std::to_string(i) + " SLURM_ARRAY_TASK_COUNT=3",
                           "task " + kCollect);
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    }
    const auto merged = run("NUM_SHARDS=3", "merge");
    ASSERT_EQ(merged.exit_code, 0) << merged.err;

    const std::string whole = "'" MMT_CLI_PATH "' --device cpu --seed 42 collect --num-shapes 7 --min-size 16 "
                              "--max-size 48 --warmup 0 --repeat 1 --no-reference --quiet --output '" +
                              (dir / "whole.json").string() + "' >/dev/null 2>&1";
    ASSERT_EQ(std::system(whole.c_str()), 0);
    const auto expected = problems_in(dir / "whole.json");
    EXPECT_EQ(expected.size(), 7u);
    EXPECT_EQ(problems_in(dir / "matmul_dataset.json"), expected);
}

TEST_F(SlurmCollect, ATaskOutsideTheArrayOrWithoutAnIndexFails) {
    auto r = run("NUM_SHARDS=3 SLURM_ARRAY_TASK_ID=3", "task " + kCollect);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("error: --shard-index: 3 is outside 0..2"), std::string::npos) << r.err;
    r = run("NUM_SHARDS=3", "task " + kCollect);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("SLURM_ARRAY_TASK_ID"), std::string::npos) << r.err;
    r = run("NUM_SHARDS=4 SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=3", "task " + kCollect);
    EXPECT_EQ(r.exit_code, 2);
    r = run("NUM_SHARDS=zero", "--dry-run");
    EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
