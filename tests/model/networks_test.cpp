#include "networks.hpp"
#include "trained_looking_net.hpp"

#include <gtest/gtest.h>
#include <torch/types.h>

namespace mmt::model {
namespace {

std::vector<std::string> names_of(RuntimeNet& net) {
    std::vector<std::string> names;
    for (const auto& [name, tensor] : net->state_dict()) names.push_back(name);
    return names;
}

// torch-diode's MatmulTimingModel: nn.Sequential named "model" of Linear, ReLU,
// BatchNorm1d, Dropout per hidden size, then the output Linear; Python's state_dict lists
// each module's parameters, then its buffers.
TEST(Networks, BaseModelUsesTorchDiodeStateDictNames) {
    ModelSpec spec;
    spec.type = ModelType::base;
    spec.hidden_dims = {8, 4};
    RuntimeNet net(spec, 5);
    const std::vector<std::string> expected{
        "model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias", "model.2.running_mean",
        "model.2.running_var", "model.2.num_batches_tracked", "model.4.weight", "model.4.bias",
        "model.6.weight", "model.6.bias", "model.6.running_mean", "model.6.running_var",
        "model.6.num_batches_tracked", "model.8.weight", "model.8.bias"};
    EXPECT_EQ(names_of(net), expected);
    const auto state = net->state_dict();
    EXPECT_EQ(state[0].second.sizes(), (std::vector<int64_t>{8, 5}));
    EXPECT_EQ(state.back().second.sizes(), (std::vector<int64_t>{1}));
}

// torch-diode's DeepMatmulTimingModel: input_layer (Sequential), hidden_layers
// (ModuleList of ResidualBlock with a "block" Sequential: Linear, ReLU, BatchNorm1d,
// Dropout, Linear, BatchNorm1d), output_layer.
TEST(Networks, DeepModelUsesTorchDiodeStateDictNames) {
    ModelSpec spec;
    spec.type = ModelType::deep;
    spec.hidden_dim = 6;
    spec.num_layers = 2;
    RuntimeNet net(spec, 5);
    const auto names = names_of(net);
    const std::vector<std::string> head{"input_layer.0.weight", "input_layer.0.bias", "input_layer.2.weight",
                                        "input_layer.2.bias", "input_layer.2.running_mean",
                                        "input_layer.2.running_var", "input_layer.2.num_batches_tracked",
                                        "hidden_layers.0.block.0.weight", "hidden_layers.0.block.0.bias",
                                        "hidden_layers.0.block.2.weight"};
    ASSERT_GE(names.size(), head.size());
    EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + head.size()), head);
    EXPECT_NE(std::find(names.begin(), names.end(), "hidden_layers.1.block.4.weight"), names.end());
    EXPECT_NE(std::find(names.begin(), names.end(), "hidden_layers.1.block.5.running_var"), names.end());
    EXPECT_EQ(names[names.size() - 2], "output_layer.weight");
    EXPECT_EQ(names.back(), "output_layer.bias");
    // 7 input-layer entries, 2 blocks × (2 + 5 + 2 + 5), 2 output entries.
    EXPECT_EQ(names.size(), 7u + 2u * 14u + 2u);
}

TEST(Networks, InitialisedNetworksGiveFiniteOutputsNearTheTargetMean) {
    for (auto type : {ModelType::base, ModelType::deep}) {
        ModelSpec spec;
        spec.type = type;
        torch::manual_seed(1);
        RuntimeNet net(spec, 32);
        net->initialise(-2.5);
        net->eval();
        torch::NoGradGuard no_grad;
        const auto out = net->forward(torch::zeros({4, 32}));
        EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
        EXPECT_EQ(out.size(0), 4);
        EXPECT_EQ(out.size(1), 1);
        // Zero inputs through zero biases and ReLUs reach only the output bias.
        EXPECT_NEAR(out[0][0].item<float>(), -2.5f, 1e-5f) << to_string(type);
    }
}

// Folding BatchNorm into the Linears must not change what the network computes. Trained-
// looking statistics (not the identity a fresh BatchNorm has) make the check meaningful.
TEST(Networks, FoldedNetworkMatchesTheModuleInEvalMode) {
    for (auto type : {ModelType::base, ModelType::deep}) {
        RuntimeNet net = test::trained_looking_net(type, {24, 16, 8}, 12, 10, 5, 0.3);
        torch::NoGradGuard no_grad;
        const auto x = torch::randn({50, 10});
        const auto expected = net->forward(x);
        const auto folded = FoldedNet(net->fold(), c10::Device(c10::kCPU)).forward(x);
        EXPECT_TRUE(torch::allclose(folded, expected, 1e-4, 1e-5))
            << to_string(type) << " max diff " << (folded - expected).abs().max().item<float>();
    }
}

// Training without batch statistics: each row's output is the eval-mode function of that
// row alone, whatever else is in the batch, and the running statistics stay untouched.
// With batch statistics the same rows come out differently (the check can fail). No dropout,
// whose masks would differ too.
TEST(Networks, TrainModeWithoutBatchStatisticsComputesTheEvalFunction) {
    for (auto type : {ModelType::base, ModelType::deep}) {
        RuntimeNet net = test::trained_looking_net(type, {24, 16}, 12, 10, 7, 0.3, /*dropout_rate=*/0.0);
        torch::NoGradGuard no_grad;
        // Rows of one "problem": near-identical, as a ranking batch's are.
        const auto x = torch::randn({1, 10}).repeat({16, 1}) + 0.05 * torch::randn({16, 10});
        const auto expected = net->forward(x);
        std::vector<at::Tensor> buffers_before;
        for (const auto& buffer : net->buffers()) buffers_before.push_back(buffer.clone());

        net->train_mode(/*batch_statistics=*/false);
        EXPECT_TRUE(net->is_training());
        const auto whole = net->forward(x);
        const auto first_half = net->forward(x.slice(0, 0, 8));
        EXPECT_TRUE(torch::allclose(whole, expected, 1e-5, 1e-6)) << to_string(type);
        EXPECT_TRUE(torch::allclose(first_half, expected.slice(0, 0, 8), 1e-5, 1e-6)) << to_string(type);
        const auto buffers_after = net->buffers();
        for (std::size_t i = 0; i < buffers_before.size(); ++i)
            EXPECT_TRUE(torch::equal(buffers_after[i], buffers_before[i])) << to_string(type) << " buffer " << i;

        net->train_mode(/*batch_statistics=*/true);
        const auto normalised = net->forward(x);
        EXPECT_FALSE(torch::allclose(normalised, expected, 1e-2, 1e-3)) << to_string(type);
    }
}

}  // namespace
}  // namespace mmt::model
