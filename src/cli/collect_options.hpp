#pragma once
/// Options shared by collect, create-validation and collect-shapeset (defaults and help
/// together), and the one function the three subcommands run.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "command.hpp"
#include "matmul_toolkit/collect/engine.hpp"
#include "matmul_toolkit/collect/inductor_backend.hpp"

namespace mmt::cli {

struct CollectCliOptions {
    std::string output = "matmul_dataset.json";

    // Generated problems.
    int num_shapes = 100;
    std::int64_t min_size = 32;
    std::optional<std::int64_t> max_size;
    bool power_of_two = false;
    bool no_rectangular = false;
    bool no_odd_sizes = false;
    std::int64_t multiple_of = 1;
    bool log_normal = false;
    collect::SizeOptions log_normal_params;  ///< only its m/n/k parameters are used
    std::vector<std::string> ops{"mm", "addmm", "bmm"};
    std::vector<std::string> dtypes;
    std::vector<std::string> layouts{"nn"};
    std::vector<std::int64_t> batch_sizes{1, 2, 4, 8};

    // Shapeset problems.
    std::string shapeset;
    std::vector<std::string> operations{"mm", "addmm", "bmm"};

    // Configs and timing.
    std::string search_mode = "max-autotune";
    std::string search_space = "DEFAULT";
    std::string configs;
    bool allow_tf32 = false;
    bool no_reference = false;
    std::optional<int> warmup;
    std::optional<int> repeat;

    // Output.
    std::optional<int> chunk_size;
    int shard_index = 0;
    int num_shards = 1;
    std::string devices;  ///< --devices: empty runs in this process
    int workers_per_device = 1;  ///< --workers-per-device (inductor backend)
    std::optional<double> stop_after_s;  ///< --stop-after
    std::string backend;  ///< --backend cpu|native|inductor; empty: the default rule
    std::string python = "python3";  ///< --python: the inductor worker's interpreter
    int worker_timeout_s = 900;      ///< --worker-timeout
    std::string inductor_worker;     ///< hidden --inductor-worker: replaces the worker command (tests)
    std::string diode_layout = "current";
    std::string trace_dir;
    bool quiet = false;

    /// Added to the seed before drawing problems (create-validation draws with seed + 1).
    std::uint64_t seed_offset = 0;
};

/// --num-shapes, sizes, --log-normal and its parameters, --ops, --dtypes, --layouts, --batch-sizes.
void add_problem_options(CLI::App& cmd, CollectCliOptions& options);
/// --shapeset (required or not) and --operations; --dtypes too when `with_dtypes`.
void add_shapeset_options(CLI::App& cmd, CollectCliOptions& options, bool required, bool with_dtypes);
/// --output, search space and mode, --configs, timing, chunking, traces, --quiet.
void add_measurement_options(CLI::App& cmd, CollectCliOptions& options);

/// The inductor backend's options from --python, --worker-timeout and --inductor-worker.
collect::InductorBackendOptions to_inductor_options(const std::string& python, int worker_timeout_s,
                                                    const std::string& worker_command, int device_index);

/// The library options these flags mean.
collect::CollectOptions to_collect_options(const CollectCliOptions& options,
                                           const GlobalOptions& global);

/// Runs the collection on the --backend / --device backend with a progress bar and Ctrl-C handling,
/// then prints the dataset statistics and the collection summary.
int run_collect_command(const CollectCliOptions& options, const GlobalOptions& global);

}  // namespace mmt::cli
