// matmul_toolkit: parse options, dispatch to a subcommand, return its exit code.

#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "command.hpp"
#include "training_commands.hpp"
#include "matmul_toolkit/build_config.hpp"
#include "matmul_toolkit/core/error.hpp"

int main(int argc, char** argv) {
    using namespace mmt;
    CLI::App app{"matmul_toolkit: time GEMM kernel configs, train runtime models, pick configs"};
    app.require_subcommand(1);
    app.set_version_flag("--version", MMT_VERSION_STRING);

    cli::GlobalOptions global;
    cli::add_global_options(app, global);

    try {
        // LibTorch is loaded (with libmmt_train.so) only for the commands that need it.
        const auto training = cli::training_use(argc, argv);
        try {
            cli::register_all_commands(app, global, training != cli::TrainingUse::none);
        } catch (const core::Error&) {
            // The full help lists what there is; a training command says why it can't run.
            if (training == cli::TrainingUse::run) throw;
            cli::register_all_commands(app, global, false);
        }
        app.parse(argc, argv);
        return cli::exit_code();
    } catch (const CLI::ParseError& e) {
        // CLI11 prints help/version itself (exit 0); anything else is a usage error.
        if (e.get_exit_code() == 0) return app.exit(e);
        std::cerr << "error: " << e.what() << "\n";
        return core::kExitBadInput;
    } catch (const core::Interrupted& e) {
        std::cerr << "error: " << e.what() << "\n";
        return core::kExitInterrupted;
    } catch (const core::InputError& e) {
        std::cerr << "error: " << e.what() << "\n";
        return core::kExitBadInput;
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return core::kExitFailure;
    }
}
