#pragma once
/// The timing dataset: hardware -> operation -> problem -> timed configs, in insertion
/// order at every level (torch-diode's Dataset layout).

#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "matmul_toolkit/core/types.hpp"

namespace mmt::core {

/// All timings of one problem, in the order they were added.
struct ProblemTimings {
    MMShape shape;
    std::vector<TimedConfig> timed_configs;
};

/// All problems of one operation key ("mm", "addmm", "bmm", "mm_nt", ...).
struct OperationTimings {
    std::string name;
    std::vector<ProblemTimings> problems;
    std::unordered_map<MMShape, std::size_t, MMShapeHash> index;  ///< shape -> problems[i]

    ProblemTimings* find(const MMShape& shape);
    const ProblemTimings* find(const MMShape& shape) const;
};

/// All operations measured on one piece of hardware.
struct HardwareTimings {
    std::string name;
    std::vector<OperationTimings> operations;

    OperationTimings* find(const std::string& op);
    const OperationTimings* find(const std::string& op) const;
};

/// One row of a table: a problem and its configs sorted fastest first.
struct TableEntry {
    std::string hardware;
    std::string op;
    MMShape shape;
    std::vector<TimedConfig> sorted_configs;
};

class Dataset {
public:
    /// Appends one timing, creating the hardware, operation and problem on first use.
    void add_timing(const std::string& hardware, const std::string& op, const MMShape& shape,
                    const TimedConfig& timed_config);

    /// Appends every timing of `other` (hardware/op/problem order of first appearance).
    void merge(const Dataset& other);

    /// A copy holding only the given hardware and/or operation; nullopt keeps everything.
    /// An op filter matches the exact key, or a bare op name matches all its layouts.
    Dataset filter(const std::optional<std::string>& hardware,
                   const std::optional<std::string>& op) const;

    /// Per problem, its configs sorted fastest first (ties keep insertion order).
    std::vector<TableEntry> to_table() const;

    /// Fastest timed config of a problem, or nullopt when the problem is absent.
    std::optional<TimedConfig> fastest(const std::string& hardware, const std::string& op,
                                       const MMShape& shape) const;

    /// True when the problem already has at least one timing (used to resume collection).
    bool contains(const std::string& hardware, const std::string& op,
                  const MMShape& shape) const;

    const std::vector<HardwareTimings>& hardware() const { return m_hardware; }
    const HardwareTimings* find_hardware(const std::string& name) const;

    std::size_t num_problems() const;
    std::size_t num_timings() const;
    bool empty() const { return m_hardware.empty(); }

private:
    HardwareTimings& hardware_entry(const std::string& name);

    std::vector<HardwareTimings> m_hardware;
};

/// Operation -> list of shapes (torch-diode's OperationShapeSet).
struct OperationShapeSet {
    struct Entry {
        std::string op;
        std::vector<MMShape> shapes;
    };
    std::vector<Entry> operations;

    void add_shape(const std::string& op, const MMShape& shape);
    std::size_t num_shapes() const;
};

/// A list of configs: a max-autotune solution file, either one list for every op or
/// one list per op.
struct Solution {
    std::vector<GemmConfig> configs;  ///< the flat form: {"config": [...]}
    std::vector<std::pair<std::string, std::vector<GemmConfig>>> per_op;  ///< {OP: {"config": [...]}}

    bool is_per_op() const { return !per_op.empty(); }
    /// Configs that apply to an op: the op's list in the per-op form, else the flat list.
    const std::vector<GemmConfig>& configs_for(const std::string& op) const;
};

}  // namespace mmt::core
