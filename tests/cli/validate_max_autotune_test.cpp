// `validate-max-autotune` through the binary: the report file and table, both solution
// file forms, and the bad input the issue lists.

#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "tiny_model.hpp"

namespace mmt::testing {
namespace {
namespace fs = std::filesystem;

class ValidateMaxAutotuneCli : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir = new fs::path(fresh_temp_dir("mmt_vma"));
        model = new fs::path(train_tiny_model(*dir));
    }
    static void TearDownTestSuite() {
        fs::remove_all(*dir);
        delete dir;
        delete model;
    }

    CliResult run(std::vector<std::string> extra, const std::string& dataset = sample_dataset(),
                  const std::string& solution = default_solution()) {
        std::vector<std::string> args{"--device", "cpu", "validate-max-autotune", "--model", model->string(),
                                      "--dataset", dataset, "--max-autotune-solution", solution};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_cli(args, *dir / "run");
    }

    static fs::path write(const std::string& name, const std::string& text) {
        std::ofstream(*dir / name) << text;
        return *dir / name;
    }

    static fs::path* dir;
    static fs::path* model;
};

fs::path* ValidateMaxAutotuneCli::dir = nullptr;
fs::path* ValidateMaxAutotuneCli::model = nullptr;

TEST_F(ValidateMaxAutotuneCli, WritesTheReportAndPrintsTheTable) {
    const auto output = *dir / "report.json";
    const auto result = run({"--output", output.string()});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_NE(result.out.find("MODEL VS MAX-AUTOTUNE"), std::string::npos);
    EXPECT_NE(result.out.find("overall"), std::string::npos);

    const auto report = nlohmann::json::parse(slurp(output));
    for (const char* op : {"mm", "addmm", "bmm"}) EXPECT_TRUE(report.at("per_op").contains(op)) << op;
    const auto& overall = report.at("overall");
    for (const char* n : {"top_1", "top_5", "top_10", "top_20", "top_50", "top_100", "top_500"}) {
        ASSERT_TRUE(overall.contains(n)) << n;
        EXPECT_EQ(overall.at(n).at("shapes_analyzed"), 5);
    }
    // Each problem of the sample has 16 measured tiles: the model's 500 best are all of
    // them, so its pick is the exhaustive best.
    EXPECT_DOUBLE_EQ(overall.at("top_500").at("vs_exhaustive").at("overall_metrics").at("avg_speedup_ratio"), 1.0);
    // Every problem of the sample has an aten_* entry.
    EXPECT_EQ(overall.at("top_1").at("vs_vendor").at("shapes_analyzed"), 5);
    EXPECT_EQ(report.at("metadata").at("model_path"), model->string());
    EXPECT_EQ(report.at("metadata").at("model_hardware"), "AMD EPYC");
}

TEST_F(ValidateMaxAutotuneCli, PerOpSolutionAnalysesOnlyItsOps) {
    const auto solution = write("per_op.json", R"({"mm": {"config": [
        {"name": "mm", "grid": 1, "block_m": 64, "block_n": 64, "block_k": 32, "group_m": 8,
         "num_stages": 2, "num_warps": 4}]}})");
    const auto output = *dir / "per_op_report.json";
    const auto result = run({"--output", output.string()}, sample_dataset(), solution.string());
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const auto report = nlohmann::json::parse(slurp(output));
    EXPECT_EQ(report.at("per_op").size(), 1u);
    EXPECT_EQ(report.at("per_op").at("mm").at("top_1").at("shapes_analyzed"), 3);
    EXPECT_NE(result.err.find("no configs for op 'addmm'"), std::string::npos) << result.err;
}

TEST_F(ValidateMaxAutotuneCli, SolutionWithNoMeasuredConfigIsRejected) {
    const auto solution = write("absent.json", R"({"config": [
        {"name": "mm", "grid": 1, "block_m": 16, "block_n": 16, "block_k": 256, "group_m": 8,
         "num_stages": 1, "num_warps": 2}]})");
    const auto result = run({"--output", (*dir / "x.json").string()}, sample_dataset(), solution.string());
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_NE(result.err.find("error: " + solution.string() + ": none of its 1 configs"), std::string::npos)
        << result.err;
    EXPECT_FALSE(fs::exists(*dir / "x.json"));
}

TEST_F(ValidateMaxAutotuneCli, OtherHardwareIsRefusedUnlessForced) {
    std::string text = slurp(sample_dataset());
    for (auto at = text.find("AMD EPYC"); at != std::string::npos; at = text.find("AMD EPYC", at)) {
        text.replace(at, 8, "Other CPU");
    }
    const auto dataset = write("other_hw.json", text);

    const auto refused = run({"--output", (*dir / "o.json").string()}, dataset.string());
    EXPECT_EQ(refused.exit_code, 2);
    EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;

    const auto forced = run({"--output", (*dir / "o.json").string(), "--force"}, dataset.string());
    EXPECT_EQ(forced.exit_code, 0) << forced.err;
    EXPECT_NE(forced.err.find("warn"), std::string::npos) << forced.err;
}

TEST_F(ValidateMaxAutotuneCli, BadInputGivesOneErrorLine) {
    const auto no_model = run_cli({"validate-max-autotune", "--model", (*dir / "none.pt").string(), "--dataset",
                                   sample_dataset(), "--max-autotune-solution", default_solution()},
                                  *dir / "run");
    EXPECT_EQ(no_model.exit_code, 2);
    const auto filtered_out = run({"--op-name", "bmm_tt"});
    EXPECT_EQ(filtered_out.exit_code, 2);
    EXPECT_NE(filtered_out.err.find("no problems left"), std::string::npos) << filtered_out.err;
    const auto bad_n = run({"--top-k", "0"});
    EXPECT_EQ(bad_n.exit_code, 2);
    EXPECT_NE(bad_n.err.find("--top-k"), std::string::npos) << bad_n.err;
}

}  // namespace
}  // namespace mmt::testing
