// Options shared by the collection subcommands and the run they share.

#include "collect_options.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <iostream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "matmul_toolkit/collect/backend_factory.hpp"
#include "matmul_toolkit/collect/interrupt.hpp"
#include "matmul_toolkit/collect/worker_pool.hpp"
#include "matmul_toolkit/core/dataset_stats.hpp"

namespace mmt::cli {

void add_problem_options(CLI::App& cmd, CollectCliOptions& o) {
    cmd.add_option("--num-shapes", o.num_shapes, "Number of distinct problems to draw")
        ->capture_default_str();
    cmd.add_option("--min-size", o.min_size, "Smallest M, N and K")->capture_default_str();
    cmd.add_option("--max-size", o.max_size, "Largest M, N and K (default: 4096 on CUDA, 512 on CPU)");
    cmd.add_flag("--power-of-two", o.power_of_two, "Only powers of two");
    cmd.add_flag("--no-rectangular", o.no_rectangular, "Only square problems (M = N = K)");
    cmd.add_flag("--no-odd-sizes", o.no_odd_sizes, "Only even sizes (odd draws are rounded to even)");
    cmd.add_option("--multiple-of", o.multiple_of,
                   "Round N and K (with --no-rectangular, every size) to the nearest multiple of this, as real "
                   "models' weights have them (e.g. 64: aligned rows, the case most log-normal draws miss); M "
                   "stays as drawn")
        ->capture_default_str();
    cmd.add_flag("--log-normal", o.log_normal,
                 "Draw sizes log-normally (torch-diode's fit to real models), clamped to the size range");
    auto& p = o.log_normal_params;
    cmd.add_option("--log-normal-m-mean", p.m.mean, "Log-normal mean of M")->capture_default_str();
    cmd.add_option("--log-normal-m-std", p.m.std, "Log-normal std of M")->capture_default_str();
    cmd.add_option("--log-normal-n-mean", p.n.mean, "Log-normal mean of N")->capture_default_str();
    cmd.add_option("--log-normal-n-std", p.n.std, "Log-normal std of N")->capture_default_str();
    cmd.add_option("--log-normal-k-mean", p.k.mean, "Log-normal mean of K")->capture_default_str();
    cmd.add_option("--log-normal-k-std", p.k.std, "Log-normal std of K")->capture_default_str();
    cmd.add_option("--ops", o.ops, "Operations; each problem draws one (mm, addmm, bmm)")
        ->capture_default_str();
    cmd.add_option("--dtypes", o.dtypes,
                   "Dtypes; each problem draws one (default: float16 bfloat16 on CUDA, float32 on CPU; int8 is "
                   "torch._int_mm: int8 operands, int32 out, --ops mm only; CPU and native CUDA backends)");
    cmd.add_option("--layouts", o.layouts,
                   "Operand layouts; each problem draws one (nn, nt, tn, tt: t = column-major operand)")
        ->capture_default_str();
    cmd.add_option("--batch-sizes", o.batch_sizes, "Batch sizes bmm problems draw from")
        ->capture_default_str();
}

void add_shapeset_options(CLI::App& cmd, CollectCliOptions& o, bool required, bool with_dtypes) {
    auto* shapeset = cmd.add_option("--shapeset", o.shapeset,
                                    "Shapeset file ({\"operations\": {OP: {\"shapes\": [...]}}}) to collect");
    if (required) shapeset->required();
    cmd.add_option("--operations", o.operations, "Operations of the shapeset to collect")
        ->capture_default_str();
    if (with_dtypes) {
        cmd.add_option("--dtypes", o.dtypes,
                       "Collect every shape in each of these dtypes instead of its own");
    }
}

void add_measurement_options(CLI::App& cmd, CollectCliOptions& o) {
    cmd.add_option("--output", o.output,
                   "Dataset file (.json or .msgpack; without an extension --format decides)")
        ->capture_default_str();
    cmd.add_option("--search-space", o.search_space,
                   "DEFAULT (Inductor's 20 mm configs) or EXHAUSTIVE (1875-config grid)")
        ->capture_default_str();
    cmd.add_option("--search-mode", o.search_mode,
                   "torch.compile mode recorded with the data (max-autotune, default, ...)")
        ->capture_default_str();
    cmd.add_option("--configs", o.configs,
                   "Solution file: time exactly its configs instead of a search space");
    cmd.add_flag("--allow-tf32", o.allow_tf32, "Set ALLOW_TF32 on float32 problems");
    cmd.add_flag("--no-aten", o.no_reference,
                 "Skip the vendor-library entry (aten_mm / aten_addmm / aten_bmm) per problem");
    add_old_flag_spelling(cmd, "--no-reference", o.no_reference);
    cmd.add_option("--warmup", o.warmup, "Untimed runs per config (default: the backend's)");
    cmd.add_option("--repeat", o.repeat, "Timed runs per config; the median is recorded (default: the backend's)");
    cmd.add_option("--stop-after", o.stop_after_s,
                   "Start no problem after this many seconds: the ones running finish and are saved, the "
                   "rest wait for the same command run again (jobs with a time limit)");
    cmd.add_option("--chunk-size", o.chunk_size,
                   "Write every N problems to OUTPUT_1, OUTPUT_2, ... (resumable)");
    cmd.add_option("--num-shards", o.num_shards,
                   "Split the problem list into N disjoint slices (same seed and flags in every run)")
        ->capture_default_str();
    cmd.add_option("--shard-index", o.shard_index,
                   "Collect only slice I (0..N-1), written to OUTPUT_shardIofN")
        ->capture_default_str();
    cmd.add_option("--devices", o.devices,
                   "Measure with one worker process per device: 0,1,... or all (on cpu: that many workers)");
    cmd.add_option("--workers-per-device", o.workers_per_device,
                   "Inductor backend: worker processes per GPU. Each compiles EXHAUSTIVE's hundreds of "
                   "Triton choices a problem on a pool of 2 x cores / (workers in all) processes "
                   "(MMT_INDUCTOR_COMPILE_PROCESSES overrides); their benchmarks take turns, so one "
                   "worker compiles while another times kernels, never two at once. For EXHAUSTIVE, e.g. 2")
        ->capture_default_str();
    cmd.add_option("--backend", o.backend,
                   "cpu, native (the built-in CUDA kernels) or inductor (Inductor's Triton templates in a Python "
                   "worker); default: cpu on --device cpu, else inductor when --python has torch and triton, "
                   "else native")
        ->check(CLI::IsMember({"cpu", "native", "inductor"}));
    cmd.add_option("--python", o.python, "Python interpreter that runs the inductor backend's worker")
        ->capture_default_str();
    cmd.add_option("--worker-timeout", o.worker_timeout_s,
                   "Inductor backend: seconds one problem may take before its worker is replaced")
        ->capture_default_str();
    cmd.add_option("--inductor-worker", o.inductor_worker, "Inductor worker command line (tests)")
        ->group("");  // hidden from --help
    cmd.add_option("--diode-layout", o.diode_layout, "torch-diode dataset layout to write")
        ->check(CLI::IsMember({"current", "legacy"}))
        ->capture_default_str();
    cmd.add_option("--trace-dir", o.trace_dir,
                   "Write a Chrome trace (Perfetto, chrome://tracing) per problem here");
    cmd.add_flag("--quiet", o.quiet, "No progress output");
}

collect::CollectOptions to_collect_options(const CollectCliOptions& o, const GlobalOptions& global) {
    collect::CollectOptions c;
    auto& g = c.generator;
    g.num_shapes = o.num_shapes;
    g.sizes.min_size = o.min_size;
    g.sizes.power_of_two = o.power_of_two;
    g.sizes.no_rectangular = o.no_rectangular;
    g.sizes.no_odd_sizes = o.no_odd_sizes;
    g.sizes.multiple_of = o.multiple_of;
    g.sizes.log_normal = o.log_normal;
    g.sizes.m = o.log_normal_params.m;
    g.sizes.n = o.log_normal_params.n;
    g.sizes.k = o.log_normal_params.k;
    g.ops = o.ops;
    g.dtypes = o.dtypes;
    g.layouts = o.layouts;
    g.batch_sizes = o.batch_sizes;
    c.max_size = o.max_size;
    c.shapeset = o.shapeset;
    c.shapeset_operations = o.operations;
    c.shapeset_dtypes = o.dtypes;
    c.search_space = collect::parse_search_space(o.search_space);
    c.configs_file = o.configs;
    c.search_mode = o.search_mode;
    c.allow_tf32 = o.allow_tf32;
    c.time_reference = !o.no_reference;
    c.warmup = o.warmup;
    c.repeat = o.repeat;
    c.seed = global.seed + o.seed_offset;
    c.output = o.output;
    c.format = global.format;
    c.chunk_size = o.chunk_size;
    c.shard = {o.shard_index, o.num_shards};
    c.layout = core::parse_diode_layout(o.diode_layout);
    c.trace_dir = o.trace_dir;
    if (o.stop_after_s && !(*o.stop_after_s > 0)) throw core::InputError("--stop-after", "must be positive seconds");
    c.stop_after_s = o.stop_after_s;
    return c;
}

namespace {

// Runs the collection and prints the statistics and the summary (the summary on Ctrl-C too).
template <typename Run>
int run_and_report(Run&& run) {
    collect::InterruptHandlerScope interrupt_handler;
    collect::CollectionSummary summary;
    try {
        summary = run();
    } catch (const collect::CollectionInterrupted& e) {
        std::cout << collect::format_summary(e.summary());
        throw;
    } catch (const collect::CollectionFaulted& e) {
        std::cout << collect::format_summary(e.summary());
        throw;
    }
    const std::string source = summary.files.empty() ? std::string("(in memory)") : summary.files.front().string();
    std::cout << core::format_stats_text(core::compute_stats(summary.dataset), source);
    std::cout << collect::format_summary(summary);
    return core::kExitOk;
}

// The lock files the Python workers of each GPU share (<base>.gpu<N>), removed at the end.
struct BenchmarkLockFiles {
    std::filesystem::path base;
    std::vector<int> devices;
    ~BenchmarkLockFiles() {
        if (base.empty()) return;
        std::error_code ignored;
        for (const int d : devices) std::filesystem::remove(base.string() + ".gpu" + std::to_string(d), ignored);
    }
};

// The inductor backend: its Python worker isolates faults, so it measures in this process,
// or with --devices / --workers-per-device in collect-workers (each with its own Python
// worker), --workers-per-device of them on each device.
int run_inductor_collection(const CollectCliOptions& o, const collect::CollectOptions& options,
                            const GlobalOptions& global, const collect::BackendSelection& selection) {
    auto inductor = to_inductor_options(o.python, o.worker_timeout_s, o.inductor_worker, 0);
    collect::WorkerPoolOptions pool;
    BenchmarkLockFiles benchmark_locks;
    if (!o.devices.empty() || o.workers_per_device > 1) {
        const auto devices = o.devices.empty() ? std::vector<int>{0}
                                               : collect::parse_devices(o.devices, collect::device_count("cuda"));
        if (!options.trace_dir.empty()) {
            throw core::InputError(o.devices.empty() ? "--workers-per-device" : "--devices",
                                   "is not available with --trace-dir (trace one worker at a time)");
        }
        for (int slot = 0; slot < o.workers_per_device; ++slot) {
            pool.devices.insert(pool.devices.end(), devices.begin(), devices.end());
        }
        if (o.workers_per_device > 1) {
            // The workers of a GPU take turns to benchmark (measure.py's BenchmarkLock).
            benchmark_locks.base = std::filesystem::temp_directory_path() /
                                   ("matmul_toolkit-" + std::to_string(::getpid()) + "-benchmark");
            benchmark_locks.devices = devices;
            ::setenv("MMT_INDUCTOR_BENCHMARK_LOCK", benchmark_locks.base.c_str(), 1);
        }
        // Each worker compiles EXHAUSTIVE's kernels on a process pool (parallel_compile.py).
        // A worker compiles about half the time and benchmarks the other half, so each gets
        // twice its share of the cores. A value the user set is kept.
        const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        const int compile_processes =
            std::clamp(2 * cores / static_cast<int>(pool.devices.size()), 1, cores);
        ::setenv("MMT_INDUCTOR_COMPILE_PROCESSES", std::to_string(compile_processes).c_str(), 0);
        inductor.device_index = pool.devices.front();
        pool.command = {std::filesystem::read_symlink("/proc/self/exe").string(), "--device", "cuda",
                        "--log-level", global.log_level, "collect-worker", "--backend", "inductor",
                        "--python", o.python, "--worker-timeout", std::to_string(o.worker_timeout_s)};
        if (!o.inductor_worker.empty()) {
            pool.command.push_back("--inductor-worker");
            pool.command.push_back(o.inductor_worker);
        }
    }
    collect::InductorBackend backend(inductor);
    collect::plan_collection(options, backend);
    spdlog::info("backend: {} ({})", selection.backend, selection.reason);
    spdlog::info("measuring on {} ({})", backend.hardware_name(), backend.name());
    const auto progress = collect::make_progress(o.quiet);
    if (pool.devices.empty()) {
        return run_and_report([&] { return collect::run_collection(options, backend, progress.get()); });
    }
    // The parent only plans: its worker said hello (hardware, versions) and ends.
    backend.stop_worker();
    return run_and_report([&] { return collect::run_worker_collection(options, backend, pool, progress.get()); });
}

}  // namespace

collect::InductorBackendOptions to_inductor_options(const std::string& python, int worker_timeout_s,
                                                    const std::string& worker_command, int device_index) {
    collect::InductorBackendOptions inductor;
    inductor.python = python;
    inductor.worker_timeout_s = worker_timeout_s;
    inductor.device_index = device_index;
    std::istringstream words(worker_command);
    for (std::string word; words >> word;) inductor.worker_command.push_back(word);
    if (worker_timeout_s < 1) throw core::InputError("--worker-timeout", "must be at least 1 second");
    return inductor;
}

int run_collect_command(const CollectCliOptions& o, const GlobalOptions& global) {
    const auto options = to_collect_options(o, global);
    if (o.worker_timeout_s < 1) throw core::InputError("--worker-timeout", "must be at least 1 second");
    if (o.workers_per_device < 1) throw core::InputError("--workers-per-device", "must be at least 1");
    const collect::BackendSelection selection = collect::select_backend(o.backend, global.device, o.python);
    if (selection.backend == "inductor") return run_inductor_collection(o, options, global, selection);
    if (o.workers_per_device != 1) {
        throw core::InputError("--workers-per-device",
                               "applies to --backend inductor only (the " + selection.backend +
                                   " backend compiles in parallel within its worker)");
    }
    const std::string device = selection.device;
    collect::WorkerPoolOptions pool;
    if (!o.devices.empty()) {
        pool.devices = collect::parse_devices(o.devices, collect::device_count(device));
        if (!options.trace_dir.empty()) {
            throw core::InputError("--trace-dir", "is not available with --devices (trace one device at a time)");
        }
    } else if (device == "cuda" && options.trace_dir.empty()) {
        // A kernel that faults leaves the CUDA context unusable until the process ends, so
        // CUDA is measured in a worker process even on one device: the parent replaces a
        // faulted worker and the collection goes on. (Traces need the backend in this process.)
        pool.devices = {0};
    }
    const bool in_process = pool.devices.empty();
    if (!in_process) {
        // NVRTC runs in processes of each worker: together they use the machine's cores once.
        const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        const int workers = static_cast<int>(pool.devices.size());
        const int compile_threads = std::max(1, (cores - workers) / workers);
        pool.command = {std::filesystem::read_symlink("/proc/self/exe").string(), "--device", device,
                        "--log-level", global.log_level, "collect-worker", "--compile-threads",
                        std::to_string(compile_threads)};
    }
    // With workers, the parent only plans: on CUDA it holds no context of its own.
    const auto backend = in_process ? collect::make_backend(device)
                                    : collect::make_planning_backend(device, pool.devices.front());
    // Bad input is reported alone, before anything else is printed or measured.
    collect::plan_collection(options, *backend);
    spdlog::info("backend: {} ({})", selection.backend, selection.reason);
    if (in_process && selection.backend == "native") {
        spdlog::warn("--trace-dir keeps the CUDA backend in this process: a kernel fault ends the collection "
                     "(finished problems are saved)");
    }
    spdlog::info("measuring on {} ({})", backend->hardware_name(), backend->name());

    const auto progress = collect::make_progress(o.quiet);
    return run_and_report([&] {
        return in_process ? collect::run_collection(options, *backend, progress.get())
                          : collect::run_worker_collection(options, *backend, pool, progress.get());
    });
}

}  // namespace mmt::cli
