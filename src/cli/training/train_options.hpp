#pragma once
/// Options shared by train and collect-and-train (defaults and help together), the one
/// function both run to train, save the model and write the logs, and the validation run
/// validate-model and collect-and-train share.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "command.hpp"
#include "matmul_toolkit/core/dataset.hpp"
#include "matmul_toolkit/model/trainer.hpp"

namespace mmt::cli {

/// The defaults are the recipe of the shipped model (data/models/inductor_h200.md);
/// `--recipe quick` swaps in a small, fast one (recipe_options).
struct TrainCliOptions {
    std::string recipe = "inductor_h200";
    std::string model = "matmul_model.pt";
    std::string model_type = "base";
    std::string hidden_dims = "96,48";
    int hidden_dim = 128;
    int num_layers = 10;
    double dropout = 0.0;
    int batch_size = 64;
    int num_epochs = 300;
    double learning_rate = 1e-3;
    double weight_decay = 1e-5;
    int patience = 30;
    int lr_decay_after = 0;
    double lr_decay = 0.5;
    double weight_average = 0.999;
    double validation_fraction = 0.15;
    double test_fraction = 0.0;
    std::string hardware_name;
    std::string op_name;
    std::string log_dir = "logs";
    int top_n_worst = 10;
    bool no_vendor_rows = false;
    int vendor_weight = 1;
    double ranking_weight = 15.0;
    std::string ranking_loss = "top";
    std::string batch_norm = "affine";
    int ensemble = 3;
    int folds = 0;
    int tune = 0;
    int eval_every = 1;
    int threads = 0;
    int jobs = 0;
    bool cuda_graph = false;
    bool no_cuda_graph = false;
};

/// The recipes --recipe names, and the options each sets: inductor_h200 (the defaults) and
/// quick. Throws core::InputError("--recipe", ...) for another name.
TrainCliOptions recipe_options(const std::string& name);

/// --recipe, --model-type, --hidden-dims, --hidden-dim, --num-layers, --dropout,
/// --batch-size, --num-epochs, --learning-rate, --weight-decay, --patience, the split
/// fractions, the filters, --log-dir, ... After parsing, the options not given take the
/// recipe's values. `with_model_path` adds --output (the model written; --model is its old
/// spelling).
void add_training_options(CLI::App& cmd, TrainCliOptions& options, bool with_model_path);

/// The library options these flags mean (device and seed from the global options).
model::TrainOptions to_train_options(const TrainCliOptions& options, const GlobalOptions& global);

/// The training device: --device when given, else cuda when LibTorch sees a GPU, else cpu.
std::string training_device(const GlobalOptions& global);

/// Checks that the model file and the log directory can be written, before any work.
void check_training_outputs(const TrainCliOptions& options);

/// Trains on `dataset` (`source` names it in messages) with a progress line per epoch
/// and Ctrl-C handling, saves the model and the logs, prints the test metrics. Throws
/// core::Interrupted after saving the best model so far when interrupted.
int run_training(const TrainCliOptions& options, const core::Dataset& dataset, const std::string& source,
                 const GlobalOptions& global);

/// What validate-model does (defined in validate_model.cpp): loads the model once,
/// evaluates it on `dataset` (read from request.dataset by the caller), prints the table
/// and writes `output_json` when not empty.
struct ModelValidationRequest {
    std::string model;
    std::string dataset;
    std::vector<std::string> file_extensions{"json", "msgpack"};
    std::string hardware_name;
    std::string op_name;
    int top_n_worst = 10;
    std::string output_json;
    int batch_size = 4096;
};
int run_model_validation(const ModelValidationRequest& request, const core::Dataset& dataset,
                         const GlobalOptions& global);

}  // namespace mmt::cli
