#include "matmul_toolkit/collect/config_space.hpp"

#include <algorithm>
#include <array>
#include <set>
#include <cctype>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect {
namespace {

core::GemmConfig make_config(int block_m, int block_n, int block_k, int group_m,
                             int num_stages, int num_warps) {
    core::GemmConfig config;
    config.block_m = block_m;
    config.block_n = block_n;
    config.block_k = block_k;
    config.group_m = group_m;
    config.num_stages = num_stages;
    config.num_warps = num_warps;
    return config;
}

void check_axis(const std::vector<int>& values, const char* axis) {
    for (int v : values) {
        if (v <= 0) {
            throw core::InputError(std::string("config axis ") + axis,
                                   "values must be positive, got " + std::to_string(v));
        }
    }
}

}  // namespace

SearchSpace parse_search_space(const std::string& name) {
    std::string upper = name;
    std::transform(upper.begin(), upper.end(), upper.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    if (upper == "DEFAULT") return SearchSpace::default_space;
    if (upper == "EXHAUSTIVE") return SearchSpace::exhaustive;
    throw core::InputError("--search-space",
                           "unknown search space '" + name + "' (expected DEFAULT or EXHAUSTIVE)");
}

std::string search_space_name(SearchSpace space) {
    return space == SearchSpace::exhaustive ? "EXHAUSTIVE" : "DEFAULT";
}

std::vector<core::GemmConfig> expand_grid(const ConfigAxes& axes) {
    check_axis(axes.block_m, "block_m");
    check_axis(axes.block_n, "block_n");
    check_axis(axes.block_k, "block_k");
    check_axis(axes.group_m, "group_m");
    check_axis(axes.num_stages, "num_stages");
    check_axis(axes.num_warps, "num_warps");
    std::vector<core::GemmConfig> configs;
    configs.reserve(axes.block_m.size() * axes.block_n.size() * axes.block_k.size() *
                    axes.group_m.size() * axes.num_stages.size() * axes.num_warps.size());
    for (int bm : axes.block_m)
        for (int bn : axes.block_n)
            for (int bk : axes.block_k)
                for (int gm : axes.group_m)
                    for (int stages : axes.num_stages)
                        for (int warps : axes.num_warps)
                            configs.push_back(make_config(bm, bn, bk, gm, stages, warps));
    return configs;
}

ConfigAxes exhaustive_axes() {
    ConfigAxes axes;
    axes.block_m = {16, 32, 64, 128, 256};
    axes.block_n = {16, 32, 64, 128, 256};
    axes.block_k = {16, 32, 64, 128, 256};
    axes.group_m = {8};
    axes.num_stages = {1, 2, 3, 4, 5};
    axes.num_warps = {2, 4, 8};
    return axes;
}

std::vector<core::GemmConfig> default_configs() {
    // (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps): Inductor's mm_kernel_configs.
    static constexpr int kList[][5] = {
        {32, 32, 16, 1, 2},    {32, 32, 128, 2, 4},   {32, 64, 32, 5, 8},
        {64, 32, 32, 5, 8},    {64, 32, 128, 5, 4},   {64, 64, 16, 2, 4},
        {64, 64, 32, 2, 4},    {64, 64, 64, 3, 8},    {64, 64, 128, 5, 4},
        {64, 128, 32, 3, 4},   {64, 128, 32, 4, 8},   {64, 128, 64, 3, 4},
        {64, 128, 128, 4, 4},  {128, 64, 32, 3, 4},   {128, 64, 32, 4, 8},
        {128, 128, 32, 2, 8},  {128, 128, 32, 3, 4},  {128, 128, 64, 3, 4},
        {128, 128, 64, 5, 8},  {128, 128, 128, 4, 8},
    };
    std::vector<core::GemmConfig> configs;
    for (const auto& c : kList) configs.push_back(make_config(c[0], c[1], c[2], 8, c[3], c[4]));
    return configs;
}

std::vector<core::GemmConfig> int8_default_configs() {
    // (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps): Inductor's int8_mm_configs.
    static constexpr int kList[][5] = {
        {64, 64, 32, 2, 4},  {64, 128, 32, 3, 4}, {128, 64, 32, 3, 4},   {64, 128, 32, 4, 8},
        {128, 64, 32, 4, 8}, {64, 32, 32, 5, 8},  {32, 64, 32, 5, 8},    {128, 128, 32, 2, 8},
        {64, 64, 64, 3, 8},  {128, 256, 128, 3, 8}, {256, 128, 128, 3, 8},
    };
    std::vector<core::GemmConfig> configs;
    for (const auto& c : kList) configs.push_back(make_config(c[0], c[1], c[2], 8, c[3], c[4]));
    return configs;
}

std::vector<core::GemmConfig> exhaustive_configs() { return expand_grid(exhaustive_axes()); }

std::vector<core::GemmConfig> configs_for(SearchSpace space) {
    return space == SearchSpace::exhaustive ? exhaustive_configs() : default_configs();
}

std::vector<core::GemmConfig> inductor_scaled_configs(const std::vector<core::GemmConfig>& configs,
                                                      const core::MMShape& shape) {
    static constexpr std::int64_t kMinBlock = 16;
    static constexpr std::int64_t kRegistersPerThread = 255;
    auto next_power_of_two = [](std::int64_t x) {
        std::int64_t p = 1;
        while (p < x) p *= 2;
        return p;
    };
    const std::int64_t m_cap = std::max(next_power_of_two(shape.M), kMinBlock);
    const std::int64_t n_cap = std::max(next_power_of_two(shape.N), kMinBlock);
    const std::int64_t k_cap = std::max(next_power_of_two(shape.K), kMinBlock);
    auto scaled = [](int block, std::int64_t cap) {
        return static_cast<int>(std::max(std::min<std::int64_t>(block, cap), kMinBlock));
    };
    std::vector<core::GemmConfig> out;
    out.reserve(configs.size());
    std::set<std::array<int, 6>> seen;
    for (const auto& c : configs) {
        core::GemmConfig s = c;
        s.block_m = scaled(c.block_m, m_cap);
        s.block_n = scaled(c.block_n, n_cap);
        s.block_k = scaled(c.block_k, k_cap);
        const std::int64_t accumulator_registers =
            (static_cast<std::int64_t>(s.block_m) * s.block_n + 32 * c.num_warps - 1) / (32 * c.num_warps);
        if (accumulator_registers > kRegistersPerThread) continue;
        s.num_warps = std::min(c.num_warps, s.block_m * s.block_n / 256);  // a 16x16 tile per warp
        if (!seen.insert({s.block_m, s.block_n, s.block_k, s.group_m, s.num_stages, s.num_warps}).second) continue;
        out.push_back(std::move(s));
    }
    return out;
}

std::int64_t inductor_shared_memory_bytes(const core::GemmConfig& config, int element_bytes) {
    return static_cast<std::int64_t>(config.num_stages) * config.block_k *
           (static_cast<std::int64_t>(config.block_m) + config.block_n) * element_bytes;
}

std::string config_name(const std::string& op) { return op + "_config"; }

core::GemmConfig specialize_config(const core::GemmConfig& config, const Problem& problem,
                                   bool allow_tf32) {
    core::GemmConfig out = config;
    out.name = config_name(problem.op);
    out.even_k = config.block_k > 0 && problem.shape.K % config.block_k == 0;
    out.allow_tf32 = allow_tf32 && problem.dtype() == "float32";
    out.acc_type = core::acc_type_for(problem.dtype());
    return out;
}

std::vector<core::GemmConfig> specialize_configs(const std::vector<core::GemmConfig>& configs,
                                                 const Problem& problem, bool allow_tf32) {
    std::vector<core::GemmConfig> out;
    out.reserve(configs.size());
    for (const auto& c : configs) out.push_back(specialize_config(c, problem, allow_tf32));
    return out;
}

core::GemmConfig reference_config(const Problem& problem) {
    core::GemmConfig config;
    config.name = "aten_" + problem.op;
    // No tiles: every tile field gets 1, the least dataset readers accept and a value no
    // Triton config has.
    config.block_m = config.block_n = config.block_k = 1;
    config.group_m = config.num_stages = config.num_warps = 1;
    config.acc_type = core::acc_type_for(problem.dtype());
    return config;
}

bool is_reference_config(const core::GemmConfig& config) { return core::is_vendor_entry(config); }

std::string describe_config(const core::GemmConfig& c) {
    if (is_reference_config(c)) return c.name;
    std::string label = std::to_string(c.block_m) + "x" + std::to_string(c.block_n) + "x" +
                        std::to_string(c.block_k) + " g" + std::to_string(c.group_m) + " s" +
                        std::to_string(c.num_stages) + " w" + std::to_string(c.num_warps);
    // Inductor's persistent TMA template may run the same tile as its mm template.
    if (c.name.find("persistent_tma") != std::string::npos) label += " tma";
    return label;
}

}  // namespace mmt::collect
