#pragma once
/// `collect-script`: a user's Python script run under the package's MatmulDatasetCollector
/// (python/matmul_toolkit_inductor/collect_script.py), which records every mm/addmm/bmm
/// autotuning its torch.compile(mode="max-autotune") does and writes them as a dataset.

#include <filesystem>
#include <string>
#include <vector>

namespace mmt::collect {

struct ScriptCollection {
    std::string python = "python3";             ///< interpreter with torch
    std::filesystem::path output;               ///< the dataset (.json) the collector writes
    std::string hardware_name;                  ///< empty: the GPU's name as torch reports it
    std::vector<std::string> script_and_args;   ///< the script, then its own arguments
};

/// Checks the request (InputError naming the script, --output or --python), then runs the
/// collector with its output on ours and returns its exit code: 130 when Ctrl-C stopped it
/// (the collector saves what it had), the collector's own code after it printed its error.
int run_script_collection(const ScriptCollection& request);

}  // namespace mmt::collect
