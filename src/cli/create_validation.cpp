// `create-validation`: collect a separate validation dataset (30 problems by default).

#include <memory>

#include "collect_options.hpp"

namespace mmt::cli {

void register_create_validation(CLI::App& app, const GlobalOptions& global) {
    auto options = std::make_shared<CollectCliOptions>();
    options->output = "matmul_validation_dataset.json";
    options->num_shapes = 30;
    // Validation problems come from --seed + 1, so the same --seed never hands `collect` and
    // `create-validation` the same draws (torch-diode uses seeds 42 and 43).
    options->seed_offset = 1;
    auto* cmd = app.add_subcommand(
        "create-validation",
        "Collect a validation dataset: like collect with 30 problems drawn from --seed + 1, "
        "or the problems of --shapeset");
    add_problem_options(*cmd, *options);
    add_shapeset_options(*cmd, *options, /*required=*/false, /*with_dtypes=*/false);
    add_measurement_options(*cmd, *options);
    cmd->callback([options, &global] { exit_code() = run_collect_command(*options, global); });
}

}  // namespace mmt::cli
