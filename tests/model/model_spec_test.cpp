#include "matmul_toolkit/model/model_spec.hpp"

#include <gtest/gtest.h>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::model {
namespace {

// The default is a small base model (fast enough to rank 1875 configs in well under a
// millisecond); --model-type deep keeps torch-diode's DeepMatmulTimingModel sizes.
TEST(ModelSpec, DefaultsAreASmallBaseModelAndTorchDiodesDeepSizes) {
    const ModelSpec spec;
    EXPECT_EQ(spec.type, ModelType::base);
    EXPECT_EQ(spec.hidden_dims, (std::vector<int>{64, 32}));
    EXPECT_EQ(spec.hidden_dim, 128);
    EXPECT_EQ(spec.num_layers, 10);
    EXPECT_DOUBLE_EQ(spec.dropout_rate, 0.2);
}

TEST(ModelSpec, ParsesTypesAndHiddenSizes) {
    EXPECT_EQ(parse_model_type("base"), ModelType::base);
    EXPECT_EQ(parse_model_type("deep"), ModelType::deep);
    EXPECT_EQ(to_string(ModelType::base), "base");
    EXPECT_EQ(parse_hidden_dims("100,50"), (std::vector<int>{100, 50}));
    EXPECT_EQ(parse_hidden_dims("7"), (std::vector<int>{7}));
}

TEST(ModelSpec, RejectsBadValuesNamingTheOption) {
    EXPECT_THROW(parse_model_type("wide"), core::InputError);
    for (const char* bad : {"", "100,", "a,b", "0,5", "-3", "10x"}) {
        try {
            parse_hidden_dims(bad);
            FAIL() << bad;
        } catch (const core::InputError& e) {
            EXPECT_EQ(e.subject(), "--hidden-dims") << bad;
        }
    }
    ModelSpec spec;
    spec.dropout_rate = 1.0;
    EXPECT_THROW(spec.validate(), core::InputError);
    spec = ModelSpec{};
    spec.type = ModelType::deep;
    spec.hidden_dim = 0;
    EXPECT_THROW(spec.validate(), core::InputError);
    spec = ModelSpec{};
    spec.type = ModelType::base;
    spec.hidden_dims.clear();
    EXPECT_THROW(spec.validate(), core::InputError);
}

TEST(ModelSpec, DescribesItself) {
    ModelSpec spec;
    EXPECT_EQ(spec.describe(), "base (hidden 64,32, dropout 0.2)");
    spec.type = ModelType::deep;
    EXPECT_EQ(spec.describe(), "deep (10 residual blocks of 128, dropout 0.2)");
    spec.type = ModelType::base;
    spec.hidden_dims = {100, 50};
    EXPECT_EQ(spec.describe(), "base (hidden 100,50, dropout 0.2)");
}

}  // namespace
}  // namespace mmt::model
