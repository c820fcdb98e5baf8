#pragma once
/// Model vs max-autotune: how close the model's N best-ranked configs come to the best
/// config of a max-autotune solution, to the best measured config of the dataset
/// (exhaustive) and to the vendor library. Pure arithmetic over a Dataset: the caller
/// supplies the model's predictions, so nothing here depends on LibTorch.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "matmul_toolkit/core/dataset.hpp"

namespace mmt::model {

/// The N of "the model's N best-ranked configs" that torch-diode reports: 1 5 10 20 50 100 500.
const std::vector<int>& default_top_n_values();

/// The percentiles reported for every ratio distribution: 10 25 50 75 90 95 99.
const std::vector<int>& reported_percentiles();

/// numpy.percentile's default ("linear"): sort x, h = (n - 1) · q / 100, then
/// x[⌊h⌋] + (h − ⌊h⌋) · (x[⌊h⌋ + 1] − x[⌊h⌋]). q in [0, 100]; throws on an empty list.
double percentile(std::vector<double> values, double q);

/// Arithmetic mean; throws on an empty list.
double mean(const std::vector<double>& values);

/// Population standard deviation (ddof = 0, numpy.std's default); throws on an empty list.
double population_std(const std::vector<double>& values);

/// True when two configs pick the same kernel: same block sizes, group_m, stages and warps.
/// EVEN_K, ALLOW_TF32 and ACC_TYPE are set per problem, so a solution file's config
/// matches a dataset entry whatever those flags say.
bool same_tuning(const core::GemmConfig& a, const core::GemmConfig& b);

/// True when two configs have the same block sizes and group_m (stages and warps aside).
bool same_tiles(const core::GemmConfig& a, const core::GemmConfig& b);

/// The model's predicted times for `configs` (a problem's measured Triton configs, in
/// dataset order): one value per config, lower is faster, any monotonic unit. NaN ranks last.
using PredictFn = std::function<std::vector<double>(
    const std::string& hardware, const std::string& op, const core::MMShape& shape,
    const std::vector<core::GemmConfig>& configs)>;

/// One problem: the model's pick against a reference time.
struct ShapeComparison {
    std::string hardware;
    std::string op;
    core::MMShape shape;
    core::GemmConfig model_config;    ///< fastest measured config among the model's N best
    double model_time_ms = 0.0;
    double reference_time_ms = 0.0;   ///< max-autotune, exhaustive or vendor time
    double ratio = 0.0;               ///< reference_time_ms / model_time_ms (> 1: model faster)
};

/// Statistics of the ratio reference time / model time over a set of problems.
struct RatioSummary {
    std::size_t shapes_analysed = 0;
    std::size_t model_better = 0;  ///< ratio > 1
    std::size_t model_worse = 0;   ///< ratio < 1
    std::size_t model_equal = 0;   ///< ratio == 1 (the same measured time)
    double avg_speedup = 0.0;      ///< mean ratio over the better problems (0 when none)
    double best_speedup = 0.0;     ///< largest ratio > 1 (0 when none)
    double avg_slowdown = 0.0;     ///< mean ratio over the worse problems (0 when none)
    double best_slowdown = 0.0;    ///< mildest slowdown: largest ratio < 1 (0 when none)
    double worst_slowdown = 0.0;   ///< most severe slowdown: smallest ratio < 1 (0 when none)
    double mean_ratio = 0.0;
    double median_ratio = 0.0;
    double std_ratio = 0.0;        ///< population standard deviation
    std::vector<std::pair<int, double>> percentiles;  ///< (10, p10), (25, p25), ...
    double total_model_ms = 0.0;
    double total_reference_ms = 0.0;
    double total_time_saved_pct = 0.0;  ///< 100 · (reference − model) / reference, summed times
    double best_case = 0.0;        ///< largest ratio
    double worst_case = 0.0;       ///< smallest ratio
    std::vector<ShapeComparison> shapes;
};

/// Summarises comparisons; every field is 0 (and no percentiles) for an empty list.
RatioSummary summarise_ratios(std::vector<ShapeComparison> comparisons);

/// The results for one N.
struct TopNResult {
    int top_n = 1;
    RatioSummary vs_max_autotune;  ///< reference: best measured config of the solution
    RatioSummary vs_exhaustive;    ///< reference: best measured Triton config of the problem
    RatioSummary vs_vendor;        ///< reference: the aten_* entry, where the problem has one
};

struct OpResult {
    std::string op;
    std::vector<TopNResult> by_top_n;
};

struct AutotuneAnalysis {
    std::vector<int> top_n_values;
    std::vector<OpResult> per_op;         ///< op keys in dataset order
    std::vector<TopNResult> overall;      ///< every op's problems pooled
    std::size_t problems_seen = 0;        ///< problems with at least one measured Triton config
    std::size_t problems_analysed = 0;    ///< of those, problems with a solution config measured
    std::size_t problems_without_solution_config = 0;
    std::size_t max_configs_per_problem = 0;
    std::vector<std::string> warnings;    ///< ops skipped, invalid times, ...
};

struct AnalysisOptions {
    std::vector<int> top_n_values = default_top_n_values();
    /// Hardware on which only block sizes and group_m tell kernels apart (the CPU backend
    /// fixes num_stages and num_warps): there a solution config matches a dataset entry
    /// whatever its stages and warps. Unset: every hardware compares all six fields.
    std::function<bool(const std::string& hardware)> tiles_only;
};

/// Compares, problem by problem, max-autotune's result (the best measured time among the
/// solution's configs for the problem's op) with the model's result for each N (the best
/// measured time among the model's N best-ranked configs; all of them when N exceeds the
/// count), and both with the exhaustive best and the vendor entry. Only problems where at
/// least one solution config was measured are analysed. Throws core::InputError (subject
/// "max-autotune solution") when that is no problem at all, or when `top_n_values` holds
/// a value below 1.
AutotuneAnalysis analyse_max_autotune(const core::Dataset& dataset,
                                      const core::Solution& solution,
                                      const PredictFn& predict,
                                      const AnalysisOptions& options = {});

/// Facts about the run that go into the JSON report.
struct AnalysisMetadata {
    std::string model_path;
    std::string dataset_path;
    std::string solution_path;
    std::string hardware_filter;  ///< empty: all
    std::string op_filter;        ///< empty: none
    std::string device;
    std::string model_hardware;
};

/// The report as JSON text (torch-diode's model_performance_analysis_by_op.json layout:
/// per_op → op → top_N, overall → top_N, metadata; each top_N block also carries
/// vs_exhaustive and vs_vendor blocks).
std::string analysis_to_json(const AutotuneAnalysis& analysis, const AnalysisMetadata& metadata);

/// A readable summary table (one line per op and N, then the overall lines).
std::string format_analysis_table(const AutotuneAnalysis& analysis);

}  // namespace mmt::model
