// `collect-script`: the plumbing to the Python collector, with stand-ins for torch
// (tests/cli/fake_torch: one that "autotunes" an mm, one whose import fails).

#include <stdlib.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"

namespace mmt::testing {
namespace {
namespace fs = std::filesystem;

const fs::path kFakeTorch = fs::path(MMT_SOURCE_DIR) / "tests" / "cli" / "fake_torch";
const std::string kScript = (kFakeTorch / "compile_mm.py").string();

class CollectScriptCommand : public ::testing::Test {
protected:
    void SetUp() override {
        m_dir = fresh_temp_dir("mmt_cli_collect_script");
        // The package under test is the source tree's, not the copy next to the binary.
        ::setenv("MMT_INDUCTOR_PYTHONPATH", (fs::path(MMT_SOURCE_DIR) / "python").c_str(), 1);
    }
    void TearDown() override {
        ::unsetenv("PYTHONPATH");
        ::unsetenv("MMT_INDUCTOR_PYTHONPATH");
        fs::remove_all(m_dir);
    }
    /// Runs the command with `torch_dir` (a folder of kFakeTorch) on PYTHONPATH.
    CliResult run(const std::string& torch_dir, const std::vector<std::string>& args) {
        ::setenv("PYTHONPATH", (kFakeTorch / torch_dir).c_str(), 1);
        return run_cli(args, m_dir / "io");
    }
    std::string output() const { return (m_dir / "collected.json").string(); }

private:
    fs::path m_dir;
};

int count_lines_starting(const std::string& text, const std::string& prefix) {
    int count = 0;
    std::size_t start = 0;
    while (start < text.size()) {
        if (text.compare(start, prefix.size(), prefix) == 0) ++count;
        const auto end = text.find('\n', start);
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return count;
}

TEST_F(CollectScriptCommand, MissingScriptIsOneErrorLine) {
    const auto missing = (kFakeTorch / "no_such_script.py").string();
    const auto result = run("working", {"collect-script", "--output", output(), missing});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_EQ(result.err, "error: " + missing + ": no such file\n");
    EXPECT_FALSE(fs::exists(output()));
}

TEST_F(CollectScriptCommand, PythonWithoutTorchIsOneErrorLine) {
    const auto result = run("missing", {"collect-script", "--output", output(), kScript});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_EQ(result.err.rfind("error: --python: torch is not importable", 0), 0u) << result.err;
    EXPECT_EQ(count_lines_starting(result.err, "error:"), 1) << result.err;
    EXPECT_FALSE(fs::exists(output()));
}

TEST_F(CollectScriptCommand, InterpreterThatCannotRunIsAnError) {
    const auto result = run("working", {"collect-script", "--python", "/nonexistent/python3",
                                        "--output", output(), kScript});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_EQ(result.err.rfind("error: --python: cannot run '/nonexistent/python3'", 0), 0u) << result.err;
}

TEST_F(CollectScriptCommand, WritesTheScriptsAutotuningAndPrintsItsStats) {
    const auto result = run("working", {"collect-script", "--output", output(), kScript});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    // compile_mm.py: mm [64, 96] x [96, 32] float16; Triton 64x32x16 (BLOCK_M, N, K) at
    // 0.01 ms, ATen at 0.02 ms, a failed config (inf) left out.
    const auto dataset = core::load_dataset(output());
    ASSERT_EQ(dataset.hardware().size(), 1u);
    const auto& hw = dataset.hardware()[0];
    EXPECT_EQ(hw.name, "Fake GPU");
    ASSERT_EQ(hw.operations.size(), 1u);
    EXPECT_EQ(hw.operations[0].name, "mm");
    ASSERT_EQ(hw.operations[0].problems.size(), 1u);
    const auto& problem = hw.operations[0].problems[0];
    EXPECT_EQ(problem.shape, core::make_shape(1, 64, 32, 96, "float16"));
    ASSERT_EQ(problem.timed_configs.size(), 2u);
    const auto& triton = problem.timed_configs[0];
    EXPECT_EQ(triton.config.name, "mm_config");
    EXPECT_EQ(triton.config.block_m, 64);
    EXPECT_EQ(triton.config.block_n, 32);
    EXPECT_EQ(triton.config.block_k, 16);
    EXPECT_TRUE(triton.config.even_k);  // 96 % 16 == 0
    EXPECT_DOUBLE_EQ(triton.time_ms, 0.01);
    EXPECT_EQ(problem.timed_configs[1].config.name, "aten_mm");
    EXPECT_DOUBLE_EQ(problem.timed_configs[1].time_ms, 0.02);
    EXPECT_NE(result.out.find("hardware 'Fake GPU'"), std::string::npos) << result.out;
    EXPECT_NE(result.out.find("64x32x16 g8 s3 w4 EVEN_K"), std::string::npos) << result.out;
}

TEST_F(CollectScriptCommand, ScriptThatRaisesExitsOneAndKeepsWhatWasCollected) {
    // "--fail" after SCRIPT is the script's argument, not an option of ours.
    const auto result = run("working", {"collect-script", "--output", output(), kScript, "--fail"});
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_NE(result.err.find("error: " + kScript + ": RuntimeError: the model diverged\n"), std::string::npos)
        << result.err;
    EXPECT_EQ(count_lines_starting(result.err, "error:"), 1) << result.err;
    EXPECT_EQ(core::load_dataset(output()).num_problems(), 1u);
}

}  // namespace
}  // namespace mmt::testing
