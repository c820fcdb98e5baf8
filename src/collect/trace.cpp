#include "matmul_toolkit/collect/trace.hpp"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "matmul_toolkit/core/dataset_io.hpp"

namespace mmt::collect {

void ProblemTrace::add_timing(const std::string& config_label, double call_start_us,
                              double call_end_us, const Timing& timing) {
    char detail[96];
    std::snprintf(detail, sizeof detail, "median %.6f ms", timing.median_ms);
    m_events.push_back({config_label, "config", call_start_us, call_end_us - call_start_us, detail});
    // The timed runs end the call. With recorded starts they keep their gaps; without,
    // they are drawn back to back.
    const auto& samples = timing.samples_ms;
    const auto& starts = timing.sample_starts_ms;
    const bool have_starts = starts.size() == samples.size() && !samples.empty();
    double total_ms = 0.0;
    for (double ms : samples) total_ms += ms;
    const double phase_ms = have_starts ? starts.back() + samples.back() : total_ms;
    const double phase_start_us = call_end_us - phase_ms * 1000.0;
    double cursor_ms = 0.0;
    for (std::size_t i = 0; i < samples.size(); ++i) {
        const double offset_ms = have_starts ? starts[i] : cursor_ms;
        m_events.push_back({config_label, "run", phase_start_us + offset_ms * 1000.0,
                            samples[i] * 1000.0, "run " + std::to_string(i + 1)});
        cursor_ms += samples[i];
    }
}

void ProblemTrace::add_failure(const std::string& config_label, double call_start_us,
                               double call_end_us, const std::string& reason) {
    m_events.push_back({config_label + " (failed)", "failure", call_start_us,
                        call_end_us - call_start_us, reason});
}

std::string ProblemTrace::to_json() const {
    nlohmann::ordered_json events = nlohmann::ordered_json::array();
    for (const auto& e : m_events) {
        nlohmann::ordered_json event;
        event["name"] = e.name;
        event["cat"] = e.category;
        event["ph"] = "X";
        event["ts"] = e.start_us;
        event["dur"] = e.duration_us;
        event["pid"] = 1;
        event["tid"] = e.category == "run" ? 2 : 1;
        event["args"] = {{"detail", e.detail}};
        events.push_back(std::move(event));
    }
    nlohmann::ordered_json doc;
    doc["traceEvents"] = std::move(events);
    doc["displayTimeUnit"] = "ms";
    doc["otherData"] = {{"problem", m_label}};
    return doc.dump(1);
}

void ProblemTrace::save(const std::filesystem::path& path) const {
    core::write_file_atomically(path, to_json() + "\n");
}

std::filesystem::path trace_path(const std::filesystem::path& dir, std::size_t index,
                                 const Problem& p) {
    char prefix[32];
    std::snprintf(prefix, sizeof prefix, "%04zu_", index);
    const auto& s = p.shape;
    return dir / (prefix + p.op_key() + "_B" + std::to_string(s.B) + "_M" + std::to_string(s.M) +
                  "_N" + std::to_string(s.N) + "_K" + std::to_string(s.K) + "_" + p.dtype() + ".json");
}

}  // namespace mmt::collect
