#pragma once
/// Dataset statistics (like torch-diode's dataset summary): hardware entries, per operation
/// the number of problems and timed configs, per problem its shape, dtype, number of
/// configs and fastest config.

#include <cstddef>
#include <string>
#include <vector>

#include "matmul_toolkit/core/dataset.hpp"
#include "matmul_toolkit/core/json_codec.hpp"

namespace mmt::core {

struct ProblemStats {
    MMShape shape;
    std::size_t num_configs = 0;
    TimedConfig fastest;  ///< first of the fastest when times tie
};

struct OperationStats {
    std::string op;
    std::size_t num_timed_configs = 0;     ///< timings over all problems
    std::size_t num_distinct_configs = 0;  ///< different configs over all problems
    std::vector<ProblemStats> problems;
};

struct HardwareStats {
    std::string name;
    std::vector<OperationStats> operations;
};

struct DatasetStats {
    std::vector<HardwareStats> hardware;
    std::size_t num_operations = 0;  ///< (hardware, op) entries
    std::size_t num_problems = 0;
    std::size_t num_timed_configs = 0;
};

/// Counts everything in dataset order.
DatasetStats compute_stats(const Dataset& dataset);

/// "float16" when all three dtypes agree, else "M_dtype/K_dtype->out_dtype".
std::string dtype_label(const MMShape& shape);

/// "B=1 M=32 N=32 K=32" (B omitted when 1).
std::string shape_label(const MMShape& shape);

/// "64x32x32 g8 s3 w4" plus any flags that differ from the defaults (EVEN_K, TF32, ...);
/// a vendor-library entry ("aten_mm", ...) by its name alone.
std::string config_label(const GemmConfig& config);

/// Human-readable report, one section per hardware and operation; ends with a newline.
std::string format_stats_text(const DatasetStats& stats, const std::string& source);

/// The same facts as a document (what `stats --json` prints).
OrderedJson stats_to_document(const DatasetStats& stats, const std::string& source);

}  // namespace mmt::core
