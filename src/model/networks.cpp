#include "networks.hpp"

#include <torch/nn/init.h>

namespace mmt::model {
namespace {

// Linear -> ReLU -> BatchNorm1d -> Dropout, appended to `seq` (four entries, as
// torch-diode's nn.Sequential, so entry indices and parameter names line up).
void append_block(torch::nn::Sequential& seq, int in, int out, double dropout_rate) {
    seq->push_back(torch::nn::Linear(in, out));
    seq->push_back(torch::nn::ReLU());
    seq->push_back(torch::nn::BatchNorm1d(out));
    seq->push_back(torch::nn::Dropout(dropout_rate));
}

}  // namespace

ResidualBlockImpl::ResidualBlockImpl(int width, double dropout_rate) {
    torch::nn::Sequential block;
    append_block(block, width, width, dropout_rate);
    block->push_back(torch::nn::Linear(width, width));
    block->push_back(torch::nn::BatchNorm1d(width));
    m_block = register_module("block", block);
    // torch-diode's block also owns a parameterless ReLU named "relu"; applying the
    // function directly leaves the state dict identical.
}

torch::Tensor ResidualBlockImpl::forward(const torch::Tensor& x) {
    return torch::relu(m_block->forward(x) + x);
}

RuntimeNetImpl::RuntimeNetImpl(const ModelSpec& spec, int input_dim) : m_spec(spec) {
    spec.validate();
    if (spec.type == ModelType::base) {
        torch::nn::Sequential seq;
        int in = input_dim;
        for (int width : spec.hidden_dims) {
            append_block(seq, in, width, spec.dropout_rate);
            in = width;
        }
        m_output = torch::nn::Linear(in, 1);
        seq->push_back(m_output);
        m_base = register_module("model", seq);
    } else {
        torch::nn::Sequential input;
        append_block(input, input_dim, spec.hidden_dim, spec.dropout_rate);
        m_input = register_module("input_layer", input);
        torch::nn::ModuleList hidden;
        for (int i = 0; i < spec.num_layers; ++i) {
            ResidualBlock block(spec.hidden_dim, spec.dropout_rate);
            hidden->push_back(block);
            m_blocks.push_back(block);
        }
        m_hidden = register_module("hidden_layers", hidden);
        m_output = register_module("output_layer", torch::nn::Linear(spec.hidden_dim, 1));
    }
}

torch::Tensor RuntimeNetImpl::forward(const torch::Tensor& x) {
    if (m_base) return m_base->forward(x);
    torch::Tensor h = m_input->forward(x);
    for (auto& block : m_blocks) h = block->forward(h);
    return m_output->forward(h);
}

void RuntimeNetImpl::initialise(double output_bias) {
    torch::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
        if (auto* linear = module->as<torch::nn::LinearImpl>()) {
            torch::nn::init::xavier_uniform_(linear->weight, 1.0);
            torch::nn::init::zeros_(linear->bias);
        } else if (auto* norm = module->as<torch::nn::BatchNorm1dImpl>()) {
            torch::nn::init::ones_(norm->weight);
            torch::nn::init::zeros_(norm->bias);
        }
    }
    m_output->bias.fill_(output_bias);
}

std::vector<std::pair<std::string, torch::Tensor>> RuntimeNetImpl::state_dict() const {
    // Module by module, its own parameters then its own buffers: the order Python's
    // Module.state_dict() produces.
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& item : named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
        const std::string prefix = item.key().empty() ? "" : item.key() + ".";
        for (const auto& p : item.value()->named_parameters(/*recurse=*/false)) {
            out.emplace_back(prefix + p.key(), p.value());
        }
        for (const auto& b : item.value()->named_buffers(/*recurse=*/false)) {
            out.emplace_back(prefix + b.key(), b.value());
        }
    }
    return out;
}

}  // namespace mmt::model
