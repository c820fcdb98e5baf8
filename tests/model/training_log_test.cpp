#include "matmul_toolkit/model/training_log.hpp"

#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "matmul_toolkit/core/dataset_io.hpp"

namespace mmt::model {
namespace {

std::vector<EpochStats> three_epochs() {
    std::vector<EpochStats> h(3);
    h[0] = {1, 2.0, 1.5, 0.25, 1000.0, true, 0, 1e-3};
    h[1] = {2, 1.0, 0.5, 0.25, 2000.0, true, 0, 1e-3};
    h[2] = {3, 0.5, 0.75, 0.25, 3000.0, false, 0, 5e-4};
    return h;
}

TEST(TrainingLog, HistoryCsvHasOneLinePerEpoch) {
    EXPECT_EQ(history_csv(three_epochs()),
              "epoch,train_loss,validation_loss,seconds,rows_per_second,best,learning_rate\n"
              "1,2,1.5,0.2500,1000.0,1,0.001\n"
              "2,1,0.5,0.2500,2000.0,1,0.001\n"
              "3,0.5,0.75,0.2500,3000.0,0,0.0005\n");
}

TEST(TrainingLog, SvgIsSelfContainedWithBothCurvesAndTheBestEpoch) {
    const auto svg = loss_plot_svg(three_epochs(), 2);
    EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
    EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
    EXPECT_NE(svg.find("</svg>"), std::string::npos);
    EXPECT_EQ(svg.find("<script"), std::string::npos);
    EXPECT_EQ(svg.find("href"), std::string::npos);
    std::size_t polylines = 0;
    for (auto at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++polylines;
    EXPECT_EQ(polylines, 2u);
    EXPECT_NE(svg.find("best epoch 2"), std::string::npos);
    EXPECT_NE(svg.find(">training<"), std::string::npos);
    EXPECT_NE(svg.find(">validation<"), std::string::npos);
    // One epoch and equal losses still give a valid plot (no division by zero).
    std::vector<EpochStats> one(1);
    one[0] = {1, 1.0, 1.0, 0.1, 10.0, true};
    const auto single = loss_plot_svg(one, 1);
    EXPECT_EQ(single.find("nan"), std::string::npos);
    EXPECT_EQ(single.find("inf"), std::string::npos);
}

TEST(TrainingLog, WritesTheThreeFiles) {
    namespace fs = std::filesystem;
    const auto dir = fs::temp_directory_path() / "mmt_training_log_test" / "nested";
    fs::remove_all(dir.parent_path());
    TrainResult result;
    result.history = three_epochs();
    result.best_epoch = 2;
    result.best_validation_loss = 0.5;
    result.split.train = {0, 1, 2};
    result.split.validation = {3};
    result.split.test = {4};
    const auto paths = write_training_logs(result, dir);
    ASSERT_EQ(paths.size(), 3u);
    for (const auto& p : paths) EXPECT_TRUE(fs::exists(p)) << p;
    const auto json = nlohmann::json::parse(core::read_file(dir / "test_metrics.json"));
    EXPECT_EQ(json["best_epoch"], 2);
    EXPECT_EQ(json["split"]["train_problems"], 3);
    EXPECT_TRUE(json["test"].contains("overall"));
    fs::remove_all(dir.parent_path());
}

// One line per held-out timing; an aten_* row has no tile, so its tile fields are empty.
TEST(TrainingLog, CrossValidationPredictionsLeaveTheVendorRowsTilesEmpty) {
    CrossValidationResult result;
    ProblemGroup problem;
    problem.op_key = "mm";
    problem.shape.M = 64;
    problem.shape.N = 128;
    problem.shape.K = 256;
    core::TimedConfig triton;
    triton.config.name = "mm_config";
    triton.config.block_m = 32;
    triton.config.block_n = 64;
    triton.config.block_k = 16;
    triton.config.group_m = 8;
    triton.config.num_stages = 3;
    triton.config.num_warps = 4;
    triton.time_ms = 0.5;
    core::TimedConfig aten;
    aten.config.name = "aten_mm";
    aten.time_ms = 0.25;
    problem.timings = {triton, aten};
    result.held_out = {problem};
    result.held_out_fold = {2};
    result.held_out_log_ms = {{std::log(0.4), std::log(0.3)}};
    const auto csv = cross_validation_predictions_csv(result);
    EXPECT_NE(csv.find("\n2,0,mm,float16,1,64,128,256,mm_config,32,64,16,8,3,4,0.5,0.4\n"), std::string::npos) << csv;
    EXPECT_NE(csv.find("\n2,0,mm,float16,1,64,128,256,aten_mm,,,,,,,0.25,0.3\n"), std::string::npos) << csv;
}

}  // namespace
}  // namespace mmt::model
