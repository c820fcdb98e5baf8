#pragma once
// A network whose BatchNorm statistics and weights look trained (not the identity a fresh
// BatchNorm has), so that checks of folding and of the float-array forward pass mean something.

#include <torch/torch.h>

#include <string>
#include <vector>

#include "networks.hpp"

namespace mmt::model::test {

inline RuntimeNet trained_looking_net(ModelType type, std::vector<int> hidden_dims, int hidden_dim, int inputs,
                                      std::uint64_t seed, double output_bias,
                                      double dropout_rate = 0.2) {
    ModelSpec spec;
    spec.type = type;
    spec.hidden_dims = std::move(hidden_dims);
    spec.hidden_dim = hidden_dim;
    spec.num_layers = 3;
    spec.dropout_rate = dropout_rate;
    torch::manual_seed(seed);
    RuntimeNet net(spec, inputs);
    net->initialise(output_bias);
    torch::NoGradGuard no_grad;
    for (auto& [name, tensor] : net->state_dict()) {
        if (name.find("running_var") != std::string::npos)
            tensor.uniform_(0.5, 2.0);
        else if (name.find("running_mean") != std::string::npos)
            tensor.normal_(0.0, 0.5);
        else if (name.find("num_batches") == std::string::npos)
            tensor.add_(torch::randn_like(tensor) * 0.1);
    }
    net->eval();
    return net;
}

}  // namespace mmt::model::test
