#pragma once
/// A trained runtime model: load a checkpoint once, then predict batches of
/// (problem, config) pairs. LibTorch stays behind the pimpl, so this header is cheap.

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "matmul_toolkit/core/types.hpp"
#include "matmul_toolkit/model/model_spec.hpp"

namespace mmt::model {

/// What a checkpoint records besides the weights.
struct ModelInfo {
    ModelSpec spec;
    std::vector<std::string> feature_names;
    std::vector<float> feature_mean;  ///< training-split statistics used to standardise inputs
    std::vector<float> feature_std;
    std::string hardware_name;        ///< the training data's hardware (names joined by ", ")
    int parallel_units = 1;           ///< SMs / cores used for the wave features
    std::string toolkit_version;
    // Training summary (zero / empty for an untrained model).
    double learning_rate = 0.0;
    double weight_decay = 0.0;
    int batch_size = 0;
    int num_epochs = 0;
    int patience = 0;
    int lr_decay_after = 0;  ///< 0: the learning rate stayed constant
    double lr_decay = 0.0;
    double weight_average = 0.0;  ///< 0: the saved weights are the trained ones, not an average
    std::string seed;
    int epochs_run = 0;
    int best_epoch = 0;
    double best_validation_loss = 0.0;
    std::size_t train_problems = 0;
    std::size_t train_rows = 0;
    /// Trained with each problem's fastest vendor-library (aten_*) entry as a row
    /// (with_reference_rows): its predictions rank ATen beside the kernel configs.
    bool vendor_rows = false;
    /// Networks averaged into this one (train --ensemble); 1 for a single network.
    int ensemble = 1;
};

/// One row to predict. parallel_units 0 means the model's own hardware.
struct PredictionQuery {
    std::string op_key;
    core::MMShape shape;
    core::GemmConfig config;
    int parallel_units = 0;
};

class Predictor {
public:
    struct Impl;

    Predictor();
    explicit Predictor(std::unique_ptr<Impl> impl);
    Predictor(Predictor&&) noexcept;
    Predictor& operator=(Predictor&&) noexcept;
    ~Predictor();

    /// Reads a checkpoint written by save(). Throws core::InputError naming the file when
    /// it is missing, not a matmul_toolkit checkpoint, or was trained with other features.
    /// `device` is "cpu" or "cuda".
    static Predictor load(const std::filesystem::path& path, const std::string& device = "cpu");

    /// Writes the checkpoint (a pickle archive Python's torch.load reads), atomically.
    void save(const std::filesystem::path& path) const;

    const ModelInfo& info() const;

    /// Predicted natural log of the time in ms, one per config of one problem. This is the
    /// ranking fast path: problem features are computed once, no per-row tensors.
    std::vector<double> predict_log_ms(const std::string& op_key, const core::MMShape& shape,
                                       const std::vector<core::GemmConfig>& configs,
                                       int parallel_units = 0) const;

    /// Predicted times in ms for one problem.
    std::vector<double> predict_ms(const std::string& op_key, const core::MMShape& shape,
                                   const std::vector<core::GemmConfig>& configs,
                                   int parallel_units = 0) const;

    /// Predicted log(ms) for rows of mixed problems.
    std::vector<double> predict_log_ms(const std::vector<PredictionQuery>& queries) const;

    /// Indices of `configs` ordered by predicted time, fastest first (ties keep order).
    std::vector<std::size_t> rank(const std::string& op_key, const core::MMShape& shape,
                                  const std::vector<core::GemmConfig>& configs,
                                  int parallel_units = 0) const;

    /// Rows per forward pass when predicting large batches.
    void set_batch_size(std::size_t rows);

    /// The LibTorch side (src/model and its tests only: the type is private there).
    Impl& impl() const { return *m_impl; }

private:
    /// The model, or core::Error when none is loaded (a default-constructed Predictor).
    const Impl& loaded() const;

    std::unique_ptr<Impl> m_impl;
};

}  // namespace mmt::model
