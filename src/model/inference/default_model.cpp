#include "matmul_toolkit/model/default_model.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <system_error>

// No spdlog here: this library compiles against LibTorch, whose fmt may not be spdlog's.

#include "matmul_toolkit/build_config.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace fs = std::filesystem;

namespace mmt::model {

namespace {

/// The file holding this code: the binary, or a shared library (libmmt_rank.so) it is in.
fs::path code_file() {
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&default_model_dirs), &info) == 0 || info.dli_fname == nullptr) return {};
    std::error_code error;
    const fs::path found = fs::canonical(info.dli_fname, error);
    return error ? fs::path() : found;
}

}  // namespace

std::vector<fs::path> default_model_dirs() {
    std::vector<fs::path> dirs;
    if (const char* env = std::getenv("MMT_MODEL_DIR"); env != nullptr && *env != '\0') dirs.emplace_back(env);
    std::error_code error;
    const fs::path binary = fs::read_symlink("/proc/self/exe", error);
    if (!error) {
        dirs.push_back(binary.parent_path() / "models");
        dirs.push_back(binary.parent_path().parent_path() / "share" / "matmul_toolkit" / "models");
    }
    // libmmt_rank.so sits in python/matmul_toolkit_inductor/ beside the binary, or under
    // share/matmul_toolkit/ when installed: the models folder is two folders up.
    if (const fs::path library = code_file(); !library.empty() && (error || library != binary)) {
        dirs.push_back(library.parent_path().parent_path().parent_path() / "models");
    }
    dirs.push_back(fs::path(MMT_SOURCE_DIR) / "data" / "models");
    return dirs;
}

fs::path default_model_path() {
    std::string looked;
    for (const auto& dir : default_model_dirs()) {
        const fs::path candidate = dir / kDefaultModelFile;
        std::error_code error;
        if (fs::is_regular_file(candidate, error)) return candidate;
        looked += (looked.empty() ? "" : ", ") + candidate.string();
    }
    throw core::InputError("--model", std::string("not given, and the default model ") + kDefaultModelFile +
                                          " is in none of: " + looked);
}

std::string model_or_default(const std::string& given) {
    if (!given.empty()) return given;
    return default_model_path().string();
}

fs::path default_solution_path() {
    std::string looked;
    for (const auto& dir : default_model_dirs()) {
        const fs::path candidate = dir.parent_path() / "solutions" / kDefaultSolutionFile;
        std::error_code error;
        if (fs::is_regular_file(candidate, error)) return candidate;
        looked += (looked.empty() ? "" : ", ") + candidate.string();
    }
    throw core::InputError("--max-autotune-solution", std::string("not given, and the shipped solution ") +
                                                          kDefaultSolutionFile + " is in none of: " + looked);
}

}  // namespace mmt::model
