#pragma once
/// The two network shapes (torch-diode's MatmulTimingModel and DeepMatmulTimingModel)
/// and their hyperparameters.

#include <string>
#include <vector>

namespace mmt::model {

enum class ModelType { base, deep };

/// "base" | "deep"; throws core::InputError("--model-type", ...) otherwise.
ModelType parse_model_type(const std::string& name);
std::string to_string(ModelType type);

/// Architecture hyperparameters. The default is a base model with hidden sizes 64,32: on
/// the H100 data (data/datasets) it predicted and ranked as well as torch-diode's larger
/// architectures (base 256,512,256,128,64; deep 10 blocks of 128) or better, and it ranks
/// the 1875 EXHAUSTIVE configs of a problem in well under a millisecond on one CPU core.
struct ModelSpec {
    ModelType type = ModelType::base;
    /// base: Linear -> ReLU -> BatchNorm -> Dropout per entry, then Linear to one output.
    std::vector<int> hidden_dims{64, 32};
    /// deep: an input block to hidden_dim, then num_layers residual blocks of that width.
    int hidden_dim = 128;
    int num_layers = 10;
    double dropout_rate = 0.2;

    /// Throws core::InputError naming the option when a size is not positive or the
    /// dropout rate is outside [0, 1).
    void validate() const;
    /// One line, e.g. "deep (10 residual blocks of 128, dropout 0.2)".
    std::string describe() const;
};

/// Parses "256,512,256" into {256, 512, 256}; throws core::InputError("--hidden-dims", ...).
std::vector<int> parse_hidden_dims(const std::string& text);

}  // namespace mmt::model
