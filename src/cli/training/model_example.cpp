// `model-example`: collect a small dataset, train the default model on it, evaluate it on
// problems it never saw and print its worst predictions; each step explained on stdout.

#include <filesystem>
#include <iostream>
#include <memory>

#include "command.hpp"
#include "examples.hpp"
#include "matmul_toolkit/collect/dataset_collector.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/evaluator.hpp"
#include "matmul_toolkit/model/trainer.hpp"
#include "train_options.hpp"

namespace mmt::cli {
namespace {

struct ModelExampleOptions {
    std::string output_dir = "model_example";
    int num_shapes = 40;
    int num_epochs = 30;

    void add_to(CLI::App& cmd) {
        cmd.add_option("--output-dir", output_dir, "Where the dataset and the model go")->capture_default_str();
        cmd.add_option("--num-shapes", num_shapes, "Problems to collect")->capture_default_str()->check(CLI::Range(10, 5000));
        cmd.add_option("--num-epochs", num_epochs, "Most training epochs")->capture_default_str()->check(CLI::Range(1, 1000));
    }
};

int run_model_example(const ModelExampleOptions& o, const GlobalOptions& global) {
    std::cout << "model-example: from timings to a model that predicts kernel runtime.\n";
    const auto backend = example_backend(global);
    const std::filesystem::path dir(o.output_dir);
    std::filesystem::create_directories(dir);

    explain(1, "Collect " + std::to_string(o.num_shapes) +
                   " log-normal problems x the DEFAULT configs (what `collect` does, kept in memory):");
    collect::DatasetCollector collector(backend->hardware_name());
    {
        collect::CollectionScope scope(collector);
        const auto summary = collect::run_collection(example_collection(o.num_shapes, 256, global.seed), *backend);
        std::cout << "   " << summary.problems_collected << " problems, " << summary.configs_timed << " configs timed\n";
    }
    collector.save_to_file(dir / "dataset.json");

    explain(2, "Train the default model (base 64,32) on ln(time): problems split into train, validation and test, "
               "Adam with early stopping (what `train` does):");
    model::TrainOptions options;
    options.num_epochs = o.num_epochs;
    options.device = training_device(global);
    options.seed = global.seed;
    const auto result = model::train_model(collector.get_dataset(), (dir / "dataset.json").string(), options);
    result.model.save(dir / "model.pt");
    std::cout << "   " << result.history.size() << " epochs, best " << result.best_epoch << "; model saved to "
              << (dir / "model.pt").string() << "\n";

    explain(3, "Evaluate it on the " + std::to_string(result.split.test.size()) +
                   " test problems it never saw: error of ln(time), ranking quality, the worst predictions "
                   "(what `validate-model` prints):");
    std::cout << model::format_report(result.test_report);
    return core::kExitOk;
}

}  // namespace

void register_model_example(CLI::App& app, const GlobalOptions& global) {
    auto options = std::make_shared<ModelExampleOptions>();
    auto* cmd = app.add_subcommand("model-example",
                                   "Example: collect a small set, train the default model, evaluate it on unseen "
                                   "problems and print its worst predictions, each step explained (CPU or GPU)");
    options->add_to(*cmd);
    cmd->callback([options, &global] { exit_code() = run_model_example(*options, global); });
}

}  // namespace mmt::cli
