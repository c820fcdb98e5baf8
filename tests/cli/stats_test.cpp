// `stats`: the table and --json for the hand-written sample, and bad input.

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "matmul_toolkit/core/json_codec.hpp"

namespace mmt::testing {
namespace {
namespace fs = std::filesystem;

const fs::path kData = MMT_TEST_DATA_DIR;

class StatsCommand : public ::testing::Test {
protected:
    void SetUp() override { m_dir = fresh_temp_dir("mmt_cli_stats"); }
    void TearDown() override { fs::remove_all(m_dir); }
    CliResult run(const std::vector<std::string>& args) { return run_cli(args, m_dir / "io"); }
    const fs::path& dir() const { return m_dir; }

private:
    fs::path m_dir;
};

TEST_F(StatsCommand, PrintsHardwareOperationsAndFastestConfigs) {
    const auto file = (kData / "dataset_current.json").string();
    const auto result = run({"stats", file});
    // Fastest per problem, read off the file: 0.025 of (0.0261.., 0.1, 0.025); 1e-05 of
    // (1e-05, 100.0); the only addmm timing; 1.5 of (1.5, 2.0).
    const std::string expected =
        "dataset: " + file + "\n"
        "hardware: 2, operations: 3, problems: 4, timed configs: 8\n"
        "\n"
        "hardware 'NVIDIA H100'\n"
        "  mm: 2 problems, 5 timed configs (5 distinct)\n"
        "    problem             dtype     configs  fastest ms  fastest config\n"
        "    M=32 N=32 K=32      float16         3       0.025  64x32x32 g8 s3 w4\n"
        "    M=1024 N=512 K=256  bfloat16        2       1e-05  128x64x32 g8 s3 w4 EVEN_K\n"
        "  addmm: 1 problem, 1 timed config (1 distinct)\n"
        "    problem         dtype    configs  fastest ms  fastest config\n"
        "    M=64 N=64 K=64  float32        1         0.5  64x64x32 g8 s2 w4 TF32\n"
        "\n"
        "hardware 'Ryzen\xE2\x84\xA2 9 cpu'\n"
        "  bmm_nt: 1 problem, 2 timed configs (2 distinct)\n"
        "    problem               dtype    configs  fastest ms  fastest config\n"
        "    B=8 M=128 N=128 K=64  float32        2         1.5  32x32x32 g1 s1 w4\n";
    EXPECT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(result.out, expected);
    EXPECT_EQ(result.err, "");
}

TEST_F(StatsCommand, JsonOutputIsMachineReadable) {
    const auto result = run({"stats", (kData / "dataset_legacy.json").string(), "--json"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const auto doc = nlohmann::ordered_json::parse(result.out);
    EXPECT_EQ(doc["hardware_count"], 1);
    EXPECT_EQ(doc["problems"], 2);
    EXPECT_EQ(doc["timed_configs"], 3);
    const auto& mm = doc["hardware"][0]["operations"][0];
    EXPECT_EQ(mm["op"], "mm");
    // 0.0261439997702837 < 0.02611199952661991? No: the second timing is the larger one.
    EXPECT_EQ(mm["problem_stats"][0]["fastest_time_ms"], 0.02611199952661991);
    EXPECT_EQ(mm["problem_stats"][0]["fastest_config"]["block_k"], 16);
}

TEST_F(StatsCommand, ReadsADirectoryOfFiles) {
    fs::create_directories(dir() / "data");
    fs::copy_file(kData / "dataset_current.json", dir() / "data" / "a.json");
    fs::copy_file(kData / "dataset_legacy.json", dir() / "data" / "b.json");
    const auto result = run({"stats", (dir() / "data").string(), "--json"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const auto doc = nlohmann::ordered_json::parse(result.out);
    EXPECT_EQ(doc["problems"], 5);        // b's float16 32^3 mm problem is also in a
    EXPECT_EQ(doc["timed_configs"], 11);  // 8 + 3
}

TEST_F(StatsCommand, BadFileIsOneErrorLineAndExit2) {
    const auto file = (kData / "bad" / "negative_dim.json").string();
    const auto result = run({"stats", file});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_EQ(result.out, "");
    EXPECT_EQ(result.err, "error: " + file +
                              ": hardware 'H100' > operation 'mm' > solution[0] > shape key > K: "
                              "must be positive, got -5\n");
}

TEST_F(StatsCommand, MissingFileIsOneErrorLineAndExit2) {
    const auto result = run({"stats", "no/such/file.json"});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_EQ(result.err, "error: no/such/file.json: no such file\n");
}

TEST_F(StatsCommand, TruncatedMsgpackIsOneErrorLineAndExit2) {
    const auto file = (kData / "bad" / "truncated.msgpack").string();
    const auto result = run({"stats", file});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_EQ(result.err, "error: " + file +
                              ": invalid msgpack: truncated data (the file ends inside a value)\n");
}

}  // namespace
}  // namespace mmt::testing
