#pragma once
// Private: the LibTorch networks. Parameter names match torch-diode's
// MatmulTimingModel ("model.<i>.weight") and DeepMatmulTimingModel ("input_layer.0.weight",
// "hidden_layers.<i>.block.<j>.weight", "output_layer.weight"), so a state dict moves
// between the two tools where the architecture matches.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include "dense_net.hpp"
#include "folding.hpp"
#include "matmul_toolkit/model/model_spec.hpp"

namespace mmt::model {

/// torch::nn::Dropout's computation (a Bernoulli mask scaled by 1 / (1 - rate), in training
/// only), drawn from a generator of its own once one is set: networks trained side by side
/// on the CPU then draw their masks independently instead of from LibTorch's one global
/// generator, and each draws what it would alone.
class StreamDropoutImpl : public torch::nn::Module {
public:
    explicit StreamDropoutImpl(double rate) : m_rate(rate) {}
    torch::Tensor forward(const torch::Tensor& x);
    void set_generator(std::optional<at::Generator> generator) { m_generator = std::move(generator); }

private:
    double m_rate;
    std::optional<at::Generator> m_generator;
};
TORCH_MODULE(StreamDropout);

/// Linear -> ReLU -> BatchNorm -> Dropout -> Linear -> BatchNorm, plus the input, then ReLU.
class ResidualBlockImpl : public torch::nn::Module {
public:
    ResidualBlockImpl(int width, double dropout_rate);
    torch::Tensor forward(const torch::Tensor& x);

private:
    friend class RuntimeNetImpl;
    torch::nn::Sequential m_block;
};
TORCH_MODULE(ResidualBlock);

/// The folded network (folding.hpp) as LibTorch tensors on a device: large batches and GPUs
/// run it; predictions equal DenseNet's on the same arrays up to float rounding.
class FoldedNet {
public:
    FoldedNet() = default;
    FoldedNet(const FoldedNetwork& folded, c10::Device device);

    /// ln(time ms) for standardised rows (rows × features, float32, on the net's device).
    at::Tensor forward(const at::Tensor& x) const;

private:
    struct Dense {
        at::Tensor weight_t;  ///< in × out, contiguous, so a row batch multiplies it directly
        at::Tensor bias;
        bool relu = true;
    };
    std::vector<Dense> m_chain;      ///< base: every layer; deep: the input layer only
    at::Tensor m_input_scale;        ///< deep: the input layer's BatchNorm, kept explicit
    at::Tensor m_input_shift;        ///< because the first residual connection reads it
    std::vector<std::pair<Dense, Dense>> m_blocks;  ///< deep: (first, second) Linear per block
    Dense m_output;                  ///< deep only (base ends its chain with it)
    bool m_deep = false;
};

/// The runtime model: features (standardised) -> ln(time ms).
class RuntimeNetImpl : public torch::nn::Module {
public:
    RuntimeNetImpl(const ModelSpec& spec, int input_dim);
    torch::Tensor forward(const torch::Tensor& x);

    /// Xavier-uniform Linear weights, zero biases, unit BatchNorm scales (torch-diode's
    /// init, which keeps the first steps finite); the output bias starts at `output_bias`
    /// (the mean training target) so training does not begin far from the data.
    void initialise(double output_bias);

    /// Training mode. Without `batch_statistics` every BatchNorm stays in eval mode: a
    /// per-unit scale and shift trained like any weight, its running statistics left alone.
    void train_mode(bool batch_statistics);

    /// Dropout masks drawn from `generator` (CPU networks; nullopt: the global generator).
    void set_dropout_generator(const std::optional<at::Generator>& generator);

    /// The eval-mode computation with BatchNorm folded away (fold_network of state_values()).
    FoldedNetwork fold() const;

    /// Parameters and buffers by their state-dict names.
    std::vector<std::pair<std::string, torch::Tensor>> state_dict() const;
    /// The same as CPU values (what fold_network and the checkpoint reader work with).
    StateDict state_values() const;

    const ModelSpec& spec() const { return m_spec; }

    /// The last Linear layer.
    torch::nn::Linear& output_layer() { return m_output; }

    /// One base network whose eval-mode output is the mean of the members' (same spec,
    /// same input): hidden layers side by side (widths × members, block-diagonal weights),
    /// the output layer averaging them. Predictor, checkpoints and DenseNet take it as any
    /// base network. Throws core::Error for deep members or differing specs.
    static std::shared_ptr<RuntimeNetImpl> average_of(const std::vector<std::shared_ptr<RuntimeNetImpl>>& members);

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
