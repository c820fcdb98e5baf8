#include "matmul_toolkit/model/model_spec.hpp"

#include <sstream>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::model {

ModelType parse_model_type(const std::string& name) {
    if (name == "base") return ModelType::base;
    if (name == "deep") return ModelType::deep;
    throw core::InputError("--model-type", "unknown model type '" + name + "' (expected base or deep)");
}

std::string to_string(ModelType type) { return type == ModelType::base ? "base" : "deep"; }

void ModelSpec::validate() const {
    if (dropout_rate < 0.0 || dropout_rate >= 1.0) {
        throw core::InputError("--dropout", "dropout rate must be in [0, 1)");
    }
    if (type == ModelType::base) {
        if (hidden_dims.empty()) throw core::InputError("--hidden-dims", "needs at least one size");
        for (int d : hidden_dims) {
            if (d <= 0) throw core::InputError("--hidden-dims", "sizes must be positive");
        }
    } else {
        if (hidden_dim <= 0) throw core::InputError("--hidden-dim", "must be positive");
        if (num_layers < 0) throw core::InputError("--num-layers", "must not be negative");
    }
}

std::string ModelSpec::describe() const {
    std::ostringstream out;
    if (type == ModelType::base) {
        out << "base (hidden";
        for (std::size_t i = 0; i < hidden_dims.size(); ++i) out << (i ? "," : " ") << hidden_dims[i];
    } else {
        out << "deep (" << num_layers << " residual blocks of " << hidden_dim;
    }
    out << ", dropout " << dropout_rate << ")";
    return out.str();
}

std::vector<int> parse_hidden_dims(const std::string& text) {
    const auto bad = [&] {
        return core::InputError("--hidden-dims", "'" + text + "' is not a comma-separated list of positive sizes");
    };
    std::vector<int> dims;
    std::size_t start = 0;
    while (true) {
        const auto comma = text.find(',', start);
        const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        try {
            std::size_t used = 0;
            const int value = std::stoi(item, &used);
            if (used != item.size() || value <= 0) throw bad();
            dims.push_back(value);
        } catch (const std::exception&) {
            throw bad();
        }
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return dims;
}

}  // namespace mmt::model
