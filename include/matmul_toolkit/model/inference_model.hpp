#pragma once
/// A trained runtime model for inference only: a checkpoint read without LibTorch into the
/// folded network as float arrays, predicting on the calling thread. What `recommend`,
/// `export-lut` and libmmt_rank.so rank with; a Predictor (training, LibTorch) predicts
/// through one of these too. Immutable once loaded, so one model serves many threads.

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

class InferenceModel {
public:
    /// The model's arrays (src/model/inference/inference_model_impl.hpp: private to the model libraries).
    struct Impl;

    InferenceModel();
    explicit InferenceModel(std::shared_ptr<const Impl> impl);

    /// Reads a checkpoint written by Predictor::save (or by torch.save of the same dict).
    /// Throws core::InputError naming the file when it is missing, not a matmul_toolkit
    /// checkpoint, or was trained with other features.
    static InferenceModel load(const std::filesystem::path& path);
    /// The same from the file's bytes; `where` names the file in errors.
    static InferenceModel from_bytes(std::string bytes, const std::string& where);

    const ModelInfo& info() const;

    /// Predicted natural log of the time in ms, one per config of one problem (problem
    /// features computed once). `parallel_units` 0: the model's own hardware.
    std::vector<double> predict_log_ms(const std::string& op_key, const core::MMShape& shape,
                                       const std::vector<core::GemmConfig>& configs,
                                       int parallel_units = 0) const;
    /// Predicted times in ms for one problem.
    std::vector<double> predict_ms(const std::string& op_key, const core::MMShape& shape,
                                   const std::vector<core::GemmConfig>& configs, int parallel_units = 0) const;
    /// Predicted log(ms) for rows of mixed problems.
    std::vector<double> predict_log_ms(const std::vector<PredictionQuery>& queries) const;
    /// Indices of `configs` ordered by predicted time, fastest first (ties keep order).
    std::vector<std::size_t> rank(const std::string& op_key, const core::MMShape& shape,
                                  const std::vector<core::GemmConfig>& configs, int parallel_units = 0) const;

    /// The standardised feature rows of one problem's configs (configs × num_features()),
    /// what the network takes; into `rows`, resized.
    void standardised_rows(const std::string& op_key, const core::MMShape& shape,
                           const std::vector<core::GemmConfig>& configs, int parallel_units,
                           std::vector<float>& rows) const;
    /// The same for rows of mixed problems.
    void standardised_rows(const std::vector<PredictionQuery>& queries, std::vector<float>& rows) const;
    /// ln(ms) of `count` standardised rows through the network, on the calling thread.
    std::vector<double> forward(const float* rows, std::size_t count) const;

    /// The arrays (the ranker's and the Predictor's; the type is private to the model library).
    const Impl& impl() const;

private:
    std::shared_ptr<const Impl> m_impl;
};

}  // namespace mmt::model
