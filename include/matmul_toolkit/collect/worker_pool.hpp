#pragma once
/// One collection spread over several devices: a worker process per device (each with its
/// own backend, and on CUDA its own context), problems handed out one at a time to
/// whichever worker is free, results written by the parent into the usual output files.
/// A worker that dies is reported, its problem retried once on another worker, and a new
/// worker started on its device (at most twice per device). A worker
/// that reports a device fault is replaced by a fresh process on the same device, and its
/// problem resumes without the configs already tried (the faulting one is counted failed).

#include <iosfwd>
#include <string>
#include <vector>

#include "matmul_toolkit/collect/backend.hpp"
#include "matmul_toolkit/collect/engine.hpp"
#include "matmul_toolkit/collect/progress.hpp"

namespace mmt::collect {

/// How to start workers: `command` + {"--device-index", "<device>"} is executed once per
/// device; the process must call serve_worker() on its stdin/stdout.
struct WorkerPoolOptions {
    std::vector<std::string> command;  ///< program and arguments (argv[0] is the path)
    std::vector<int> devices;          ///< one worker per entry (a device listed twice runs two)
};

/// Parses --devices: "0,1,3" or "all" (`available` devices: 0..available-1). Throws
/// InputError("--devices", ...) on an empty, negative, repeated or unavailable index.
std::vector<int> parse_devices(const std::string& text, int available);

/// Like run_collection, measuring in worker processes. `backend` only plans the run
/// (defaults, supported dtypes, hardware name); it times nothing. --trace-dir is refused.
CollectionSummary run_worker_collection(const CollectOptions& options, const Backend& backend,
                                        const WorkerPoolOptions& pool, ProgressSink* progress = nullptr);

/// The worker's side: reads the run's options and then one problem per line from `in`
/// (optionally with the config labels to skip), measures each on `backend` and answers one
/// line per problem on `out`, until `in` ends. After a device fault it answers with what
/// the problem measured, the configs it tried and the fault, and returns true at once: the
/// process must exit (its device context is unusable).
bool serve_worker(Backend& backend, std::istream& in, std::ostream& out);

}  // namespace mmt::collect
