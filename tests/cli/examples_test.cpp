// The example modes run on the CPU, explain their steps and leave their files.

#include <filesystem>

#include <gtest/gtest.h>

#include "cli_runner.hpp"

namespace mmt {
namespace {

namespace fs = std::filesystem;

class ExampleModes : public ::testing::Test {
protected:
    void SetUp() override { dir = testing::fresh_temp_dir("mmt_cli_examples"); }
    void TearDown() override { fs::remove_all(dir); }

    testing::CliResult run(const std::string& mode, std::vector<std::string> extra = {}) {
        std::vector<std::string> args{"--device", "cpu", mode, "--output-dir", (dir / mode).string()};
        args.insert(args.end(), extra.begin(), extra.end());
        return testing::run_cli(args, dir / "run");
    }

    static void expect_steps(const testing::CliResult& r, int steps) {
        for (int i = 1; i <= steps; ++i) EXPECT_NE(r.out.find("\n" + std::to_string(i) + ". "), std::string::npos) << r.out;
    }

    fs::path dir;
};

TEST_F(ExampleModes, CollectorExampleSavesTheDatasetAndItsTable) {
    const auto r = run("collector-example", {"--num-shapes", "3"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_steps(r, 3);
    EXPECT_NE(r.out.find("3 problems read back"), std::string::npos) << r.out;
    EXPECT_TRUE(fs::exists(dir / "collector-example" / "dataset.json"));
    EXPECT_TRUE(fs::exists(dir / "collector-example" / "table.json"));
}

TEST_F(ExampleModes, BasicExampleRecordsRowsInCsvAndJson) {
    const auto r = run("collector-basic-example", {"--configs", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_steps(r, 3);
    EXPECT_NE(r.out.find("timings.csv: 6 rows read back"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("timings.json: 6 rows read back"), std::string::npos) << r.out;
}

TEST_F(ExampleModes, ModelExampleTrainsAndPrintsTheWorstPredictions) {
    const auto r = run("model-example", {"--num-shapes", "20", "--num-epochs", "5"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_steps(r, 3);
    EXPECT_NE(r.out.find("worst predictions"), std::string::npos) << r.out;
    EXPECT_TRUE(fs::exists(dir / "model-example" / "model.pt"));
}

}  // namespace
}  // namespace mmt
