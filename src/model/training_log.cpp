#include "matmul_toolkit/model/training_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "matmul_toolkit/core/csv_table.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/dataset_stats.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "report_json.hpp"

namespace mmt::model {
namespace {

std::string num(double value, const char* format = "%.6g") {
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), format, value);
    return buffer;
}

}  // namespace

std::string history_csv(const std::vector<EpochStats>& history) {
    std::ostringstream out;
    out << "epoch,train_loss,validation_loss,seconds,rows_per_second,best,learning_rate\n";
    for (const auto& e : history) {
        out << e.epoch << ',' << num(e.train_loss, "%.9g") << ',' << num(e.validation_loss, "%.9g") << ','
            << num(e.seconds, "%.4f") << ',' << num(e.rows_per_second, "%.1f") << ',' << (e.improved ? 1 : 0)
            << ',' << num(e.learning_rate, "%.6g") << '\n';
    }
    return out.str();
}

std::string loss_plot_svg(const std::vector<EpochStats>& history, int best_epoch) {
    constexpr double kWidth = 720, kHeight = 420, kLeft = 80, kRight = 24, kTop = 44, kBottom = 56;
    const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;

    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const auto& e : history) {
        for (double v : {e.train_loss, e.validation_loss}) {
            const double l = std::log10(std::max(v, 1e-12));
            lo = std::min(lo, l);
            hi = std::max(hi, l);
        }
    }
    if (history.empty()) lo = -1, hi = 0;
    if (hi - lo < 1e-9) lo -= 0.5, hi += 0.5;
    const double pad = (hi - lo) * 0.05;
    lo -= pad;
    hi += pad;
    const double first = 1, last = std::max<double>(2, static_cast<double>(history.size()));

    auto x_of = [&](double epoch) { return kLeft + (epoch - first) / (last - first) * plot_w; };
    auto y_of = [&](double loss) {
        const double l = std::log10(std::max(loss, 1e-12));
        return kTop + (hi - l) / (hi - lo) * plot_h;
    };

    std::ostringstream svg;
    svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
        << "\" viewBox=\"0 0 " << kWidth << ' ' << kHeight << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
        << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        << "<text x=\"" << kWidth / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">"
        << "Training and validation loss (MSE of ln time, log scale)</text>\n";

    // Grid and y labels: five values evenly spaced in log space.
    for (int i = 0; i <= 4; ++i) {
        const double l = lo + (hi - lo) * i / 4.0;
        const double y = kTop + (hi - l) / (hi - lo) * plot_h;
        svg << "<line x1=\"" << kLeft << "\" y1=\"" << num(y) << "\" x2=\"" << kLeft + plot_w << "\" y2=\""
            << num(y) << "\" stroke=\"#e0e0e0\"/>\n"
            << "<text x=\"" << kLeft - 6 << "\" y=\"" << num(y + 4) << "\" text-anchor=\"end\">"
            << num(std::pow(10.0, l), "%.3g") << "</text>\n";
    }
    // x labels: at most ten epochs.
    const int epochs = static_cast<int>(history.size());
    const int step = std::max(1, (epochs + 9) / 10);
    for (int e = 1; e <= std::max(epochs, 1); e += step) {
        svg << "<text x=\"" << num(x_of(e)) << "\" y=\"" << kTop + plot_h + 18
            << "\" text-anchor=\"middle\">" << e << "</text>\n";
    }
    svg << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << plot_w << "\" height=\"" << plot_h
        << "\" fill=\"none\" stroke=\"#333\"/>\n"
        << "<text x=\"" << kLeft + plot_w / 2 << "\" y=\"" << kHeight - 12
        << "\" text-anchor=\"middle\">epoch</text>\n"
        << "<text x=\"16\" y=\"" << kTop + plot_h / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 "
        << kTop + plot_h / 2 << ")\">loss</text>\n";

    if (best_epoch > 0) {
        const double x = x_of(best_epoch);
        svg << "<line x1=\"" << num(x) << "\" y1=\"" << kTop << "\" x2=\"" << num(x) << "\" y2=\""
            << kTop + plot_h << "\" stroke=\"#888\" stroke-dasharray=\"4 3\"/>\n"
            << "<text x=\"" << num(x + 4) << "\" y=\"" << kTop + 14 << "\" fill=\"#555\">best epoch "
            << best_epoch << "</text>\n";
    }
    auto polyline = [&](const char* colour, auto value_of) {
        svg << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"2\" points=\"";
        for (const auto& e : history) svg << num(x_of(e.epoch)) << ',' << num(y_of(value_of(e))) << ' ';
        svg << "\"/>\n";
    };
    polyline("#1f77b4", [](const EpochStats& e) { return e.train_loss; });
    polyline("#ff7f0e", [](const EpochStats& e) { return e.validation_loss; });

    const double lx = kLeft + plot_w - 150, ly = kTop + 16;
    svg << "<line x1=\"" << lx << "\" y1=\"" << ly << "\" x2=\"" << lx + 24 << "\" y2=\"" << ly
        << "\" stroke=\"#1f77b4\" stroke-width=\"2\"/><text x=\"" << lx + 30 << "\" y=\"" << ly + 4
        << "\">training</text>\n"
        << "<line x1=\"" << lx << "\" y1=\"" << ly + 18 << "\" x2=\"" << lx + 24 << "\" y2=\"" << ly + 18
        << "\" stroke=\"#ff7f0e\" stroke-width=\"2\"/><text x=\"" << lx + 30 << "\" y=\"" << ly + 22
        << "\">validation</text>\n"
        << "</svg>\n";
    return svg.str();
}

std::string test_metrics_json(const TrainResult& result) {
    nlohmann::ordered_json j;
    j["best_epoch"] = result.best_epoch;
    j["best_validation_loss"] = result.best_validation_loss;
    j["epochs_run"] = result.history.size();
    j["stopped_early"] = result.stopped_early;
    j["split"] = {{"train_problems", result.split.train.size()},
                  {"validation_problems", result.split.validation.size()},
                  {"test_problems", result.split.test.size()},
                  {"train_rows", result.train_rows},
                  {"validation_rows", result.validation_rows},
                  {"test_rows", result.test_rows}};
    j["test"] = result.split.test.empty() ? nlohmann::ordered_json() : report_json(result.test_report);
    return j.dump(2) + "\n";
}

std::vector<std::filesystem::path> write_training_logs(const TrainResult& result,
                                                       const std::filesystem::path& log_dir) {
    std::error_code ec;
    std::filesystem::create_directories(log_dir, ec);
    if (ec) throw core::InputError(log_dir.string(), "cannot create the log directory: " + ec.message());
    const std::vector<std::filesystem::path> paths{log_dir / "training_history.csv",
                                                   log_dir / "training_loss.svg", log_dir / "test_metrics.json"};
    core::write_file_atomically(paths[0], history_csv(result.history));
    core::write_file_atomically(paths[1], loss_plot_svg(result.history, result.best_epoch));
    core::write_file_atomically(paths[2], test_metrics_json(result));
    return paths;
}

std::string cross_validation_json(const CrossValidationResult& result) {
    nlohmann::ordered_json j;
    j["folds"] = nlohmann::ordered_json::array();
    for (const auto& fold : result.folds) {
        j["folds"].push_back({{"train_problems", fold.train_problems},
                              {"test_problems", fold.test_problems},
                              {"best_epoch", fold.best_epoch},
                              {"seconds", fold.seconds},
                              {"test", report_json(fold.report)}});
    }
    j["pooled"] = report_json(result.pooled);
    return j.dump(2) + "\n";
}

std::string cross_validation_predictions_csv(const CrossValidationResult& result) {
    core::CsvTable table;
    table.columns = {"fold",      "problem",   "op",      "dtype",      "B",         "M",
                     "N",         "K",         "config",  "block_m",    "block_n",   "block_k",
                     "group_m",   "num_stages", "num_warps", "measured_ms", "predicted_ms"};
    const auto number = [](double value) {
        char buffer[32];
        std::snprintf(buffer, sizeof(buffer), "%.6g", value);
        return std::string(buffer);
    };
    for (std::size_t p = 0; p < result.held_out.size(); ++p) {
        const ProblemGroup& problem = result.held_out[p];
        const core::MMShape& s = problem.shape;
        for (std::size_t i = 0; i < problem.timings.size(); ++i) {
            const core::GemmConfig& c = problem.timings[i].config;
            // A vendor-library row (aten_*) has no tile: its fields stay empty, not the defaults.
            const bool vendor = core::is_vendor_entry(c);
            const auto tile_field = [vendor](int value) { return vendor ? std::string() : std::to_string(value); };
            table.rows.push_back({std::to_string(result.held_out_fold[p]), std::to_string(p), problem.op_key,
                                  core::dtype_label(s), std::to_string(s.B), std::to_string(s.M), std::to_string(s.N),
                                  std::to_string(s.K), c.name, tile_field(c.block_m), tile_field(c.block_n),
                                  tile_field(c.block_k), tile_field(c.group_m), tile_field(c.num_stages),
                                  tile_field(c.num_warps), number(problem.timings[i].time_ms),
                                  number(std::exp(result.held_out_log_ms[p][i]))});
        }
    }
    return core::csv_text(table);
}

std::filesystem::path write_cross_validation_log(const CrossValidationResult& result,
                                                 const std::filesystem::path& log_dir) {
    std::error_code ec;
    std::filesystem::create_directories(log_dir, ec);
    if (ec) throw core::InputError(log_dir.string(), "cannot create the log directory: " + ec.message());
    const auto path = log_dir / "cv_metrics.json";
    core::write_file_atomically(path, cross_validation_json(result));
    core::write_file_atomically(log_dir / "cv_predictions.csv", cross_validation_predictions_csv(result));
    return path;
}

}  // namespace mmt::model
