#pragma once
// Adam over every parameter of a network at once. The parameters and their gradients become
// views into two flat buffers, so zeroing the gradients is one fill and a step is nine
// kernels whatever the number of tensors. LibTorch's optimizer loops over the tensors, ~10
// kernels each: ~800 launches a step for the deep model (84 tensors), which made a step
// cost 17 ms on an H100 for 64 rows.

#include <torch/types.h>

#include <vector>

namespace mmt::model {

class FlatAdam {
public:
    /// Moves `parameters` (float32, one device) into a flat buffer and gives each a gradient
    /// that is a view into a second one. Backward then accumulates in place into it.
    FlatAdam(const std::vector<at::Tensor>& parameters, double learning_rate, double weight_decay,
             double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8);

    /// Zeroes every gradient (keeps them allocated: they are views of the flat buffer).
    void zero_grad();
    /// torch.optim.Adam's update (L2 weight decay added to the gradient, bias-corrected
    /// moments), on the flat buffers.
    void step();
    /// From now on the step count and the bias corrections live in device tensors, so a
    /// step launches the same kernels with the same arguments every time and can be
    /// captured in a CUDA graph (a few more kernels a step, none waiting on the host).
    void keep_step_on_device();
    /// The learning rate of the steps from now on (a captured step reads it from the
    /// device, so a replayed graph follows it too).
    void set_learning_rate(double learning_rate);
    double learning_rate() const { return m_lr; }

    /// From now on every step also moves an exponential moving average of the weights
    /// toward them, average = decay · average + (1 − decay) · weights, starting from the
    /// weights as they are; part of step(), so a captured step keeps it too.
    void keep_weight_average(double decay);
    bool has_weight_average() const { return m_average.defined(); }
    /// Exchanges the weights with their average, in place (the same buffers, so a captured
    /// step is unaffected): the network then computes with the average until the next call.
    void swap_weight_average();

private:
    at::Tensor m_params, m_grads, m_exp_avg, m_exp_avg_sq;
    at::Tensor m_average;  ///< defined after keep_weight_average()
    double m_average_decay = 0.0;
    double m_lr, m_weight_decay, m_beta1, m_beta2, m_eps;
    long m_step = 0;
    at::Tensor m_device_step;  ///< float64 scalar; defined after keep_step_on_device()
    at::Tensor m_device_lr;    ///< float64 scalar; likewise
};

/// Intra-op threads worth using for training steps of `batch_rows` rows: one per 512 rows,
/// at most the hardware's. Steps of a few hundred rows are a few microseconds of work per
/// op, which threads only slow down, and with other work on the machine by 10-30x (OpenMP
/// barriers wait on preempted threads: 50 s an epoch with 16 threads on a 16-core VM, 0.2 s
/// with one).
int training_threads(long batch_rows);

}  // namespace mmt::model
