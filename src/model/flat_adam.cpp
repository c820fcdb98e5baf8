#include "flat_adam.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::model {

FlatAdam::FlatAdam(const std::vector<at::Tensor>& parameters, double learning_rate, double weight_decay,
                   double beta1, double beta2, double eps)
    : m_lr(learning_rate), m_weight_decay(weight_decay), m_beta1(beta1), m_beta2(beta2), m_eps(eps) {
    if (parameters.empty()) throw core::Error("training", "a network without parameters");
    std::int64_t total = 0;
    for (const auto& p : parameters) {
        if (p.scalar_type() != at::kFloat || p.device() != parameters.front().device())
            throw core::Error("training", "FlatAdam needs float32 parameters on one device");
        total += p.numel();
    }
    torch::NoGradGuard no_grad;
    const auto options = parameters.front().options();
    m_params = torch::empty({total}, options);
    m_grads = torch::zeros({total}, options);
    m_exp_avg = torch::zeros({total}, options);
    m_exp_avg_sq = torch::zeros({total}, options);
    std::int64_t offset = 0;
    for (auto p : parameters) {
        const std::int64_t n = p.numel();
        at::Tensor slot = m_params.narrow(0, offset, n);
        slot.copy_(p.detach().reshape({-1}));
        p.set_data(slot.view(p.sizes()));
        p.mutable_grad() = m_grads.narrow(0, offset, n).view(p.sizes());
        offset += n;
    }
}

void FlatAdam::zero_grad() { m_grads.zero_(); }

void FlatAdam::keep_step_on_device() {
    if (m_device_step.defined()) return;
    m_device_step = torch::full({}, static_cast<double>(m_step), m_params.options().dtype(at::kDouble));
    m_device_lr = torch::full({}, m_lr, m_params.options().dtype(at::kDouble));
}

void FlatAdam::set_learning_rate(double learning_rate) {
    m_lr = learning_rate;
    if (m_device_lr.defined()) m_device_lr.fill_(learning_rate);
}

void FlatAdam::keep_weight_average(double decay) {
    if (!(decay > 0.0 && decay < 1.0)) throw core::Error("training", "a weight-average decay must be in (0, 1)");
    torch::NoGradGuard no_grad;
    m_average_decay = decay;
    m_average = m_params.clone();
}

void FlatAdam::swap_weight_average() {
    if (!m_average.defined()) throw core::Error("training", "no weight average is kept");
    torch::NoGradGuard no_grad;
    const at::Tensor weights = m_params.clone();
    m_params.copy_(m_average);
    m_average.copy_(weights);
}

void FlatAdam::step() {
    torch::NoGradGuard no_grad;
    ++m_step;
    const at::Tensor grad = m_weight_decay != 0.0 ? m_grads.add(m_params, m_weight_decay) : m_grads;
    m_exp_avg.mul_(m_beta1).add_(grad, 1.0 - m_beta1);
    m_exp_avg_sq.mul_(m_beta2).addcmul_(grad, grad, 1.0 - m_beta2);
    if (m_device_step.defined()) {
        m_device_step.add_(1.0);
        const at::Tensor bias1 = 1.0 - at::pow(m_beta1, m_device_step);
        const at::Tensor bias2 = 1.0 - at::pow(m_beta2, m_device_step);
        const at::Tensor denom = (m_exp_avg_sq.sqrt() / bias2.sqrt()).add_(m_eps);
        m_params.sub_(m_exp_avg / denom * (m_device_lr / bias1));
        if (m_average.defined()) m_average.lerp_(m_params, 1.0 - m_average_decay);
        return;
    }
    const double bias1 = 1.0 - std::pow(m_beta1, static_cast<double>(m_step));
    const double bias2 = 1.0 - std::pow(m_beta2, static_cast<double>(m_step));
    const at::Tensor denom = (m_exp_avg_sq.sqrt() / std::sqrt(bias2)).add_(m_eps);
    m_params.addcdiv_(m_exp_avg, denom, -m_lr / bias1);
    if (m_average.defined()) m_average.lerp_(m_params, 1.0 - m_average_decay);
}

int training_threads(long batch_rows) {
    const long hardware = std::max(1u, std::thread::hardware_concurrency());
    return static_cast<int>(std::clamp(batch_rows / 512, 1L, hardware));
}

}  // namespace mmt::model
