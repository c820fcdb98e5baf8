#pragma once
/// DatasetCollector: torch-diode's MatmulDatasetCollector for C++ programs. While a
/// collector is collecting, every problem any collection in the process finishes (see
/// run_collection) is added to its dataset under the collector's hardware name, as
/// Inductor's feedback savers feed torch-diode's collector.
///
///     collect::DatasetCollector collector(backend->hardware_name());
///     {
///         collect::CollectionScope scope(collector);   // start_collection()
///         collect::run_collection(options, *backend);
///     }                                                // stop_collection()
///     collector.save_to_file("timings.json");

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "matmul_toolkit/core/dataset.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"

namespace mmt::collect {

/// One finished problem: every timing measured for it (the reference entry included).
struct ProblemResult {
    std::string hardware;
    std::string op;  ///< the dataset operation key ("mm", "mm_nt", ...)
    core::MMShape shape;
    std::vector<core::TimedConfig> timed_configs;
};

/// A callback that sees every finished problem; returns an id for remove_feedback_saver.
using FeedbackSaver = std::function<void(const ProblemResult&)>;
int add_feedback_saver(FeedbackSaver saver);
void remove_feedback_saver(int id);
/// Hands a result to every registered saver (the engine calls this once per problem).
void publish_result(const ProblemResult& result);

class DatasetCollector {
public:
    explicit DatasetCollector(std::string hardware_name);
    ~DatasetCollector();
    DatasetCollector(const DatasetCollector&) = delete;
    DatasetCollector& operator=(const DatasetCollector&) = delete;

    /// Starts receiving finished problems (a warning, no effect, when already collecting).
    void start_collection();
    /// Stops receiving them (a warning, no effect, when not collecting).
    void stop_collection();
    bool is_collecting() const { return m_saver_id >= 0; }

    /// Adds one problem's timings under this collector's hardware name.
    void add_problem(const std::string& op, const core::MMShape& shape,
                     const std::vector<core::TimedConfig>& timed_configs);

    const std::string& hardware_name() const { return m_hardware; }
    const core::Dataset& get_dataset() const { return m_dataset; }
    /// Per problem, its configs fastest first.
    std::vector<core::TableEntry> to_table() const;

    /// Writes the dataset (format from the extension), atomically.
    void save_to_file(const std::filesystem::path& path,
                      core::DiodeLayout layout = core::DiodeLayout::current) const;
    /// Replaces the dataset with a file's.
    void load_from_file(const std::filesystem::path& path);
    /// Writes the table as torch-diode's Table: {"hardware": {HW: {"operation": {OP:
    /// {"solution": {SHAPE_KEY: {"config": [fastest first], ...}}}}}}}, atomically.
    void save_table_to_file(const std::filesystem::path& path) const;

private:
    std::string m_hardware;
    core::Dataset m_dataset;
    int m_saver_id = -1;
};

/// start_collection() on construction, stop_collection() on destruction.
class CollectionScope {
public:
    explicit CollectionScope(DatasetCollector& collector) : m_collector(collector) {
        m_collector.start_collection();
    }
    ~CollectionScope() { m_collector.stop_collection(); }
    CollectionScope(const CollectionScope&) = delete;
    CollectionScope& operator=(const CollectionScope&) = delete;

private:
    DatasetCollector& m_collector;
};

/// The document save_table_to_file writes.
core::OrderedJson table_to_document(const std::vector<core::TableEntry>& table);

}  // namespace mmt::collect
