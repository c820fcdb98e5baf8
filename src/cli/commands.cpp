// The list of subcommands and the global options they share.

#include "command.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "matmul_toolkit/collect/backend_factory.hpp"
#include "training_commands.hpp"

namespace mmt::cli {

std::string resolved_device(const GlobalOptions& global) {
    if (!global.device.empty()) return global.device;
    return collect::cuda_device_available() ? "cuda" : "cpu";
}

int& exit_code() {
    static int code = 0;
    return code;
}

void add_global_options(CLI::App& app, GlobalOptions& global) {
    app.add_option("--seed", global.seed, "Seed for every random choice")
        ->capture_default_str()->configurable();
    app.add_option("--device", global.device, "Measurement / training device (default: cuda when a GPU is present, else cpu)")
        ->check(CLI::IsMember({"cuda", "cpu"}));
    app.add_option("--format", global.format, "Format of output files a command names itself (convert: the output format)")
        ->check(CLI::IsMember({"json", "msgpack"}))->capture_default_str();
    app.add_option("--log-level", global.log_level, "trace, debug, info, warn, error, off")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
        ->capture_default_str();
    app.fallthrough();  // global options may also follow the subcommand name
    app.parse_complete_callback([&global] {
        // Logs go to stderr so stdout carries only results (tables, --json output).
        if (!spdlog::get("mmt")) spdlog::set_default_logger(spdlog::stderr_color_mt("mmt"));
        spdlog::set_level(spdlog::level::from_str(global.log_level));
        spdlog::set_pattern("[%H:%M:%S] %^%l%$ %v");
    });
}

void register_all_commands(CLI::App& app, const GlobalOptions& global, bool with_training) {
    // The training commands come from libmmt_train.so, in their places in the list.
    const TrainingCommands* training = with_training ? &training_commands() : nullptr;
    const auto train_side = [&](TrainingCommands::Register TrainingCommands::*command) {
        if (training != nullptr) (training->*command)(app, global);
    };
    register_stats(app, global);
    register_convert(app, global);
    register_merge(app, global);
    train_side(&TrainingCommands::validate_max_autotune);
    register_recommend(app, global);
    register_export_lut(app, global);
    register_collect(app, global);
    register_collect_worker(app, global);
    register_create_validation(app, global);
    register_collect_shapeset(app, global);
    register_collect_script(app, global);
    register_profile(app, global);
    train_side(&TrainingCommands::train);
    train_side(&TrainingCommands::validate_model);
    train_side(&TrainingCommands::collect_and_train);
    train_side(&TrainingCommands::train_table);
    train_side(&TrainingCommands::predict_table);
    register_collector_example(app, global);
    register_collector_basic_example(app, global);
    train_side(&TrainingCommands::model_example);
}

}  // namespace mmt::cli
