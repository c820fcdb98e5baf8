// `collect-script SCRIPT [ARGS...]`: run a Python script under Inductor's autotuning
// collector and print the statistics of the dataset it wrote.

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "command.hpp"
#include "matmul_toolkit/collect/script_collection.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/dataset_stats.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::cli {
namespace {

struct CollectScriptOptions {
    std::string output = "inductor_dataset.json";
    std::string python = "python3";
    std::string hardware_name;

    void add_to(CLI::App& cmd) {
        cmd.add_option("--output", output, "Dataset to write (.json); merge, stats and train read it")
            ->capture_default_str();
        cmd.add_option("--python", python, "Python interpreter with torch that runs the script")
            ->capture_default_str();
        cmd.add_option("--hardware-name", hardware_name,
                       "Hardware name written into the dataset (default: the GPU's name as torch reports it)");
    }
};

int run_collect_script(const CollectScriptOptions& options, std::vector<std::string> words) {
    if (!words.empty() && words.front() == "--") words.erase(words.begin());
    const int code = collect::run_script_collection({options.python, options.output, options.hardware_name, words});
    // The collector printed its own `error:` line for a failure; its code is ours.
    if (code != core::kExitOk) return code;
    const auto dataset = core::load_dataset(options.output);
    std::cout << core::format_stats_text(core::compute_stats(dataset), options.output);
    return core::kExitOk;
}

}  // namespace

void register_collect_script(CLI::App& app, const GlobalOptions&) {
    auto options = std::make_shared<CollectScriptOptions>();
    auto* cmd = app.add_subcommand(
        "collect-script",
        "Run a Python script (SCRIPT [ARGS...]) and record the mm/addmm/bmm autotuning of what it "
        "compiles with torch.compile(mode=\"max-autotune\") as a dataset");
    options->add_to(*cmd);
    cmd->footer("SCRIPT [ARGS...]: the script and its arguments; everything from SCRIPT on goes "
                "to the script. Global options go before the subcommand name.");
    // Everything from SCRIPT on belongs to the script, options included.
    cmd->prefix_command();
    cmd->fallthrough(false);
    cmd->callback([options, cmd] { exit_code() = run_collect_script(*options, cmd->remaining()); });
}

}  // namespace mmt::cli
