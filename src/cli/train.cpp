// `train --dataset F | --data-dir D`: fit a runtime model on a dataset, save it and its logs.

#include <memory>
#include <string>
#include <vector>

#include "command.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "train_options.hpp"

namespace mmt::cli {
namespace {

struct TrainCommandOptions {
    std::string dataset;
    std::string data_dir;
    std::vector<std::string> file_extensions{"json", "msgpack"};
    TrainCliOptions training;

    void add_to(CLI::App& cmd) {
        auto* file = cmd.add_option("--dataset", dataset, "Dataset file (.json / .msgpack) to train on");
        auto* dir = cmd.add_option("--data-dir", data_dir, "Directory of dataset files to train on (merged)");
        file->excludes(dir);
        cmd.add_option("--file-extensions", file_extensions, "Extensions of the files read from --data-dir")
            ->capture_default_str();
        add_training_options(cmd, training, /*with_model_path=*/true);
    }
};

int run_train(const TrainCommandOptions& o, const GlobalOptions& global) {
    if (o.dataset.empty() && o.data_dir.empty()) {
        throw core::InputError("--dataset", "give a dataset: --dataset FILE or --data-dir DIR");
    }
    const std::string source = o.dataset.empty() ? o.data_dir : o.dataset;
    const auto dataset = o.dataset.empty() ? core::load_dataset_dir(o.data_dir, o.file_extensions)
                                           : core::load_dataset_any(o.dataset, o.file_extensions);
    return run_training(o.training, dataset, source, global);
}

}  // namespace

void register_train(CLI::App& app, const GlobalOptions& global) {
    auto options = std::make_shared<TrainCommandOptions>();
    auto* cmd = app.add_subcommand(
        "train",
        "Train a model that predicts ln(kernel time) from (problem, config): split by problem, "
        "Adam with early stopping; writes the model (.pt) and logs (history CSV, loss SVG, test metrics)");
    options->add_to(*cmd);
    cmd->callback([options, &global] { exit_code() = run_train(*options, global); });
}

}  // namespace mmt::cli
