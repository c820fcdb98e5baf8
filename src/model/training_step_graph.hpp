#pragma once
// A training step of fixed batch size captured once as a CUDA graph and replayed for every
// full batch after. An eager step of the deep model is ~300 small kernels, each dispatched
// through LibTorch and autograd on the host: 6 ms a step of 64 rows on an H200 while the
// GPU idles. Replaying the captured graph launches them all at once.
//
// Built only against a LibTorch with CUDA (MMT_TRAINING_CUDA_GRAPHS); the trainer falls
// back to eager steps elsewhere.

#include <cstdint>
#include <memory>

#include <torch/types.h>

#include "flat_adam.hpp"
#include "networks.hpp"
#include "training_step.hpp"

namespace mmt::model {

class TrainingStepGraph {
public:
    /// `x` and `y`: the training rows, resident on a CUDA device; every captured step
    /// gathers `batch_rows` of them by index and runs training_step (with `ranking`).
    /// Switches `optimizer` to a device-side step count.
    TrainingStepGraph(RuntimeNet& net, FlatAdam& optimizer, const at::Tensor& x, const at::Tensor& y,
                      std::int64_t batch_rows, const RankingTerm& ranking = {});
    ~TrainingStepGraph();
    TrainingStepGraph(const TrainingStepGraph&) = delete;
    TrainingStepGraph& operator=(const TrainingStepGraph&) = delete;

    /// One step on the rows `index` (batch_rows long, on the device) of the problems `group`
    /// (numbered within the batch; only read with a ranking weight): the first few run
    /// eagerly on a side stream (lazy initialisation must not happen during capture), the
    /// next is captured, all later ones replay the graph.
    void step(const at::Tensor& index, const at::Tensor& group = at::Tensor());
    /// Sum over the steps since the last reset of loss × rows, on the device.
    const at::Tensor& loss_sum() const { return m_loss_sum; }
    void reset_loss_sum();

private:
    void run_step();

    struct Capture;
    RuntimeNet& m_net;
    FlatAdam& m_optimizer;
    at::Tensor m_x, m_y, m_index, m_group, m_loss_sum;
    std::int64_t m_batch_rows;
    RankingTerm m_ranking;
    int m_steps = 0;
    std::unique_ptr<Capture> m_capture;
};

}  // namespace mmt::model
