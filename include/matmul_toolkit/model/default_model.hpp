#pragma once
/// The model `recommend` and `export-lut` use when no --model is given: the one shipped in
/// data/models/, trained on timings of Inductor's own Triton templates (data/README.md).

#include <filesystem>
#include <string>
#include <vector>

namespace mmt::model {

/// File name of the shipped default model.
inline constexpr const char* kDefaultModelFile = "inductor_h200.pt";

/// Where the default model is looked for, in order: $MMT_MODEL_DIR, <binary dir>/models,
/// <binary dir>/../share/matmul_toolkit/models, in a process that loaded libmmt_rank.so
/// <library dir>/../../models (the library's package folder beside the binary, or
/// share/matmul_toolkit/python/... when installed), the source tree's data/models.
std::vector<std::filesystem::path> default_model_dirs();

/// The first default model that exists; throws core::InputError("--model", ...) naming
/// the places it looked when there is none.
std::filesystem::path default_model_path();

/// `given` when not empty, else default_model_path().
std::string model_or_default(const std::string& given);

/// File name of the shipped max-autotune solution (Inductor's DEFAULT mm configs).
inline constexpr const char* kDefaultSolutionFile = "default_max_autotune.json";

/// The shipped solution, in the solutions folder beside the first models folder of
/// default_model_dirs() that has it (data/solutions, share/matmul_toolkit/solutions); throws
/// core::InputError("--max-autotune-solution", ...) naming the places it looked.
std::filesystem::path default_solution_path();

}  // namespace mmt::model
