#pragma once
// Private: what an InferenceModel holds. ConfigRanker reads the arrays directly; a Predictor
// builds one from the network it trained or loaded.

#include <cstddef>
#include <vector>

#include "dense_net.hpp"
#include "folding.hpp"
#include "matmul_toolkit/model/inference_model.hpp"

namespace mmt::model {

struct InferenceModel::Impl {
    /// `folded`: the network of `info.spec`, folded (fold_network).
    Impl(ModelInfo info, const FoldedNetwork& folded);

    ModelInfo info;
    DenseNet dense;              ///< the folded network as CPU float arrays
    std::vector<float> inv_std;  ///< 1 / feature_std, so standardising is a multiply

    /// Standardises raw features in place (rows × num_features()).
    void standardise(float* rows, std::size_t count) const;
};

}  // namespace mmt::model
