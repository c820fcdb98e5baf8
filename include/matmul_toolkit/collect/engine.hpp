#pragma once
/// The collection engine: for each problem and each config of the search space, time the
/// kernel on a backend and add the result to a dataset. One engine serves every backend.
/// The CLI's collect, create-validation and collect-shapeset are thin wrappers of
/// run_collection(); other programs call it the same way.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "matmul_toolkit/collect/backend.hpp"
#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/collect/dataset_collector.hpp"
#include "matmul_toolkit/collect/device_fault.hpp"
#include "matmul_toolkit/collect/problem_generator.hpp"
#include "matmul_toolkit/collect/progress.hpp"
#include "matmul_toolkit/collect/sharding.hpp"
#include "matmul_toolkit/core/dataset.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect {

struct CollectOptions {
    // What to measure: `problems` when given, else a shapeset's when `shapeset` is set,
    // else generated problems.
    std::vector<Problem> problems;
    GeneratorOptions generator;  ///< empty dtypes: the backend's default dtypes
    /// Unset: the backend's default (4096 on CUDA, 512 on CPU).
    std::optional<std::int64_t> max_size;
    std::filesystem::path shapeset;
    std::vector<std::string> shapeset_operations{"mm", "addmm", "bmm"};
    std::vector<std::string> shapeset_dtypes;  ///< empty: each shape's own dtype
    /// The slice of the problem list this run collects (after generation or reading); a
    /// shard writes to shard_output_path(output).
    Shard shard;

    // Which configs.
    SearchSpace search_space = SearchSpace::default_space;
    std::filesystem::path configs_file;  ///< a solution file: time exactly its configs
    std::string search_mode = "max-autotune";  ///< recorded only, as torch-diode does
    bool allow_tf32 = false;
    bool time_reference = true;  ///< the aten_<op> entry per problem

    // How to time: unset means the backend's default.
    std::optional<int> warmup;
    std::optional<int> repeat;
    std::uint64_t seed = 42;

    // Where it goes. An empty output keeps everything in memory (see DatasetCollector).
    std::filesystem::path output;
    std::string format = "json";  ///< the output's format when its name has no extension
    std::optional<int> chunk_size;  ///< every N problems to OUTPUT_1, OUTPUT_2, ...
    core::DiodeLayout layout = core::DiodeLayout::current;
    std::filesystem::path trace_dir;  ///< a Chrome trace per problem when set

    /// describe_config() labels left out of every problem (a reference entry's name skips
    /// the reference): a worker resuming a problem after a device fault skips the configs
    /// its predecessor already tried.
    std::vector<std::string> skip_configs;

    /// Start no problem after this many seconds of the run: those running finish and are
    /// saved, the rest wait for a resumed run (jobs with a time limit).
    std::optional<double> stop_after_s;
};

/// Whether a run `elapsed_s` seconds old starts no more problems (stop_after_s).
inline bool past_stop_time(const CollectOptions& options, double elapsed_s) {
    return options.stop_after_s && elapsed_s >= *options.stop_after_s;
}

/// What a collection did.
struct CollectionSummary {
    std::string backend;
    std::string hardware;
    std::size_t problems_planned = 0;
    std::size_t problems_resumed = 0;    ///< already in the output files, skipped
    std::size_t problems_collected = 0;  ///< measured and written this run
    std::size_t problems_empty = 0;      ///< every config and the reference failed
    std::size_t problems_abandoned = 0;  ///< in flight at an interrupt, not recorded
    std::size_t problems_not_started = 0;  ///< left for a resumed run by stop_after_s
    std::size_t configs_considered = 0;
    std::size_t configs_timed = 0;
    std::size_t references_timed = 0;
    std::map<std::string, std::size_t> pruned;     ///< reason -> configs
    std::map<std::string, std::size_t> failed;     ///< reason -> configs
    std::map<std::string, std::size_t> reference_failed;  ///< reason -> problems
    double wall_seconds = 0.0;
    double timed_kernel_seconds = 0.0;  ///< inside timed kernel runs (the backend's count)
    std::vector<std::filesystem::path> files;  ///< every output file, resumed ones included
    core::Dataset dataset;  ///< what those files hold now (or what was collected in memory)
    /// In-memory runs only: the sidecar's per-problem timing documents (meta key -> label -> doc).
    core::OrderedJson problems_meta = core::OrderedJson::object();
    bool interrupted = false;
    /// Runs with worker processes (--devices): each worker that died, and what became of its problem.
    std::vector<std::string> worker_failures;
};

/// Thrown by run_collection when SIGINT/SIGTERM stopped it, after everything finished was
/// saved; it carries the summary so far.
class CollectionInterrupted : public core::Interrupted {
public:
    CollectionInterrupted(const std::string& what, CollectionSummary summary)
        : core::Interrupted(what), m_summary(std::move(summary)) {}
    const CollectionSummary& summary() const { return m_summary; }

private:
    CollectionSummary m_summary;
};

/// Thrown by run_collection when the backend reported a DeviceFault (its device context is
/// unusable): the problems finished before it were saved. It carries the summary (the
/// faulting config counted as failed), what the problem in flight measured before the
/// fault, and every config label that problem tried (timed, failed or faulted).
class CollectionFaulted : public DeviceFault {
public:
    CollectionFaulted(const std::string& what, CollectionSummary summary, ProblemResult partial,
                      core::OrderedJson partial_meta, std::vector<std::string> attempted, std::string config,
                      std::string cause)
        : DeviceFault("", what),
          m_summary(std::move(summary)),
          m_partial(std::move(partial)),
          m_partial_meta(std::move(partial_meta)),
          m_attempted(std::move(attempted)),
          m_config(std::move(config)),
          m_cause(std::move(cause)) {}
    const CollectionSummary& summary() const { return m_summary; }
    /// The problem in flight and the entries timed before the fault (maybe none).
    const ProblemResult& partial() const { return m_partial; }
    /// Its sidecar documents (label -> timing document).
    const core::OrderedJson& partial_meta() const { return m_partial_meta; }
    const std::vector<std::string>& attempted() const { return m_attempted; }
    /// The describe_config() label of the config that faulted.
    const std::string& config() const { return m_config; }
    /// The backend's error (e.g. the CUDA call and CUDA_ERROR_ILLEGAL_ADDRESS).
    const std::string& cause() const { return m_cause; }

private:
    CollectionSummary m_summary;
    ProblemResult m_partial;
    core::OrderedJson m_partial_meta;
    std::vector<std::string> m_attempted;
    std::string m_config;
    std::string m_cause;
};

/// Everything a run will do, resolved and checked before any work starts.
struct CollectionPlan {
    std::vector<Problem> problems;
    /// Per op; in the DEFAULT space int8 problems have their own list, keyed "mm:int8"
    /// (planned_configs() picks the list of a problem).
    std::vector<std::pair<std::string, std::vector<core::GemmConfig>>> configs_per_op;
    TimingOptions timing;
    std::filesystem::path output;  ///< with its extension; empty for in-memory runs
};

/// The planned configs of `problem` (not yet specialised to it): its op's, or in the
/// DEFAULT space Inductor's int8 list for an int8 problem. Throws core::Error when the
/// plan has none.
const std::vector<core::GemmConfig>& planned_configs(const CollectionPlan& plan, const Problem& problem);


/// Resolves defaults from the backend and rejects bad input (InputError naming the option
/// or file): sizes, lists, dtypes or ops the backend doesn't support, unreadable
/// shapesets or config files, an unwritable output or trace directory.
CollectionPlan plan_collection(const CollectOptions& options, const Backend& backend);

/// Runs a collection: plans it, skips problems already in the output files (resume),
/// times every config the backend keeps, writes the files as it goes (atomically, after
/// every problem or chunk) and hands each finished problem to publish_result(). Throws
/// InputError before any work on bad input, CollectionInterrupted after saving on Ctrl-C,
/// CollectionFaulted after saving when the backend faults (no later measurement could be
/// trusted in this process; `collect` isolates faults in worker processes).
CollectionSummary run_collection(const CollectOptions& options, Backend& backend,
                                 ProgressSink* progress = nullptr);

/// Human-readable summary: problems, configs, pruned/failed by reason, throughput, files.
std::string format_summary(const CollectionSummary& summary);

/// The "run" object of the sidecar: tool version, backend, search mode and space, timing.
core::OrderedJson run_metadata(const CollectOptions& options, const CollectionPlan& plan,
                               const Backend& backend);

}  // namespace mmt::collect
