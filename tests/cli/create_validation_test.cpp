// `create-validation`: collect's problems drawn from --seed + 1, or a shapeset's.

#include <set>

#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"

namespace mmt::testing {
namespace {
namespace fs = std::filesystem;

std::set<std::string> problems_in(const fs::path& file) {
    std::set<std::string> keys;
    const auto dataset = core::load_dataset(file);
    for (const auto& hw : dataset.hardware())
        for (const auto& op : hw.operations)
            for (const auto& p : op.problems) keys.insert(op.name + core::shape_key(p.shape));
    return keys;
}

class CreateValidationCommand : public ::testing::Test {
protected:
    void SetUp() override { m_dir = fresh_temp_dir("mmt_cli_validation"); }
    void TearDown() override { fs::remove_all(m_dir); }
    CliResult run(const std::vector<std::string>& args) { return run_cli(args, m_dir / "io"); }
    fs::path path(const std::string& name) const { return m_dir / name; }
    std::vector<std::string> tiny(const std::string& command, const std::string& output) const {
        return {"--device", "cpu", command, "--min-size", "16", "--max-size", "40", "--warmup", "0",
                "--repeat", "1", "--quiet", "--output", path(output).string()};
    }

    fs::path m_dir;
};

TEST_F(CreateValidationCommand, DrawsThirtyProblemsFromTheNextSeed) {
    auto validation = tiny("create-validation", "validation.json");
    validation.insert(validation.begin(), {"--seed", "42"});
    const auto result = run(validation);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(problems_in(path("validation.json")).size(), 30u);

    auto same_as_seed_43 = tiny("collect", "seed43.json");
    same_as_seed_43.insert(same_as_seed_43.begin(), {"--seed", "43"});
    same_as_seed_43.insert(same_as_seed_43.end(), {"--num-shapes", "30"});
    ASSERT_EQ(run(same_as_seed_43).exit_code, 0);
    EXPECT_EQ(problems_in(path("validation.json")), problems_in(path("seed43.json")));

    auto training = tiny("collect", "training.json");
    training.insert(training.end(), {"--num-shapes", "30"});
    ASSERT_EQ(run(training).exit_code, 0);
    EXPECT_NE(problems_in(path("validation.json")), problems_in(path("training.json")));
}

TEST_F(CreateValidationCommand, HelpShowsItsDefaults) {
    const auto result = run({"create-validation", "--help"});
    ASSERT_EQ(result.exit_code, 0);
    EXPECT_NE(result.out.find("--num-shapes INT=30"), std::string::npos) << result.out;
    EXPECT_NE(result.out.find("matmul_validation_dataset.json"), std::string::npos) << result.out;
}

TEST_F(CreateValidationCommand, UsesAShapesetWhenGivenOne) {
    auto args = tiny("create-validation", "validation.json");
    args.insert(args.end(), {"--shapeset", std::string(MMT_SOURCE_DIR) + "/data/shapesets/example_shapes.json",
                             "--operations", "mm"});
    const auto result = run(args);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(problems_in(path("validation.json")).size(), 3u);  // the file's three mm shapes
}

}  // namespace
}  // namespace mmt::testing
