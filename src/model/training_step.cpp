#include "training_step.hpp"

#include <cmath>

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/loss.h>

namespace mmt::model {

at::Tensor within_problem_loss(const at::Tensor& predicted, const at::Tensor& measured, const at::Tensor& group,
                               std::int64_t groups) {
    // (p - mean p) - (y - mean y) is the error p - y less its problem's mean error.
    const at::Tensor error = predicted.view({-1}) - measured.view({-1});
    // Sums per problem as products with the rows × groups membership matrix, not index_add_:
    // on a GPU its atomic adds sum in a different order every run (and so does the backward
    // of index_select), and Adam turns that noise in near-zero gradients (biases ahead of a
    // BatchNorm) into whole steps, so graph and eager steps, or two runs, would drift apart.
    const at::Tensor member =
        (group.view({-1, 1}) == torch::arange(groups, group.options()).view({1, -1})).to(error.scalar_type());
    const at::Tensor counts = member.sum(0).clamp_min(1.0);
    return (error - member.matmul(member.t().matmul(error) / counts)).pow(2).mean();
}

namespace {
// Pairs closer than 5 % in time are left out; a pair ordered right by 0.1 in ln time costs
// under 1 % of a wrong one.
constexpr double kPairMargin = 0.05;
constexpr double kPairSharpness = 30.0;
// RankingLoss::top: a pair whose faster config is the problem's fastest weighs 1 + kTopBoost,
// one 10 % behind it 1 + kTopBoost / e.
constexpr double kTopBoost = 4.0;
constexpr double kTopScale = 0.1;
}  // namespace

at::Tensor pairwise_ranking_loss(const at::Tensor& predicted, const at::Tensor& measured, const at::Tensor& group,
                                 bool weight_top) {
    const at::Tensor p = predicted.view({-1});
    const at::Tensor y = measured.view({-1});
    const at::Tensor same = group.view({-1, 1}) == group.view({1, -1});
    // [i][j]: row j measured slower than row i, both of one problem.
    const at::Tensor slower = same & (y.view({1, -1}) - y.view({-1, 1}) > kPairMargin);
    at::Tensor weight = slower.to(p.scalar_type());
    if (weight_top) {
        // Each row's problem's fastest time in the batch (a batch holds whole problems).
        const at::Tensor fastest =
            std::get<0>(torch::where(same, y.view({1, -1}), torch::full_like(y, INFINITY).view({1, -1})).min(1));
        weight = weight * (1.0 + kTopBoost * torch::exp((fastest - y) / kTopScale)).view({-1, 1});
    }
    const at::Tensor order = p.view({1, -1}) - p.view({-1, 1});  // p_j - p_i, > 0 when right
    const at::Tensor pair_loss = torch::nn::functional::softplus(order * -kPairSharpness) / kPairSharpness;
    return (pair_loss * weight).sum() / weight.sum().clamp_min(1.0);
}

at::Tensor training_step(RuntimeNet& net, FlatAdam& optimizer, const at::Tensor& x, const at::Tensor& y,
                         const at::Tensor& index, const at::Tensor& group, const RankingTerm& ranking) {
    const at::Tensor xb = x.index_select(0, index);
    const at::Tensor yb = y.index_select(0, index);
    optimizer.zero_grad();
    const at::Tensor predicted = net->forward(xb);
    at::Tensor loss = torch::nn::functional::mse_loss(predicted, yb);
    if (ranking.weight > 0.0) {
        const at::Tensor term = ranking.loss == RankingLoss::offset
                                    ? within_problem_loss(predicted, yb, group, index.numel())
                                    : pairwise_ranking_loss(predicted, yb, group, ranking.loss == RankingLoss::top);
        loss = loss + ranking.weight * term;
    }
    loss.backward();
    optimizer.step();
    return loss.detach();
}

}  // namespace mmt::model
