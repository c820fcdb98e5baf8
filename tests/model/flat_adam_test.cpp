// FlatAdam: the same steps as LibTorch's Adam (the reference it replaces) on a small
// network, gradients accumulated into its flat buffer, and the training thread rule.

#include "flat_adam.hpp"

#include "matmul_toolkit/core/error.hpp"

#include <thread>

#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/activation.h>
#include <torch/optim/adam.h>

namespace mmt::model {
namespace {

torch::nn::Sequential small_net() {
    return torch::nn::Sequential(torch::nn::Linear(5, 8), torch::nn::ReLU(), torch::nn::Linear(8, 1));
}

/// A second network with the first one's weights.
torch::nn::Sequential copy_of(const torch::nn::Sequential& net) {
    auto copy = small_net();
    torch::NoGradGuard no_grad;
    auto from = net->parameters(), to = copy->parameters();
    for (std::size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
    return copy;
}

/// One step of MSE training (FlatAdam and LibTorch's Adam alike).
template <class Optimizer>
void train_step(torch::nn::Sequential& net, Optimizer& optimizer, const at::Tensor& x, const at::Tensor& y) {
    optimizer.zero_grad();
    torch::mse_loss(net->forward(x), y).backward();
    optimizer.step();
}

TEST(FlatAdam, StepsLikeLibTorchsAdam) {
    torch::manual_seed(3);
    auto ours = small_net();
    auto reference = copy_of(ours);
    std::vector<at::Tensor> initial;
    for (const auto& p : ours->parameters()) initial.push_back(p.detach().clone());
    const double lr = 1e-2, weight_decay = 1e-3;
    FlatAdam flat(ours->parameters(), lr, weight_decay);
    torch::optim::Adam adam(reference->parameters(), torch::optim::AdamOptions(lr).weight_decay(weight_decay));
    const auto x = torch::randn({16, 5});
    const auto y = torch::randn({16, 1});
    for (int step = 0; step < 5; ++step) {
        train_step(ours, flat, x, y);
        train_step(reference, adam, x, y);
    }
    const auto a = ours->parameters(), b = reference->parameters();
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-5, 1e-6)) << "parameter " << i;
        EXPECT_FALSE(torch::allclose(a[i], initial[i])) << "parameter " << i << " did not move";
    }
}

TEST(FlatAdam, StepCountOnTheDeviceGivesTheSameSteps) {
    // The CUDA-graph path keeps the step count in a tensor; switched on after two host
    // steps, it must continue the same sequence (checked here on CPU tensors).
    torch::manual_seed(5);
    auto host = small_net();
    auto device = copy_of(host);
    FlatAdam on_host(host->parameters(), 1e-2, 1e-3);
    FlatAdam on_device(device->parameters(), 1e-2, 1e-3);
    const auto x = torch::randn({16, 5});
    const auto y = torch::randn({16, 1});
    for (int step = 0; step < 6; ++step) {
        if (step == 2) on_device.keep_step_on_device();
        train_step(host, on_host, x, y);
        train_step(device, on_device, x, y);
    }
    const auto a = host->parameters(), b = device->parameters();
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-5, 1e-7)) << "parameter " << i;
}

TEST(FlatAdam, ANewLearningRateStepsLikeLibTorchsAdamAtThatRate) {
    // A decayed rate (train --lr-decay-after) on the host step count and on the device one.
    torch::manual_seed(7);
    auto on_host = small_net();
    auto on_device = copy_of(on_host);
    auto reference = copy_of(on_host);
    FlatAdam host_adam(on_host->parameters(), 1e-2, 1e-3);
    FlatAdam device_adam(on_device->parameters(), 1e-2, 1e-3);
    device_adam.keep_step_on_device();
    torch::optim::Adam adam(reference->parameters(), torch::optim::AdamOptions(1e-2).weight_decay(1e-3));
    const auto x = torch::randn({16, 5});
    const auto y = torch::randn({16, 1});
    for (int step = 0; step < 6; ++step) {
        if (step == 3) {
            host_adam.set_learning_rate(2.5e-3);
            device_adam.set_learning_rate(2.5e-3);
            static_cast<torch::optim::AdamOptions&>(adam.param_groups()[0].options()).lr(2.5e-3);
        }
        train_step(on_host, host_adam, x, y);
        train_step(on_device, device_adam, x, y);
        train_step(reference, adam, x, y);
    }
    EXPECT_DOUBLE_EQ(host_adam.learning_rate(), 2.5e-3);
    const auto a = on_host->parameters(), b = on_device->parameters(), c = reference->parameters();
    for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_TRUE(torch::allclose(a[i], c[i], 1e-5, 1e-6)) << "parameter " << i;
        EXPECT_TRUE(torch::allclose(b[i], c[i], 1e-5, 1e-6)) << "parameter " << i;
    }
}

// The weight average follows average = d · average + (1 − d) · weights after every step,
// on the host and the device step count alike, and a swap exchanges the two in place.
TEST(FlatAdam, WeightAverageFollowsEveryStepAndSwapsInPlace) {
    for (const bool on_device : {false, true}) {
        torch::manual_seed(9);
        auto net = small_net();
        FlatAdam optimizer(net->parameters(), 1e-2, 0.0);
        if (on_device) optimizer.keep_step_on_device();
        EXPECT_FALSE(optimizer.has_weight_average());
        optimizer.keep_weight_average(0.9);
        ASSERT_TRUE(optimizer.has_weight_average());
        std::vector<at::Tensor> expected;
        for (const auto& p : net->parameters()) expected.push_back(p.detach().clone());
        const auto x = torch::randn({16, 5});
        const auto y = torch::randn({16, 1});
        for (int step = 0; step < 5; ++step) {
            train_step(net, optimizer, x, y);
            const auto now = net->parameters();
            for (std::size_t i = 0; i < now.size(); ++i) expected[i] = 0.9 * expected[i] + 0.1 * now[i].detach();
        }
        std::vector<at::Tensor> weights, storage;
        for (const auto& p : net->parameters()) weights.push_back(p.detach().clone()), storage.push_back(p);
        optimizer.swap_weight_average();
        const auto swapped = net->parameters();
        for (std::size_t i = 0; i < swapped.size(); ++i) {
            EXPECT_EQ(swapped[i].data_ptr(), storage[i].data_ptr()) << "parameter " << i << " moved";
            EXPECT_TRUE(torch::allclose(swapped[i], expected[i], 1e-5, 1e-7)) << "parameter " << i;
            EXPECT_FALSE(torch::allclose(swapped[i], weights[i], 1e-5, 1e-7)) << "parameter " << i;
        }
        optimizer.swap_weight_average();
        const auto back = net->parameters();
        for (std::size_t i = 0; i < back.size(); ++i) EXPECT_TRUE(torch::equal(back[i], weights[i])) << "parameter " << i;
    }
    auto net = small_net();
    FlatAdam optimizer(net->parameters(), 1e-2, 0.0);
    EXPECT_THROW(optimizer.keep_weight_average(1.0), core::Error);
    EXPECT_THROW(optimizer.swap_weight_average(), core::Error);
}

TEST(FlatAdam, GradientsAreViewsOfOneBufferAndZeroTogether) {
    auto net = small_net();
    FlatAdam flat(net->parameters(), 1e-3, 0.0);
    torch::mse_loss(net->forward(torch::ones({4, 5})), torch::zeros({4, 1})).backward();
    double total = 0;
    for (const auto& p : net->parameters()) total += p.grad().abs().sum().item<double>();
    EXPECT_GT(total, 0.0);
    flat.zero_grad();
    for (const auto& p : net->parameters()) {
        ASSERT_TRUE(p.grad().defined());
        EXPECT_EQ(p.grad().abs().sum().item<double>(), 0.0);
    }
}

TEST(TrainingThreads, OnePer512RowsAtMostTheHardwares) {
    const long hardware = std::max(1u, std::thread::hardware_concurrency());
    EXPECT_EQ(training_threads(64), 1);
    EXPECT_EQ(training_threads(511), 1);
    EXPECT_EQ(training_threads(1024), std::min(2L, hardware));
    EXPECT_EQ(training_threads(1L << 20), hardware);
}

}  // namespace
}  // namespace mmt::model
