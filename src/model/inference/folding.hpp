#pragma once
// Private: the eval-mode network with every BatchNorm folded into a neighbouring Linear and
// dropout gone, computed from a state dict without LibTorch: a chain of matrix products, bias
// adds and ReLUs, which is all inference needs. DenseNet runs it on the CPU; FoldedNet
// (networks.hpp) runs the same arrays through LibTorch on large batches and GPUs. Every
// model, loaded or just trained, folds through here, so all of them predict alike.

#include <cstddef>
#include <utility>
#include <vector>

#include "checkpoint_reader.hpp"
#include "dense_net.hpp"
#include "matmul_toolkit/model/model_spec.hpp"

namespace mmt::model {

/// y = x · weight_t + bias, then ReLU when `relu`.
struct FoldedLayer {
    std::size_t in = 0;
    std::size_t out = 0;
    std::vector<float> weight_t;  ///< in × out, row-major
    std::vector<float> bias;      ///< out
    bool relu = true;
};

/// base: `chain` is every layer. deep: `chain` is the input layer; then h · input_scale +
/// input_shift (the input layer's BatchNorm, kept explicit because the first residual
/// connection reads it), blocks h = relu(second(first(h)) + h), and `output`.
struct FoldedNetwork {
    std::vector<FoldedLayer> chain;
    bool deep = false;
    std::vector<float> input_scale;
    std::vector<float> input_shift;
    std::vector<std::pair<FoldedLayer, FoldedLayer>> blocks;
    FoldedLayer output;
};

/// Folds a network of `spec` whose parameters and buffers `state` holds (every entry of
/// expected_state_dict). BatchNorm in eval mode is y = scale ⊙ x + shift with
/// scale = weight / sqrt(running_var + 1e-5) and shift = bias - running_mean ⊙ scale; a
/// Linear W, b after it becomes W · diag(scale), W · shift + b. Float operations as
/// LibTorch's fold made them, the sums of W · shift in double (rounded once), so the result
/// does not depend on a BLAS's summation order.
FoldedNetwork fold_network(const ModelSpec& spec, const StateDict& state);

/// The folded network as DenseNet's float arrays (the first layer dense, as ConfigRanker
/// splits its weights by feature; an ensemble's block-diagonal layers block by block).
DenseNet dense_net_of(const FoldedNetwork& folded);

}  // namespace mmt::model
