// `collect-shapeset`: every shape of the listed operations, in the shapes' own dtypes.

#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"

namespace mmt::testing {
namespace {
namespace fs = std::filesystem;

const std::string kExampleShapes = std::string(MMT_SOURCE_DIR) + "/data/shapesets/example_shapes.json";

class CollectShapesetCommand : public ::testing::Test {
protected:
    void SetUp() override { m_dir = fresh_temp_dir("mmt_cli_shapeset"); }
    void TearDown() override { fs::remove_all(m_dir); }
    CliResult run(const std::vector<std::string>& args) { return run_cli(args, m_dir / "io"); }
    fs::path path(const std::string& name) const { return m_dir / name; }
    std::vector<std::string> args(const std::string& shapeset, const std::string& output) const {
        return {"--device", "cpu", "collect-shapeset", "--shapeset", shapeset, "--warmup", "0",
                "--repeat", "1", "--quiet", "--output", path(output).string()};
    }

    fs::path m_dir;
};

TEST_F(CollectShapesetCommand, CollectsEveryShapeOfTheFile) {
    const auto result = run(args(kExampleShapes, "data.msgpack"));
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const auto dataset = core::load_dataset(path("data.msgpack"));
    // example_shapes.json: mm 128³, 256x512x128, 96x200x72; addmm 128x256x64; bmm 4x64x64x32.
    EXPECT_EQ(dataset.num_problems(), 5u);
    const auto& hw = dataset.hardware().at(0).name;
    EXPECT_TRUE(dataset.contains(hw, "mm", core::make_shape(1, 96, 200, 72, "float32")));
    EXPECT_TRUE(dataset.contains(hw, "addmm", core::make_shape(1, 128, 256, 64, "float32")));
    EXPECT_TRUE(dataset.contains(hw, "bmm", core::make_shape(4, 64, 64, 32, "float32")));
}

TEST_F(CollectShapesetCommand, OperationsSelectWhichShapesAreCollected) {
    auto a = args(kExampleShapes, "data.json");
    a.insert(a.end(), {"--operations", "addmm", "bmm"});
    ASSERT_EQ(run(a).exit_code, 0);
    EXPECT_EQ(core::load_dataset(path("data.json")).num_problems(), 2u);
}

TEST_F(CollectShapesetCommand, AShapesetInADtypeTheCpuLacksIsRejectedUpFront) {
    const std::string file = std::string(MMT_SOURCE_DIR) + "/data/shapesets/transformer_shapes.json";
    const auto result = run(args(file, "data.json"));
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_EQ(result.err.rfind("error: " + file + ": dtype bfloat16 is not supported by the cpu backend", 0), 0u)
        << result.err;
    EXPECT_FALSE(fs::exists(path("data.json")));
}

TEST_F(CollectShapesetCommand, AMissingShapesetIsBadInput) {
    EXPECT_EQ(run(args(path("missing.json").string(), "data.json")).exit_code, 2);
    EXPECT_EQ(run({"--device", "cpu", "collect-shapeset"}).exit_code, 2);  // --shapeset is required
}

}  // namespace
}  // namespace mmt::testing
