// `train --dataset F [--dataset G ...] | --data-dir D`: fit a runtime model on a dataset, save it and its logs.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "command.hpp"
#include "log.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/core/meta_sidecar.hpp"
#include "train_options.hpp"

namespace mmt::cli {
namespace {

struct TrainCommandOptions {
    std::vector<std::string> datasets;
    std::string data_dir;
    std::vector<std::string> file_extensions{"json", "msgpack"};
    TrainCliOptions training;

    void add_to(CLI::App& cmd) {
        auto* file = cmd.add_option("--dataset", datasets,
                                    "Dataset file (.json / .msgpack) to train on; given several times, the files are merged");
        auto* dir = cmd.add_option("--data-dir", data_dir, "Directory of dataset files to train on (merged)");
        file->excludes(dir);
        cmd.add_option("--file-extensions", file_extensions, "Extensions of the files read from --data-dir")
            ->capture_default_str();
        add_training_options(cmd, training, /*with_model_path=*/true);
    }
};

// Every dataset file the options name, directories listed.
std::vector<std::filesystem::path> dataset_files(const TrainCommandOptions& o) {
    std::vector<std::filesystem::path> files;
    std::vector<std::string> paths = o.datasets;
    if (!o.data_dir.empty()) paths.push_back(o.data_dir);
    for (const auto& path : paths) {
        if (!std::filesystem::is_directory(path)) {
            files.emplace_back(path);
            continue;
        }
        for (auto& file : core::list_dataset_files(path, o.file_extensions)) files.push_back(std::move(file));
    }
    return files;
}

int run_train(const TrainCommandOptions& o, const GlobalOptions& global) {
    if (o.datasets.empty() && o.data_dir.empty()) {
        throw core::InputError("--dataset", "give a dataset: --dataset FILE or --data-dir DIR");
    }
    const std::string mixed = core::mixed_timing_warning(dataset_files(o));
    if (!mixed.empty()) log_warning(mixed);
    if (!o.data_dir.empty()) {
        return run_training(o.training, core::load_dataset_dir(o.data_dir, o.file_extensions), o.data_dir, global);
    }
    core::Dataset dataset = core::load_dataset_any(o.datasets.front(), o.file_extensions);
    std::string source = o.datasets.front();
    for (std::size_t i = 1; i < o.datasets.size(); ++i) {
        dataset.merge(core::load_dataset_any(o.datasets[i], o.file_extensions));
        source += " + " + o.datasets[i];
    }
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
