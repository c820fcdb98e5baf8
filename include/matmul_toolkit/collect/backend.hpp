#pragma once
/// The interface every measurement backend (CPU, CUDA) implements. The collection engine
/// talks to backends only through this header.

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "matmul_toolkit/core/types.hpp"

namespace mmt::collect {

/// One problem to measure: an op, an operand layout and the diode shape (which carries
/// B, M, N, K, dtypes and the output size/stride).
struct Problem {
    std::string op = "mm";      ///< "mm" | "addmm" | "bmm"
    std::string layout = "nn";  ///< "nn" | "nt" | "tn" | "tt"
    core::MMShape shape;
    float alpha = 1.0f;  ///< addmm: out = beta·bias + alpha·A·B (torch.addmm's defaults)
    float beta = 1.0f;   ///< addmm: bias is a length-N vector broadcast over the rows

    const std::string& dtype() const { return shape.M_dtype; }
    /// The dataset operation key: op_key(op, layout).
    std::string op_key() const;
    /// Element strides of A [B, M, K] and B [B, K, N] for this layout (contiguous storage).
    std::array<std::int64_t, 3> a_stride() const;
    std::array<std::int64_t, 3> b_stride() const;
    /// 2·B·M·N·K
    double flops() const;
};

/// How each config is timed.
struct TimingOptions {
    int warmup = 3;
    int repeat = 10;
    /// GPU backends: evict L2 before every timed run (cold L2, what collections record).
    /// Off only for diagnostics (warm-L2 rates); the CPU backend has no such flush.
    bool flush_l2 = true;
    /// GPU backends, diagnostics: the GPU stays idle this long after each flush, before the
    /// timed run (bench/triton_suite.py spins after its flush; this matches it).
    int settle_us = 0;
};

/// The result of timing one kernel: the median and the spread of `repeat` runs.
struct Timing {
    double median_ms = 0.0;
    double min_ms = 0.0;
    double max_ms = 0.0;
    std::vector<double> samples_ms;  ///< every timed run, in launch order (for traces)
    /// Optional: start of each timed run in ms after the time() call began. Left empty,
    /// traces draw the runs back to back.
    std::vector<double> sample_starts_ms;
};

/// What a backend suggests when the user leaves an option unset.
struct CollectionDefaults {
    TimingOptions timing;
    std::int64_t max_size = 4096;  ///< --max-size for generated problems
    std::vector<std::string> dtypes{"float16", "bfloat16"};  ///< --dtypes
};

/// A config the backend refuses for a problem, and why.
struct PrunedConfig {
    core::GemmConfig config;
    std::string reason;
};

struct PruneResult {
    std::vector<core::GemmConfig> kept;
    std::vector<PrunedConfig> pruned;
};

/// The configs the engine will offer prune() for a problem (already specialised).
using ConfigsForProblem = std::function<std::vector<core::GemmConfig>(const Problem&)>;

class Backend {
public:
    /// One result of measure_batch(): a config (or the reference) and its timing or error.
    struct BatchEntry {
        core::GemmConfig config;
        bool reference = false;         ///< the vendor-library entry (reference_config())
        std::optional<Timing> timing;   ///< set when it was timed
        std::string error;              ///< set when it failed ("category: detail")
    };

    virtual ~Backend() = default;

    /// "cpu", "cuda" or "inductor".
    virtual std::string name() const = 0;
    /// The hardware name written into datasets (GPU name as PyTorch reports it, or the
    /// CPU model from /proc/cpuinfo).
    virtual std::string hardware_name() const = 0;
    virtual std::vector<std::string> supported_dtypes() const = 0;
    virtual std::vector<std::string> supported_ops() const = 0;

    /// Defaults for --warmup, --repeat and --max-size on this backend.
    virtual CollectionDefaults collection_defaults() const { return {}; }

    /// Called once before any timing with the problems still to measure, in the order they
    /// will be measured; `configs_for` (valid during the call only) gives each problem's
    /// configs. A backend that builds kernels per problem (CUDA) starts building them all
    /// here, so the first problems' kernels are ready first. Advisory: nothing changes if a
    /// backend ignores it (the default), and it never throws for a problem prune() accepts.
    virtual void plan(const std::vector<Problem>& problems, const ConfigsForProblem& configs_for) {
        (void)problems;
        (void)configs_for;
    }

    /// Splits configs into those this backend can run for the problem and those it can't.
    /// `kept` is what the engine times: a backend may rewrite fields that mean nothing to
    /// it (the CPU backend fixes num_stages/num_warps) and then prunes the duplicates.
    /// Reasons are categories ("shared memory exceeds ..."), so the engine can count them.
    virtual PruneResult prune(const std::vector<core::GemmConfig>& configs,
                              const Problem& problem) const = 0;

    /// Allocates and fills (seeded, uniform in [0.1, 1.1]) the problem's operands; every
    /// time() call until the next prepare() uses them.
    virtual void prepare(const Problem& problem, std::uint64_t seed) = 0;

    /// Times one config on the prepared problem. Throws when the kernel fails or gives a
    /// wrong result; the engine records such a config as failed and goes on.
    virtual Timing time(const Problem& problem, const core::GemmConfig& config,
                        const TimingOptions& options) = 0;

    /// Times the vendor library (cuBLAS, or the CPU reference) on the prepared problem.
    virtual Timing time_reference(const Problem& problem, const TimingOptions& options) = 0;

    /// Seconds spent inside timed kernel runs since construction (for overhead reports).
    virtual double timed_kernel_seconds() const = 0;

    /// True when the engine must call measure_batch() once per problem instead of time()
    /// per config (a backend that decides and measures a problem's configs itself).
    virtual bool measures_in_batches() const { return false; }

    /// Measures the prepared problem in one go: `own_space` "DEFAULT" / "EXHAUSTIVE" lets
    /// the backend pick its own configs of that space (`kept_configs` is then advisory),
    /// "" measures exactly `kept_configs`. With `with_reference` the vendor-library entry
    /// is among the results. Per-config failures are entries with an error; throws when the
    /// whole problem failed (core::Interrupted on Ctrl-C). The default throws core::Error.
    virtual std::vector<BatchEntry> measure_batch(const Problem& problem,
                                                  const std::vector<core::GemmConfig>& kept_configs,
                                                  const std::string& own_space, bool with_reference,
                                                  const TimingOptions& options);

    /// Name/value pairs describing the measuring software (e.g. python, torch, triton
    /// versions), written to the sidecar's run object as "environment". Default: none.
    virtual std::vector<std::pair<std::string, std::string>> environment() const { return {}; }

    /// What Timing.median_ms (the dataset's time) holds, for the sidecar: "median" unless a
    /// backend records another statistic of its runs.
    virtual std::string statistic() const { return "median"; }
};

}  // namespace mmt::collect
