// Loading libmmt_train.so: only for the commands that need LibTorch.

#include "training_commands.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLibrary = "libmmt_train.so";

/// Global options that take a value (add_global_options): their value is no subcommand.
bool takes_value(const std::string& arg) {
    return arg == "--seed" || arg == "--device" || arg == "--format" || arg == "--log-level";
}

std::vector<fs::path> library_candidates() {
    std::error_code error;
    const fs::path binary = fs::read_symlink("/proc/self/exe", error);
    if (error) return {kLibrary};
    return {binary.parent_path() / kLibrary, binary.parent_path().parent_path() / "lib" / "matmul_toolkit" / kLibrary};
}

}  // namespace

const std::vector<std::string>& training_command_names() {
    static const std::vector<std::string> names{"validate-max-autotune", "train",         "validate-model",
                                                "collect-and-train",     "train-table",   "predict-table",
                                                "model-example"};
    return names;
}

TrainingUse training_use(int argc, const char* const* argv) {
    bool help = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--help" || arg == "-h") help = true;
        if (takes_value(arg)) {
            ++i;
            continue;
        }
        if (arg.empty() || arg[0] == '-') continue;
        // The first word that is no option's value names the subcommand.
        const auto& names = training_command_names();
        return std::find(names.begin(), names.end(), arg) != names.end() ? TrainingUse::run : TrainingUse::none;
    }
    return help ? TrainingUse::help : TrainingUse::none;
}

const TrainingCommands& training_commands() {
    static const TrainingCommands* loaded = [] {
        std::string why;
        for (const auto& path : library_candidates()) {
            std::error_code error;
            if (!fs::exists(path, error)) {
                why += (why.empty() ? "" : "; ") + path.string() + ": no such file";
                continue;
            }
            // RTLD_GLOBAL: LibTorch's own plugins look for its symbols there.
            void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
            if (handle == nullptr) {
                why += (why.empty() ? "" : "; ") + std::string(::dlerror());
                continue;
            }
            using Entry = const TrainingCommands* (*)();
            const auto entry = reinterpret_cast<Entry>(::dlsym(handle, kTrainingCommandsSymbol));
            const TrainingCommands* commands = entry != nullptr ? entry() : nullptr;
            if (commands == nullptr || commands->version != kTrainingCommandsVersion) {
                why += (why.empty() ? "" : "; ") + path.string() + ": not this build's training library";
                continue;
            }
            return commands;
        }
        throw core::Error(kLibrary, "cannot be loaded (training and LibTorch predictions need it): " + why);
    }();
    return *loaded;
}

}  // namespace mmt::cli
