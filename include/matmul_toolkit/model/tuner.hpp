#pragma once
/// train --tune: a small seeded random search over the base network's width and depth,
/// the learning rate, weight decay and dropout, each trial scored on the validation
/// problems (never the test split), the best trial kept as the model.

#include <cstddef>
#include <functional>
#include <vector>

#include "matmul_toolkit/model/evaluator.hpp"
#include "matmul_toolkit/model/trainer.hpp"

namespace mmt::model {

struct TuneTrial {
    ModelSpec model;
    double learning_rate = 0.0;
    double weight_decay = 0.0;
    int best_epoch = 0;
    double seconds = 0.0;
    Metrics validation;  ///< on the validation problems, with the trial's best weights
};

struct TuneResult {
    std::vector<TuneTrial> trials;  ///< trial 0: the options as given
    std::size_t best = 0;           ///< index of the best trial
    TrainResult best_result;        ///< the best trial's model and its test report
};

/// Trials are drawn with options.seed; all share options.seed's split. Trial 0 trains
/// `options` unchanged, so tuning never ends worse on validation than the defaults. The
/// best trial has the highest validation top-1 achieved fraction, then the lowest
/// validation RMSE. Throws core::InputError for trials < 1 or a deep model.
TuneResult tune_model(const std::vector<ProblemGroup>& problems, const TrainOptions& options, int trials,
                      const std::function<void(std::size_t, const TuneTrial&)>& on_trial = {});

/// The trials as a table, the best marked.
std::string format_tune_table(const TuneResult& result);

}  // namespace mmt::model
