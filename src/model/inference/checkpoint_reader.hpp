#pragma once
// Private: a checkpoint (Predictor::save's dict) read without LibTorch: what it records
// (ModelInfo) and its state dict, every check of the format, the features and the
// architecture made before a weight is used. InferenceModel::load and Predictor::load both
// read through here.

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "matmul_toolkit/model/inference_model.hpp"

namespace mmt::model {

/// The checkpoint's "format" and "format_version" (Predictor::save writes them).
inline constexpr const char* kCheckpointFormat = "matmul_toolkit.runtime_model";
inline constexpr std::int64_t kCheckpointFormatVersion = 1;

/// A parameter or buffer of a state dict: its sizes and its elements in row-major order.
struct StateTensor {
    std::vector<std::int64_t> sizes;
    std::vector<double> values;  ///< exact for float weights and integer buffers up to 2^53
};

/// Parameters and buffers by name, in the order expected_state_dict lists them.
using StateDict = std::vector<std::pair<std::string, StateTensor>>;

/// A name and sizes of the state dict a network has.
using StateEntry = std::pair<std::string, std::vector<std::int64_t>>;

/// The parameters and buffers of a network of `spec` over `inputs` features, as
/// Module.state_dict() lists them (torch-diode's names): base "model.<i>.weight" ..., deep
/// "input_layer.<i>.*", "hidden_layers.<b>.block.<i>.*", "output_layer.*". RuntimeNet's
/// state_dict() gives the same list (a test holds them together).
std::vector<StateEntry> expected_state_dict(const ModelSpec& spec, std::size_t inputs);

/// The entry named `name`; nullptr when there is none.
const StateTensor* find_state(const StateDict& state, const std::string& name);

/// What a checkpoint holds.
struct Checkpoint {
    ModelInfo info;
    StateDict state;  ///< every entry of expected_state_dict(info.spec, num_features())
};

/// Reads a checkpoint file. Throws core::InputError(path, ...) when it is missing, not a
/// matmul_toolkit checkpoint, trained with other features than this build computes, or its
/// state dict does not fit its architecture.
Checkpoint read_checkpoint(const std::filesystem::path& path);

/// The same from the file's bytes; `where` names the file in errors.
Checkpoint read_checkpoint_bytes(std::string bytes, const std::string& where);

/// "[288, 68]", as LibTorch prints sizes.
std::string sizes_text(const std::vector<std::int64_t>& sizes);

}  // namespace mmt::model
