#include "matmul_toolkit/model/tuner.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::model {
namespace {

/// A draw in [lo, hi) uniform in log space, from the raw generator (portable across
/// standard libraries, unlike std::uniform_real_distribution).
double log_uniform(std::mt19937_64& rng, double lo, double hi) {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    return std::exp(std::log(lo) + u * (std::log(hi) - std::log(lo)));
}

template <typename T, std::size_t N>
T pick(std::mt19937_64& rng, const T (&values)[N]) {
    return values[rng() % N];
}

TrainOptions draw_trial(const TrainOptions& base, std::mt19937_64& rng) {
    static constexpr int kWidths[] = {32, 64, 128, 256};
    static constexpr int kDepths[] = {1, 2, 3};
    static constexpr double kDropouts[] = {0.0, 0.1, 0.2, 0.3};
    TrainOptions trial = base;
    const int width = pick(rng, kWidths);
    const int depth = pick(rng, kDepths);
    trial.model.hidden_dims.clear();
    // Widths halve layer by layer (64,32 like the default), never below 16.
    for (int layer = 0; layer < depth; ++layer) trial.model.hidden_dims.push_back(std::max(16, width >> layer));
    trial.model.dropout_rate = pick(rng, kDropouts);
    trial.learning_rate = log_uniform(rng, 3e-4, 3e-3);
    trial.weight_decay = log_uniform(rng, 1e-6, 1e-3);
    return trial;
}

bool better(const Metrics& a, const Metrics& b) {
    const double top_a = a.top_k_achieved[0], top_b = b.top_k_achieved[0];
    if (std::isnan(top_b)) return !std::isnan(top_a);
    if (top_a != top_b) return top_a > top_b;
    return a.rmse_log < b.rmse_log;
}

std::string dims(const ModelSpec& spec) {
    std::string out;
    for (std::size_t i = 0; i < spec.hidden_dims.size(); ++i) out += (i ? "," : "") + std::to_string(spec.hidden_dims[i]);
    return out;
}

}  // namespace

TuneResult tune_model(const std::vector<ProblemGroup>& problems, const TrainOptions& options, int trials,
                      const std::function<void(std::size_t, const TuneTrial&)>& on_trial) {
    if (trials < 1) throw core::InputError("--tune", "must be at least 1 trial");
    if (options.model.type != ModelType::base) throw core::InputError("--tune", "searches base networks (use --model-type base)");
    validate_train_options(options);
    std::mt19937_64 rng(options.seed);
    TuneResult result;
    for (int t = 0; t < trials; ++t) {
        const TrainOptions trial_options = t == 0 ? options : draw_trial(options, rng);
        const auto start = std::chrono::steady_clock::now();
        TrainResult trained = train_model(problems, trial_options);
        TuneTrial trial;
        trial.model = trial_options.model;
        trial.learning_rate = trial_options.learning_rate;
        trial.weight_decay = trial_options.weight_decay;
        trial.best_epoch = trained.best_epoch;
        trial.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        trial.validation = evaluate_model(trained.model, select_problems(problems, trained.split.validation), 0).overall;
        const bool interrupted = trained.interrupted;
        if (t == 0 || better(trial.validation, result.trials[result.best].validation)) {
            result.best = static_cast<std::size_t>(t);
            result.best_result = std::move(trained);
        }
        result.trials.push_back(trial);
        if (on_trial) on_trial(static_cast<std::size_t>(t), trial);
        if (interrupted) break;  // the best so far stands; the caller sees it interrupted
    }
    return result;
}

std::string format_tune_table(const TuneResult& result) {
    std::ostringstream out;
    char line[256];
    std::snprintf(line, sizeof(line), "%-6s %-14s %8s %10s %10s %7s %9s %8s %9s %8s\n", "trial", "hidden", "dropout",
                  "lr", "wd", "epoch", "val_rmse", "val_top1", "val_spear", "seconds");
    out << line;
    for (std::size_t i = 0; i < result.trials.size(); ++i) {
        const auto& t = result.trials[i];
        std::snprintf(line, sizeof(line), "%-6s %-14s %8.2f %10.3g %10.3g %7d %9.4f %8.3f %9.3f %8.1f\n",
                      (std::to_string(i) + (i == result.best ? " *" : "")).c_str(), dims(t.model).c_str(),
                      t.model.dropout_rate, t.learning_rate, t.weight_decay, t.best_epoch, t.validation.rmse_log,
                      t.validation.top_k_achieved[0], t.validation.spearman, t.seconds);
        out << line;
    }
    out << "* best: highest top-1 on the validation problems, then lowest RMSE; trial 0 is the options as given\n";
    return out.str();
}

}  // namespace mmt::model
