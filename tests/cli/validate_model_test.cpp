// `validate-model`: the metrics table, --output-json, and clear errors for bad models.

#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "tiny_model.hpp"

namespace mmt {
namespace {

namespace fs = std::filesystem;

class ValidateModelCommand : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir = new fs::path(testing::fresh_temp_dir("mmt_cli_validate_model"));
        model = new fs::path(testing::train_tiny_model(*dir));
    }
    static void TearDownTestSuite() {
        fs::remove_all(*dir);
        delete dir;
        delete model;
    }

    static fs::path* dir;
    static fs::path* model;
};

fs::path* ValidateModelCommand::dir = nullptr;
fs::path* ValidateModelCommand::model = nullptr;

TEST_F(ValidateModelCommand, PrintsTheTableAndWritesTheSameNumbersAsJson) {
    const auto json_path = *dir / "report.json";
    const auto r = testing::run_cli({"validate-model", "--model", model->string(), "--dataset",
                                     testing::sample_dataset(), "--top-n-worst", "3", "--output-json",
                                     json_path.string()},
                                    *dir / "ok");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* column : {"mse_log", "rmse_log", "exp_rmse", "r2", "mape_%", "spearman", "top1", "top5",
                               "top10", "overall", "addmm", "bmm", "worst predictions"}) {
        EXPECT_NE(r.out.find(column), std::string::npos) << column << "\n" << r.out;
    }
    const auto json = nlohmann::json::parse(testing::slurp(json_path));
    EXPECT_EQ(json["overall"]["problems"], 5);
    EXPECT_EQ(json["overall"]["rows"], 85);  // 80 configs and each problem's aten_* entry (the model learned them)
    EXPECT_TRUE(json["overall"]["rmse_log"].is_number());
    EXPECT_TRUE(json["overall"]["top_k_achieved_fraction"]["1"].is_number());
    EXPECT_EQ(json["per_op"].size(), 3u);
    EXPECT_EQ(json["worst_predictions"].size(), 3u);
}

TEST_F(ValidateModelCommand, OpFilterKeepsOneOp) {
    const auto json_path = *dir / "mm.json";
    const auto r = testing::run_cli({"validate-model", "--model", model->string(), "--dataset",
                                     testing::sample_dataset(), "--op-name", "mm", "--output-json",
                                     json_path.string()},
                                    *dir / "mm");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto json = nlohmann::json::parse(testing::slurp(json_path));
    ASSERT_EQ(json["per_op"].size(), 1u);
    EXPECT_EQ(json["per_op"][0]["op"], "mm");
}

TEST_F(ValidateModelCommand, MissingOrForeignModelIsAClearError) {
    auto r = testing::run_cli({"validate-model", "--model", (*dir / "absent.pt").string(), "--dataset",
                               testing::sample_dataset()},
                              *dir / "absent");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("absent.pt"), std::string::npos) << r.err;

    r = testing::run_cli({"validate-model", "--model", testing::sample_dataset(), "--dataset",
                          testing::sample_dataset()},
                         *dir / "foreign");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("not a matmul_toolkit checkpoint"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace mmt
