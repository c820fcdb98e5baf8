#include "matmul_toolkit/core/dataset_stats.hpp"

#include <algorithm>
#include <cstdio>
#include <unordered_set>

#include "matmul_toolkit/core/dataset_io.hpp"

namespace mmt::core {
namespace {

std::string format_ms(double ms) {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.6g", ms);
    return buffer;
}

std::string count_of(std::size_t n, const std::string& noun) {
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string pad_right(const std::string& text, std::size_t width) {
    return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

std::string pad_left(const std::string& text, std::size_t width) {
    return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

}  // namespace

DatasetStats compute_stats(const Dataset& dataset) {
    DatasetStats stats;
    for (const auto& hw : dataset.hardware()) {
        HardwareStats hw_stats{hw.name, {}};
        for (const auto& op : hw.operations) {
            OperationStats op_stats;
            op_stats.op = op.name;
            std::unordered_set<GemmConfig, GemmConfigHash> distinct;
            for (const auto& problem : op.problems) {
                ProblemStats p;
                p.shape = problem.shape;
                p.num_configs = problem.timed_configs.size();
                if (!problem.timed_configs.empty()) {
                    p.fastest = *std::min_element(
                        problem.timed_configs.begin(), problem.timed_configs.end(),
                        [](const TimedConfig& a, const TimedConfig& b) { return a.time_ms < b.time_ms; });
                }
                for (const auto& tc : problem.timed_configs) distinct.insert(tc.config);
                op_stats.num_timed_configs += p.num_configs;
                op_stats.problems.push_back(std::move(p));
            }
            op_stats.num_distinct_configs = distinct.size();
            stats.num_operations += 1;
            stats.num_problems += op_stats.problems.size();
            stats.num_timed_configs += op_stats.num_timed_configs;
            hw_stats.operations.push_back(std::move(op_stats));
        }
        stats.hardware.push_back(std::move(hw_stats));
    }
    return stats;
}

std::string dtype_label(const MMShape& shape) {
    if (shape.M_dtype == shape.K_dtype && shape.K_dtype == shape.out_dtype) return shape.M_dtype;
    return shape.M_dtype + "/" + shape.K_dtype + "->" + shape.out_dtype;
}

std::string shape_label(const MMShape& shape) {
    std::string out = shape.B == 1 ? "" : "B=" + std::to_string(shape.B) + " ";
    out += "M=" + std::to_string(shape.M) + " N=" + std::to_string(shape.N) +
           " K=" + std::to_string(shape.K);
    return out;
}

std::string config_label(const GemmConfig& c) {
    // Vendor-library entries (aten_mm, ...) carry placeholder tile fields.
    if (is_vendor_entry(c)) return c.name;
    std::string out = std::to_string(c.block_m) + "x" + std::to_string(c.block_n) + "x" +
                      std::to_string(c.block_k) + " g" + std::to_string(c.group_m) + " s" +
                      std::to_string(c.num_stages) + " w" + std::to_string(c.num_warps);
    if (c.even_k) out += " EVEN_K";
    if (c.allow_tf32) out += " TF32";
    if (c.use_fast_accum) out += " FAST_ACCUM";
    if (c.acc_type != "tl.float32") out += " " + c.acc_type;
    return out;
}

std::string format_stats_text(const DatasetStats& stats, const std::string& source) {
    std::string out = "dataset: " + source + "\n";
    out += "hardware: " + std::to_string(stats.hardware.size()) +
           ", operations: " + std::to_string(stats.num_operations) +
           ", problems: " + std::to_string(stats.num_problems) +
           ", timed configs: " + std::to_string(stats.num_timed_configs) + "\n";
    for (const auto& hw : stats.hardware) {
        out += "\nhardware '" + hw.name + "'\n";
        for (const auto& op : hw.operations) {
            out += "  " + op.op + ": " + count_of(op.problems.size(), "problem") + ", " +
                   count_of(op.num_timed_configs, "timed config") + " (" +
                   std::to_string(op.num_distinct_configs) + " distinct)\n";
            std::size_t shape_width = 7;
            std::size_t dtype_width = 5;
            for (const auto& p : op.problems) {
                shape_width = std::max(shape_width, shape_label(p.shape).size());
                dtype_width = std::max(dtype_width, dtype_label(p.shape).size());
            }
            out += "    " + pad_right("problem", shape_width) + "  " + pad_right("dtype", dtype_width) +
                   "  configs  fastest ms  fastest config\n";
            for (const auto& p : op.problems) {
                out += "    " + pad_right(shape_label(p.shape), shape_width) + "  " +
                       pad_right(dtype_label(p.shape), dtype_width) + "  " +
                       pad_left(std::to_string(p.num_configs), 7) + "  " +
                       pad_left(p.num_configs ? format_ms(p.fastest.time_ms) : "-", 10) + "  " +
                       (p.num_configs ? config_label(p.fastest.config) : "-") + "\n";
            }
        }
    }
    return out;
}

OrderedJson stats_to_document(const DatasetStats& stats, const std::string& source) {
    OrderedJson hardware = OrderedJson::array();
    for (const auto& hw : stats.hardware) {
        OrderedJson operations = OrderedJson::array();
        for (const auto& op : hw.operations) {
            OrderedJson problems = OrderedJson::array();
            for (const auto& p : op.problems) {
                OrderedJson problem = OrderedJson::object();
                problem["shape"] = shape_to_document(p.shape);
                problem["dtype"] = dtype_label(p.shape);
                problem["configs"] = p.num_configs;
                if (p.num_configs) {
                    problem["fastest_time_ms"] = p.fastest.time_ms;
                    problem["fastest_config"] = config_to_document(p.fastest.config);
                }
                problems.push_back(std::move(problem));
            }
            OrderedJson entry = OrderedJson::object();
            entry["op"] = op.op;
            entry["problems"] = op.problems.size();
            entry["timed_configs"] = op.num_timed_configs;
            entry["distinct_configs"] = op.num_distinct_configs;
            entry["problem_stats"] = std::move(problems);
            operations.push_back(std::move(entry));
        }
        OrderedJson entry = OrderedJson::object();
        entry["name"] = hw.name;
        entry["operations"] = std::move(operations);
        hardware.push_back(std::move(entry));
    }
    OrderedJson out = OrderedJson::object();
    out["source"] = source;
    out["hardware_count"] = stats.hardware.size();
    out["operations"] = stats.num_operations;
    out["problems"] = stats.num_problems;
    out["timed_configs"] = stats.num_timed_configs;
    out["hardware"] = std::move(hardware);
    return out;
}

}  // namespace mmt::core
