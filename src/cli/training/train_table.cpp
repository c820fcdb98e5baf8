// `train-table --dataset F --target COL`: small MLPs of any kernel's measurements in a CSV
// (one per --group-by value), their held-out R² and RMSE, and the portable JSON.

#include <cmath>
#include <filesystem>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "command.hpp"
#include "log.hpp"
#include "matmul_toolkit/core/csv_table.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/collect/output_files.hpp"
#include "matmul_toolkit/model/model_spec.hpp"
#include "matmul_toolkit/model/table_model.hpp"
#include "table_columns.hpp"

namespace mmt::cli {
namespace {

struct TrainTableOptions {
    std::string csv;
    std::string target;
    std::vector<std::string> features;
    std::string group_by;
    std::string hidden_dims = "100,50";
    model::TableTrainOptions training;
    std::string output = "table_model.json";
    std::string init_from;

    void add_to(CLI::App& cmd) {
        cmd.add_option("--dataset", csv, "CSV file: a header line, then one measurement per row (required)");
        add_old_spelling(cmd, "--csv", "--dataset", csv);
        cmd.add_option("--target", target, "Column to predict (e.g. a duration in ns)")->required();
        cmd.add_option("--features", features,
                       "Feature columns (default: every column but the target and --group-by)");
        cmd.add_option("--group-by", group_by, "Train one model per value of this column");
        cmd.add_option("--hidden-dims", hidden_dims, "Hidden layer sizes, comma-separated (ReLU)")->capture_default_str();
        cmd.add_option("--epochs", training.epochs, "Passes over the training rows (Adam)")->capture_default_str();
        cmd.add_option("--batch-size", training.batch_size, "Rows per step")->capture_default_str();
        cmd.add_option("--learning-rate", training.learning_rate, "Adam learning rate")->capture_default_str();
        cmd.add_option("--weight-decay", training.weight_decay, "Adam weight decay (L2)")->capture_default_str();
        cmd.add_option("--test-fraction", training.test_fraction, "Share of each model's rows held out for R² and RMSE")
            ->capture_default_str();
        cmd.add_option("--output", output, "Where to write the models (portable JSON)")->capture_default_str();
        cmd.add_option("--init-from", init_from,
                       "Start from the weights and scalers of a model file in the same JSON (e.g. a scikit-learn "
                       "MLPRegressor exported as the README shows); with --epochs 0 they are kept unchanged");
    }
};

std::string fmt(double value, const char* format) {
    if (!std::isfinite(value)) return "n/a";
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), format, value);
    return buffer;
}

int run_train_table(TrainTableOptions o, const GlobalOptions& global) {
    require_given(o.csv, "--dataset");
    o.training.seed = global.seed;
    o.training.hidden = model::parse_hidden_dims(o.hidden_dims);
    model::validate_table_options(o.training);
    if (std::filesystem::is_directory(o.output)) throw core::InputError("--output", "'" + o.output + "' is a directory");
    collect::check_writable_directory(std::filesystem::path(o.output).parent_path(), "--output");
    const auto table = core::read_csv(o.csv);
    const TableColumns columns = select_table_columns(table, o.target, o.features, o.group_by);

    model::TableModelFile init;
    if (!o.init_from.empty()) init = model::table_models_from_json(core::read_file(o.init_from), o.init_from);

    model::TableModelFile file;
    file.features = columns.feature_names;
    file.target = o.target;
    file.group_by = o.group_by;
    std::vector<model::TableModelReport> reports;
    for (const auto& group : group_rows(table, columns)) {
        const model::TableMlp* start = nullptr;
        if (!o.init_from.empty()) {
            if (init.features != file.features) {
                throw core::InputError("--init-from", "its features differ from the ones this run uses");
            }
            for (const auto& m : init.models) {
                if (m.group == group.name) start = &m;
            }
            if (!start && init.models.size() == 1 && init.group_by.empty()) start = &init.models.front();
            if (!start) throw core::InputError("--init-from", "no model for group '" + group.name + "'");
        }
        const auto x = feature_rows(table, columns, group.rows, o.csv);
        const auto y = target_values(table, columns, group.rows, o.csv);
        model::TableModelReport report;
        report.group = group.name;
        log_info("training " + (group.name.empty() ? "" : "group '" + group.name + "': ") + std::to_string(group.rows.size()) + " rows");
        file.models.push_back(model::train_table_mlp(x, y, columns.features.size(), o.training, start, report));
        reports.push_back(report);
    }
    core::write_file_atomically(o.output, model::table_models_to_json(file));

    std::printf("%-20s %10s %10s %10s %14s\n", o.group_by.empty() ? "model" : o.group_by.c_str(), "train_rows",
                "test_rows", "r2", "rmse");
    for (const auto& r : reports) {
        std::printf("%-20s %10zu %10zu %10s %14s\n", r.group.empty() ? "all" : r.group.c_str(), r.train_rows,
                    r.test_rows, fmt(r.r2, "%.4f").c_str(), fmt(r.rmse, "%.6g").c_str());
    }
    std::printf("models written to %s (features: %zu, target: %s)\n", o.output.c_str(), file.features.size(),
                o.target.c_str());
    return core::kExitOk;
}

}  // namespace

void register_train_table(CLI::App& app, const GlobalOptions& global) {
    auto options = std::make_shared<TrainTableOptions>();
    auto* cmd = app.add_subcommand(
        "train-table",
        "Train small MLPs (standard scaler + hidden ReLU layers, Adam) that predict a CSV column from "
        "other columns, one per --group-by value; prints held-out R² and RMSE and writes portable JSON");
    options->add_to(*cmd);
    cmd->callback([options, &global] { exit_code() = run_train_table(*options, global); });
}

}  // namespace mmt::cli
