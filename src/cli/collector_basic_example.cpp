// `collector-basic-example`: the basic collector (MatmulCollector): time a few configs
// yourself, record each row, save it as CSV and JSON, read it back; steps explained on stdout.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "command.hpp"
#include "examples.hpp"
#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/collect/matmul_collector.hpp"
#include "matmul_toolkit/collect/problem_generator.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::cli {
namespace {

struct BasicExampleOptions {
    std::string output_dir = "collector_basic_example";
    int configs = 4;

    void add_to(CLI::App& cmd) {
        cmd.add_option("--output-dir", output_dir, "Where the CSV and JSON files go")->capture_default_str();
        cmd.add_option("--configs", configs, "DEFAULT configs to time per problem")->capture_default_str()->check(CLI::Range(1, 20));
    }
};

int run_basic_example(const BasicExampleOptions& o, const GlobalOptions& global) {
    std::cout << "collector-basic-example: MatmulCollector, flat rows of (op, layout, dtype, sizes, config, time)\n"
                 "for one-off measurements, with no dataset or hardware hierarchy.\n";
    const auto backend = example_backend(global);
    const std::string dtype = backend->supported_dtypes().front();

    explain(1, "Time the first " + std::to_string(o.configs) + " DEFAULT configs the backend can run on three " + dtype +
                   " problems yourself (Backend::prepare, then Backend::time) and record() each result:");
    collect::MatmulCollector rows;
    const std::vector<collect::Problem> problems{collect::make_problem("mm", "nn", 1, 128, 128, 128, dtype),
                                                collect::make_problem("mm", "nt", 1, 256, 64, 128, dtype),
                                                collect::make_problem("bmm", "nn", 4, 64, 64, 64, dtype)};
    collect::TimingOptions timing;
    timing.warmup = 1;
    timing.repeat = 3;
    for (const auto& problem : problems) {
        auto configs = backend->prune(collect::specialize_configs(collect::default_configs(), problem, false), problem).kept;
        configs.resize(std::min<std::size_t>(configs.size(), static_cast<std::size_t>(o.configs)));
        backend->plan({problem}, [&](const collect::Problem&) { return configs; });
        backend->prepare(problem, global.seed);
        for (const auto& config : configs) {
            collect::MatmulRecord row;
            row.op = problem.op;
            row.layout = problem.layout;
            row.dtype = dtype;
            row.B = problem.shape.B;
            row.M = problem.shape.M;
            row.N = problem.shape.N;
            row.K = problem.shape.K;
            row.config = config;
            row.time_ms = backend->time(problem, config, timing).median_ms;
            rows.record(row);
        }
    }
    for (const auto& r : rows.records()) {
        std::printf("   %-4s %-2s B=%lld M=%-4lld N=%-4lld K=%-4lld %-22s %.4f ms\n", r.op.c_str(), r.layout.c_str(),
                    static_cast<long long>(r.B), static_cast<long long>(r.M), static_cast<long long>(r.N),
                    static_cast<long long>(r.K), collect::describe_config(r.config).c_str(), r.time_ms);
    }

    explain(2, "save() writes CSV or JSON by the extension (atomically); load() reads either back, checking every row:");
    const std::filesystem::path dir(o.output_dir);
    std::filesystem::create_directories(dir);
    for (const char* name : {"timings.csv", "timings.json"}) {
        rows.save(dir / name);
        std::cout << "   " << (dir / name).string() << ": " << collect::MatmulCollector::load(dir / name).size()
                  << " rows read back\n";
    }

    explain(3, "to_dataset() files the rows under a hardware name when the torch-diode hierarchy is wanted after all:");
    std::cout << "   " << rows.to_dataset(backend->hardware_name()).num_problems() << " problems under '"
              << backend->hardware_name() << "'\n";
    return core::kExitOk;
}

}  // namespace

void register_collector_basic_example(CLI::App& app, const GlobalOptions& global) {
    auto options = std::make_shared<BasicExampleOptions>();
    auto* cmd = app.add_subcommand("collector-basic-example",
                                   "Example: the basic collector (MatmulCollector): time a few configs, record the "
                                   "rows, save and load them as CSV and JSON, each step explained (CPU or GPU)");
    options->add_to(*cmd);
    cmd->callback([options, &global] { exit_code() = run_basic_example(*options, global); });
}

}  // namespace mmt::cli
