#pragma once
/// Chrome-trace JSON (opens in Perfetto and chrome://tracing) of one problem: one event
/// per timed call of a config, with one child event per timed run, named by config.

#include <filesystem>
#include <string>
#include <vector>

#include "matmul_toolkit/collect/backend.hpp"

namespace mmt::collect {

class ProblemTrace {
public:
    explicit ProblemTrace(std::string problem_label) : m_label(std::move(problem_label)) {}

    /// A timed config: the whole call (warmup and check included) from `call_start_us` to
    /// `call_end_us` (µs on one clock), and its runs from `timing`.
    void add_timing(const std::string& config_label, double call_start_us, double call_end_us,
                    const Timing& timing);
    /// A config that failed, with why.
    void add_failure(const std::string& config_label, double call_start_us, double call_end_us,
                     const std::string& reason);

    std::size_t num_events() const { return m_events.size(); }
    /// {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}
    std::string to_json() const;
    /// Writes to_json() atomically.
    void save(const std::filesystem::path& path) const;

private:
    struct Event {
        std::string name;
        std::string category;
        double start_us = 0.0;
        double duration_us = 0.0;
        std::string detail;
    };
    std::string m_label;
    std::vector<Event> m_events;
};

/// "<dir>/0007_mm_nt_B1_M128_N256_K64_float32.json" for the problem at `index`.
std::filesystem::path trace_path(const std::filesystem::path& dir, std::size_t index,
                                 const Problem& problem);

}  // namespace mmt::collect
