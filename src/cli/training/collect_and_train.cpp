// `collect-and-train`: collect a training dataset, collect a validation dataset (seed + 1),
// train a model, validate it. Each step is the subcommand of the same name's run function.

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "collect_options.hpp"
#include "command.hpp"
#include "matmul_toolkit/collect/output_files.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "train_options.hpp"

namespace mmt::cli {
namespace {

namespace fs = std::filesystem;

struct CollectAndTrainOptions {
    CollectCliOptions collection;  ///< its `output` is --dataset
    std::string validation_dataset = "matmul_validation_dataset.json";
    int validation_shapes = 30;
    std::string validation_report;
    TrainCliOptions training;
    bool skip_collection = false;
    bool skip_validation = false;
    bool skip_training = false;

    void add_to(CLI::App& cmd) {
        add_problem_options(cmd, collection);
        add_measurement_options(cmd, collection);
        // The collection's output is the training input: torch-diode calls it --dataset.
        cmd.remove_option(cmd.get_option("--output"));
        cmd.add_option("--dataset", collection.output,
                       "Training dataset: written by the collection, read by the training")
            ->capture_default_str();
        cmd.add_option("--validation-dataset", validation_dataset,
                       "Validation dataset: written by the validation collection, read by the validation")
            ->capture_default_str();
        cmd.add_option("--validation-shapes", validation_shapes,
                       "Problems in the validation dataset (drawn with --seed + 1)")
            ->capture_default_str();
        cmd.add_option("--validation-report", validation_report, "Also write the validation metrics as JSON here");
        add_training_options(cmd, training, /*with_model_path=*/true);
        cmd.add_flag("--skip-collection", skip_collection, "Use the existing --dataset instead of collecting");
        cmd.add_flag("--skip-validation", skip_validation,
                     "Neither collect the validation dataset nor validate the model");
        cmd.add_flag("--skip-training", skip_training, "Collect only (and validate an existing model at --output)");
    }
};

/// The dataset a collection to `output` wrote: the file itself, or its chunks
/// OUTPUT_1, OUTPUT_2, ... A directory is read whole.
core::Dataset load_collected(const std::string& output, const GlobalOptions& global) {
    if (fs::is_directory(output)) return core::load_dataset_dir(output, {"json", "msgpack"});
    const auto path = collect::resolve_output_path(output, global.format);
    if (fs::exists(path)) return core::load_dataset(path);
    const auto chunks = collect::existing_chunks(path);
    if (chunks.empty()) {
        throw core::InputError(path.string(), "no such dataset (nor chunks " +
                                                  collect::chunk_path(path, 1).filename().string() +
                                                  ", ...); collect it first (drop --skip-collection)");
    }
    core::Dataset dataset;
    for (const auto& chunk : chunks) dataset.merge(core::load_dataset(chunk));
    return dataset;
}

void step(int number, const std::string& what) {
    std::cout << "\n== " << number << "/4 " << what << "\n" << std::flush;
}

int run_collect_and_train(const CollectAndTrainOptions& o, const GlobalOptions& global) {
    if (o.validation_shapes < 1) throw core::InputError("--validation-shapes", "must be at least 1");
    // Everything the later steps need is checked before the first measurement.
    if (!o.skip_training) {
        auto train_options = to_train_options(o.training, global);
        model::validate_train_options(train_options);
        model::check_training_device(train_options.device);
        check_training_outputs(o.training);
    }
    const auto& dataset = o.collection.output;

    if (o.skip_collection) {
        step(1, "collect: skipped, using " + dataset);
    } else {
        step(1, "collect: " + std::to_string(o.collection.num_shapes) + " problems -> " + dataset);
        run_collect_command(o.collection, global);
    }

    if (o.skip_validation) {
        step(2, "create-validation: skipped");
    } else {
        step(2, "create-validation: " + std::to_string(o.validation_shapes) + " problems (seed " +
                    std::to_string(global.seed + 1) + ") -> " + o.validation_dataset);
        CollectCliOptions validation = o.collection;
        validation.output = o.validation_dataset;
        validation.num_shapes = o.validation_shapes;
        validation.seed_offset = 1;
        run_collect_command(validation, global);
    }

    if (o.skip_training) {
        step(3, "train: skipped");
    } else {
        step(3, "train: " + dataset + " -> " + o.training.model);
        run_training(o.training, load_collected(dataset, global), dataset, global);
    }

    if (o.skip_validation) {
        step(4, "validate-model: skipped");
    } else if (!fs::exists(o.training.model)) {
        step(4, "validate-model: skipped, no model at " + o.training.model);
    } else {
        step(4, "validate-model: " + o.training.model + " on " + o.validation_dataset);
        ModelValidationRequest request;
        request.model = o.training.model;
        request.dataset = o.validation_dataset;
        request.hardware_name = o.training.hardware_name;
        request.op_name = o.training.op_name;
        request.top_n_worst = o.training.top_n_worst;
        request.output_json = o.validation_report;
        run_model_validation(request, load_collected(o.validation_dataset, global), global);
    }
    return core::kExitOk;
}

}  // namespace

void register_collect_and_train(CLI::App& app, const GlobalOptions& global) {
    auto options = std::make_shared<CollectAndTrainOptions>();
    auto* cmd = app.add_subcommand(
        "collect-and-train",
        "Collect a training dataset, collect a validation dataset (seed + 1), train a model and "
        "validate it, in one run (--skip-collection, --skip-validation, --skip-training)");
    options->add_to(*cmd);
    cmd->callback([options, &global] {
        // --no-aten: no ATen entry timed, so none to train on.
        if (options->collection.no_reference) options->training.no_vendor_rows = true;
        exit_code() = run_collect_and_train(*options, global);
    });
}

}  // namespace mmt::cli
