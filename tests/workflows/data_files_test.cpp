// The files under data/ load with the toolkit's readers and say what data/README.md says.

#include <string>

#include <gtest/gtest.h>

#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"

namespace mmt {
namespace {

const std::string kData = std::string(MMT_SOURCE_DIR) + "/data";

TEST(DefaultMaxAutotuneSolution, IsInductorsDefaultSpaceInOrder) {
    const auto solution = core::load_solution(kData + "/solutions/default_max_autotune.json");
    const auto expected = collect::default_configs();

    ASSERT_FALSE(solution.is_per_op());
    ASSERT_EQ(solution.configs.size(), 20u);
    ASSERT_EQ(solution.configs.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(solution.configs[i], expected[i]);
    }
    // Spot checks against the list in the collection issue.
    EXPECT_EQ(solution.configs.front().block_k, 16);
    EXPECT_EQ(solution.configs.front().num_stages, 1);
    EXPECT_EQ(solution.configs.front().num_warps, 2);
    EXPECT_EQ(solution.configs.back().block_m, 128);
    EXPECT_EQ(solution.configs.back().block_k, 128);
    EXPECT_EQ(solution.configs.back().num_warps, 8);
}

std::size_t shapes_of(const core::OperationShapeSet& set, const std::string& op) {
    for (const auto& entry : set.operations) {
        if (entry.op == op) return entry.shapes.size();
    }
    return 0;
}

TEST(Shapesets, ExampleHoldsFiveFloat32Problems) {
    const auto set = core::load_shapeset(kData + "/shapesets/example_shapes.json");
    EXPECT_EQ(set.num_shapes(), 5u);
    for (const auto& entry : set.operations) {
        for (const auto& shape : entry.shapes) EXPECT_EQ(shape.M_dtype, "float32");
    }
}

TEST(Shapesets, TransformerCountsMatchTheReadme) {
    const auto set = core::load_shapeset(kData + "/shapesets/transformer_shapes.json");
    EXPECT_EQ(shapes_of(set, "mm"), 77u);
    EXPECT_EQ(shapes_of(set, "addmm"), 56u);
    EXPECT_EQ(shapes_of(set, "bmm"), 24u);
}

TEST(Shapesets, ModelSuiteHoldsRealModelGemmsInTheirLayouts) {
    const auto set = core::load_shapeset(kData + "/shapesets/model_suite.json");
    // A Linear's weight is a transposed view: the suite's GEMMs are mostly mm_nt / addmm_nt.
    EXPECT_GT(shapes_of(set, "mm_nt"), 0u);
    EXPECT_GT(set.num_shapes(), shapes_of(set, "mm_nt"));  // and others (the rotary mm)
}

}  // namespace
}  // namespace mmt
