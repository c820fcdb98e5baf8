#include "matmul_toolkit/model/table_model.hpp"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::model {
namespace {

// A known smooth function of three features, no noise.
void synthetic(std::size_t rows, std::vector<double>& x, std::vector<double>& y) {
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<double> u(-2.0, 2.0);
    for (std::size_t r = 0; r < rows; ++r) {
        const double a = u(rng), b = u(rng), c = u(rng) + 2.0;
        x.insert(x.end(), {a, b, c});
        y.push_back(5000.0 + 800.0 * std::sin(a) + 300.0 * b * b + 150.0 * a * c);
    }
}

TableTrainOptions quick() {
    TableTrainOptions o;
    o.hidden = {32, 16};
    o.epochs = 150;
    o.batch_size = 64;
    o.learning_rate = 3e-3;
    return o;
}

TEST(TableModel, LearnsASmoothFunctionOnHeldOutRows) {
    std::vector<double> x, y;
    synthetic(1500, x, y);
    TableModelReport report;
    const auto model = train_table_mlp(x, y, 3, quick(), nullptr, report);
    EXPECT_EQ(report.train_rows + report.test_rows, 1500u);
    EXPECT_EQ(report.test_rows, 300u);
    EXPECT_GE(report.r2, 0.95) << "rmse " << report.rmse;
    ASSERT_EQ(model.layers.size(), 3u);
    EXPECT_EQ(model.layers[0].inputs, 3u);
    EXPECT_EQ(model.layers[0].outputs, 32u);
    EXPECT_EQ(model.layers[2].activation, "identity");
}

// The JSON holds every double exactly: read and written again it is the same text, and a
// model started from it with no epochs predicts to the bit what it predicted.
TEST(TableModel, JsonRoundTripsBitExactly) {
    std::vector<double> x, y;
    synthetic(200, x, y);
    auto options = quick();
    options.epochs = 5;
    TableModelReport report;
    TableModelFile file;
    file.features = {"a", "b", "c"};
    file.target = "ns";
    file.models.push_back(train_table_mlp(x, y, 3, options, nullptr, report));
    const std::string text = table_models_to_json(file);
    const auto loaded = table_models_from_json(text, "m.json");
    EXPECT_EQ(table_models_to_json(loaded), text);
    EXPECT_EQ(loaded.models[0].predict(x), file.models[0].predict(x));

    options.epochs = 0;
    TableModelReport again;
    const auto kept = train_table_mlp(x, y, 3, options, &loaded.models[0], again);
    EXPECT_EQ(kept.predict(x), file.models[0].predict(x));
    EXPECT_EQ(again.r2, report.r2);
}

// Weights written the way a scikit-learn MLPRegressor exports them (coefs in x out).
TEST(TableModel, ReadsHandWrittenWeightsAndPredictsByThem) {
    const std::string text = R"({"format": "matmul_toolkit.table_mlp", "version": 1, "features": ["x"],
        "target": "t", "group_by": null, "models": [{"group": null,
        "scaler": {"mean": [1.0], "std": [2.0]}, "target_scaler": {"mean": 10.0, "std": 1.0},
        "layers": [{"coefs": [[1.0, -1.0]], "intercepts": [0.0, 0.0], "activation": "relu"},
                   {"coefs": [[2.0], [3.0]], "intercepts": [0.5], "activation": "identity"}]}]})";
    const auto file = table_models_from_json(text, "sk.json");
    // x = 5: z = 2 -> relu [2, 0] -> 4.5 -> 14.5; x = -3: z = -2 -> [0, 2] -> 6.5 -> 16.5
    EXPECT_EQ(file.models[0].predict({5.0, -3.0}), (std::vector<double>{14.5, 16.5}));
}

TEST(TableModel, BadFilesAndOptionsAreClearErrors) {
    EXPECT_THROW(table_models_from_json("{}", "m.json"), core::InputError);
    EXPECT_THROW(table_models_from_json("not json", "m.json"), core::InputError);
    const std::string unchained = R"({"format": "matmul_toolkit.table_mlp", "features": ["x"], "target": "t",
        "group_by": null, "models": [{"group": null, "scaler": {"mean": [0], "std": [1]},
        "target_scaler": {"mean": 0, "std": 1},
        "layers": [{"coefs": [[1.0, 1.0]], "intercepts": [0, 0], "activation": "relu"},
                   {"coefs": [[1.0]], "intercepts": [0], "activation": "identity"}]}]})";
    EXPECT_THROW(table_models_from_json(unchained, "m.json"), core::InputError);
    std::vector<double> x{1, 2, 3}, y{1, 2, 3};
    TableModelReport report;
    EXPECT_THROW(train_table_mlp(x, y, 1, quick(), nullptr, report), core::InputError);  // 3 rows
    auto options = quick();
    options.test_fraction = 1.0;
    EXPECT_THROW(validate_table_options(options), core::InputError);
}

}  // namespace
}  // namespace mmt::model
