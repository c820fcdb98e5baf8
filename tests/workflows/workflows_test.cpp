// The bash workflows under workflows/, run on the CPU with tiny sizes (label cli).

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "script_runner.hpp"

namespace {
namespace fs = std::filesystem;

using mmt::testing::ScriptResult;
using mmt::testing::slurp;

class WorkflowTest : public mmt::testing::ScriptTest {
protected:
    WorkflowTest() : ScriptTest("mmt_workflow") {}

    /// Runs workflows/<script> with `env` (NAME=value ...) on the CPU with tiny sizes.
    ScriptResult run(const std::string& script, const std::string& env) {
        return run_script("workflows/" + script,
                          "DEVICE=cpu NUM_SHAPES=5 VALIDATION_SHAPES=3 MAX_SIZE=48 NUM_EPOCHS=2 " + env);
    }
};

TEST_F(WorkflowTest, MatmulWorkflowCollectsTrainsAndValidates) {
    const auto r = run("matmul_workflow.sh", "DATA_DIR='" + dir.string() + "' SEED=7");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_TRUE(fs::exists(dir / "seed_7_train_dataset.json"));
    EXPECT_TRUE(fs::exists(dir / "seed_7_validation_dataset.json"));
    EXPECT_TRUE(fs::exists(dir / "matmul_model.pt"));
    EXPECT_TRUE(fs::exists(dir / "logs" / "training_history.csv"));
    const auto report = nlohmann::json::parse(slurp(dir / "validation_report.json"));
    EXPECT_EQ(report.at("overall").at("problems"), 3);
    EXPECT_TRUE(std::isfinite(report.at("overall").at("rmse_log").get<double>()));
}

TEST_F(WorkflowTest, MatmulWorkflowStopsAtTheFirstFailingStep) {
    const auto r = run("matmul_workflow.sh", "DATA_DIR='" + dir.string() + "' SEARCH_SPACE=NONE");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--search-space"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "matmul_model.pt"));
}

TEST_F(WorkflowTest, MaxAutotuneValidationWritesTheReport) {
    // A model of the shipped CPU sample, then the script on that sample.
    const std::string sample = MMT_SOURCE_DIR "/data/datasets/sample_cpu.json";
    const std::string train = "'" MMT_CLI_PATH "' --device cpu train --recipe quick --dataset '" + sample + "' --output '" +
                              (dir / "m.pt").string() + "' --model-type base --hidden-dims 16 --num-epochs 2 " +
                              "--log-dir '" + (dir / "logs").string() + "' >/dev/null 2>&1";
    ASSERT_EQ(std::system(train.c_str()), 0);

    const auto r = run("matmul_max_autotune_validation.sh",
                       "MODEL_PATH='" + (dir / "m.pt").string() + "' VALIDATION_DATASET='" + sample +
                           "' OUTPUT='" + (dir / "analysis.json").string() + "' TOP_N='1 5'");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const auto report = nlohmann::json::parse(slurp(dir / "analysis.json"));
    EXPECT_TRUE(report.at("overall").contains("top_1"));
    EXPECT_TRUE(report.at("overall").contains("top_5"));
    EXPECT_FALSE(report.at("overall").contains("top_10"));
    EXPECT_NE(r.out.find("MODEL VS MAX-AUTOTUNE"), std::string::npos);
}

TEST_F(WorkflowTest, MaxAutotuneValidationNamesAMissingInput) {
    const auto r = run("matmul_max_autotune_validation.sh",
                       "MODEL_PATH='" + (dir / "absent.pt").string() + "'");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("absent.pt: no such file"), std::string::npos) << r.err;
}

TEST_F(WorkflowTest, CiBenchmarkPrintsEveryMetric) {
    const auto r = run("ci_benchmark.sh", "WORK_DIR='" + dir.string() + "'");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const auto metrics = nlohmann::json::parse(r.out);
    EXPECT_EQ(metrics.at("device"), "cpu");
    EXPECT_TRUE(metrics.at("missing").empty());
    for (const char* name : {"collection_configs_per_second", "training_rows_per_second", "validation_rmse_log",
                             "validation_r2", "top1_achieved_fraction", "top5_achieved_fraction",
                             "recommend_latency_ms"}) {
        ASSERT_TRUE(metrics.at(name).is_number()) << name;
    }
    EXPECT_GT(metrics.at("collection_configs_per_second").get<double>(), 0.0);
    EXPECT_GT(metrics.at("training_rows_per_second").get<double>(), 0.0);
    EXPECT_GT(metrics.at("top1_achieved_fraction").get<double>(), 0.0);
    EXPECT_LE(metrics.at("top1_achieved_fraction").get<double>(), 1.0);
    EXPECT_EQ(metrics.at("recommend_candidates"), 1876);  // EXHAUSTIVE and the vendor entry
}

TEST_F(WorkflowTest, CiBenchmarkFailsWhenAMetricCannotBeProduced) {
    const auto r = run("ci_benchmark.sh", "WORK_DIR='" + dir.string() + "' RECOMMEND_SHAPESET=/nonexistent.json");
    EXPECT_NE(r.exit_code, 0);
    const auto metrics = nlohmann::json::parse(r.out);
    EXPECT_TRUE(metrics.at("recommend_latency_ms").is_null());
    EXPECT_EQ(metrics.at("missing"), nlohmann::json::array({"recommend_latency_ms", "recommend_candidates"}));
    EXPECT_TRUE(metrics.at("validation_rmse_log").is_number());
}

}  // namespace
