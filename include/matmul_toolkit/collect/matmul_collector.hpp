#pragma once
/// MatmulCollector: the basic collector for one-off use. Where DatasetCollector gathers
/// whole collections into torch-diode's hardware -> op -> problem -> config hierarchy,
/// this one keeps flat rows, one per measurement the caller makes, and saves them as CSV
/// or JSON:
///
///     collect::MatmulCollector rows;
///     rows.record({"mm", "nn", "bfloat16", 1, 4096, 4096, 1024, config, 0.081});
///     rows.save("timings.csv");           // or .json
///     auto again = collect::MatmulCollector::load("timings.csv");
///
/// to_dataset() moves the rows into a Dataset when the hierarchy is wanted after all.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "matmul_toolkit/core/dataset.hpp"
#include "matmul_toolkit/core/types.hpp"

namespace mmt::collect {

/// One measurement: what ran (op, operand layout, dtype, sizes), with which config, how long.
struct MatmulRecord {
    std::string op = "mm";       ///< mm, addmm or bmm
    std::string layout = "nn";   ///< nn, nt, tn or tt (A then B; t: a transposed view)
    std::string dtype = "float16";
    std::int64_t B = 1;          ///< batch (bmm), 1 otherwise
    std::int64_t M = 0, N = 0, K = 0;
    core::GemmConfig config;     ///< block sizes, group_m, num_stages, num_warps
    double time_ms = 0.0;
};

class MatmulCollector {
public:
    /// Adds a row; throws core::InputError naming the field when it is not valid (unknown op,
    /// layout or dtype, a size or config field below 1, a time that is not positive and finite,
    /// B other than 1 for mm / addmm).
    void record(const MatmulRecord& record);

    const std::vector<MatmulRecord>& records() const { return m_records; }
    std::size_t size() const { return m_records.size(); }
    void clear() { m_records.clear(); }

    /// Writes every row, atomically: CSV for a .csv path, JSON ({"records": [...]}) for .json.
    void save(const std::filesystem::path& path) const;
    /// Reads a file save() wrote (by extension); every row is checked as record() checks it,
    /// an error naming the file and the row.
    static MatmulCollector load(const std::filesystem::path& path);

    /// The rows as a torch-diode dataset under `hardware`, in row order (a config timed twice
    /// is two entries, as repeated measurements are in any dataset; merge takes their median).
    core::Dataset to_dataset(const std::string& hardware) const;

private:
    std::vector<MatmulRecord> m_records;
};

}  // namespace mmt::collect
