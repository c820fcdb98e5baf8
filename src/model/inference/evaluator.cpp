#include "matmul_toolkit/model/evaluator.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>

#include "matmul_toolkit/core/dataset_stats.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/features.hpp"
#include "matmul_toolkit/model/lut_export.hpp"
#include "report_json.hpp"

namespace mmt::model {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Ranks starting at 1; tied values share the mean of their ranks.
std::vector<double> average_ranks(const std::vector<double>& values) {
    std::vector<std::size_t> order(values.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return values[a] < values[b]; });
    std::vector<double> ranks(values.size());
    for (std::size_t i = 0; i < order.size();) {
        std::size_t j = i;
        while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
        const double rank = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
        for (std::size_t k = i; k <= j; ++k) ranks[order[k]] = rank;
        i = j + 1;
    }
    return ranks;
}

/// Pearson correlation of the average ranks; NaN when either side is constant.
double spearman(const std::vector<double>& a, const std::vector<double>& b) {
    const auto ra = average_ranks(a), rb = average_ranks(b);
    const double n = static_cast<double>(ra.size());
    const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
    const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
    double cov = 0, va = 0, vb = 0;
    for (std::size_t i = 0; i < ra.size(); ++i) {
        cov += (ra[i] - ma) * (rb[i] - mb);
        va += (ra[i] - ma) * (ra[i] - ma);
        vb += (rb[i] - mb) * (rb[i] - mb);
    }
    if (va <= 0.0 || vb <= 0.0) return kNaN;
    return cov / std::sqrt(va * vb);
}

/// Accumulates the metrics of one group (an op, or everything).
struct Accumulator {
    std::size_t problems = 0;
    std::vector<double> actual_log;
    std::vector<double> predicted_log;
    double spearman_sum = 0.0;
    std::size_t spearman_count = 0;
    std::array<double, kTopK.size()> log_fraction_sum{};
    std::vector<double> regrets;  ///< per problem: time of the model's pick / best − 1
    double log_fraction_vendor_sum = 0.0;
    std::size_t vendor_problems = 0;
    std::array<double, kAtenMargins.size()> log_fraction_within_sum{};
    std::array<std::size_t, kAtenMargins.size()> paired_within{};

    /// `vendor`: the vendor row's index, or npos.
    void add_problem(const std::vector<double>& actual, const std::vector<double>& predicted, std::size_t vendor) {
        ++problems;
        actual_log.insert(actual_log.end(), actual.begin(), actual.end());
        predicted_log.insert(predicted_log.end(), predicted.begin(), predicted.end());
        if (actual.size() >= 2) {
            const double rho = spearman(predicted, actual);
            if (!std::isnan(rho)) {
                spearman_sum += rho;
                ++spearman_count;
            }
        }
        std::vector<std::size_t> order(predicted.size());
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return predicted[a] < predicted[b]; });
        const double best = *std::min_element(actual.begin(), actual.end());
        for (std::size_t k = 0; k < kTopK.size(); ++k) {
            const std::size_t take = std::min<std::size_t>(static_cast<std::size_t>(kTopK[k]), order.size());
            double best_of_top = std::numeric_limits<double>::infinity();
            for (std::size_t i = 0; i < take; ++i) best_of_top = std::min(best_of_top, actual[order[i]]);
            // In log space: ln(best / best_of_top) = best − best_of_top.
            log_fraction_sum[k] += best - best_of_top;
            if (kTopK[k] == 1) regrets.push_back(std::expm1(best_of_top - best));
        }
        if (vendor < actual.size()) add_vendor_choice(actual, predicted, order, vendor, best);
    }

    /// As export-lut --with-aten: the best-ranked kernel config and the vendor row, Inductor
    /// keeping the faster; with --aten-within, both only where predicted close.
    void add_vendor_choice(const std::vector<double>& actual, const std::vector<double>& predicted,
                           const std::vector<std::size_t>& order, std::size_t vendor, double best) {
        std::size_t kernel = vendor;
        for (const std::size_t i : order) {
            if (i != vendor) {
                kernel = i;
                break;
            }
        }
        const double paired = std::min(actual[kernel], actual[vendor]);
        log_fraction_vendor_sum += best - paired;
        ++vendor_problems;
        const double alone = predicted[kernel] <= predicted[vendor] ? actual[kernel] : actual[vendor];
        // Predictions are ln(ms).
        const double kernel_ms = std::exp(predicted[kernel]), vendor_ms = std::exp(predicted[vendor]);
        for (std::size_t m = 0; m < kAtenMargins.size(); ++m) {
            const bool pair = pairs_with_vendor(kernel_ms, vendor_ms, AtenPairing{kAtenMargins[m]});
            log_fraction_within_sum[m] += best - (pair ? paired : alone);
            paired_within[m] += pair ? 1 : 0;
        }
    }

    Metrics finish(const std::string& op) const {
        Metrics m;
        m.op = op;
        m.problems = problems;
        m.rows = actual_log.size();
        if (m.rows == 0) {
            m.mse_log = m.rmse_log = m.exp_rmse = m.r2 = m.mape_percent = m.spearman = kNaN;
            m.top_k_achieved.fill(kNaN);
            m.regret_mean = m.regret_p95 = m.top1_with_vendor = kNaN;
            m.top1_aten_within.fill(kNaN);
            return m;
        }
        const double n = static_cast<double>(m.rows);
        const double mean = std::accumulate(actual_log.begin(), actual_log.end(), 0.0) / n;
        double ss_res = 0, ss_tot = 0, ape = 0;
        for (std::size_t i = 0; i < m.rows; ++i) {
            const double err = predicted_log[i] - actual_log[i];
            ss_res += err * err;
            ss_tot += (actual_log[i] - mean) * (actual_log[i] - mean);
            ape += std::abs(std::exp(predicted_log[i]) - std::exp(actual_log[i])) / std::exp(actual_log[i]);
        }
        m.mse_log = ss_res / n;
        m.rmse_log = std::sqrt(m.mse_log);
        m.exp_rmse = std::exp(m.rmse_log);
        m.r2 = ss_tot > 0.0 ? 1.0 - ss_res / ss_tot : kNaN;
        m.mape_percent = 100.0 * ape / n;
        m.spearman_problems = spearman_count;
        m.spearman = spearman_count ? spearman_sum / static_cast<double>(spearman_count) : kNaN;
        for (std::size_t k = 0; k < kTopK.size(); ++k) {
            m.top_k_achieved[k] = std::exp(log_fraction_sum[k] / static_cast<double>(problems));
        }
        m.regret_mean = std::accumulate(regrets.begin(), regrets.end(), 0.0) / static_cast<double>(regrets.size());
        m.regret_p95 = nearest_rank_percentile(regrets, 0.95);
        m.vendor_problems = vendor_problems;
        m.top1_with_vendor = vendor_problems
                                 ? std::exp(log_fraction_vendor_sum / static_cast<double>(vendor_problems))
                                 : kNaN;
        m.paired_within = paired_within;
        for (std::size_t i = 0; i < kAtenMargins.size(); ++i) {
            m.top1_aten_within[i] =
                vendor_problems ? std::exp(log_fraction_within_sum[i] / static_cast<double>(vendor_problems)) : kNaN;
        }
        return m;
    }
};

/// One Accumulator per subset name (an op, a dtype), finished in order of first appearance.
class SubsetAccumulators {
public:
    void add_problem(const std::string& name, const std::vector<double>& actual,
                     const std::vector<double>& predicted, std::size_t vendor) {
        auto [it, added] = m_by_name.try_emplace(name);
        if (added) m_order.push_back(name);
        it->second.add_problem(actual, predicted, vendor);
    }

    std::vector<Metrics> finish() const {
        std::vector<Metrics> metrics;
        for (const auto& name : m_order) metrics.push_back(m_by_name.at(name).finish(name));
        return metrics;
    }

private:
    std::vector<std::string> m_order;
    std::map<std::string, Accumulator> m_by_name;
};

nlohmann::ordered_json number(double value) {
    if (std::isfinite(value)) return value;
    return nullptr;
}

/// `label_key`: what the subset's name is ("op" for the overall and per-op rows, "dtype").
nlohmann::ordered_json metrics_json(const Metrics& m, const char* label_key = "op") {
    nlohmann::ordered_json j;
    j[label_key] = m.op;
    j["problems"] = m.problems;
    j["rows"] = m.rows;
    j["mse_log"] = number(m.mse_log);
    j["rmse_log"] = number(m.rmse_log);
    j["exp_rmse"] = number(m.exp_rmse);
    j["r2"] = number(m.r2);
    j["mape_percent"] = number(m.mape_percent);
    j["spearman"] = number(m.spearman);
    j["spearman_problems"] = m.spearman_problems;
    nlohmann::ordered_json top = nlohmann::ordered_json::object();
    for (std::size_t k = 0; k < kTopK.size(); ++k) top[std::to_string(kTopK[k])] = number(m.top_k_achieved[k]);
    j["top_k_achieved_fraction"] = top;
    j["regret"] = {{"mean", number(m.regret_mean)}, {"p95", number(m.regret_p95)}};
    nlohmann::ordered_json within = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < kAtenMargins.size(); ++i) {
        within.push_back({{"margin_percent", 100.0 * kAtenMargins[i]},
                          {"achieved_fraction", number(m.top1_aten_within[i])},
                          {"paired", m.paired_within[i]}});
    }
    j["top1_with_vendor"] = {{"achieved_fraction", number(m.top1_with_vendor)},
                             {"problems", m.vendor_problems},
                             {"aten_within", within}};
    return j;
}

std::string fmt(double value, const char* format = "%.4f") {
    if (!std::isfinite(value)) return "n/a";
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), format, value);
    return buffer;
}

std::string config_summary(const core::GemmConfig& c) {
    std::ostringstream out;
    out << c.block_m << "x" << c.block_n << "x" << c.block_k << " g" << c.group_m << " s" << c.num_stages
        << " w" << c.num_warps;
    return out.str();
}

/// The op, dtype, B, M, N, K columns the report's tables start with.
std::string problem_columns(const std::string& op, const core::MMShape& shape) {
    char buffer[128];
    std::snprintf(buffer, sizeof(buffer), "%-10s %-8s %6lld %6lld %6lld %6lld", op.c_str(), shape.M_dtype.c_str(),
                  static_cast<long long>(shape.B), static_cast<long long>(shape.M), static_cast<long long>(shape.N),
                  static_cast<long long>(shape.K));
    return buffer;
}

/// A config as a table names it; a vendor-library row by its name (aten_mm, ...).
std::string pick_name(const core::GemmConfig& c) {
    return is_reference_config(c) ? c.name : config_summary(c);
}

}  // namespace

double nearest_rank_percentile(std::vector<double> values, double fraction) {
    if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
    std::sort(values.begin(), values.end());
    const auto rank = static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(values.size())));
    return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}

EvaluationReport evaluate_predictions(const std::vector<ProblemGroup>& problems,
                                      const std::vector<std::vector<double>>& predicted_log_ms,
                                      std::size_t top_n_worst) {
    if (predicted_log_ms.size() != problems.size()) {
        throw core::Error("evaluation", "predictions for " + std::to_string(predicted_log_ms.size()) +
                                            " problems, expected " + std::to_string(problems.size()));
    }
    Accumulator overall;
    SubsetAccumulators per_op, per_dtype;
    struct Candidate {
        double error;
        std::size_t problem;
        std::size_t row;
    };
    std::vector<Candidate> candidates;
    std::vector<WorstPick> picks;

    for (std::size_t p = 0; p < problems.size(); ++p) {
        const auto& problem = problems[p];
        const auto& predicted = predicted_log_ms[p];
        if (predicted.size() != problem.timings.size()) {
            throw core::Error("evaluation", "prediction count does not match the configs of a problem");
        }
        std::vector<double> actual(problem.timings.size());
        for (std::size_t i = 0; i < actual.size(); ++i) {
            actual[i] = std::log(problem.timings[i].time_ms);
            candidates.push_back({std::abs(predicted[i] - actual[i]), p, i});
        }
        if (actual.empty()) continue;
        const auto picked = static_cast<std::size_t>(std::min_element(predicted.begin(), predicted.end()) - predicted.begin());
        const auto best = static_cast<std::size_t>(std::min_element(actual.begin(), actual.end()) - actual.begin());
        picks.push_back({problem.hardware, problem.op_key, problem.shape, problem.timings[picked].config,
                         problem.timings[best].config, problem.timings[picked].time_ms, problem.timings[best].time_ms,
                         problem.timings[picked].time_ms / problem.timings[best].time_ms - 1.0});
        std::size_t vendor = std::string::npos;
        for (std::size_t i = 0; i < problem.timings.size(); ++i)
            if (is_reference_config(problem.timings[i].config)) vendor = i;
        overall.add_problem(actual, predicted, vendor);
        per_op.add_problem(problem.op_key, actual, predicted, vendor);
        per_dtype.add_problem(core::dtype_label(problem.shape), actual, predicted, vendor);
    }

    EvaluationReport report;
    report.overall = overall.finish("overall");
    report.per_op = per_op.finish();
    report.per_dtype = per_dtype.finish();

    const std::size_t keep = std::min(top_n_worst, candidates.size());
    std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(keep), candidates.end(),
                      [](const Candidate& a, const Candidate& b) { return a.error > b.error; });
    for (std::size_t i = 0; i < keep; ++i) {
        const auto& c = candidates[i];
        const auto& problem = problems[c.problem];
        WorstPrediction w;
        w.hardware = problem.hardware;
        w.op = problem.op_key;
        w.shape = problem.shape;
        w.config = problem.timings[c.row].config;
        w.actual_ms = problem.timings[c.row].time_ms;
        w.predicted_ms = std::exp(predicted_log_ms[c.problem][c.row]);
        w.ratio = w.predicted_ms / w.actual_ms;
        report.worst.push_back(w);
    }
    const std::size_t keep_picks = std::min(top_n_worst, picks.size());
    std::partial_sort(picks.begin(), picks.begin() + static_cast<std::ptrdiff_t>(keep_picks), picks.end(),
                      [](const WorstPick& a, const WorstPick& b) { return a.regret > b.regret; });
    picks.resize(keep_picks);
    while (!picks.empty() && picks.back().regret <= 0.0) picks.pop_back();  // a best pick is no loss
    report.worst_picks = std::move(picks);
    return report;
}

nlohmann::ordered_json report_json(const EvaluationReport& report) {
    nlohmann::ordered_json j;
    j["overall"] = metrics_json(report.overall);
    j["per_op"] = nlohmann::ordered_json::array();
    for (const auto& m : report.per_op) j["per_op"].push_back(metrics_json(m));
    j["per_dtype"] = nlohmann::ordered_json::array();
    for (const auto& m : report.per_dtype) j["per_dtype"].push_back(metrics_json(m, "dtype"));
    j["worst_predictions"] = nlohmann::ordered_json::array();
    for (const auto& w : report.worst) {
        nlohmann::ordered_json item;
        item["hardware"] = w.hardware;
        item["op"] = w.op;
        item["B"] = w.shape.B;
        item["M"] = w.shape.M;
        item["N"] = w.shape.N;
        item["K"] = w.shape.K;
        item["dtype"] = w.shape.M_dtype;
        item["config"] = {{"name", w.config.name},       {"block_m", w.config.block_m},
                          {"block_n", w.config.block_n}, {"block_k", w.config.block_k},
                          {"group_m", w.config.group_m}, {"num_stages", w.config.num_stages},
                          {"num_warps", w.config.num_warps}};
        item["predicted_ms"] = w.predicted_ms;
        item["actual_ms"] = w.actual_ms;
        item["ratio"] = w.ratio;
        j["worst_predictions"].push_back(item);
    }
    j["worst_picks"] = nlohmann::ordered_json::array();
    for (const auto& w : report.worst_picks) {
        j["worst_picks"].push_back({{"hardware", w.hardware}, {"op", w.op}, {"B", w.shape.B}, {"M", w.shape.M},
                                    {"N", w.shape.N}, {"K", w.shape.K}, {"dtype", w.shape.M_dtype},
                                    {"picked", w.picked.name}, {"picked_ms", w.picked_ms}, {"best", w.best.name},
                                    {"best_ms", w.best_ms}, {"regret", w.regret}});
    }
    return j;
}

std::string report_to_json(const EvaluationReport& report) { return report_json(report).dump(2) + "\n"; }

std::string format_report(const EvaluationReport& report) {
    std::ostringstream out;
    char line[512];
    std::snprintf(line, sizeof(line), "%-12s %8s %8s %9s %9s %9s %8s %9s %9s %8s %8s %8s %9s %9s\n", "subset",
                  "problems", "rows", "mse_log", "rmse_log", "exp_rmse", "r2", "mape_%", "spearman",
                  "top1", "top5", "top10", "regret_%", "p95_reg_%");
    out << line;
    auto row = [&](const Metrics& m) {
        std::snprintf(line, sizeof(line), "%-12s %8zu %8zu %9s %9s %9s %8s %9s %9s %8s %8s %8s %9s %9s\n",
                      m.op.c_str(), m.problems, m.rows, fmt(m.mse_log).c_str(), fmt(m.rmse_log).c_str(),
                      fmt(m.exp_rmse, "%.3f").c_str(), fmt(m.r2, "%.3f").c_str(),
                      fmt(m.mape_percent, "%.1f").c_str(), fmt(m.spearman, "%.3f").c_str(),
                      fmt(m.top_k_achieved[0], "%.3f").c_str(), fmt(m.top_k_achieved[1], "%.3f").c_str(),
                      fmt(m.top_k_achieved[2], "%.3f").c_str(), fmt(100.0 * m.regret_mean, "%.1f").c_str(),
                      fmt(100.0 * m.regret_p95, "%.1f").c_str());
        out << line;
    };
    for (const auto& m : report.per_op) row(m);
    // Rows by dtype too where there are several: fp32 kernels rank unlike the 16-bit ones.
    if (report.per_dtype.size() > 1) {
        for (const auto& m : report.per_dtype) row(m);
    }
    row(report.overall);
    out << "top-k: geometric mean over problems of best measured time / best measured time among the "
           "model's k best-ranked configs; regret: time of the model's pick / best time - 1, mean and "
           "95th percentile over problems\n";
    if (report.overall.vendor_problems > 0) {
        const Metrics& o = report.overall;
        out << "top-1 beside the vendor choice (export-lut --with-aten: the model's best kernel config and "
               "ATen, the faster kept): "
            << fmt(o.top1_with_vendor, "%.3f") << " over the " << o.vendor_problems << " problems with a vendor row\n";
        out << "  paired only where predicted within (--aten-within), else the one predicted faster alone:";
        for (std::size_t i = 0; i < kAtenMargins.size(); ++i) {
            out << (i ? ";" : "") << " " << fmt(100.0 * kAtenMargins[i], "%.0f") << " %: "
                << fmt(o.top1_aten_within[i], "%.3f") << " (" << o.paired_within[i] << " paired)";
        }
        out << "\n";
    }
    if (!report.worst.empty()) {
        out << "\nworst predictions (largest |ln predicted - ln actual|):\n";
        std::snprintf(line, sizeof(line), "%-10s %-8s %6s %6s %6s %6s  %-24s %12s %12s %8s\n", "op",
                      "dtype", "B", "M", "N", "K", "config", "predicted_ms", "actual_ms", "ratio");
        out << line;
        for (const auto& w : report.worst) {
            std::snprintf(line, sizeof(line), "%s  %-24s %12.5g %12.5g %8.3f\n", problem_columns(w.op, w.shape).c_str(),
                          config_summary(w.config).c_str(), w.predicted_ms, w.actual_ms, w.ratio);
            out << line;
        }
    }
    if (!report.worst_picks.empty()) {
        out << "\nworst picks (largest regret of the model's first pick):\n";
        std::snprintf(line, sizeof(line), "%-10s %-8s %6s %6s %6s %6s  %-24s %11s  %-24s %11s %9s\n", "op", "dtype",
                      "B", "M", "N", "K", "picked", "picked_ms", "best", "best_ms", "regret_%");
        out << line;
        for (const auto& w : report.worst_picks) {
            std::snprintf(line, sizeof(line), "%s  %-24s %11.5g  %-24s %11.5g %9.1f\n", problem_columns(w.op, w.shape).c_str(),
                          pick_name(w.picked).c_str(), w.picked_ms, pick_name(w.best).c_str(), w.best_ms,
                          100.0 * w.regret);
            out << line;
        }
    }
    return out.str();
}

}  // namespace mmt::model
