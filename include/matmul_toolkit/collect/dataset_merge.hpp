#pragma once
/// Merging datasets collected apart (shards, machines, repeated runs) into one: identical
/// (hardware, op, problem, config) entries become one entry holding the median time, and
/// every hardware name stays its own hardware entry.

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "matmul_toolkit/core/dataset.hpp"
#include "matmul_toolkit/core/json_codec.hpp"

namespace mmt::collect {

/// What one hardware name contributed.
struct HardwareMergeCount {
    std::string name;
    std::size_t problems = 0;  ///< distinct (op, problem) pairs
    std::size_t entries = 0;   ///< distinct configs over those problems, after merging
    std::vector<std::filesystem::path> files;  ///< inputs that hold this hardware
};

/// What a merge did.
struct MergeSummary {
    std::vector<std::filesystem::path> files;    ///< inputs read, in merge order
    std::vector<std::filesystem::path> skipped;  ///< found in a directory but skipped (the output)
    std::size_t entries_read = 0;      ///< timings in all inputs
    std::size_t entries_written = 0;   ///< distinct (hardware, op, problem, config) entries
    std::size_t entries_combined = 0;  ///< written entries that were seen more than once
    std::vector<HardwareMergeCount> hardware;
    /// Hardware names that differ only in case or spacing: kept apart, but worth a look.
    std::vector<std::pair<std::string, std::string>> similar_hardware;
};

struct MergeResult {
    core::Dataset dataset;  ///< first-appearance order at every level
    MergeSummary summary;
    /// Per combined entry (meta key -> config label -> {"samples": n, "times_ms": [...]}),
    /// for the output's sidecar.
    core::OrderedJson combined = core::OrderedJson::object();
};

/// Files and directories to merge, expanded: a directory gives its .json and .msgpack
/// dataset files (sorted, sidecars excluded). A file named twice counts once; `output`
/// is skipped inside directories and refused when named directly. Throws InputError on a
/// missing input, an empty directory or no inputs at all.
std::vector<std::filesystem::path> expand_merge_inputs(const std::vector<std::filesystem::path>& inputs,
                                                       const std::filesystem::path& output,
                                                       std::vector<std::filesystem::path>* skipped = nullptr);

/// Merges datasets in the given order; `sources` (same length, may be empty) names them
/// in the summary.
MergeResult merge_datasets(const std::vector<core::Dataset>& datasets,
                           const std::vector<std::filesystem::path>& sources = {});

/// Reads (either torch-diode layout, JSON or msgpack) and merges dataset files.
MergeResult merge_dataset_files(const std::vector<std::filesystem::path>& files);

/// Writes the merged dataset (torch-diode's current layout; format from the extension)
/// and a sidecar recording the inputs and the combined entries. Atomic.
void save_merge(const MergeResult& result, const std::filesystem::path& output);

/// Human-readable: inputs, entries read / written / combined, per-hardware counts.
std::string format_merge_summary(const MergeSummary& summary);

}  // namespace mmt::collect
