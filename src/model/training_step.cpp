#include "training_step.hpp"

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

at::Tensor training_step(RuntimeNet& net, FlatAdam& optimizer, const at::Tensor& x, const at::Tensor& y,
                         const at::Tensor& index, const at::Tensor& group, double ranking_weight) {
    const at::Tensor xb = x.index_select(0, index);
    const at::Tensor yb = y.index_select(0, index);
    optimizer.zero_grad();
    const at::Tensor predicted = net->forward(xb);
    at::Tensor loss = torch::nn::functional::mse_loss(predicted, yb);
    if (ranking_weight > 0.0) loss = loss + ranking_weight * within_problem_loss(predicted, yb, group, index.numel());
    loss.backward();
    optimizer.step();
    return loss.detach();
}

}  // namespace mmt::model
