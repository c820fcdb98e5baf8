// `stats FILE|DIR`: summarise a dataset (hardware, operations, problems, fastest configs).

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "command.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/dataset_stats.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::cli {
namespace {

struct StatsOptions {
    std::string input;
    bool json = false;
    std::vector<std::string> file_extensions{"json", "msgpack"};

    void add_to(CLI::App& cmd) {
        cmd.add_option("--dataset", input, "Dataset file (.json or .msgpack) or a directory of them (required)");
        add_old_spelling(cmd, "input", "--dataset", input);  // the positional argument of earlier versions
        cmd.add_flag("--json", json, "Print the statistics as JSON instead of a table");
        cmd.add_option("--file-extensions", file_extensions,
                       "Extensions of the dataset files read from a directory")
            ->capture_default_str();
    }
};

int run_stats(const StatsOptions& options) {
    require_given(options.input, "--dataset");
    const auto dataset = core::load_dataset_any(options.input, options.file_extensions);
    const auto stats = core::compute_stats(dataset);
    if (options.json) {
        std::cout << core::python_json_dumps(core::stats_to_document(stats, options.input), 2) << "\n";
    } else {
        std::cout << core::format_stats_text(stats, options.input);
    }
    return core::kExitOk;
}

}  // namespace

void register_stats(CLI::App& app, const GlobalOptions&) {
    auto options = std::make_shared<StatsOptions>();
    auto* cmd = app.add_subcommand(
        "stats", "Summarise a dataset: hardware, per operation the problems and configs, "
                 "per problem its shape, dtype, number of configs and fastest config");
    options->add_to(*cmd);
    cmd->callback([options] { exit_code() = run_stats(*options); });
}

}  // namespace mmt::cli
