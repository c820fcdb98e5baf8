#include "matmul_toolkit/model/trainer.hpp"

#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "matmul_toolkit/core/error.hpp"
#include "synthetic_data.hpp"

namespace mmt::model {
namespace {

TrainOptions small_options() {
    TrainOptions o;
    o.model.type = ModelType::base;
    o.model.hidden_dims = {64, 64};
    o.model.dropout_rate = 0.0;
    o.num_epochs = 60;
    o.patience = 15;
    o.batch_size = 64;
    o.learning_rate = 3e-3;
    o.seed = 11;
    return o;
}

// The model must learn a runtime law on problems it has never seen: padded flops over a
// tile-size-dependent throughput plus a launch latency, with 2 % noise.
TEST(Trainer, LearnsSyntheticRuntimeLawOnHeldOutProblems) {
    const auto dataset = testing::synthetic_dataset(80, 5);
    const auto result = train_model(dataset, "synthetic", small_options());
    const auto& test = result.test_report.overall;
    EXPECT_EQ(test.problems, result.split.test.size());
    EXPECT_GT(test.r2, 0.95) << format_report(result.test_report);
    EXPECT_GT(test.top_k_achieved[0], 0.9) << format_report(result.test_report);
    EXPECT_GT(test.spearman, 0.8);
}

// The within-problem term trains on whole problems per batch and still learns the law.
TEST(Trainer, RankingTermLearnsTheSameLaw) {
    auto options = small_options();
    options.ranking_weight = 1.0;
    const auto result = train_model(testing::synthetic_dataset(80, 5), "synthetic", options);
    const auto& test = result.test_report.overall;
    EXPECT_GT(test.r2, 0.95) << format_report(result.test_report);
    EXPECT_GT(test.top_k_achieved[0], 0.9) << format_report(result.test_report);
    EXPECT_GT(test.spearman, 0.8);
    options.ranking_weight = -1.0;
    EXPECT_THROW(train_model(testing::synthetic_dataset(10, 3), "synthetic", options), core::InputError);
}

TEST(Trainer, DeepModelTrainsWithoutNaN) {
    const auto dataset = testing::synthetic_dataset(20, 3);
    auto options = small_options();
    options.model.type = ModelType::deep;
    options.model.hidden_dim = 32;
    options.model.num_layers = 2;
    options.num_epochs = 3;
    const auto result = train_model(dataset, "synthetic", options);
    ASSERT_EQ(result.history.size(), 3u);
    for (const auto& e : result.history) {
        EXPECT_TRUE(std::isfinite(e.train_loss));
        EXPECT_TRUE(std::isfinite(e.validation_loss));
        EXPECT_GT(e.rows_per_second, 0.0);
    }
}

TEST(Trainer, NoProblemLeaksAcrossSplits) {
    const auto dataset = testing::synthetic_dataset(30, 9);
    auto options = small_options();
    options.num_epochs = 1;
    const auto result = train_model(dataset, "synthetic", options);
    const auto problems = group_problems(dataset, "synthetic");
    std::set<std::size_t> seen;
    for (const auto* part : {&result.split.train, &result.split.validation, &result.split.test}) {
        for (auto i : *part) EXPECT_TRUE(seen.insert(i).second);
    }
    EXPECT_EQ(seen.size(), problems.size());
    // Row counts follow the problems: every config of a problem sits in its problem's split.
    EXPECT_EQ(result.train_rows, count_rows(select_problems(problems, result.split.train)));
    EXPECT_EQ(result.validation_rows, count_rows(select_problems(problems, result.split.validation)));
    EXPECT_EQ(result.test_rows, count_rows(select_problems(problems, result.split.test)));
    EXPECT_EQ(result.train_rows + result.validation_rows + result.test_rows, count_rows(problems));
}

// A big learning rate on a small dataset overfits: validation loss stops improving, the
// trainer stops `patience` epochs after the best one and hands back that epoch's weights.
TEST(Trainer, EarlyStoppingRestoresTheBestEpoch) {
    const auto dataset = testing::synthetic_dataset(12, 21, 0.3);
    auto options = small_options();
    options.model.hidden_dims = {128, 128};
    options.learning_rate = 2e-2;
    options.num_epochs = 300;
    options.patience = 4;
    options.batch_size = 8;
    const auto result = train_model(dataset, "synthetic", options);

    ASSERT_TRUE(result.stopped_early);
    EXPECT_EQ(static_cast<int>(result.history.size()), result.best_epoch + options.patience);
    double best = 1e300;
    int best_epoch = 0;
    for (const auto& e : result.history) {
        if (e.validation_loss < best) best = e.validation_loss, best_epoch = e.epoch;
    }
    EXPECT_EQ(result.best_epoch, best_epoch);
    EXPECT_DOUBLE_EQ(result.best_validation_loss, best);
    EXPECT_NE(result.history.back().validation_loss, best);

    // The returned weights reproduce the best epoch's validation loss, not the last one's.
    const auto problems = group_problems(dataset, "synthetic");
    double sum = 0;
    std::size_t rows = 0;
    for (auto i : result.split.validation) {
        const auto& p = problems[i];
        std::vector<core::GemmConfig> configs;
        for (const auto& t : p.timings) configs.push_back(t.config);
        const auto predicted = result.model.predict_log_ms(p.op_key, p.shape, configs);
        for (std::size_t r = 0; r < configs.size(); ++r) {
            const double err = predicted[r] - std::log(p.timings[r].time_ms);
            sum += err * err;
            ++rows;
        }
    }
    EXPECT_NEAR(sum / rows, best, 1e-4 * std::max(1.0, best));
    EXPECT_EQ(result.model.info().best_epoch, result.best_epoch);
}

TEST(Trainer, StopRequestEndsTrainingWithBestWeights) {
    const auto dataset = testing::synthetic_dataset(10, 4);
    auto options = small_options();
    options.num_epochs = 50;
    int epochs_seen = 0;
    options.on_epoch = [&](const EpochStats&) { ++epochs_seen; };
    options.stop_requested = [&] { return epochs_seen >= 2; };
    const auto result = train_model(dataset, "synthetic", options);
    EXPECT_TRUE(result.interrupted);
    EXPECT_EQ(result.history.size(), 2u);
    EXPECT_GE(result.best_epoch, 1);
    EXPECT_EQ(result.test_report.overall.problems, result.split.test.size());
}

TEST(Trainer, SameSeedGivesSameModel) {
    const auto dataset = testing::synthetic_dataset(10, 4);
    auto options = small_options();
    options.num_epochs = 2;
    const auto a = train_model(dataset, "synthetic", options);
    const auto b = train_model(dataset, "synthetic", options);
    ASSERT_EQ(a.history.size(), b.history.size());
    EXPECT_DOUBLE_EQ(a.history.back().validation_loss, b.history.back().validation_loss);
}

TEST(Trainer, BadInputIsAClearError) {
    core::Dataset empty;
    EXPECT_THROW(train_model(empty, "empty.json", small_options()), core::InputError);
    const auto two = testing::synthetic_dataset(2, 1);
    EXPECT_THROW(train_model(two, "two.json", small_options()), core::InputError);
    const auto dataset = testing::synthetic_dataset(5, 1);
    auto options = small_options();
    options.batch_size = 1;
    EXPECT_THROW(train_model(dataset, "d", options), core::InputError);
    options = small_options();
    options.learning_rate = 0;
    EXPECT_THROW(train_model(dataset, "d", options), core::InputError);
    options = small_options();
    options.device = "tpu";
    EXPECT_THROW(train_model(dataset, "d", options), core::InputError);
}

}  // namespace
}  // namespace mmt::model
