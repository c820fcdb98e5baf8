// `validate-max-autotune`: how close the model's N best-ranked configs come to the best
// config of a max-autotune solution, to the exhaustive best and to the vendor library.

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "command.hpp"
#include "log.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/autotune_analysis.hpp"
#include "matmul_toolkit/model/default_model.hpp"
#include "matmul_toolkit/model/features.hpp"
#include "matmul_toolkit/model/predictor.hpp"
#include "matmul_toolkit/model/recommend.hpp"

namespace mmt::cli {
namespace {

struct ValidateMaxAutotuneOptions {
    std::string model;
    std::string dataset;
    std::string solution;
    std::string op_name;
    std::string hardware_name;
    std::string output = "model_performance_analysis_by_op.json";
    std::vector<int> top_n = model::default_top_n_values();
    std::vector<std::string> file_extensions{"json", "msgpack"};
    bool force = false;

    void add_to(CLI::App& cmd) {
        cmd.add_option("--model", model, "Trained model checkpoint (.pt); default: the shipped model");
        cmd.add_option("--dataset", dataset,
                       "Validation dataset file (.json / .msgpack) or a directory of them")
            ->required();
        cmd.add_option("--max-autotune-solution", solution,
                       "Solution file: the configs max-autotune tries, {\"config\": [...]} for "
                       "every op or {OP: {\"config\": [...]}} per op; default: the shipped "
                       "data/solutions/default_max_autotune.json (Inductor's DEFAULT mm configs)");
        cmd.add_option("--op-name", op_name, "Analyse only this operation (mm also selects mm_nt, ...)");
        cmd.add_option("--hardware-name", hardware_name, "Analyse only this hardware");
        cmd.add_option("--output", output, "JSON report (torch-diode's file name by default)")
            ->capture_default_str();
        add_old_spelling(cmd, "--top-n", "--top-k", top_n);
        cmd.add_option("--top-k", top_n, "Values of K: the model's K best-ranked configs are tried")
            ->capture_default_str();
        cmd.add_option("--file-extensions", file_extensions,
                       "Extensions of the dataset files read from a directory")
            ->capture_default_str();
        cmd.add_flag("--force", force,
                     "Go on when the dataset holds hardware the model was not trained on");
    }
};

std::optional<std::string> optional_filter(const std::string& value) {
    if (value.empty()) return std::nullopt;
    return value;
}

int run_validate_max_autotune(ValidateMaxAutotuneOptions o, const GlobalOptions& global) {
    if (o.solution.empty()) o.solution = model::default_solution_path().string();
    o.model = model::model_or_default(o.model);
    // Inputs are read and checked before the model, so a bad path fails fast.
    const auto solution = core::load_solution(o.solution);
    auto dataset = core::load_dataset_any(o.dataset, o.file_extensions)
                       .filter(optional_filter(o.hardware_name), optional_filter(o.op_name));
    if (dataset.num_problems() == 0) {
        throw core::InputError(o.dataset, "no problems left after the --hardware-name / --op-name filters");
    }
    const std::string device = resolved_device(global);
    const auto predictor = model::Predictor::load(o.model, device);
    const auto warning = model::check_model_hardware(predictor.info(), dataset, o.model, o.force);
    if (!warning.empty()) log_warning(warning);

    model::AnalysisOptions options;
    options.top_n_values = o.top_n;
    options.tiles_only = [](const std::string& hardware) {
        return !model::lookup_hardware(hardware).is_gpu;
    };
    const model::PredictFn predict = [&predictor](const std::string& hardware, const std::string& op,
                                                  const core::MMShape& shape,
                                                  const std::vector<core::GemmConfig>& configs) {
        return predictor.predict_log_ms(op, shape, configs,
                                        model::lookup_hardware(hardware).parallel_units);
    };
    log_info("analysing " + std::to_string(dataset.num_problems()) + " problems of " + o.dataset + " against " + o.solution);
    model::AutotuneAnalysis analysis;
    try {
        analysis = model::analyse_max_autotune(dataset, solution, predict, options);
    } catch (const core::InputError& e) {
        if (e.subject() == "max-autotune solution") throw core::InputError(o.solution, e.detail());
        if (e.subject() == "top-N") throw core::InputError("--top-k", e.detail());
        throw;
    }
    for (const auto& w : analysis.warnings) log_warning(w);

    model::AnalysisMetadata metadata;
    metadata.model_path = o.model;
    metadata.dataset_path = o.dataset;
    metadata.solution_path = o.solution;
    metadata.hardware_filter = o.hardware_name;
    metadata.op_filter = o.op_name;
    metadata.device = device;
    metadata.model_hardware = predictor.info().hardware_name;
    core::write_file_atomically(o.output, model::analysis_to_json(analysis, metadata));

    std::cout << model::format_analysis_table(analysis);
    std::cout << "Comprehensive per-op statistics saved to: " << o.output << "\n";
    return core::kExitOk;
}

}  // namespace

void register_validate_max_autotune(CLI::App& app, const GlobalOptions& global) {
    auto options = std::make_shared<ValidateMaxAutotuneOptions>();
    auto* cmd = app.add_subcommand(
        "validate-max-autotune",
        "Compare the model's top-N configs with max-autotune over a solution's configs, with "
        "the exhaustive best and with the vendor library, per op and overall");
    options->add_to(*cmd);
    cmd->callback([options, &global] { exit_code() = run_validate_max_autotune(*options, global); });
}

}  // namespace mmt::cli
