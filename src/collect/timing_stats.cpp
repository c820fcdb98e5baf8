#include "matmul_toolkit/collect/timing_stats.hpp"

#include <algorithm>

namespace mmt::collect {

double median(std::vector<double> values) {
    if (values.empty()) return 0.0;
    const std::size_t mid = values.size() / 2;
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
    const double upper = values[mid];
    if (values.size() % 2 == 1) return upper;
    const double lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
    return (lower + upper) / 2.0;
}

void summarize_samples(Timing& timing) {
    const auto& s = timing.samples_ms;
    timing.median_ms = median(s);
    timing.min_ms = s.empty() ? 0.0 : *std::min_element(s.begin(), s.end());
    timing.max_ms = s.empty() ? 0.0 : *std::max_element(s.begin(), s.end());
}

double relative_spread(const Timing& timing) {
    return timing.median_ms > 0.0 ? (timing.max_ms - timing.min_ms) / timing.median_ms : 0.0;
}

}  // namespace mmt::collect
