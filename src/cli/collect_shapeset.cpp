// `collect-shapeset`: time kernel configs on the problems of a shapeset file.

#include <memory>

#include "collect_options.hpp"

namespace mmt::cli {

void register_collect_shapeset(CLI::App& app, const GlobalOptions& global) {
    auto options = std::make_shared<CollectCliOptions>();
    options->output = "operation_shapeset_data.msgpack";
    auto* cmd = app.add_subcommand(
        "collect-shapeset", "Time every config of a search space on the problems of a shapeset "
                            "file and write a torch-diode dataset");
    add_shapeset_options(*cmd, *options, /*required=*/true, /*with_dtypes=*/true);
    add_measurement_options(*cmd, *options);
    cmd->callback([options, &global] { exit_code() = run_collect_command(*options, global); });
}

}  // namespace mmt::cli
