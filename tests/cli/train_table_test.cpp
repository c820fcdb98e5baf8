// `train-table` and `predict-table`: one model per group from a CSV, their R², the JSON,
// predictions as a new column, --init-from with no epochs writing the same file again,
// and bad input as one error line.

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

namespace mmt {
namespace {

namespace fs = std::filesystem;

class TrainTableCommand : public ::testing::Test {
protected:
    void SetUp() override {
        dir = testing::fresh_temp_dir("mmt_cli_train_table");
        std::ofstream csv(dir / "kernels.csv");
        csv << "layout,m,n,duration_ns\n";
        std::mt19937_64 rng(5);
        std::uniform_real_distribution<double> u(0.0, 4.0);
        for (int i = 0; i < 600; ++i) {
            const double m = u(rng), n = u(rng);
            const bool nt = i % 2 == 1;
            csv << (nt ? "nt" : "nn") << ',' << m << ',' << n << ',' << 2000.0 + 300.0 * m * n + (nt ? 500.0 : 0.0) << "\n";
        }
    }
    void TearDown() override { fs::remove_all(dir); }

    testing::CliResult run(std::vector<std::string> args) { return testing::run_cli(args, dir / "run"); }

    fs::path dir;
};

TEST_F(TrainTableCommand, TrainsOneModelPerGroupAndPredictsEveryRow) {
    const auto model = (dir / "model.json").string();
    auto r = run({"train-table", "--csv", (dir / "kernels.csv").string(), "--target", "duration_ns", "--group-by",
                  "layout", "--hidden-dims", "32,16", "--epochs", "60", "--batch-size", "32", "--output", model});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("nn"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("nt"), std::string::npos) << r.out;
    const auto json = nlohmann::json::parse(testing::slurp(model));
    EXPECT_EQ(json["features"], (std::vector<std::string>{"m", "n"}));
    ASSERT_EQ(json["models"].size(), 2u);
    EXPECT_EQ(json["models"][1]["group"], "nt");

    r = run({"predict-table", "--model", model, "--csv", (dir / "kernels.csv").string(), "--output",
             (dir / "predicted.csv").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(dir / "predicted.csv");
    std::string header, line;
    std::getline(in, header);
    EXPECT_EQ(header, "layout,m,n,duration_ns,predicted_duration_ns");
    int rows = 0;
    double worst = 0.0;
    while (std::getline(in, line)) {
        ++rows;
        const auto last = line.rfind(','), before = line.rfind(',', last - 1);
        const double actual = std::stod(line.substr(before + 1, last - before - 1));
        worst = std::max(worst, std::abs(std::stod(line.substr(last + 1)) / actual - 1.0));
    }
    EXPECT_EQ(rows, 600);
    EXPECT_LT(worst, 0.25);

    // Weights in, no epochs: the same file out, byte for byte.
    const auto again = (dir / "again.json").string();
    r = run({"train-table", "--csv", (dir / "kernels.csv").string(), "--target", "duration_ns", "--group-by", "layout",
             "--hidden-dims", "32,16", "--epochs", "0", "--init-from", model, "--output", again});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(testing::slurp(again), testing::slurp(model));
}

TEST_F(TrainTableCommand, BadInputIsOneErrorLine) {
    const auto csv = (dir / "kernels.csv").string();
    std::ofstream(dir / "text.csv") << "a,b,t\n1,x,3\n2,y,4\n3,z,5\n4,w,6\n5,v,7\n";
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
        {{"train-table", "--csv", csv, "--target", "nope"}, "error: --target: no column 'nope'"},
        {{"train-table", "--csv", (dir / "absent.csv").string(), "--target", "t"}, "absent.csv"},
        {{"train-table", "--csv", (dir / "text.csv").string(), "--target", "t"}, "row 1, column 'b'"},
        {{"train-table", "--csv", csv, "--target", "duration_ns", "--epochs", "-1"}, "error: --epochs"},
        {{"train-table", "--csv", csv, "--target", "duration_ns", "--hidden-dims", "0"}, "error: --hidden-dims"},
        {{"train-table", "--csv", csv, "--target", "duration_ns", "--init-from", csv}, "error: "},
        {{"predict-table", "--model", csv, "--csv", csv, "--output", (dir / "p.csv").string()}, "error: "},
    };
    for (const auto& [args, message] : cases) {
        const auto r = run(args);
        EXPECT_EQ(r.exit_code, 2) << message << "\n" << r.err;
        EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
    EXPECT_FALSE(fs::exists(dir / "p.csv"));
    EXPECT_FALSE(fs::exists(dir / "run" / "table_model.json"));
}

}  // namespace
}  // namespace mmt
