// TrainingStepGraph against the same steps launched one by one, on a GPU: after warm-up,
// capture and replays the network (parameters and BatchNorm statistics) must be where the
// eager steps put it, with and without the ranking term, and dropout must draw new masks on
// every replay.

#include "training_step_graph.hpp"

#include <gtest/gtest.h>
#include <torch/cuda.h>

namespace mmt::model {
namespace {

constexpr int kInputs = 10;
constexpr std::int64_t kRows = 200;
constexpr std::int64_t kBatch = 64;

ModelSpec deep_spec(double dropout_rate) {
    ModelSpec spec;
    spec.type = ModelType::deep;
    spec.hidden_dim = 32;
    spec.num_layers = 3;
    spec.dropout_rate = dropout_rate;
    return spec;
}

/// A deep network on the GPU in training mode, the same weights for the same dropout rate.
RuntimeNet training_net(double dropout_rate, bool batch_statistics = true) {
    torch::manual_seed(4);
    RuntimeNet net(deep_spec(dropout_rate), kInputs);
    net->initialise(0.5);
    net->to(torch::kCUDA);
    net->train_mode(batch_statistics);
    return net;
}

/// The training rows (features, targets) on the GPU.
std::pair<at::Tensor, at::Tensor> training_rows() {
    return {torch::randn({kRows, kInputs}).cuda(), torch::randn({kRows, 1}).cuda()};
}

/// A second network with the first one's parameters and buffers.
RuntimeNet copy_of(const RuntimeNet& net, bool batch_statistics = true) {
    RuntimeNet copy(net->spec(), kInputs);
    copy->to(torch::kCUDA);
    copy->train_mode(batch_statistics);
    torch::NoGradGuard no_grad;
    const auto from = net->state_dict(), to = copy->state_dict();
    for (std::size_t i = 0; i < from.size(); ++i) to[i].second.copy_(from[i].second);
    return copy;
}

/// The rows of each step: the same draws for both paths.
std::vector<at::Tensor> batch_indices(int steps) {
    torch::manual_seed(9);
    std::vector<at::Tensor> indices;
    for (int s = 0; s < steps; ++s) indices.push_back(torch::randperm(kRows, torch::kLong).slice(0, 0, kBatch).cuda());
    return indices;
}

/// Each row's problem within a batch of kBatch rows: runs of 1 to 12 rows, as the trainer
/// numbers them (0, 0, 0, 1, 1, ...), different for every step.
std::vector<at::Tensor> batch_groups(int steps) {
    torch::manual_seed(11);
    std::vector<at::Tensor> groups;
    for (int s = 0; s < steps; ++s) {
        const auto runs = torch::randint(1, 13, {kBatch}, torch::kLong);
        std::vector<std::int64_t> group;
        for (std::int64_t g = 0; static_cast<std::int64_t>(group.size()) < kBatch; ++g)
            group.insert(group.end(), static_cast<std::size_t>(runs[g].item<std::int64_t>()), g);
        group.resize(kBatch);
        groups.push_back(torch::tensor(group, torch::kLong).cuda());
    }
    return groups;
}

void expect_replays_match_eager_steps(const RankingTerm& ranking, bool batch_statistics = true) {
    RuntimeNet graphed_net = training_net(0.0, batch_statistics);
    RuntimeNet eager_net = copy_of(graphed_net, batch_statistics);
    const auto [x, y] = training_rows();

    FlatAdam graphed_adam(graphed_net->parameters(), 3e-3, 1e-4);
    FlatAdam eager_adam(eager_net->parameters(), 3e-3, 1e-4);
    eager_adam.keep_step_on_device();  // the same bias-correction arithmetic on both sides
    graphed_adam.keep_weight_average(0.9);  // train --weight-average: captured with the step
    eager_adam.keep_weight_average(0.9);
    TrainingStepGraph graph(graphed_net, graphed_adam, x, y, kBatch, ranking);

    const int steps = 8;  // 3 warm-up, the capture, 4 replays
    const auto indices = batch_indices(steps);
    const auto groups = batch_groups(steps);
    at::Tensor eager_loss_sum = torch::zeros({}, x.options());
    for (int s = 0; s < steps; ++s) {
        if (s == 6) {  // a decayed rate (train --lr-decay-after) reaches the replayed graph
            graphed_adam.set_learning_rate(1.5e-3);
            eager_adam.set_learning_rate(1.5e-3);
        }
        graph.step(indices[s], groups[s]);
        eager_loss_sum +=
            training_step(eager_net, eager_adam, x, y, indices[s], groups[s], ranking) * static_cast<double>(kBatch);
    }
    EXPECT_NEAR(graph.loss_sum().item<double>(), eager_loss_sum.item<double>(), 1e-4 * eager_loss_sum.item<double>());
    // The weights, then their averages.
    for (int pass = 0; pass < 2; ++pass) {
        if (pass == 1) {
            graphed_adam.swap_weight_average();
            eager_adam.swap_weight_average();
        }
        const auto a = graphed_net->state_dict(), b = eager_net->state_dict();
        ASSERT_EQ(a.size(), b.size());
        for (std::size_t i = 0; i < a.size(); ++i) {
            if (a[i].second.is_floating_point()) {
                EXPECT_TRUE(torch::allclose(a[i].second, b[i].second, 1e-4, 1e-5))
                    << a[i].first << (pass ? " (average)" : "") << ": largest difference "
                    << (a[i].second - b[i].second).abs().max().item<double>();
            } else {
                EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;  // num_batches_tracked
            }
        }
    }
}

TEST(TrainingStepGraph, ReplaysStepToWhereEagerStepsGo) {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    expect_replays_match_eager_steps({});
}

TEST(TrainingStepGraph, ReplaysRankingStepToWhereEagerStepsGo) {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    expect_replays_match_eager_steps({3.0, RankingLoss::offset});
    expect_replays_match_eager_steps({3.0, RankingLoss::pairwise});
}

// BatchNorm as a plain scale and shift (--batch-norm affine, the default): the captured
// step trains as the eager one too.
TEST(TrainingStepGraph, ReplaysAffineBatchNormStepToWhereEagerStepsGo) {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    expect_replays_match_eager_steps({3.0, RankingLoss::pairwise}, /*batch_statistics=*/false);
}

TEST(TrainingStepGraph, DropoutDrawsNewMasksOnEveryReplay) {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    RuntimeNet net = training_net(0.5);
    const auto [x, y] = training_rows();
    // A learning rate of 0 keeps the weights, and train-mode BatchNorm normalises by the
    // batch, so the same rows give the same loss unless the dropout masks change.
    FlatAdam adam(net->parameters(), 0.0, 0.0);
    TrainingStepGraph graph(net, adam, x, y, kBatch);
    const auto index = batch_indices(1).front();
    std::vector<double> losses;
    for (int s = 0; s < 7; ++s) {
        graph.reset_loss_sum();
        graph.step(index);
        losses.push_back(graph.loss_sum().item<double>());
    }
    for (std::size_t s = 4; s < losses.size(); ++s) EXPECT_NE(losses[s], losses[s - 1]) << "replay " << s;
}

}  // namespace
}  // namespace mmt::model
