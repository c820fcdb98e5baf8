#pragma once
// Private: the LibTorch networks. Parameter names match torch-diode's
// MatmulTimingModel ("model.<i>.weight") and DeepMatmulTimingModel ("input_layer.0.weight",
// "hidden_layers.<i>.block.<j>.weight", "output_layer.weight"), so a state dict moves
// between the two tools where the architecture matches.

#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include "matmul_toolkit/model/model_spec.hpp"

namespace mmt::model {

/// Linear -> ReLU -> BatchNorm -> Dropout -> Linear -> BatchNorm, plus the input, then ReLU.
class ResidualBlockImpl : public torch::nn::Module {
public:
    ResidualBlockImpl(int width, double dropout_rate);
    torch::Tensor forward(const torch::Tensor& x);

private:
    torch::nn::Sequential m_block;
};
TORCH_MODULE(ResidualBlock);

/// The runtime model: features (standardised) -> ln(time ms).
class RuntimeNetImpl : public torch::nn::Module {
public:
    RuntimeNetImpl(const ModelSpec& spec, int input_dim);
    torch::Tensor forward(const torch::Tensor& x);

    /// Xavier-uniform Linear weights, zero biases, unit BatchNorm scales (torch-diode's
    /// init, which keeps the first steps finite); the output bias starts at `output_bias`
    /// (the mean training target) so training does not begin far from the data.
    void initialise(double output_bias);

    /// Parameters and buffers by their state-dict names.
    std::vector<std::pair<std::string, torch::Tensor>> state_dict() const;

    /// The last Linear layer.
    torch::nn::Linear& output_layer() { return m_output; }

private:
    ModelSpec m_spec;
    torch::nn::Sequential m_base{nullptr};   // base: "model"
    torch::nn::Sequential m_input{nullptr};  // deep: "input_layer"
    torch::nn::ModuleList m_hidden{nullptr}; // deep: "hidden_layers"
    std::vector<ResidualBlock> m_blocks;
    torch::nn::Linear m_output{nullptr};     // deep: "output_layer"; base: last of "model"
};
TORCH_MODULE(RuntimeNet);

}  // namespace mmt::model
