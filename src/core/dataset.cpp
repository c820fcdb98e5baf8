#include "matmul_toolkit/core/dataset.hpp"

#include <algorithm>

namespace mmt::core {

ProblemTimings* OperationTimings::find(const MMShape& shape) {
    auto it = index.find(shape);
    return it == index.end() ? nullptr : &problems[it->second];
}

const ProblemTimings* OperationTimings::find(const MMShape& shape) const {
    auto it = index.find(shape);
    return it == index.end() ? nullptr : &problems[it->second];
}

OperationTimings* HardwareTimings::find(const std::string& op) {
    for (auto& entry : operations) {
        if (entry.name == op) return &entry;
    }
    return nullptr;
}

const OperationTimings* HardwareTimings::find(const std::string& op) const {
    for (const auto& entry : operations) {
        if (entry.name == op) return &entry;
    }
    return nullptr;
}

HardwareTimings& Dataset::hardware_entry(const std::string& name) {
    for (auto& entry : m_hardware) {
        if (entry.name == name) return entry;
    }
    m_hardware.push_back(HardwareTimings{name, {}});
    return m_hardware.back();
}

const HardwareTimings* Dataset::find_hardware(const std::string& name) const {
    for (const auto& entry : m_hardware) {
        if (entry.name == name) return &entry;
    }
    return nullptr;
}

void Dataset::add_timing(const std::string& hardware, const std::string& op,
                         const MMShape& shape, const TimedConfig& timed_config) {
    auto& hw = hardware_entry(hardware);
    auto* operation = hw.find(op);
    if (operation == nullptr) {
        hw.operations.push_back(OperationTimings{op, {}, {}});
        operation = &hw.operations.back();
    }
    auto* problem = operation->find(shape);
    if (problem == nullptr) {
        operation->index.emplace(shape, operation->problems.size());
        operation->problems.push_back(ProblemTimings{shape, {}});
        problem = &operation->problems.back();
    }
    problem->timed_configs.push_back(timed_config);
}

void Dataset::merge(const Dataset& other) {
    for (const auto& hw : other.m_hardware) {
        for (const auto& op : hw.operations) {
            for (const auto& problem : op.problems) {
                for (const auto& timed : problem.timed_configs) {
                    add_timing(hw.name, op.name, problem.shape, timed);
                }
            }
        }
    }
}

namespace {

bool op_matches(const std::string& key, const std::string& wanted) {
    if (key == wanted) return true;
    // A bare op name ("mm") selects every layout of that op ("mm_nt", ...).
    return key.size() > wanted.size() && key.compare(0, wanted.size(), wanted) == 0 &&
           key[wanted.size()] == '_' && wanted.find('_') == std::string::npos;
}

}  // namespace

Dataset Dataset::filter(const std::optional<std::string>& hardware,
                        const std::optional<std::string>& op) const {
    Dataset out;
    for (const auto& hw : m_hardware) {
        if (hardware && hw.name != *hardware) continue;
        for (const auto& operation : hw.operations) {
            if (op && !op_matches(operation.name, *op)) continue;
            for (const auto& problem : operation.problems) {
                for (const auto& timed : problem.timed_configs) {
                    out.add_timing(hw.name, operation.name, problem.shape, timed);
                }
            }
        }
    }
    return out;
}

std::vector<TableEntry> Dataset::to_table() const {
    std::vector<TableEntry> table;
    for (const auto& hw : m_hardware) {
        for (const auto& operation : hw.operations) {
            for (const auto& problem : operation.problems) {
                TableEntry entry{hw.name, operation.name, problem.shape, problem.timed_configs};
                std::stable_sort(entry.sorted_configs.begin(), entry.sorted_configs.end(),
                                 [](const TimedConfig& a, const TimedConfig& b) {
                                     return a.time_ms < b.time_ms;
                                 });
                table.push_back(std::move(entry));
            }
        }
    }
    return table;
}

std::optional<TimedConfig> Dataset::fastest(const std::string& hardware, const std::string& op,
                                            const MMShape& shape) const {
    const auto* hw = find_hardware(hardware);
    const auto* operation = hw ? hw->find(op) : nullptr;
    const auto* problem = operation ? operation->find(shape) : nullptr;
    if (problem == nullptr || problem->timed_configs.empty()) return std::nullopt;
    return *std::min_element(problem->timed_configs.begin(), problem->timed_configs.end(),
                             [](const TimedConfig& a, const TimedConfig& b) {
                                 return a.time_ms < b.time_ms;
                             });
}

bool Dataset::contains(const std::string& hardware, const std::string& op,
                       const MMShape& shape) const {
    const auto* hw = find_hardware(hardware);
    const auto* operation = hw ? hw->find(op) : nullptr;
    const auto* problem = operation ? operation->find(shape) : nullptr;
    return problem != nullptr && !problem->timed_configs.empty();
}

std::size_t Dataset::num_problems() const {
    std::size_t count = 0;
    for (const auto& hw : m_hardware) {
        for (const auto& op : hw.operations) count += op.problems.size();
    }
    return count;
}

std::size_t Dataset::num_timings() const {
    std::size_t count = 0;
    for (const auto& hw : m_hardware) {
        for (const auto& op : hw.operations) {
            for (const auto& problem : op.problems) count += problem.timed_configs.size();
        }
    }
    return count;
}

void OperationShapeSet::add_shape(const std::string& op, const MMShape& shape) {
    for (auto& entry : operations) {
        if (entry.op == op) {
            entry.shapes.push_back(shape);
            return;
        }
    }
    operations.push_back(Entry{op, {shape}});
}

std::size_t OperationShapeSet::num_shapes() const {
    std::size_t count = 0;
    for (const auto& entry : operations) count += entry.shapes.size();
    return count;
}

const std::vector<GemmConfig>& Solution::configs_for(const std::string& op) const {
    for (const auto& [name, list] : per_op) {
        if (name == op) return list;
    }
    return configs;
}

}  // namespace mmt::core
