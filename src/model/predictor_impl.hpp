#pragma once
// Private: what a Predictor holds. The trainer builds one directly from the network it
// trained; Predictor::load builds one from a checkpoint.

#include <cstddef>
#include <vector>

#include <c10/core/Device.h>

#include "matmul_toolkit/model/predictor.hpp"
#include "networks.hpp"

namespace mmt::model {

struct Predictor::Impl {
    Impl(ModelInfo info, RuntimeNet net, c10::Device device);

    ModelInfo info;
    mutable RuntimeNet net;
    FoldedNet folded;  ///< what forward() runs: the net's eval-mode computation, folded
    DenseNet dense;    ///< the folded net as CPU float arrays, for ConfigRanker
    c10::Device device;
    std::vector<float> inv_std;  ///< 1 / feature_std, so standardising is a multiply
    std::size_t batch_size = 1 << 16;
    /// Up to this many rows, CPU predictions run DenseNet on the calling thread; larger
    /// batches go through LibTorch, which may spread them over threads.
    static constexpr std::size_t kDenseRows = 16384;

    /// Standardises raw features in place (rows × num_features()).
    void standardise(float* rows, std::size_t count) const;
    /// ln(ms) for standardised rows.
    std::vector<double> forward(const float* standardised, std::size_t rows) const;
};

}  // namespace mmt::model
