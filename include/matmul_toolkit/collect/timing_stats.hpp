#pragma once
/// Summaries of repeated timings, shared by every backend.

#include <vector>

#include "matmul_toolkit/collect/backend.hpp"

namespace mmt::collect {

/// The median (mean of the two middle values for an even count, as numpy.median);
/// 0 for an empty list.
double median(std::vector<double> values);

/// Sets median_ms, min_ms and max_ms from samples_ms.
void summarize_samples(Timing& timing);

/// (max - min) / median: the spread a sidecar records; 0 when the median is 0.
double relative_spread(const Timing& timing);

}  // namespace mmt::collect
