#include "folding.hpp"

#include <cmath>
#include <string>
#include <tuple>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::model {
namespace {

/// torch.nn.BatchNorm1d's default eps, which every network here uses.
constexpr float kBatchNormEps = 1e-5f;

/// A Linear's weight [out, in] and bias, as floats.
struct Linear {
    std::size_t in = 0, out = 0;
    std::vector<float> weight;  ///< out × in, row-major
    std::vector<float> bias;
};

std::vector<float> floats_of(const StateTensor& t) {
    return std::vector<float>(t.values.begin(), t.values.end());
}

const StateTensor& entry(const StateDict& state, const std::string& name) {
    const StateTensor* t = find_state(state, name);
    if (t == nullptr) throw core::Error("model", "the state dict lacks '" + name + "'");
    return *t;
}

Linear linear(const StateDict& state, const std::string& prefix) {
    const StateTensor& weight = entry(state, prefix + "weight");
    Linear l;
    l.out = static_cast<std::size_t>(weight.sizes.at(0));
    l.in = static_cast<std::size_t>(weight.sizes.at(1));
    l.weight = floats_of(weight);
    l.bias = floats_of(entry(state, prefix + "bias"));
    return l;
}

/// BatchNorm in eval mode as y = scale ⊙ x + shift.
std::pair<std::vector<float>, std::vector<float>> affine_of(const StateDict& state, const std::string& prefix) {
    const auto weight = floats_of(entry(state, prefix + "weight"));
    const auto bias = floats_of(entry(state, prefix + "bias"));
    const auto mean = floats_of(entry(state, prefix + "running_mean"));
    const auto var = floats_of(entry(state, prefix + "running_var"));
    std::vector<float> scale(weight.size()), shift(weight.size());
    for (std::size_t j = 0; j < weight.size(); ++j) {
        const float denominator = std::sqrt(var[j] + kBatchNormEps);
        scale[j] = weight[j] / denominator;
        const float scaled_mean = mean[j] * scale[j];
        shift[j] = bias[j] - scaled_mean;
    }
    return {scale, shift};
}

/// A Linear whose input first went through y = scale ⊙ x + shift:
/// W (scale ⊙ x + shift) + b = (W · diag(scale)) x + (W shift + b).
void absorb_input_affine(Linear& l, const std::vector<float>& scale, const std::vector<float>& shift) {
    for (std::size_t o = 0; o < l.out; ++o) {
        double sum = 0.0;
        for (std::size_t j = 0; j < l.in; ++j) {
            float& w = l.weight[o * l.in + j];
            sum += static_cast<double>(w) * static_cast<double>(shift[j]);
            w = w * scale[j];
        }
        l.bias[o] = l.bias[o] + static_cast<float>(sum);
    }
}

FoldedLayer folded_layer(const Linear& l, bool relu) {
    FoldedLayer f;
    f.in = l.in;
    f.out = l.out;
    f.weight_t.resize(l.in * l.out);
    for (std::size_t o = 0; o < l.out; ++o) {
        for (std::size_t j = 0; j < l.in; ++j) f.weight_t[j * l.out + o] = l.weight[o * l.in + j];
    }
    f.bias = l.bias;
    f.relu = relu;
    return f;
}

DenseLayer dense_layer(const FoldedLayer& f, bool find_blocks) {
    return make_dense_layer(f.in, f.out, f.weight_t, f.bias, f.relu, find_blocks);
}

}  // namespace

FoldedNetwork fold_network(const ModelSpec& spec, const StateDict& state) {
    FoldedNetwork folded;
    if (spec.type == ModelType::base) {
        // Entries come in fours (Linear, ReLU, BatchNorm, Dropout), then the output Linear;
        // each BatchNorm folds into the Linear after it.
        std::vector<float> scale, shift;
        const std::size_t layers = spec.hidden_dims.size() + 1;
        for (std::size_t i = 0; i < layers; ++i) {
            const std::string prefix = "model." + std::to_string(4 * i) + ".";
            Linear l = linear(state, prefix);
            if (!scale.empty()) absorb_input_affine(l, scale, shift);
            const bool last = i + 1 == layers;
            folded.chain.push_back(folded_layer(l, !last));
            if (!last) std::tie(scale, shift) = affine_of(state, "model." + std::to_string(4 * i + 2) + ".");
        }
        return folded;
    }
    folded.deep = true;
    folded.chain.push_back(folded_layer(linear(state, "input_layer.0."), true));
    std::tie(folded.input_scale, folded.input_shift) = affine_of(state, "input_layer.2.");
    for (int b = 0; b < spec.num_layers; ++b) {
        const std::string block = "hidden_layers." + std::to_string(b) + ".block.";
        const Linear first = linear(state, block + "0.");
        const auto [mid_scale, mid_shift] = affine_of(state, block + "2.");
        Linear second = linear(state, block + "4.");
        const auto [out_scale, out_shift] = affine_of(state, block + "5.");
        absorb_input_affine(second, mid_scale, mid_shift);
        // The BatchNorm after the second Linear scales its output rows.
        for (std::size_t o = 0; o < second.out; ++o) {
            for (std::size_t j = 0; j < second.in; ++j) second.weight[o * second.in + j] *= out_scale[o];
            const float scaled = second.bias[o] * out_scale[o];
            second.bias[o] = scaled + out_shift[o];
        }
        folded.blocks.emplace_back(folded_layer(first, true), folded_layer(second, false));
    }
    folded.output = folded_layer(linear(state, "output_layer."), false);
    return folded;
}

DenseNet dense_net_of(const FoldedNetwork& folded) {
    DenseNet net;
    for (const auto& layer : folded.chain) net.chain.push_back(dense_layer(layer, !net.chain.empty()));
    net.deep = folded.deep;
    if (!folded.deep) return net;
    net.input_scale = folded.input_scale;
    net.input_shift = folded.input_shift;
    for (const auto& [first, second] : folded.blocks) {
        net.blocks.emplace_back(dense_layer(first, true), dense_layer(second, true));
    }
    net.output = dense_layer(folded.output, true);
    return net;
}

}  // namespace mmt::model
