// `merge`: combine datasets collected apart (shards, machines, repeated runs) into one file.

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "command.hpp"
#include "matmul_toolkit/collect/dataset_merge.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/core/meta_sidecar.hpp"

namespace mmt::cli {
namespace {
namespace fs = std::filesystem;

struct MergeOptions {
    std::vector<std::string> inputs;
    std::string output;

    void add_to(CLI::App& cmd) {
        cmd.add_option("--dataset", inputs,
                       "Dataset files (.json or .msgpack, either torch-diode layout) or directories of them "
                       "(required)");
        add_old_spelling(cmd, "--inputs", "--dataset", inputs);
        cmd.add_option("--output", output,
                       "Merged dataset (current layout; without an extension --format decides)")
            ->required();
    }
};

int run_merge(const MergeOptions& options, const GlobalOptions& global) {
    fs::path output = options.output;
    if (!output.has_extension()) output += core::extension_for(core::parse_file_format(global.format));
    core::format_from_extension(output);
    std::vector<fs::path> skipped;
    const auto files =
        collect::expand_merge_inputs({options.inputs.begin(), options.inputs.end()}, output, &skipped);
    const std::string mixed = core::mixed_timing_warning(files);
    if (!mixed.empty()) spdlog::warn("{}", mixed);
    auto result = collect::merge_dataset_files(files);
    result.summary.skipped = skipped;
    collect::save_merge(result, output);
    std::cout << collect::format_merge_summary(result.summary);
    std::cout << "  output: " << output.string() << "\n";
    return core::kExitOk;
}

}  // namespace

void register_merge(CLI::App& app, const GlobalOptions& global) {
    auto options = std::make_shared<MergeOptions>();
    auto* cmd = app.add_subcommand(
        "merge", "Merge datasets into one (identical hardware/op/problem/config entries keep "
                 "the median time; different hardware stays apart)");
    options->add_to(*cmd);
    cmd->callback([options, &global] { exit_code() = run_merge(*options, global); });
}

}  // namespace mmt::cli
