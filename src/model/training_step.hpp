#pragma once
// One training step, the same code whether the trainer runs it eagerly or a CUDA graph
// captured it once (training_step_graph.hpp).

#include <cstdint>

#include <torch/types.h>

#include "flat_adam.hpp"
#include "matmul_toolkit/model/trainer.hpp"
#include "networks.hpp"

namespace mmt::model {

/// Mean over the rows of the squared error of each prediction's offset from its problem's
/// mean prediction against the measured offset: what ranking inside a problem needs, blind to
/// how well the problem's overall scale is predicted. `group`: each row's problem, 0..groups-1
/// (numbers without rows are allowed: `groups` is only an upper bound).
at::Tensor within_problem_loss(const at::Tensor& predicted, const at::Tensor& measured, const at::Tensor& group,
                               std::int64_t groups);

/// Over the ordered pairs (i, j) of rows of one problem whose measured ln times differ by
/// more than kPairMargin (y_j > y_i + margin: ties within the timing noise say nothing),
/// the mean of softplus(-s (p_j - p_i)) / s with s = kPairSharpness: near zero once the
/// prediction orders the pair right by a few hundredths of ln time, a hinge that grows
/// with the wrong order. Mean over the pairs; 0 when the batch holds none. No host sync.
/// `weight_top`: a weighted mean instead, each pair weighted by 1 + 4 exp(-(y_i - y_best) / 0.1)
/// with y_best the problem's fastest row in the batch (RankingLoss::top).
at::Tensor pairwise_ranking_loss(const at::Tensor& predicted, const at::Tensor& measured, const at::Tensor& group,
                                 bool weight_top = false);

/// The within-problem term of a training step and its weight (0: none).
struct RankingTerm {
    double weight = 0.0;
    RankingLoss loss = RankingLoss::pairwise;
};

/// Gathers the rows `index` of `x` and `y`, and minimises the MSE of ln time plus
/// `ranking.weight` × the ranking term over `group` (the rows' problems, numbered within
/// the batch; unused when the weight is 0): zero_grad, forward, backward, optimizer step.
/// Returns the batch's mean loss, detached, on the device (no host sync).
at::Tensor training_step(RuntimeNet& net, FlatAdam& optimizer, const at::Tensor& x, const at::Tensor& y,
                         const at::Tensor& index, const at::Tensor& group, const RankingTerm& ranking);

}  // namespace mmt::model
