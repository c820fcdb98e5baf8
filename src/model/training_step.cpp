#include "training_step.hpp"

#include <torch/nn/functional/loss.h>

namespace mmt::model {

at::Tensor within_problem_loss(const at::Tensor& predicted, const at::Tensor& measured, const at::Tensor& group,
                               std::int64_t groups) {
    const at::Tensor p = predicted.view({-1}), y = measured.view({-1});
    const at::Tensor counts =
        torch::zeros({groups}, p.options()).index_add_(0, group, torch::ones_like(p)).clamp_min(1.0);
    const at::Tensor p_mean = torch::zeros({groups}, p.options()).index_add_(0, group, p) / counts;
    const at::Tensor y_mean = torch::zeros({groups}, p.options()).index_add_(0, group, y) / counts;
    return ((p - p_mean.index_select(0, group)) - (y - y_mean.index_select(0, group))).pow(2).mean();
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
