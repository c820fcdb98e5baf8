#pragma once
/// `profile`'s grid of matmul experiments and how each is run and recorded: one folder per
/// experiment (config_0001/, ...) with its traces and a meta.json written last, so a run
/// that stops resumes after the last finished experiment. The runners: a backend of this
/// binary (native CUDA or CPU: the Chrome trace of its timed runs), or the Inductor worker
/// (torch.profiler's Kineto trace and a Chakra execution trace of eager PyTorch ops).

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "matmul_toolkit/collect/backend.hpp"

namespace mmt::collect {

class InductorBackend;

/// The grid's axes; every combination is one experiment.
struct ProfileAxes {
    std::vector<std::int64_t> sizes{1024};  ///< M = N = K, or every (M, N, K) of them when rectangular
    bool rectangular = false;
    std::vector<std::string> dtypes{"float32"};
    std::vector<std::string> layouts{"nn"};
    std::vector<std::int64_t> batch_sizes{1};  ///< 1: mm; more: bmm of that many matrices
};

/// Values of the axes when their search flag is given (--size-search, ...).
std::vector<std::int64_t> profile_search_sizes();         ///< 256 512 1024 2048 4096
std::vector<std::string> profile_search_dtypes();         ///< float32 float16 bfloat16 int8
std::vector<std::string> profile_search_layouts();        ///< nn nt tn tt
std::vector<std::int64_t> profile_search_batch_sizes();   ///< 1 2 4 8 16

/// torch.profiler's schedule: `repeat` cycles of `wait` idle, `warmup` untraced and `active`
/// traced steps (one matmul per step).
struct ProfileSteps {
    int wait = 1;
    int warmup = 1;
    int active = 3;
    int repeat = 1;
    int total() const { return (wait + warmup + active) * repeat; }
};

struct Experiment {
    std::string name;  ///< "config_0001"
    Problem problem;
    std::string skip_reason;  ///< non-empty: recorded as skipped, nothing runs
};

/// "config_0001" for index 0.
std::string experiment_name(std::size_t index);

/// The experiments in a fixed order (batch size, dtype, layout, then sizes, outermost
/// first). int8 (torch._int_mm) experiments other than mm, or of sizes torch._int_mm does
/// not take on CUDA (M <= 16, N or K not a multiple of 8, K <= 16), are skipped with why.
/// Throws InputError naming the option of an empty or invalid axis.
std::vector<Experiment> profile_grid(const ProfileAxes& axes);

/// What one experiment produced.
struct ExperimentResult {
    std::string status = "done";  ///< "done" | "skipped" | "failed"
    std::string reason;           ///< skipped / failed: why
    std::vector<std::string> traces;   ///< file names in the experiment's folder
    std::string execution_trace;       ///< Chakra execution trace file, or empty
    std::string execution_trace_note;  ///< why there is none (native backends)
    std::optional<double> time_ms;     ///< mean time of one matmul over the traced steps
    std::string kernel;                ///< what ran: the config, the library, the op
};

/// Runs one experiment into its folder (which exists and is empty of finished results).
class ExperimentRunner {
public:
    virtual ~ExperimentRunner() = default;
    virtual std::string backend_name() const = 0;
    virtual std::string hardware_name() const = 0;
    virtual std::vector<std::pair<std::string, std::string>> versions() const { return {}; }
    /// Why the experiment cannot run here (a dtype without a kernel, bf16 on a device
    /// without it), or empty.
    virtual std::string unsupported_reason(const Problem& problem) const = 0;
    virtual ExperimentResult run(const Experiment& experiment, const std::filesystem::path& dir,
                                 const ProfileSteps& steps, std::uint64_t seed) = 0;
};

/// A backend of this binary: the vendor library where the backend has one for the dtype
/// (cuBLAS: what torch.matmul runs), else the first DEFAULT config it keeps, timed with
/// (wait + warmup) x repeat warm-up runs and active x repeat timed runs; the Chrome trace of
/// those runs (Perfetto, chrome://tracing) is the experiment's trace. No execution trace.
std::unique_ptr<ExperimentRunner> make_backend_runner(Backend& backend);

/// The Inductor worker's `profile` request: eager torch ops under torch.profiler.
std::unique_ptr<ExperimentRunner> make_inductor_runner(InductorBackend& backend);

struct ProfileRunOptions {
    std::filesystem::path output_dir;
    ProfileSteps steps;
    std::uint64_t seed = 42;
};

struct ProfileSummary {
    std::size_t done = 0, skipped = 0, failed = 0, resumed = 0;
    bool interrupted = false;
    std::filesystem::path summary_csv;
};

/// Runs the experiments not finished in `output_dir` (their meta.json is there), in order;
/// Ctrl-C stops after the experiment in progress. Writes <output_dir>/profile_summary.csv
/// (one row per experiment, rewritten after each). Throws InputError when a folder holds
/// an experiment other than the grid's (another grid in the same output folder).
ProfileSummary run_profile(const std::vector<Experiment>& experiments, const ProfileRunOptions& options,
                           ExperimentRunner& runner);

}  // namespace mmt::collect
