#pragma once
/// A trained runtime model with its LibTorch network: what training makes and saves, and
/// what predicts on a GPU or in large batches. Predictions go through its InferenceModel
/// (the same features, the same folded network); LibTorch stays behind the pimpl, so this
/// header is cheap. Commands that only rank load an InferenceModel instead.

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "matmul_toolkit/core/types.hpp"
#include "matmul_toolkit/model/inference_model.hpp"
#include "matmul_toolkit/model/model_spec.hpp"

namespace mmt::model {

class Predictor {
public:
    struct Impl;

    Predictor();
    explicit Predictor(std::unique_ptr<Impl> impl);
    Predictor(Predictor&&) noexcept;
    Predictor& operator=(Predictor&&) noexcept;
    ~Predictor();

    /// Reads a checkpoint written by save() (through InferenceModel's reader: no byte of the
    /// file reaches LibTorch). Throws core::InputError naming the file when it is missing,
    /// not a matmul_toolkit checkpoint, or was trained with other features. `device` is
    /// "cpu" or "cuda".
    static Predictor load(const std::filesystem::path& path, const std::string& device = "cpu");

    /// Writes the checkpoint (a pickle archive Python's torch.load reads), atomically.
    void save(const std::filesystem::path& path) const;

    const ModelInfo& info() const;

    /// The folded network on the CPU, as the ranker and recommend use it (valid while this
    /// Predictor lives; a copy shares it).
    const InferenceModel& inference() const;

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
