#include "training_step_graph.hpp"

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::model {

namespace {
// Eager steps before the capture: cuBLAS handles and workspaces, cuDNN's BatchNorm and the
// autograd engine's device thread are set up on first use, which a capture cannot hold.
constexpr int kWarmupSteps = 3;
}  // namespace

struct TrainingStepGraph::Capture {
    at::cuda::CUDAGraph graph;
    // One side stream for the warm-up and the capture: cuBLAS keeps a workspace per
    // handle and stream, so the warm-up sets up the very stream the capture runs on.
    c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
    bool captured = false;
};

TrainingStepGraph::TrainingStepGraph(RuntimeNet& net, FlatAdam& optimizer, const at::Tensor& x, const at::Tensor& y,
                                     std::int64_t batch_rows, const RankingTerm& ranking)
    : m_net(net), m_optimizer(optimizer), m_x(x), m_y(y), m_batch_rows(batch_rows),
      m_ranking(ranking), m_capture(std::make_unique<Capture>()) {
    if (!x.is_cuda()) throw core::Error("training", "a CUDA-graph step needs the rows on a CUDA device");
    m_index = torch::zeros({batch_rows}, x.options().dtype(at::kLong));
    m_group = torch::zeros({batch_rows}, x.options().dtype(at::kLong));
    m_loss_sum = torch::zeros({}, x.options());
    m_optimizer.keep_step_on_device();
}

TrainingStepGraph::~TrainingStepGraph() = default;

void TrainingStepGraph::reset_loss_sum() { m_loss_sum.zero_(); }

void TrainingStepGraph::run_step() {
    const at::Tensor loss = training_step(m_net, m_optimizer, m_x, m_y, m_index, m_group, m_ranking);
    torch::NoGradGuard no_grad;
    m_loss_sum.add_(loss * static_cast<double>(m_batch_rows));
}

void TrainingStepGraph::step(const at::Tensor& index, const at::Tensor& group) {
    if (index.numel() != m_batch_rows) {
        throw core::Error("training", "a CUDA-graph step takes batches of " + std::to_string(m_batch_rows) + " rows");
    }
    if (m_ranking.weight > 0.0 && (!group.defined() || group.numel() != m_batch_rows)) {
        throw core::Error("training", "a CUDA-graph step with a ranking term needs each row's problem");
    }
    m_index.copy_(index);
    if (m_ranking.weight > 0.0) m_group.copy_(group);
    if (m_capture->captured) {
        m_capture->graph.replay();
        return;
    }
    // Warm-up and capture run on a side stream, as a capture must; the default stream's
    // work is finished first and the side stream's before going back to it.
    torch::cuda::synchronize();
    {
        const c10::cuda::CUDAStreamGuard side(m_capture->side);
        if (m_steps < kWarmupSteps) {
            run_step();
        } else {
            m_capture->graph.capture_begin();
            try {
                run_step();
            } catch (...) {
                // End the capture, so the stream and the allocator are left as they were and
                // the step's own error is the one reported.
                try {
                    m_capture->graph.capture_end();
                } catch (...) {
                }
                throw;
            }
            m_capture->graph.capture_end();
            m_capture->captured = true;
        }
    }
    torch::cuda::synchronize();
    // A capture records the step without running it: run it now.
    if (m_capture->captured) m_capture->graph.replay();
    ++m_steps;
}

}  // namespace mmt::model
