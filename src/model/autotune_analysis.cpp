#include "matmul_toolkit/model/autotune_analysis.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iomanip>
#include <limits>
#include <numeric>
#include <optional>
#include <sstream>

#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/problems.hpp"

namespace mmt::model {

const std::vector<int>& default_top_n_values() {
    static const std::vector<int> values{1, 5, 10, 20, 50, 100, 500};
    return values;
}

const std::vector<int>& reported_percentiles() {
    static const std::vector<int> values{10, 25, 50, 75, 90, 95, 99};
    return values;
}

double percentile(std::vector<double> values, double q) {
    if (values.empty()) throw core::Error("percentile", "no values");
    std::sort(values.begin(), values.end());
    const double h = (static_cast<double>(values.size()) - 1.0) * q / 100.0;
    const auto lower = static_cast<std::size_t>(std::floor(h));
    if (lower + 1 >= values.size()) return values.back();
    return values[lower] + (h - static_cast<double>(lower)) * (values[lower + 1] - values[lower]);
}

double mean(const std::vector<double>& values) {
    if (values.empty()) throw core::Error("mean", "no values");
    return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double population_std(const std::vector<double>& values) {
    const double m = mean(values);
    double sum = 0.0;
    for (double v : values) sum += (v - m) * (v - m);
    return std::sqrt(sum / static_cast<double>(values.size()));
}

bool same_tuning(const core::GemmConfig& a, const core::GemmConfig& b) {
    return a.block_m == b.block_m && a.block_n == b.block_n && a.block_k == b.block_k &&
           a.group_m == b.group_m && a.num_stages == b.num_stages && a.num_warps == b.num_warps;
}

bool same_tiles(const core::GemmConfig& a, const core::GemmConfig& b) {
    return a.block_m == b.block_m && a.block_n == b.block_n && a.block_k == b.block_k &&
           a.group_m == b.group_m;
}

RatioSummary summarise_ratios(std::vector<ShapeComparison> comparisons) {
    RatioSummary s;
    s.shapes_analysed = comparisons.size();
    if (comparisons.empty()) return s;

    std::vector<double> ratios, speedups, slowdowns;
    ratios.reserve(comparisons.size());
    for (const auto& c : comparisons) {
        ratios.push_back(c.ratio);
        s.total_model_ms += c.model_time_ms;
        s.total_reference_ms += c.reference_time_ms;
        if (c.ratio > 1.0) {
            ++s.model_better;
            speedups.push_back(c.ratio);
        } else if (c.ratio < 1.0) {
            ++s.model_worse;
            slowdowns.push_back(c.ratio);
        } else {
            ++s.model_equal;
        }
    }
    if (!speedups.empty()) {
        s.avg_speedup = mean(speedups);
        s.best_speedup = *std::max_element(speedups.begin(), speedups.end());
    }
    if (!slowdowns.empty()) {
        s.avg_slowdown = mean(slowdowns);
        s.best_slowdown = *std::max_element(slowdowns.begin(), slowdowns.end());
        s.worst_slowdown = *std::min_element(slowdowns.begin(), slowdowns.end());
    }
    s.mean_ratio = mean(ratios);
    s.median_ratio = percentile(ratios, 50.0);
    s.std_ratio = population_std(ratios);
    for (int p : reported_percentiles()) s.percentiles.emplace_back(p, percentile(ratios, p));
    s.total_time_saved_pct = s.total_reference_ms > 0.0
        ? 100.0 * (s.total_reference_ms - s.total_model_ms) / s.total_reference_ms
        : 0.0;
    s.best_case = *std::max_element(ratios.begin(), ratios.end());
    s.worst_case = *std::min_element(ratios.begin(), ratios.end());
    s.shapes = std::move(comparisons);
    return s;
}

namespace {

/// What one problem contributes, computed once and reused for every N.
struct ProblemFacts {
    std::string hardware;
    std::string op;
    const core::MMShape* shape = nullptr;
    std::vector<core::TimedConfig> triton;   ///< measured Triton configs, dataset order
    std::vector<std::size_t> model_order;    ///< indices into `triton`, model's best first
    double max_autotune_ms = 0.0;
    double exhaustive_ms = 0.0;
    std::optional<double> vendor_ms;
};

/// The solution configs that apply to an op key: the per-op entry for the exact key,
/// else for its bare op ("mm" for "mm_nt"); the flat form applies to every op.
const std::vector<core::GemmConfig>* solution_configs_for(const core::Solution& solution,
                                                          const std::string& op_key) {
    if (!solution.is_per_op()) return &solution.configs;
    for (const auto& [name, list] : solution.per_op) {
        if (name == op_key) return &list;
    }
    const auto underscore = op_key.rfind('_');
    if (underscore != std::string::npos) {
        const std::string bare = op_key.substr(0, underscore);
        for (const auto& [name, list] : solution.per_op) {
            if (name == bare) return &list;
        }
    }
    return nullptr;
}

std::vector<std::size_t> rank_by_prediction(const std::vector<double>& predicted) {
    std::vector<std::size_t> order(predicted.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    auto key = [&](std::size_t i) {
        return std::isnan(predicted[i]) ? std::numeric_limits<double>::infinity() : predicted[i];
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
    return order;
}

ShapeComparison compare(const ProblemFacts& facts, int top_n, double reference_ms) {
    const std::size_t count = std::min<std::size_t>(static_cast<std::size_t>(top_n),
                                                    facts.model_order.size());
    std::size_t best = facts.model_order.front();
    for (std::size_t i = 1; i < count; ++i) {
        const std::size_t candidate = facts.model_order[i];
        if (facts.triton[candidate].time_ms < facts.triton[best].time_ms) best = candidate;
    }
    ShapeComparison c;
    c.hardware = facts.hardware;
    c.op = facts.op;
    c.shape = *facts.shape;
    c.model_config = facts.triton[best].config;
    c.model_time_ms = facts.triton[best].time_ms;
    c.reference_time_ms = reference_ms;
    c.ratio = reference_ms / c.model_time_ms;
    return c;
}

TopNResult evaluate(const std::vector<const ProblemFacts*>& problems, int top_n) {
    std::vector<ShapeComparison> ma, exhaustive, vendor;
    for (const auto* facts : problems) {
        ma.push_back(compare(*facts, top_n, facts->max_autotune_ms));
        exhaustive.push_back(compare(*facts, top_n, facts->exhaustive_ms));
        if (facts->vendor_ms) vendor.push_back(compare(*facts, top_n, *facts->vendor_ms));
    }
    TopNResult result;
    result.top_n = top_n;
    result.vs_max_autotune = summarise_ratios(std::move(ma));
    result.vs_exhaustive = summarise_ratios(std::move(exhaustive));
    result.vs_vendor = summarise_ratios(std::move(vendor));
    return result;
}

}  // namespace

AutotuneAnalysis analyse_max_autotune(const core::Dataset& dataset,
                                      const core::Solution& solution,
                                      const PredictFn& predict,
                                      const AnalysisOptions& options) {
    for (int n : options.top_n_values) {
        if (n < 1) {
            throw core::InputError("top-N", "every N must be at least 1, got " + std::to_string(n));
        }
    }
    AutotuneAnalysis analysis;
    analysis.top_n_values = options.top_n_values;

    std::vector<ProblemFacts> facts;
    std::vector<std::string> op_order;
    std::vector<std::string> ops_without_solution;
    std::size_t invalid_times = 0;

    for (const auto& hw : dataset.hardware()) {
        for (const auto& operation : hw.operations) {
            const auto* ma_configs = solution_configs_for(solution, operation.name);
            const bool tiles_only = options.tiles_only && options.tiles_only(hw.name);
            auto listed_in_solution = [&](const core::GemmConfig& measured) {
                return std::any_of(ma_configs->begin(), ma_configs->end(),
                                   [&](const core::GemmConfig& c) {
                                       return tiles_only ? same_tiles(c, measured)
                                                         : same_tuning(c, measured);
                                   });
            };
            for (const auto& problem : operation.problems) {
                ProblemFacts f;
                f.hardware = hw.name;
                f.op = operation.name;
                f.shape = &problem.shape;
                bool valid = true;
                for (const auto& timed : problem.timed_configs) {
                    if (!(timed.time_ms > 0.0) || !std::isfinite(timed.time_ms)) {
                        valid = false;
                        break;
                    }
                    if (is_reference_config(timed.config)) {
                        f.vendor_ms = f.vendor_ms ? std::min(*f.vendor_ms, timed.time_ms) : timed.time_ms;
                    } else {
                        f.triton.push_back(timed);
                    }
                }
                if (!valid) {
                    ++invalid_times;
                    continue;
                }
                if (f.triton.empty()) continue;
                ++analysis.problems_seen;
                analysis.max_configs_per_problem =
                    std::max(analysis.max_configs_per_problem, f.triton.size());

                std::optional<double> ma_best;
                if (ma_configs != nullptr) {
                    for (const auto& timed : f.triton) {
                        if (listed_in_solution(timed.config) && (!ma_best || timed.time_ms < *ma_best)) {
                            ma_best = timed.time_ms;
                        }
                    }
                } else if (std::find(ops_without_solution.begin(), ops_without_solution.end(),
                                     operation.name) == ops_without_solution.end()) {
                    ops_without_solution.push_back(operation.name);
                }
                if (!ma_best) {
                    ++analysis.problems_without_solution_config;
                    continue;
                }
                f.max_autotune_ms = *ma_best;
                f.exhaustive_ms = std::min_element(f.triton.begin(), f.triton.end(),
                                                   [](const auto& a, const auto& b) {
                                                       return a.time_ms < b.time_ms;
                                                   })->time_ms;

                std::vector<core::GemmConfig> configs;
                configs.reserve(f.triton.size());
                for (const auto& timed : f.triton) configs.push_back(timed.config);
                const auto predicted = predict(hw.name, operation.name, problem.shape, configs);
                if (predicted.size() != configs.size()) {
                    throw core::Error("prediction", "expected " + std::to_string(configs.size()) +
                                                        " predicted times, got " +
                                                        std::to_string(predicted.size()));
                }
                f.model_order = rank_by_prediction(predicted);
                if (std::find(op_order.begin(), op_order.end(), f.op) == op_order.end()) {
                    op_order.push_back(f.op);
                }
                facts.push_back(std::move(f));
            }
        }
    }

    for (const auto& op : ops_without_solution) {
        analysis.warnings.push_back("the solution lists no configs for op '" + op +
                                    "'; its problems are not analysed");
    }
    if (invalid_times > 0) {
        analysis.warnings.push_back(std::to_string(invalid_times) +
                                    " problem(s) with a non-positive or non-finite time skipped");
    }
    if (analysis.problems_without_solution_config > 0) {
        analysis.warnings.push_back(std::to_string(analysis.problems_without_solution_config) +
                                    " problem(s) have none of the solution's configs measured; "
                                    "not analysed");
    }
    analysis.problems_analysed = facts.size();
    if (facts.empty()) {
        std::size_t listed = solution.configs.size();
        for (const auto& entry : solution.per_op) listed += entry.second.size();
        throw core::InputError("max-autotune solution",
                               "none of its " + std::to_string(listed) +
                                   " configs was measured for any problem of the dataset (" +
                                   std::to_string(analysis.problems_seen) + " problems)");
    }

    std::vector<const ProblemFacts*> all;
    for (const auto& f : facts) all.push_back(&f);
    for (const auto& op : op_order) {
        std::vector<const ProblemFacts*> of_op;
        for (const auto& f : facts) {
            if (f.op == op) of_op.push_back(&f);
        }
        OpResult result{op, {}};
        for (int n : options.top_n_values) result.by_top_n.push_back(evaluate(of_op, n));
        analysis.per_op.push_back(std::move(result));
    }
    for (int n : options.top_n_values) analysis.overall.push_back(evaluate(all, n));
    return analysis;
}

namespace {

using json = core::OrderedJson;

/// One ratio block with torch-diode's field names; `reference` names the reference
/// time ("ma", "exhaustive", "vendor").
json summary_json(const RatioSummary& s, const std::string& reference) {
    json distribution = json::object();
    for (const auto& [p, value] : s.percentiles) distribution["p" + std::to_string(p)] = value;
    auto pct = [&](std::size_t count) {
        return s.shapes_analysed == 0 ? 0.0 : 100.0 * static_cast<double>(count) /
                                                  static_cast<double>(s.shapes_analysed);
    };
    json details = json::array();
    for (const auto& c : s.shapes) {
        details.push_back({
            {"hardware", c.hardware},
            {"op", c.op},
            {"shape", core::shape_key(c.shape)},
            {"model_time", c.model_time_ms},
            {reference + "_time", c.reference_time_ms},
            {"speedup_ratio", c.ratio},
            {"performance", c.ratio > 1.0 ? "better" : (c.ratio < 1.0 ? "worse" : "equal")},
            {"model_config", core::config_to_document(c.model_config)},
        });
    }
    return {
        {"shapes_analyzed", s.shapes_analysed},
        {"performance_breakdown",
         {{"model_better",
           {{"count", s.model_better},
            {"percentage", pct(s.model_better)},
            {"avg_speedup", s.avg_speedup},
            {"best_speedup", s.best_speedup}}},
          {"model_worse",
           {{"count", s.model_worse},
            {"percentage", pct(s.model_worse)},
            {"avg_slowdown", s.avg_slowdown},
            {"best_slowdown", s.best_slowdown},
            {"worst_slowdown", s.worst_slowdown}}},
          {"model_equal", {{"count", s.model_equal}, {"percentage", pct(s.model_equal)}}}}},
        {"overall_metrics",
         {{"avg_speedup_ratio", s.mean_ratio},
          {"median_speedup_ratio", s.median_ratio},
          {"std_speedup_ratio", s.std_ratio},
          {"total_time_saved_pct", s.total_time_saved_pct},
          {"best_case", s.best_case},
          {"worst_case", s.worst_case}}},
        {"distribution", distribution},
        {"raw_times",
         {{"total_model_time", s.total_model_ms},
          {"total_" + reference + "_time", s.total_reference_ms}}},
        {"shape_details", details},
    };
}

json top_n_json(const TopNResult& r, const std::string* op) {
    json block = json::object();
    if (op != nullptr) block["op"] = *op;
    block["top_n"] = r.top_n;
    const json max_autotune = summary_json(r.vs_max_autotune, "ma");
    for (const auto& [key, value] : max_autotune.items()) block[key] = value;
    block["vs_exhaustive"] = summary_json(r.vs_exhaustive, "exhaustive");
    block["vs_vendor"] = summary_json(r.vs_vendor, "vendor");
    return block;
}

std::string iso_timestamp() {
    const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    localtime_r(&now, &tm);
    char buffer[32];
    std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &tm);
    return buffer;
}

}  // namespace

std::string analysis_to_json(const AutotuneAnalysis& analysis, const AnalysisMetadata& metadata) {
    json per_op = json::object();
    json ops_present = json::array();
    for (const auto& op : analysis.per_op) {
        json by_n = json::object();
        for (const auto& r : op.by_top_n) by_n["top_" + std::to_string(r.top_n)] = top_n_json(r, &op.op);
        per_op[op.op] = by_n;
        ops_present.push_back(op.op);
    }
    json overall = json::object();
    for (const auto& r : analysis.overall) {
        overall["top_" + std::to_string(r.top_n)] = top_n_json(r, nullptr);
    }
    json report = {
        {"per_op", per_op},
        {"overall", overall},
        {"metadata",
         {{"model_path", metadata.model_path},
          {"validation_dataset_path", metadata.dataset_path},
          {"max_autotune_solution_path", metadata.solution_path},
          {"timestamp", iso_timestamp()},
          {"hardware_name", metadata.hardware_filter.empty() ? "all" : metadata.hardware_filter},
          {"op_name_filter", metadata.op_filter.empty() ? "none" : metadata.op_filter},
          {"device", metadata.device},
          {"model_hardware", metadata.model_hardware},
          {"ops_present", ops_present},
          {"top_n_values", analysis.top_n_values},
          {"problems_seen", analysis.problems_seen},
          {"problems_analyzed", analysis.problems_analysed},
          {"problems_without_solution_config", analysis.problems_without_solution_config},
          {"max_configs_per_problem", analysis.max_configs_per_problem},
          {"warnings", analysis.warnings},
          {"notes",
           "speedup_ratio = reference time / model time (> 1: the model's pick is faster). "
           "Model time for top_N = best measured time among the model's N best-ranked configs. "
           "Per-op stats are computed independently; overall pools every op's problems. "
           "Percentiles use numpy's default linear interpolation; std is the population std."}}},
    };
    return core::python_json_dumps(report, 2) + "\n";
}

std::string format_analysis_table(const AutotuneAnalysis& analysis) {
    std::ostringstream out;
    out << "MODEL VS MAX-AUTOTUNE (ratio = max-autotune time / model time; > 1: model faster)\n";
    out << "problems analysed: " << analysis.problems_analysed << " of " << analysis.problems_seen;
    if (analysis.problems_without_solution_config > 0) {
        out << " (" << analysis.problems_without_solution_config
            << " without a measured solution config)";
    }
    out << "\n\n";
    char line[256];
    std::snprintf(line, sizeof line, "%-10s %5s %6s %6s %6s %6s %8s %8s %8s %8s %8s %9s %9s\n",
                  "op", "N", "shapes", "better", "worse", "equal", "mean", "median", "p10", "p90",
                  "saved%", "vs_exh", "vs_vendor");
    out << line;
    auto row = [&](const std::string& op, const TopNResult& r) {
        const auto& s = r.vs_max_autotune;
        const double p10 = s.percentiles.empty() ? 0.0 : s.percentiles.front().second;
        double p90 = 0.0;
        for (const auto& [p, v] : s.percentiles) {
            if (p == 90) p90 = v;
        }
        char vendor[32];
        if (r.vs_vendor.shapes_analysed > 0) {
            std::snprintf(vendor, sizeof vendor, "%9.3f", r.vs_vendor.mean_ratio);
        } else {
            std::snprintf(vendor, sizeof vendor, "%9s", "-");
        }
        std::snprintf(line, sizeof line,
                      "%-10s %5d %6zu %6zu %6zu %6zu %8.3f %8.3f %8.3f %8.3f %8.2f %9.3f %s\n",
                      op.c_str(), r.top_n, s.shapes_analysed, s.model_better, s.model_worse,
                      s.model_equal, s.mean_ratio, s.median_ratio, p10, p90,
                      s.total_time_saved_pct, r.vs_exhaustive.mean_ratio, vendor);
        out << line;
    };
    for (const auto& op : analysis.per_op) {
        for (const auto& r : op.by_top_n) row(op.op, r);
    }
    for (const auto& r : analysis.overall) row("overall", r);
    out << "\nvs_exh: mean of exhaustive-best time / model time (1 = the model found the best "
           "measured config); vs_vendor: mean of vendor time / model time.\n";
    return out.str();
}

}  // namespace mmt::model
