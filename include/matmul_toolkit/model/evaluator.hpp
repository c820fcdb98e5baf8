#pragma once
/// Model quality on a dataset: regression error in log space and on time, and ranking
/// quality per problem (Spearman, top-k achieved fraction), per op and overall.

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "matmul_toolkit/core/dataset.hpp"
#include "matmul_toolkit/model/problems.hpp"

namespace mmt::model {

class Predictor;

/// The k of the top-k achieved fractions.
inline constexpr std::array<int, 3> kTopK{1, 5, 10};

/// The margins of `export-lut --with-aten --aten-within`: ATen joins the kernel pick only
/// where the model predicts the two within this fraction of each other.
inline constexpr std::array<double, 4> kAtenMargins{0.1, 0.25, 0.5, 1.0};

/// The smallest value with at least `fraction` of the values at or below it (nearest rank);
/// NaN for none.
double nearest_rank_percentile(std::vector<double> values, double fraction);

/// Metrics over a set of rows and the problems they belong to. A metric that is not
/// defined for the data (R² with constant actual times, Spearman with one config per
/// problem) is NaN, written as null in JSON.
struct Metrics {
    std::string op;  ///< the subset: an op key, a dtype label (per_dtype) or "overall"
    std::size_t problems = 0;
    std::size_t rows = 0;
    double mse_log = 0.0;   ///< mean squared error of ln(time ms)
    double rmse_log = 0.0;
    double exp_rmse = 0.0;  ///< typical multiplicative error factor
    double r2 = 0.0;        ///< R² of ln(time ms)
    double mape_percent = 0.0;  ///< mean |predicted − actual| / actual on time, in %
    double spearman = 0.0;      ///< mean over problems with at least two configs
    std::size_t spearman_problems = 0;
    /// Geometric mean over problems of best time / best time among the model's top k.
    std::array<double, kTopK.size()> top_k_achieved{};
    /// Over problems, (best time among the model's top 1) / best time − 1: what a user
    /// loses by running the model's pick. Mean and 95th percentile (nearest rank).
    double regret_mean = 0.0;
    double regret_p95 = 0.0;
    /// Over the problems with a vendor-library row (aten_*), the geometric mean of best
    /// time / the faster of the model's best-ranked kernel config and the vendor row: what
    /// an `export-lut --with-aten` table gets, Inductor timing the two. NaN without such rows.
    double top1_with_vendor = 0.0;
    std::size_t vendor_problems = 0;
    /// The same where the two are paired only when predicted within kAtenMargins[i] of each
    /// other, the one predicted faster standing alone elsewhere (`--aten-within`), and on
    /// how many of the vendor_problems they were paired.
    std::array<double, kAtenMargins.size()> top1_aten_within{};
    std::array<std::size_t, kAtenMargins.size()> paired_within{};
};

/// One of the worst predictions (largest |ln predicted − ln actual|).
struct WorstPrediction {
    std::string hardware;
    std::string op;
    core::MMShape shape;
    core::GemmConfig config;
    double predicted_ms = 0.0;
    double actual_ms = 0.0;
    double ratio = 0.0;  ///< predicted / actual
};

/// One of the problems where the model's first pick loses most against the best config.
struct WorstPick {
    std::string hardware;
    std::string op;
    core::MMShape shape;
    core::GemmConfig picked;
    core::GemmConfig best;
    double picked_ms = 0.0;
    double best_ms = 0.0;
    double regret = 0.0;  ///< picked_ms / best_ms − 1
};

struct EvaluationReport {
    Metrics overall;
    std::vector<Metrics> per_op;  ///< in order of first appearance
    std::vector<Metrics> per_dtype;  ///< by core::dtype_label, in order of first appearance
    std::vector<WorstPrediction> worst;
    std::vector<WorstPick> worst_picks;  ///< largest regret first
};

/// Evaluates predictions given as ln(ms), one vector per problem, aligned with
/// problems[i].timings. Throws core::Error when the shapes disagree.
EvaluationReport evaluate_predictions(const std::vector<ProblemGroup>& problems,
                                      const std::vector<std::vector<double>>& predicted_log_ms,
                                      std::size_t top_n_worst = 10);

/// ln(ms) predictions per problem, aligned with problems[i].timings (each row with its own
/// hardware's SM count). This and evaluate_model are the model library's (LibTorch: they
/// predict on the Predictor's device); the rest of this header needs only mmt_inference.
std::vector<std::vector<double>> predict_problems(const Predictor& predictor,
                                                  const std::vector<ProblemGroup>& problems);

/// Predicts every problem with the model (predict_problems), then evaluates.
EvaluationReport evaluate_model(const Predictor& predictor, const std::vector<ProblemGroup>& problems,
                                std::size_t top_n_worst = 10);

/// The report as a JSON document (2-space indent).
std::string report_to_json(const EvaluationReport& report);

/// A readable table: one row per op and overall, then the worst predictions.
std::string format_report(const EvaluationReport& report);

}  // namespace mmt::model
