// `predict-table --model M.json --dataset F --output P.csv`: a train-table model's predictions
// for every row of a CSV, as a new column.

#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "command.hpp"
#include "matmul_toolkit/collect/output_files.hpp"
#include "matmul_toolkit/core/csv_table.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/table_model.hpp"
#include "table_columns.hpp"

namespace mmt::cli {
namespace {

struct PredictTableOptions {
    std::string model;
    std::string csv;
    std::string output;

    void add_to(CLI::App& cmd) {
        cmd.add_option("--model", model, "Models written by train-table (JSON)")->required();
        cmd.add_option("--dataset", csv, "CSV file holding the model's feature columns (and its group column) (required)");
        add_old_spelling(cmd, "--csv", "--dataset", csv);
        cmd.add_option("--output", output, "CSV to write: the input with a predicted_<target> column added")->required();
    }
};

int run_predict_table(const PredictTableOptions& o) {
    require_given(o.csv, "--dataset");
    const auto file = model::table_models_from_json(core::read_file(o.model), o.model);
    if (std::filesystem::is_directory(o.output)) throw core::InputError("--output", "'" + o.output + "' is a directory");
    collect::check_writable_directory(std::filesystem::path(o.output).parent_path(), "--output");
    auto table = core::read_csv(o.csv);
    const TableColumns columns = select_table_columns(table, "", file.features, file.group_by);
    const std::string column = "predicted_" + file.target;
    for (const auto& name : table.columns) {
        if (name == column) throw core::InputError(o.csv, "already has a column '" + column + "'");
    }

    std::vector<std::string> predictions(table.rows.size());
    for (const auto& group : group_rows(table, columns)) {
        const model::TableMlp* model = nullptr;
        for (const auto& m : file.models) {
            if (m.group == group.name) model = &m;
        }
        if (!model) throw core::InputError(o.csv, "no model for " + file.group_by + " '" + group.name + "'");
        const auto predicted = model->predict(feature_rows(table, columns, group.rows, o.csv));
        for (std::size_t i = 0; i < group.rows.size(); ++i) {
            std::ostringstream text;
            text.precision(17);
            text << predicted[i];
            predictions[group.rows[i]] = text.str();
        }
    }
    table.columns.push_back(column);
    for (std::size_t r = 0; r < table.rows.size(); ++r) table.rows[r].push_back(predictions[r]);
    core::write_file_atomically(o.output, core::csv_text(table));
    std::cout << "predicted " << table.rows.size() << " rows into " << o.output << " (column " << column << ")\n";
    return core::kExitOk;
}

}  // namespace

void register_predict_table(CLI::App& app, const GlobalOptions&) {
    auto options = std::make_shared<PredictTableOptions>();
    auto* cmd = app.add_subcommand("predict-table",
                                   "Predict the target of every row of a CSV with train-table's models (each row by "
                                   "its group's model) and write the CSV with the predictions as a new column");
    options->add_to(*cmd);
    cmd->callback([options] { exit_code() = run_predict_table(*options); });
}

}  // namespace mmt::cli
