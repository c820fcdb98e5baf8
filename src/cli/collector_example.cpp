// `collector-example`: the dataset collector on a few problems, then to_table and
// save_table_to_file, each step explained on stdout.

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "command.hpp"
#include "examples.hpp"
#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/collect/dataset_collector.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::cli {
namespace {

struct CollectorExampleOptions {
    std::string output_dir = "collector_example";
    int num_shapes = 4;

    void add_to(CLI::App& cmd) {
        cmd.add_option("--output-dir", output_dir, "Where the dataset and its table go")->capture_default_str();
        cmd.add_option("--num-shapes", num_shapes, "Problems to measure")->capture_default_str()->check(CLI::Range(1, 1000));
    }
};

int run_collector_example(const CollectorExampleOptions& o, const GlobalOptions& global) {
    std::cout << "collector-example: DatasetCollector, torch-diode's MatmulDatasetCollector for C++.\n";
    const auto backend = example_backend(global);

    explain(1, "While a CollectionScope is open, the collector records every problem any collection in this "
               "process finishes, as torch-diode's collector hooks Inductor's feedback saver. Collecting " +
                   std::to_string(o.num_shapes) + " log-normal problems (DEFAULT configs):");
    collect::DatasetCollector collector(backend->hardware_name());
    {
        collect::CollectionScope scope(collector);
        const auto summary = collect::run_collection(example_collection(o.num_shapes, 128, global.seed), *backend);
        std::cout << "   " << summary.problems_collected << " problems, " << summary.configs_timed << " configs timed\n";
    }

    explain(2, "to_table() orders each problem's configs fastest first (the reference aten_* entry among them):");
    for (const auto& entry : collector.to_table()) {
        const auto& best = entry.sorted_configs.front();
        std::printf("   %-6s M=%-4lld N=%-4lld K=%-4lld %-9s fastest %-22s %.4f ms (of %zu)\n", entry.op.c_str(),
                    static_cast<long long>(entry.shape.M), static_cast<long long>(entry.shape.N),
                    static_cast<long long>(entry.shape.K), entry.shape.M_dtype.c_str(),
                    collect::describe_config(best.config).c_str(), best.time_ms, entry.sorted_configs.size());
    }

    explain(3, "save_to_file() writes the dataset, save_table_to_file() torch-diode's Table; load_from_file() reads a "
               "dataset back:");
    const std::filesystem::path dir(o.output_dir);
    std::filesystem::create_directories(dir);
    collector.save_to_file(dir / "dataset.json");
    collector.save_table_to_file(dir / "table.json");
    collect::DatasetCollector reloaded(backend->hardware_name());
    reloaded.load_from_file(dir / "dataset.json");
    std::cout << "   " << (dir / "dataset.json").string() << " (" << reloaded.get_dataset().num_problems()
              << " problems read back), " << (dir / "table.json").string() << "\n";
    return core::kExitOk;
}

}  // namespace

void register_collector_example(CLI::App& app, const GlobalOptions& global) {
    auto options = std::make_shared<CollectorExampleOptions>();
    auto* cmd = app.add_subcommand("collector-example",
                                   "Example: the dataset collector on a few problems, then to_table and "
                                   "save_table_to_file, each step explained (CPU or GPU)");
    options->add_to(*cmd);
    cmd->callback([options, &global] { exit_code() = run_collector_example(*options, global); });
}

}  // namespace mmt::cli
