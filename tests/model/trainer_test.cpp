#include "matmul_toolkit/model/trainer.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/tuner.hpp"
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

// The MSE of ln time the trained model makes on its validation problems.
double validation_mse(const TrainResult& result, const core::Dataset& dataset) {
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
    return sum / static_cast<double>(rows);
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

// The within-problem term (rows batched problem by problem) still learns the law with
// either BatchNorm mode, and the two modes train different networks; a negative weight and
// an unknown mode name are refused.
TEST(Trainer, RankingTermLearnsTheSameLawInBothBatchNormModes) {
    auto options = small_options();
    options.ranking_weight = 1.0;
    const auto dataset = testing::synthetic_dataset(80, 5);
    const auto problems = group_problems(dataset, "synthetic");
    std::vector<std::vector<double>> predictions;
    for (auto mode : {BatchNormMode::affine, BatchNormMode::batch}) {
        options.batch_norm = mode;
        const auto result = train_model(dataset, "synthetic", options);
        const auto& test = result.test_report.overall;
        EXPECT_GT(test.r2, 0.95) << format_report(result.test_report);
        EXPECT_GT(test.top_k_achieved[0], 0.9) << format_report(result.test_report);
        EXPECT_GT(test.spearman, 0.8);
        predictions.push_back(predict_problems(result.model, problems).front());
    }
    EXPECT_NE(predictions[0], predictions[1]);
    EXPECT_EQ(parse_batch_norm_mode("affine"), BatchNormMode::affine);
    EXPECT_EQ(parse_batch_norm_mode("batch"), BatchNormMode::batch);
    EXPECT_THROW(parse_batch_norm_mode("layer"), core::InputError);
    options.ranking_weight = -1.0;
    EXPECT_THROW(train_model(testing::synthetic_dataset(10, 3), "synthetic", options), core::InputError);
}

// --aten-weight repeats each problem's vendor row in the training loss: a different fit,
// the same reported row counts; below 1 it is refused.
TEST(Trainer, VendorWeightRepeatsVendorRowsInTheLossOnly) {
    auto problems = group_problems(testing::synthetic_dataset(30, 4), "synthetic");
    for (auto& p : problems) {
        core::TimedConfig aten;
        aten.config.name = "aten_mm";
        aten.config.block_m = aten.config.block_n = aten.config.block_k = 1;
        aten.config.group_m = aten.config.num_stages = aten.config.num_warps = 1;
        aten.time_ms = 1.5 * p.timings.front().time_ms;
        p.reference = aten;
    }
    problems = with_reference_rows(std::move(problems));
    auto options = small_options();
    options.num_epochs = 3;
    options.vendor_rows = true;
    const auto once = train_model(problems, options);
    options.vendor_weight = 3;
    const auto thrice = train_model(problems, options);
    EXPECT_EQ(once.train_rows, thrice.train_rows);
    EXPECT_EQ(once.train_rows, count_rows(select_problems(problems, once.split.train)));
    EXPECT_NE(once.history.back().train_loss, thrice.history.back().train_loss);
    options.vendor_weight = 0;
    EXPECT_THROW(train_model(problems, options), core::InputError);
    options.vendor_weight = 3;  // with no vendor rows to weigh
    options.vendor_rows = false;
    EXPECT_THROW(train_model(problems, options), core::InputError);
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
    EXPECT_NEAR(validation_mse(result, dataset), best, 1e-4 * std::max(1.0, best));
    EXPECT_EQ(result.model.info().best_epoch, result.best_epoch);
}

// --lr-decay-after: each run of that many epochs without a better validation loss
// multiplies the rate by --lr-decay; an improvement starts the count again.
TEST(Trainer, LearningRateDecaysAfterEpochsWithoutImprovement) {
    const auto dataset = testing::synthetic_dataset(12, 21, 0.3);
    auto options = small_options();
    options.model.hidden_dims = {128, 128};
    options.learning_rate = 2e-2;  // overfits: validation stalls within a few epochs
    options.num_epochs = 40;
    options.patience = 12;
    options.batch_size = 8;
    options.lr_decay_after = 3;
    options.lr_decay = 0.5;
    const auto result = train_model(dataset, "synthetic", options);

    double expected = options.learning_rate;
    int without_improvement = 0, decays = 0;
    for (const auto& e : result.history) {
        EXPECT_DOUBLE_EQ(e.learning_rate, expected) << "epoch " << e.epoch;
        if (e.improved) {
            without_improvement = 0;
        } else if (++without_improvement % 3 == 0) {
            expected *= 0.5;
            ++decays;
        }
    }
    EXPECT_GE(decays, 2);
    EXPECT_EQ(result.model.info().lr_decay_after, 3);
    EXPECT_DOUBLE_EQ(result.model.info().lr_decay, 0.5);

    options.lr_decay = 0.0;
    EXPECT_THROW(validate_train_options(options), core::InputError);
}

// --weight-average: the average of the weights is what is validated and saved, and on
// noisy steps (a high learning rate, small batches) its validation loss is the steadier.
TEST(Trainer, WeightAverageIsWhatIsValidatedAndSaved) {
    const auto dataset = testing::synthetic_dataset(12, 21, 0.3);
    auto options = small_options();
    options.learning_rate = 2e-2;
    options.num_epochs = 30;
    options.patience = 30;
    options.batch_size = 8;
    const auto plain = train_model(dataset, "synthetic", options);
    options.weight_average = 0.99;
    const auto averaged = train_model(dataset, "synthetic", options);

    ASSERT_EQ(averaged.history.size(), plain.history.size());
    // The average moves less from epoch to epoch than the weights on these noisy steps.
    const auto variation = [](const TrainResult& r) {
        double sum = 0.0;
        for (std::size_t i = r.history.size() / 2; i < r.history.size(); ++i)
            sum += std::abs(r.history[i].validation_loss - r.history[i - 1].validation_loss);
        return sum;
    };
    EXPECT_LT(variation(averaged), 0.25 * variation(plain));
    const double best = averaged.best_validation_loss;
    EXPECT_NEAR(validation_mse(averaged, dataset), best, 1e-4 * std::max(1.0, best));
    EXPECT_DOUBLE_EQ(averaged.model.info().weight_average, 0.99);
    EXPECT_DOUBLE_EQ(plain.model.info().weight_average, 0.0);
    // The checkpoint records it.
    const auto path = std::filesystem::temp_directory_path() /
                      ("mmt_weight_average_" + std::to_string(::getpid()) + ".pt");
    averaged.model.save(path);
    EXPECT_DOUBLE_EQ(Predictor::load(path).info().weight_average, 0.99);
    std::filesystem::remove(path);

    options.weight_average = 1.0;
    EXPECT_THROW(validate_train_options(options), core::InputError);
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
    options = small_options();
    options.threads = -1;
    EXPECT_THROW(train_model(dataset, "d", options), core::InputError);
    options = small_options();
    options.cuda_graph = true;  // required: on the CPU (and without a CUDA LibTorch) there are no graphs
    EXPECT_THROW(train_model(dataset, "d", options), core::InputError);
    options = small_options();
    options.jobs = -1;
    EXPECT_THROW(train_model(dataset, "d", options), core::InputError);
    options = small_options();
    options.jobs = 2;
    options.device = "cuda";  // a GPU trains one network at a time
    EXPECT_THROW(validate_train_options(options), core::InputError);
}

// A few epochs of an ensemble with dropout (every kind of random draw), one job.
TrainOptions short_ensemble_with_dropout(int members) {
    auto options = small_options();
    options.num_epochs = 3;
    options.model.dropout_rate = 0.2;
    options.ensemble = members;
    options.jobs = 1;
    return options;
}

// Members trained side by side each draw what they would alone (initial weights, batch
// order, dropout masks): --jobs changes the wall time, never the model.
TEST(Trainer, JobsDoNotChangeTheModel) {
    const auto problems = group_problems(testing::synthetic_dataset(20, 4), "synthetic");
    auto options = short_ensemble_with_dropout(3);
    const auto alone = train_model(problems, options);
    options.jobs = 3;
    std::set<int> members_seen;
    options.on_epoch = [&](const EpochStats& e) { members_seen.insert(e.member); };
    const auto side_by_side = train_model(problems, options);
    EXPECT_EQ(members_seen, (std::set<int>{0, 1, 2}));
    EXPECT_EQ(predict_problems(alone.model, problems), predict_problems(side_by_side.model, problems));
    ASSERT_EQ(alone.history.size(), side_by_side.history.size());
    EXPECT_EQ(alone.history.back().validation_loss, side_by_side.history.back().validation_loss);
}

// An ensemble is one network whose prediction is the mean (in log space) of its members,
// each trained alone with its own seed on the same split.
TEST(Trainer, EnsembleIsTheMeanOfItsMembers) {
    const auto problems = group_problems(testing::synthetic_dataset(20, 4), "synthetic");
    auto options = small_options();
    options.num_epochs = 4;
    options.split = split_by_problem(problems.size(), 0.2, 0.2, 5);
    options.ensemble = 3;
    const auto ensemble = train_model(problems, options);
    EXPECT_EQ(ensemble.model.info().ensemble, 3);
    EXPECT_EQ(ensemble.model.info().spec.hidden_dims, (std::vector<int>{192, 192}));
    options.ensemble = 1;
    std::vector<std::vector<double>> mean;
    for (int member = 0; member < 3; ++member) {
        options.seed = small_options().seed + static_cast<std::uint64_t>(member);
        const auto single = predict_problems(train_model(problems, options).model, problems);
        if (mean.empty()) mean.assign(single.size(), {});
        for (std::size_t p = 0; p < single.size(); ++p) {
            mean[p].resize(single[p].size(), 0.0);
            for (std::size_t i = 0; i < single[p].size(); ++i) mean[p][i] += single[p][i] / 3.0;
        }
    }
    const auto merged = predict_problems(ensemble.model, problems);
    for (std::size_t p = 0; p < merged.size(); ++p) {
        for (std::size_t i = 0; i < merged[p].size(); ++i) EXPECT_NEAR(merged[p][i], mean[p][i], 1e-4);
    }
    options.model.type = ModelType::deep;
    options.ensemble = 2;
    EXPECT_THROW(train_model(problems, options), core::InputError);
}

TEST(CrossValidation, PredictsEveryProblemWithTheModelThatDidNotSeeIt) {
    const auto problems = group_problems(testing::synthetic_dataset(60, 5), "synthetic");
    std::size_t calls = 0;
    auto options = small_options();
    options.jobs = 1;  // folds in turn, so in order
    const auto result = cross_validate(problems, options, 4,
                                       [&](std::size_t fold, const FoldResult&) { EXPECT_EQ(fold, calls++); });
    ASSERT_EQ(result.folds.size(), 4u);
    EXPECT_EQ(calls, 4u);
    std::size_t tested = 0;
    for (const auto& fold : result.folds) {
        tested += fold.test_problems;
        EXPECT_EQ(fold.report.overall.problems, fold.test_problems);
        EXPECT_GE(problems.size() - fold.train_problems - fold.test_problems, 1u);  // validation
    }
    EXPECT_EQ(tested, problems.size());
    EXPECT_EQ(result.pooled.overall.problems, problems.size());
    EXPECT_GT(result.pooled.overall.r2, 0.9) << format_report(result.pooled);
    EXPECT_GT(result.pooled.overall.top_k_achieved[0], 0.9) << format_report(result.pooled);
    EXPECT_THROW(cross_validate(problems, small_options(), 1), core::InputError);
}

// Folds trained side by side (their members sharing the jobs) finish in any order but give
// the folds and pooled metrics of folds trained in turn.
TEST(CrossValidation, JobsDoNotChangeTheFoldsOrThePooledMetrics) {
    const auto problems = group_problems(testing::synthetic_dataset(30, 4), "synthetic");
    auto options = short_ensemble_with_dropout(2);
    const auto in_turn = cross_validate(problems, options, 3);
    options.jobs = 4;
    std::set<std::size_t> folds_reported;
    const auto side_by_side =
        cross_validate(problems, options, 3, [&](std::size_t fold, const FoldResult&) { folds_reported.insert(fold); });
    EXPECT_EQ(folds_reported, (std::set<std::size_t>{0, 1, 2}));
    ASSERT_EQ(in_turn.folds.size(), side_by_side.folds.size());
    for (std::size_t f = 0; f < in_turn.folds.size(); ++f) {
        EXPECT_EQ(in_turn.folds[f].test_problems, side_by_side.folds[f].test_problems);
        EXPECT_EQ(in_turn.folds[f].best_epoch, side_by_side.folds[f].best_epoch);
        EXPECT_EQ(in_turn.folds[f].report.overall.rmse_log, side_by_side.folds[f].report.overall.rmse_log);
    }
    EXPECT_EQ(in_turn.pooled.overall.problems, side_by_side.pooled.overall.problems);
    EXPECT_EQ(in_turn.pooled.overall.rmse_log, side_by_side.pooled.overall.rmse_log);
    EXPECT_EQ(in_turn.pooled.overall.spearman, side_by_side.pooled.overall.spearman);
    EXPECT_EQ(in_turn.pooled.overall.regret_p95, side_by_side.pooled.overall.regret_p95);
}

// Trial 0 is the options as given; the others are drawn from the seed (same seed, same
// trials); the best trial's model is returned with its test report.
TEST(Tuner, TrialZeroIsTheGivenOptionsAndTheSeedFixesTheDraws) {
    const auto problems = group_problems(testing::synthetic_dataset(20, 4), "synthetic");
    auto options = small_options();
    options.num_epochs = 3;
    const auto a = tune_model(problems, options, 3);
    ASSERT_EQ(a.trials.size(), 3u);
    EXPECT_EQ(a.trials[0].model.hidden_dims, options.model.hidden_dims);
    EXPECT_DOUBLE_EQ(a.trials[0].learning_rate, options.learning_rate);
    ASSERT_LT(a.best, 3u);
    for (const auto& t : a.trials) {
        if (&t == &a.trials[a.best]) continue;
        EXPECT_GE(a.trials[a.best].validation.top_k_achieved[0], t.validation.top_k_achieved[0]);
    }
    EXPECT_EQ(a.best_result.model.info().spec.hidden_dims, a.trials[a.best].model.hidden_dims);
    EXPECT_EQ(a.best_result.test_report.overall.problems, a.best_result.split.test.size());
    const auto b = tune_model(problems, options, 3);
    for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(a.trials[i].model.hidden_dims, b.trials[i].model.hidden_dims);
        EXPECT_DOUBLE_EQ(a.trials[i].learning_rate, b.trials[i].learning_rate);
        EXPECT_DOUBLE_EQ(a.trials[i].weight_decay, b.trials[i].weight_decay);
    }
    EXPECT_NE(format_tune_table(a).find("*"), std::string::npos);
    EXPECT_THROW(tune_model(problems, options, 0), core::InputError);
}

// Validation runs every eval_every epochs and after the last; only those can improve.
TEST(Trainer, EvalEveryValidatesOnlyThoseEpochs) {
    auto options = small_options();
    options.num_epochs = 7;
    options.patience = 100;
    options.eval_every = 3;
    const auto result = train_model(testing::synthetic_dataset(20, 4), "synthetic", options);
    ASSERT_EQ(result.history.size(), 7u);
    for (const auto& e : result.history) {
        const bool validated = e.epoch % 3 == 0 || e.epoch == 7;
        if (!validated) EXPECT_FALSE(e.improved) << e.epoch;
        if (!validated && e.epoch > 3) EXPECT_EQ(e.validation_loss, result.history[2].validation_loss);
    }
    EXPECT_TRUE(result.best_epoch == 3 || result.best_epoch == 6 || result.best_epoch == 7) << result.best_epoch;
    options.eval_every = 0;
    EXPECT_THROW(train_model(testing::synthetic_dataset(10, 3), "synthetic", options), core::InputError);
}

// On a GPU the full batches replay one captured step (a CUDA graph); without dropout it
// must train as the steps launched one by one do, deep model (BatchNorm) included, and the
// same seed must give the same model. Step for step the two agree within 1e-4
// (training_step_graph_test); over ~20 Adam steps rounding differences grow, most in the
// eval-mode loss of the deep model through its BatchNorm statistics (0.6 % after one
// epoch on an H200), hence the wider bound on the validation loss.
TEST(Trainer, CudaGraphStepsTrainAsEagerSteps) {
    if (default_training_device() != "cuda") GTEST_SKIP() << "no CUDA device (or a LibTorch without CUDA)";
    const auto dataset = testing::synthetic_dataset(40, 8);  // ~3 full batches an epoch
    for (const auto [type, ranking_weight] : {std::pair{ModelType::base, 0.0}, std::pair{ModelType::deep, 0.0},
                                              std::pair{ModelType::base, 3.0}}) {
        auto options = small_options();
        options.model.type = type;
        options.ranking_weight = ranking_weight;
        options.model.hidden_dim = 32;
        options.model.num_layers = 3;
        options.num_epochs = 6;
        options.patience = 100;
        options.device = "cuda";
        options.cuda_graph = true;
        const auto graphed = train_model(dataset, "synthetic", options);
        const auto again = train_model(dataset, "synthetic", options);
        options.cuda_graph = false;
        const auto eager = train_model(dataset, "synthetic", options);
        ASSERT_EQ(graphed.history.size(), eager.history.size());
        const std::string run = to_string(type) + " ranking weight " + std::to_string(ranking_weight);
        for (std::size_t e = 0; e < eager.history.size(); ++e) {
            EXPECT_NEAR(graphed.history[e].train_loss, eager.history[e].train_loss,
                        1e-3 * std::max(1.0, eager.history[e].train_loss)) << run << " epoch " << e + 1;
            EXPECT_NEAR(graphed.history[e].validation_loss, eager.history[e].validation_loss,
                        2e-2 * std::max(1.0, eager.history[e].validation_loss)) << run << " epoch " << e + 1;
        }
        EXPECT_DOUBLE_EQ(graphed.history.back().validation_loss, again.history.back().validation_loss) << run;
        EXPECT_LT(graphed.history.back().train_loss, graphed.history.front().train_loss) << to_string(type);
    }
}

}  // namespace
}  // namespace mmt::model
