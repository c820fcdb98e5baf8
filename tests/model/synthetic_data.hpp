#pragma once
// Test helper: datasets whose times follow a known law, so a model's accuracy can be
// checked against the truth.

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "matmul_toolkit/core/dataset.hpp"

namespace mmt::model::testing {

inline const char* kSyntheticGpu = "NVIDIA H100 80GB HBM3";

/// A DEFAULT-like grid of tile shapes.
inline std::vector<core::GemmConfig> synthetic_configs() {
    const int tiles[][5] = {{32, 32, 32, 2, 2},   {32, 64, 32, 3, 4},  {64, 32, 32, 3, 4},
                            {64, 64, 32, 3, 4},   {64, 64, 64, 4, 4},  {64, 128, 32, 3, 4},
                            {128, 64, 32, 3, 4},  {128, 128, 32, 3, 8}, {128, 128, 64, 4, 8},
                            {128, 256, 32, 3, 8}, {256, 128, 32, 3, 8}, {16, 16, 16, 1, 2}};
    std::vector<core::GemmConfig> configs;
    for (const auto& t : tiles) {
        core::GemmConfig c;
        c.name = "triton_mm";
        c.block_m = t[0];
        c.block_n = t[1];
        c.block_k = t[2];
        c.num_stages = t[3];
        c.num_warps = t[4];
        configs.push_back(c);
    }
    return configs;
}

/// Time of a config on a problem: padded flops over a throughput that grows with the
/// tile area, plus a fixed launch latency; multiplicative noise ~ exp(N(0, noise)).
inline double synthetic_time_ms(const core::MMShape& s, const core::GemmConfig& c, double noise,
                                std::mt19937_64& rng) {
    auto padded = [](std::int64_t x, int b) { return static_cast<double>((x + b - 1) / b * b); };
    const double padded_flops = 2.0 * s.B * padded(s.M, c.block_m) * padded(s.N, c.block_n) * padded(s.K, c.block_k);
    const double efficiency = std::pow(std::min(1.0, c.block_m * c.block_n / (128.0 * 128.0)), 0.35);
    const double time = padded_flops / (2.0e8 * efficiency) + 0.004;
    std::normal_distribution<double> eps(0.0, noise);
    return time * std::exp(eps(rng));
}

/// `problems` random mm problems (sizes 32..2048, log-uniform), every config timed.
inline core::Dataset synthetic_dataset(int problems, std::uint64_t seed, double noise = 0.02,
                                       const std::string& op = "mm") {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> log_size(5.0, 11.0);
    core::Dataset dataset;
    const auto configs = synthetic_configs();
    for (int p = 0; p < problems; ++p) {
        const auto m = static_cast<std::int64_t>(std::exp2(log_size(rng)));
        const auto n = static_cast<std::int64_t>(std::exp2(log_size(rng)));
        const auto k = static_cast<std::int64_t>(std::exp2(log_size(rng)));
        const auto shape = core::make_shape(1, m, n, k, "float16");
        for (const auto& c : configs) {
            core::GemmConfig config = c;
            config.even_k = k % c.block_k == 0;
            dataset.add_timing(kSyntheticGpu, op, shape, {config, synthetic_time_ms(shape, config, noise, rng)});
        }
    }
    return dataset;
}

}  // namespace mmt::model::testing
