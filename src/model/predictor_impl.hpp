#pragma once
// Private: what a Predictor holds. The trainer builds one directly from the network it
// trained; Predictor::load builds one from a checkpoint.

#include <cstddef>
#include <vector>

#include <c10/core/Device.h>

#include "matmul_toolkit/model/inference_model.hpp"
#include "matmul_toolkit/model/predictor.hpp"
#include "networks.hpp"

namespace mmt::model {

struct Predictor::Impl {
    /// Folds `net` (eval mode, on `device`) into `inference` and `folded`.
    Impl(ModelInfo info, RuntimeNet net, c10::Device device);

    ModelInfo info;  ///< what save() writes
    mutable RuntimeNet net;
    /// The folded network as CPU float arrays: every CPU prediction of up to kDenseRows rows.
    InferenceModel inference;
    FoldedNet folded;  ///< the same folded arrays through LibTorch: larger batches, GPUs
    c10::Device device;
    std::size_t batch_size = 1 << 16;
    /// Up to this many rows, CPU predictions run DenseNet on the calling thread; larger
    /// batches go through LibTorch, which may spread them over threads.
    static constexpr std::size_t kDenseRows = 16384;

    /// ln(ms) for standardised rows.
    std::vector<double> forward(const float* standardised, std::size_t rows) const;
};

}  // namespace mmt::model
