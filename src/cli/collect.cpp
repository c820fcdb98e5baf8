// `collect`: time kernel configs on randomly drawn problems and write a dataset.

#include <memory>

#include "collect_options.hpp"

namespace mmt::cli {

void register_collect(CLI::App& app, const GlobalOptions& global) {
    auto options = std::make_shared<CollectCliOptions>();
    auto* cmd = app.add_subcommand(
        "collect", "Time every config of a search space on seeded random problems and write a "
                   "torch-diode dataset (resumes when the output exists)");
    add_problem_options(*cmd, *options);
    add_measurement_options(*cmd, *options);
    cmd->callback([options, &global] { exit_code() = run_collect_command(*options, global); });
}

}  // namespace mmt::cli
