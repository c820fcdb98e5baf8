// `train`: trains on the shipped CPU sample, writes the model and the logs; bad input
// gives one error line and exit code 2.

#include <filesystem>
#include <regex>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "matmul_toolkit/core/csv_table.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/meta_sidecar.hpp"
#include "tiny_model.hpp"

namespace mmt {
namespace {

namespace fs = std::filesystem;

class TrainCommand : public ::testing::Test {
protected:
    void SetUp() override { dir = testing::fresh_temp_dir("mmt_cli_train"); }
    void TearDown() override { fs::remove_all(dir); }

    testing::CliResult train(std::vector<std::string> extra) {
        std::vector<std::string> args{"--device", "cpu", "train", "--recipe", "quick", "--output", (dir / "m.pt").string(),
                                      "--log-dir", (dir / "logs").string(), "--model-type", "base",
                                      "--hidden-dims", "16,8", "--num-epochs", "3"};
        args.insert(args.end(), extra.begin(), extra.end());
        return testing::run_cli(args, dir / "run");
    }

    fs::path dir;
};

TEST_F(TrainCommand, TrainsSavesTheModelAndWritesTheLogs) {
    const auto r = train({"--dataset", testing::sample_dataset()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(dir / "m.pt"));
    EXPECT_TRUE(fs::exists(dir / "logs" / "training_history.csv"));
    EXPECT_TRUE(fs::exists(dir / "logs" / "training_loss.svg"));
    EXPECT_TRUE(fs::exists(dir / "logs" / "test_metrics.json"));
    EXPECT_NE(r.err.find("epoch   1/3"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("epoch   3/3"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("model saved to"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("overall"), std::string::npos) << r.out;
    // history: a header and one line per epoch
    const auto csv = testing::slurp(dir / "logs" / "training_history.csv");
    EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4);
}

TEST_F(TrainCommand, TrainsTheShippedRecipeWithoutFlagsAndQuickOnRequest) {
    // No recipe flag: the shipped model's recipe (three base 96,48 networks, no dropout, no
    // test split); --num-epochs given on the command line overrides the recipe's 300.
    const auto shipped = testing::run_cli({"--device", "cpu", "train", "--dataset", testing::sample_dataset(),
                                           "--output", (dir / "shipped.pt").string(), "--log-dir",
                                           (dir / "shipped_logs").string(), "--num-epochs", "2"},
                                          dir / "run_shipped");
    ASSERT_EQ(shipped.exit_code, 0) << shipped.err;
    EXPECT_NE(shipped.out.find("base (hidden 96,48, dropout 0) x3 (ensemble"), std::string::npos) << shipped.out;
    EXPECT_NE(shipped.out.find("test 0 problems"), std::string::npos) << shipped.out;
    // --recipe quick (the helper's), its widths overridden by --hidden-dims 16,8.
    const auto quick = train({"--dataset", testing::sample_dataset()});
    ASSERT_EQ(quick.exit_code, 0) << quick.err;
    EXPECT_NE(quick.out.find("base (hidden 16,8, dropout 0.2) on"), std::string::npos) << quick.out;
    // --model is the old spelling of --output.
    const auto old = testing::run_cli({"--device", "cpu", "train", "--recipe", "quick", "--dataset",
                                       testing::sample_dataset(), "--model", (dir / "old.pt").string(),
                                       "--log-dir", (dir / "old_logs").string(), "--num-epochs", "1"},
                                      dir / "run_old");
    ASSERT_EQ(old.exit_code, 0) << old.err;
    EXPECT_TRUE(fs::exists(dir / "old.pt"));
}

TEST_F(TrainCommand, FoldsCrossValidateThenTrainTheModel) {
    const auto r = train({"--dataset", testing::sample_dataset(), "--folds", "3"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("3-fold cross-validation by problem"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("fold 3/3"), std::string::npos) << r.err;
    const auto cv = nlohmann::json::parse(testing::slurp(dir / "logs" / "cv_metrics.json"));
    EXPECT_EQ(cv["folds"].size(), 3u);
    EXPECT_TRUE(cv["pooled"]["overall"]["regret"]["p95"].is_number());
    EXPECT_TRUE(fs::exists(dir / "m.pt"));
    // Every held-out timing once, with the fold that held it out and both times.
    const auto predictions = core::read_csv(dir / "logs" / "cv_predictions.csv");
    EXPECT_EQ(predictions.rows.size(), cv["pooled"]["overall"]["rows"].get<std::size_t>());
    const auto fold = core::csv_column(predictions, "fold", "cv_predictions.csv");
    const auto predicted = core::csv_column(predictions, "predicted_ms", "cv_predictions.csv");
    std::set<std::string> folds;
    for (const auto& row : predictions.rows) {
        folds.insert(row[fold]);
        EXPECT_GT(std::stod(row[predicted]), 0.0);
    }
    EXPECT_EQ(folds, (std::set<std::string>{"0", "1", "2"}));
}

TEST_F(TrainCommand, ZeroTestFractionTrainsTheFinalModelOnTheTestProblemsToo) {
    const auto r = train({"--dataset", testing::sample_dataset(), "--folds", "3", "--test-fraction", "0"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(dir / "m.pt"));
    EXPECT_NE(r.out.find("test 0 problems"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("no test split (--test-fraction 0): the cross-validation above"), std::string::npos) << r.out;
    const auto metrics = nlohmann::json::parse(testing::slurp(dir / "logs" / "test_metrics.json"));
    EXPECT_EQ(metrics["split"]["test_problems"], 0);
    EXPECT_TRUE(metrics["test"].is_null());
}

TEST_F(TrainCommand, TuneAndEnsemblePrintWhatTheyDid) {
    auto r = train({"--dataset", testing::sample_dataset(), "--tune", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("val_top1"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("trial 2/2"), std::string::npos) << r.err;
    r = train({"--dataset", testing::sample_dataset(), "--ensemble", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("member 2/2"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("x2 (ensemble"), std::string::npos) << r.out;
}

TEST_F(TrainCommand, ReadsADirectoryOfDatasetFiles) {
    fs::create_directories(dir / "data");
    fs::copy_file(testing::sample_dataset(), dir / "data" / "part1.json");
    const auto r = train({"--data-dir", (dir / "data").string(), "--file-extensions", "json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(dir / "m.pt"));
}

// Problems in training + validation + test, from "... of P problems (validation V, test T problems)".
int problems_trained_on(const std::string& out) {
    const std::regex summary(R"(of (\d+) problems \(validation (\d+), test (\d+) problems\))");
    std::smatch m;
    if (!std::regex_search(out, m, summary)) return -1;
    return std::stoi(m[1]) + std::stoi(m[2]) + std::stoi(m[3]);
}

TEST_F(TrainCommand, MergesTheDatasetsGivenSeveralTimesAndSaysWhenTheyWereTimedDifferentWays) {
    // The sample's problems split over two files: given both, training sees them all.
    const auto table = core::load_dataset(testing::sample_dataset()).to_table();
    ASSERT_GE(table.size(), 4u);
    core::Dataset first;
    core::Dataset second;
    for (std::size_t i = 0; i < table.size(); ++i) {
        for (const auto& timing : table[i].sorted_configs) {
            (i % 2 == 0 ? first : second).add_timing(table[i].hardware, table[i].op, table[i].shape, timing);
        }
    }
    core::save_dataset(first, dir / "first.json");
    core::save_dataset(second, dir / "second.json");
    // As if the Inductor backend had timed them before and after a change of method.
    core::save_meta_sidecar(dir / "first.json", {{"run", {{"backend", "inductor"}, {"environment", {{"timing", "a"}}}}}});
    core::save_meta_sidecar(dir / "second.json", {{"run", {{"backend", "inductor"}, {"environment", {{"timing", "b"}}}}}});
    const auto one = train({"--dataset", (dir / "first.json").string()});
    const auto both = train({"--dataset", (dir / "first.json").string(), "--dataset", (dir / "second.json").string()});
    ASSERT_EQ(one.exit_code, 0) << one.err;
    ASSERT_EQ(both.exit_code, 0) << both.err;
    EXPECT_EQ(problems_trained_on(one.out), static_cast<int>(first.num_problems())) << one.out;
    EXPECT_EQ(problems_trained_on(both.out), static_cast<int>(table.size())) << both.out;
    EXPECT_EQ(one.err.find("timed different ways"), std::string::npos) << one.err;
    EXPECT_NE(both.err.find("timed different ways (their sidecars' run.environment.timing): \"a\": " +
                            (dir / "first.json").string() + "; \"b\": " + (dir / "second.json").string()),
              std::string::npos)
        << both.err;
}

TEST_F(TrainCommand, BadInputIsOneErrorLineAndExitTwo) {
    struct Case {
        std::vector<std::string> args;
        std::string message;
    };
    core::Dataset zero;
    core::TimedConfig bad;
    bad.time_ms = 0.0;
    zero.add_timing("cpu", "mm", core::make_shape(1, 8, 8, 8, "float32"), bad);
    core::save_dataset(zero, dir / "zero.json");
    core::Dataset two;
    core::TimedConfig ok;
    ok.time_ms = 1.0;
    two.add_timing("cpu", "mm", core::make_shape(1, 8, 8, 8, "float32"), ok);
    two.add_timing("cpu", "mm", core::make_shape(1, 16, 8, 8, "float32"), ok);
    core::save_dataset(two, dir / "two.json");

    const std::vector<Case> cases{
        {{}, "error: --dataset: give a dataset"},
        {{"--dataset", (dir / "absent.json").string()}, "absent.json"},
        {{"--dataset", testing::sample_dataset(), "--op-name", "bmm_tt"}, "no timed kernel configs after the filters"},
        {{"--dataset", testing::sample_dataset(), "--hardware-name", "NVIDIA H100"}, "--hardware-name 'NVIDIA H100'"},
        {{"--dataset", (dir / "zero.json").string()}, "not a positive finite number"},
        {{"--dataset", (dir / "two.json").string()}, "at least 3"},
        {{"--dataset", testing::sample_dataset(), "--hidden-dims", "16,,8"}, "error: --hidden-dims"},
        {{"--dataset", testing::sample_dataset(), "--learning-rate", "-1"}, "error: --learning-rate"},
        {{"--dataset", testing::sample_dataset(), "--output", dir.string()}, "error: --output"},
        {{"--dataset", testing::sample_dataset(), "--recipe", "slow"}, "error: --recipe"},
        {{"--dataset", testing::sample_dataset(), "--folds", "1"}, "error: --folds"},
        {{"--dataset", testing::sample_dataset(), "--test-fraction", "-0.1"}, "error: --validation-fraction/--test-fraction"},
        {{"--dataset", testing::sample_dataset(), "--ensemble", "0"}, "error: --ensemble"},
        {{"--dataset", testing::sample_dataset(), "--jobs", "-1"}, "error: --jobs: must be 0 (one per core) or more"},
        {{"--dataset", testing::sample_dataset(), "--ranking-loss", "listwise"}, "error: --ranking-loss"},
        {{"--dataset", testing::sample_dataset(), "--batch-norm", "layer"}, "error: --batch-norm: unknown mode 'layer'"},
        {{"--dataset", testing::sample_dataset(), "--tune", "-2"}, "error: --tune"},
        // Required graph steps where none can run (this CPU build), and both flags at once.
        {{"--dataset", testing::sample_dataset(), "--cuda-graph"}, "error: --cuda-graph: "},
        {{"--dataset", testing::sample_dataset(), "--cuda-graph", "--no-cuda-graph"},
         "error: --cuda-graph excludes --no-cuda-graph"},
    };
    for (const auto& c : cases) {
        const auto r = train(c.args);
        EXPECT_EQ(r.exit_code, 2) << c.message << "\n" << r.err;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
    EXPECT_FALSE(fs::exists(dir / "m.pt"));
}

}  // namespace
}  // namespace mmt
