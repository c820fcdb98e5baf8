#pragma once
/// The subcommands that train or predict through LibTorch live in libmmt_train.so
/// (src/cli/training/), which the binary loads only when one of them is asked for (or the
/// full --help), so that every other command starts without loading LibTorch. The library
/// links against the binary itself: its commands call the same core, collect and inference
/// code, and the binary's exit_code() and resolved_device().

#include <string>
#include <vector>

#include "command.hpp"

namespace mmt::cli {

/// What libmmt_train.so gives: a registration function per subcommand (see command.hpp).
struct TrainingCommands {
    using Register = void (*)(CLI::App&, const GlobalOptions&);
    /// kTrainingCommandsVersion of the library: a binary and a library of two builds refuse each other.
    int version = 0;
    Register validate_max_autotune = nullptr;
    Register train = nullptr;
    Register validate_model = nullptr;
    Register collect_and_train = nullptr;
    Register train_table = nullptr;
    Register predict_table = nullptr;
    Register model_example = nullptr;
};

/// Changes whenever TrainingCommands does.
inline constexpr int kTrainingCommandsVersion = 1;

/// The library's entry point, extern "C" so that dlsym finds it by this name.
inline constexpr const char* kTrainingCommandsSymbol = "mmt_training_commands";

/// The subcommands libmmt_train.so registers.
const std::vector<std::string>& training_command_names();

/// What `argv` needs of the training commands: nothing, to list them (the full --help, where
/// the training library may be missing), or to run one.
enum class TrainingUse { none, help, run };
TrainingUse training_use(int argc, const char* const* argv);

/// The training commands, loading libmmt_train.so (beside the binary, or
/// ../lib/matmul_toolkit/ when installed) on the first call. Throws core::Error naming the
/// library and why it could not be loaded.
const TrainingCommands& training_commands();

}  // namespace mmt::cli
