// `validate-model --model M --dataset F|D`: a trained model's accuracy and ranking quality.

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "log.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/default_model.hpp"
#include "matmul_toolkit/model/evaluator.hpp"
#include "matmul_toolkit/model/predictor.hpp"
#include "matmul_toolkit/model/problems.hpp"
#include "train_options.hpp"

namespace mmt::cli {
namespace {

struct ValidateModelOptions : ModelValidationRequest {
    void add_to(CLI::App& cmd) {
        cmd.add_option("--model", model, "Trained model checkpoint (.pt); default: the shipped model");
        cmd.add_option("--dataset", dataset, "Dataset file (.json / .msgpack) or a directory of them")
            ->required();
        cmd.add_option("--file-extensions", file_extensions, "Extensions of the files read from a directory")
            ->capture_default_str();
        cmd.add_option("--hardware-name", hardware_name, "Validate only on this hardware's timings");
        cmd.add_option("--op-name", op_name, "Validate only on this operation (mm also selects mm_nt, ...)");
        cmd.add_option("--top-n-worst", top_n_worst, "Worst predictions to list")->capture_default_str();
        cmd.add_option("--output", output_json, "Also write the metrics as JSON to this file");
        add_old_spelling(cmd, "--output-json", "--output", output_json);
        cmd.add_option("--batch-size", batch_size, "Rows per forward pass")->capture_default_str();
    }
};

std::optional<std::string> optional_filter(const std::string& value) {
    if (value.empty()) return std::nullopt;
    return value;
}

}  // namespace

int run_model_validation(const ModelValidationRequest& o, const core::Dataset& dataset,
                         const GlobalOptions& global) {
    if (o.top_n_worst < 0) throw core::InputError("--top-n-worst", "must not be negative");
    if (o.batch_size < 1) throw core::InputError("--batch-size", "must be positive");
    auto problems = model::select_dataset_problems(dataset, o.dataset, optional_filter(o.hardware_name),
                                                   optional_filter(o.op_name));
    // Inference is cheap: the CPU unless --device asks for the GPU.
    auto predictor = model::Predictor::load(o.model, global.device.empty() ? "cpu" : global.device);
    // A model that learned ATen's time is judged as max-autotune is: ATen is a candidate too.
    if (predictor.info().vendor_rows) problems = model::with_reference_rows(std::move(problems));
    predictor.set_batch_size(static_cast<std::size_t>(o.batch_size));

    const auto& trained_on = predictor.info().hardware_name;
    for (const auto& hw : dataset.hardware()) {
        if (optional_filter(o.hardware_name) && hw.name != o.hardware_name) continue;
        if (trained_on.find(hw.name) == std::string::npos) {
            log_warning("the model was trained on '" + trained_on + "', the dataset holds timings of '" + hw.name + "'");
        }
    }
    const auto report = model::evaluate_model(predictor, problems, static_cast<std::size_t>(o.top_n_worst));

    std::cout << "model " << o.model << " (" << predictor.info().spec.describe() << ", trained on "
              << trained_on << ")\n"
              << "dataset " << o.dataset << ": " << problems.size() << " problems, " << model::count_rows(problems)
              << " timed configs\n\n"
              << model::format_report(report);
    if (!o.output_json.empty()) {
        nlohmann::ordered_json json;
        json["model"] = o.model;
        json["dataset"] = o.dataset;
        json["model_hardware"] = trained_on;
        const auto metrics = nlohmann::ordered_json::parse(model::report_to_json(report));
        for (const auto& [key, value] : metrics.items()) {
            json[key] = value;
        }
        core::write_file_atomically(o.output_json, json.dump(2) + "\n");
        std::cout << "metrics written to " << o.output_json << "\n";
    }
    return core::kExitOk;
}

void register_validate_model(CLI::App& app, const GlobalOptions& global) {
    auto options = std::make_shared<ValidateModelOptions>();
    auto* cmd = app.add_subcommand(
        "validate-model",
        "Evaluate a trained model on a dataset: MSE/RMSE of ln(time), exp(RMSE), R², MAPE, and "
        "per-problem ranking (Spearman, top-k achieved fraction), per op and overall");
    options->add_to(*cmd);
    cmd->callback([options, &global] {
        const auto dataset = core::load_dataset_any(options->dataset, options->file_extensions);
        options->model = model::model_or_default(options->model);
        exit_code() = run_model_validation(*options, dataset, global);
    });
}

}  // namespace mmt::cli
