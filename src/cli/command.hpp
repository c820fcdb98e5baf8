#pragma once
/// How subcommands plug into `main`: each src/cli/<name>.cpp defines one
/// register_<name>(CLI::App&, const GlobalOptions&) that adds its subcommand and the
/// callback that runs it. The CLI only parses, calls a library function and prints.

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::cli {

/// Options every subcommand sees.
struct GlobalOptions {
    std::uint64_t seed = 42;
    std::string device;          ///< "cuda" or "cpu"; empty until resolved (cuda when a GPU is present)
    std::string format = "json"; ///< format of outputs whose path has no extension
    std::string log_level = "info";
};

/// Resolved --device: the flag's value, else "cuda" when a GPU is usable, else "cpu".
std::string resolved_device(const GlobalOptions& global);

/// Set by a subcommand's callback: the process exit code.
int& exit_code();

/// An option's former spelling (issue 56: one name for one thing): accepted, filling the
/// same variable, and left out of --help. Given together with the new spelling it is an error
/// (each would replace the other's value).
template <typename T>
void add_old_spelling(CLI::App& cmd, const std::string& old_name, const std::string& new_name, T& variable) {
    cmd.add_option(old_name, variable)->group("")->check(
        [&cmd, old_name, new_name](const std::string&) -> std::string {
            if (cmd.count(new_name) > 0) {
                // Not a CLI::ValidationError: CLI11 would name the hidden option "" in its message.
                throw core::InputError(old_name, "the old spelling of " + new_name + ": give one of them");
            }
            return {};
        });
}
inline void add_old_flag_spelling(CLI::App& cmd, const std::string& old_name, bool& flag) {
    cmd.add_flag(old_name, flag)->group("");
}

/// What ->required() checked, for an option that has an old spelling too.
template <typename T>
void require_given(const T& value, const std::string& name) {
    if (value.empty()) throw core::InputError(name, "is required");
}

/// Adds --seed, --device, --format, --log-level to the app (they apply to every subcommand).
void add_global_options(CLI::App& app, GlobalOptions& global);

/// Registers every subcommand (src/cli/commands.cpp lists them); the ones that need LibTorch
/// (libmmt_train.so, training_commands.hpp) only `with_training`.
void register_all_commands(CLI::App& app, const GlobalOptions& global, bool with_training);

void register_stats(CLI::App& app, const GlobalOptions& global);
void register_convert(CLI::App& app, const GlobalOptions& global);
void register_merge(CLI::App& app, const GlobalOptions& global);
void register_validate_max_autotune(CLI::App& app, const GlobalOptions& global);
void register_recommend(CLI::App& app, const GlobalOptions& global);
void register_export_lut(CLI::App& app, const GlobalOptions& global);
void register_collect(CLI::App& app, const GlobalOptions& global);
void register_collect_worker(CLI::App& app, const GlobalOptions& global);
void register_create_validation(CLI::App& app, const GlobalOptions& global);
void register_collect_shapeset(CLI::App& app, const GlobalOptions& global);
void register_collect_script(CLI::App& app, const GlobalOptions& global);
void register_train(CLI::App& app, const GlobalOptions& global);
void register_validate_model(CLI::App& app, const GlobalOptions& global);
void register_collect_and_train(CLI::App& app, const GlobalOptions& global);
void register_train_table(CLI::App& app, const GlobalOptions& global);
void register_predict_table(CLI::App& app, const GlobalOptions& global);
void register_collector_example(CLI::App& app, const GlobalOptions& global);
void register_collector_basic_example(CLI::App& app, const GlobalOptions& global);
void register_model_example(CLI::App& app, const GlobalOptions& global);
void register_profile(CLI::App& app, const GlobalOptions& global);

}  // namespace mmt::cli
