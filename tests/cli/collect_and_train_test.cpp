// `collect-and-train`: the four steps end to end on the CPU backend, the skip flags, and
// bad input caught before any measurement.

#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "tiny_model.hpp"

namespace mmt {
namespace {

namespace fs = std::filesystem;

class CollectAndTrainCommand : public ::testing::Test {
protected:
    void SetUp() override { dir = testing::fresh_temp_dir("mmt_cli_collect_and_train"); }
    void TearDown() override { fs::remove_all(dir); }

    testing::CliResult run(std::vector<std::string> extra) {
        std::vector<std::string> args{"--device", "cpu", "collect-and-train",
                                      "--dataset", (dir / "train.json").string(),
                                      "--validation-dataset", (dir / "validation.json").string(),
                                      "--output", (dir / "model.pt").string(), "--recipe", "quick",
                                      "--log-dir", (dir / "logs").string(),
                                      "--num-shapes", "8", "--validation-shapes", "4", "--max-size", "96",
                                      "--num-epochs", "3", "--model-type", "base", "--hidden-dims", "16,8",
                                      "--quiet"};
        args.insert(args.end(), extra.begin(), extra.end());
        return testing::run_cli(args, dir / "run");
    }

    fs::path dir;
};

TEST_F(CollectAndTrainCommand, CollectsTrainsAndValidates) {
    const auto report = dir / "report.json";
    const auto r = run({"--validation-report", report.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    for (const char* step : {"== 1/4 collect", "== 2/4 create-validation", "== 3/4 train", "== 4/4 validate-model"}) {
        EXPECT_NE(r.out.find(step), std::string::npos) << step << "\n" << r.out;
    }
    EXPECT_NE(r.out.find("(seed 43)"), std::string::npos) << r.out;
    for (const char* file : {"train.json", "validation.json", "model.pt", "logs/training_history.csv"}) {
        EXPECT_TRUE(fs::exists(dir / file)) << file;
    }
    const auto json = nlohmann::json::parse(testing::slurp(report));
    EXPECT_EQ(json["overall"]["problems"], 4);
    EXPECT_EQ(json["dataset"], (dir / "validation.json").string());
}

TEST_F(CollectAndTrainCommand, SkipFlagsSkipTheirSteps) {
    fs::copy_file(testing::sample_dataset(), dir / "train.json");
    const auto r = run({"--skip-collection", "--skip-validation"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("1/4 collect: skipped"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("2/4 create-validation: skipped"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("4/4 validate-model: skipped"), std::string::npos) << r.out;
    EXPECT_TRUE(fs::exists(dir / "model.pt"));
    EXPECT_FALSE(fs::exists(dir / "validation.json"));

    // Collect only: no training, and the model from before is validated.
    const auto again = run({"--skip-training"});
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.out.find("3/4 train: skipped"), std::string::npos) << again.out;
    EXPECT_NE(again.out.find("== 4/4 validate-model: "), std::string::npos) << again.out;
    EXPECT_TRUE(fs::exists(dir / "validation.json"));
}

TEST_F(CollectAndTrainCommand, BadInputStopsBeforeAnyMeasurement) {
    auto r = run({"--skip-collection"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("collect it first"), std::string::npos) << r.err;

    r = run({"--learning-rate", "0"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("error: --learning-rate"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "train.json"));

    r = run({"--validation-shapes", "0"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_FALSE(fs::exists(dir / "train.json"));
}

}  // namespace
}  // namespace mmt
