#include "networks.hpp"

#include <tuple>

#include <torch/nn/init.h>
#include <torch/types.h>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::model {
namespace {

// Linear -> ReLU -> BatchNorm1d -> Dropout, appended to `seq` (four entries, as
// torch-diode's nn.Sequential, so entry indices and parameter names line up).
void append_block(torch::nn::Sequential& seq, int in, int out, double dropout_rate) {
    seq->push_back(torch::nn::Linear(in, out));
    seq->push_back(torch::nn::ReLU());
    seq->push_back(torch::nn::BatchNorm1d(out));
    seq->push_back(StreamDropout(dropout_rate));
}

}  // namespace

torch::Tensor StreamDropoutImpl::forward(const torch::Tensor& x) {
    if (!m_generator) return torch::dropout(x, m_rate, is_training());
    if (!is_training() || m_rate == 0.0) return x;
    // at::dropout's CPU path, with the generator named.
    at::Tensor noise = at::empty_like(x).bernoulli_(1.0 - m_rate, *m_generator);
    noise.div_(1.0 - m_rate);
    return x * noise;
}

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

void RuntimeNetImpl::train_mode(bool batch_statistics) {
    train();
    if (batch_statistics) return;
    for (auto& module : modules(/*include_self=*/false)) {
        if (module->as<torch::nn::BatchNorm1dImpl>()) module->eval();
    }
}

void RuntimeNetImpl::set_dropout_generator(const std::optional<at::Generator>& generator) {
    for (auto& module : modules(/*include_self=*/false)) {
        if (auto* dropout = module->as<StreamDropoutImpl>()) dropout->set_generator(generator);
    }
}

FoldedNetwork RuntimeNetImpl::fold() const { return fold_network(m_spec, state_values()); }

namespace {

at::Tensor tensor_of(const std::vector<float>& values, std::vector<std::int64_t> sizes, c10::Device device) {
    return torch::tensor(at::ArrayRef<float>(values), torch::kFloat32).reshape(sizes).to(device);
}

}  // namespace

FoldedNet::FoldedNet(const FoldedNetwork& folded, c10::Device device) : m_deep(folded.deep) {
    auto dense = [&](const FoldedLayer& layer) {
        Dense d;
        d.weight_t = tensor_of(layer.weight_t, {static_cast<std::int64_t>(layer.in), static_cast<std::int64_t>(layer.out)},
                               device);
        d.bias = tensor_of(layer.bias, {static_cast<std::int64_t>(layer.out)}, device);
        d.relu = layer.relu;
        return d;
    };
    for (const auto& layer : folded.chain) m_chain.push_back(dense(layer));
    if (!m_deep) return;
    const auto width = static_cast<std::int64_t>(folded.input_scale.size());
    m_input_scale = tensor_of(folded.input_scale, {width}, device);
    m_input_shift = tensor_of(folded.input_shift, {width}, device);
    for (const auto& [first, second] : folded.blocks) m_blocks.emplace_back(dense(first), dense(second));
    m_output = dense(folded.output);
}

at::Tensor FoldedNet::forward(const at::Tensor& x) const {
    auto apply = [](const Dense& d, const at::Tensor& in) {
        at::Tensor out = at::addmm(d.bias, in, d.weight_t);
        if (d.relu) out.relu_();
        return out;
    };
    at::Tensor h = x;
    for (const auto& d : m_chain) h = apply(d, h);
    if (!m_deep) return h;
    h.mul_(m_input_scale).add_(m_input_shift);
    for (const auto& [first, second] : m_blocks) {
        at::Tensor v = apply(second, apply(first, h));
        h = v.add_(h).relu_();
    }
    return apply(m_output, h);
}

StateDict RuntimeNetImpl::state_values() const {
    torch::NoGradGuard no_grad;
    StateDict out;
    for (const auto& [name, tensor] : state_dict()) {
        const at::Tensor cpu = tensor.detach().to(torch::kCPU, torch::kFloat64).contiguous();
        StateTensor values;
        values.sizes.assign(cpu.sizes().begin(), cpu.sizes().end());
        values.values.assign(cpu.data_ptr<double>(), cpu.data_ptr<double>() + cpu.numel());
        out.emplace_back(name, std::move(values));
    }
    return out;
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

std::shared_ptr<RuntimeNetImpl> RuntimeNetImpl::average_of(
    const std::vector<std::shared_ptr<RuntimeNetImpl>>& members) {
    if (members.empty()) throw core::Error("ensemble", "no member networks");
    const ModelSpec& spec = members.front()->m_spec;
    if (spec.type != ModelType::base) throw core::Error("ensemble", "only base networks can be averaged");
    for (const auto& m : members) {
        if (m->m_spec.type != ModelType::base || m->m_spec.hidden_dims != spec.hidden_dims) {
            throw core::Error("ensemble", "member networks differ in architecture");
        }
    }
    const auto count = static_cast<std::int64_t>(members.size());
    ModelSpec wide = spec;
    for (int& width : wide.hidden_dims) width *= static_cast<int>(count);
    const auto input_dim = static_cast<int>(members.front()->m_base->ptr(0)->as<torch::nn::LinearImpl>()->weight.size(1));
    auto merged = std::make_shared<RuntimeNetImpl>(wide, input_dim);

    torch::NoGradGuard no_grad;
    const std::size_t layers = merged->m_base->size();
    const std::size_t last = layers - 1;
    for (std::size_t i = 0; i < layers; ++i) {
        auto target = merged->m_base->ptr(i);
        if (auto* linear = target->as<torch::nn::LinearImpl>()) {
            std::vector<at::Tensor> weights, biases;
            for (const auto& m : members) {
                auto* source = m->m_base->ptr(i)->as<torch::nn::LinearImpl>();
                weights.push_back(source->weight);
                biases.push_back(source->bias);
            }
            if (i == 0) {  // every member reads the same input: stack the output rows
                linear->weight.copy_(torch::cat(weights, 0));
                linear->bias.copy_(torch::cat(biases, 0));
            } else if (i == last) {  // mean of the members' outputs
                linear->weight.copy_(torch::cat(weights, 1) / static_cast<double>(count));
                linear->bias.copy_(torch::stack(biases).mean(0));
            } else {  // each member's units see only that member's previous layer
                linear->weight.copy_(torch::block_diag(weights));
                linear->bias.copy_(torch::cat(biases, 0));
            }
        } else if (auto* norm = target->as<torch::nn::BatchNorm1dImpl>()) {
            std::vector<at::Tensor> scale, shift, mean, var;
            for (const auto& m : members) {
                auto* source = m->m_base->ptr(i)->as<torch::nn::BatchNorm1dImpl>();
                scale.push_back(source->weight);
                shift.push_back(source->bias);
                mean.push_back(source->running_mean);
                var.push_back(source->running_var);
            }
            norm->weight.copy_(torch::cat(scale));
            norm->bias.copy_(torch::cat(shift));
            norm->running_mean.copy_(torch::cat(mean));
            norm->running_var.copy_(torch::cat(var));
        }
    }
    merged->eval();
    return merged;
}

}  // namespace mmt::model
