#pragma once
/// Kernel config search spaces: Inductor's DEFAULT list and the EXHAUSTIVE grid, the grid
/// expansion that builds them, and the per-problem fields Inductor sets on each config.

#include <cstdint>
#include <string>
#include <vector>

#include "matmul_toolkit/collect/backend.hpp"
#include "matmul_toolkit/core/types.hpp"

namespace mmt::collect {

/// `--search-space`: DEFAULT (Inductor's mm list) or EXHAUSTIVE (the full grid).
enum class SearchSpace { default_space, exhaustive };

/// Parses "DEFAULT" / "EXHAUSTIVE" (any case); throws InputError("--search-space", ...).
SearchSpace parse_search_space(const std::string& name);
/// "DEFAULT" | "EXHAUSTIVE"
std::string search_space_name(SearchSpace space);

/// One value list per config field; every combination is one config (llama-bench style).
struct ConfigAxes {
    std::vector<int> block_m;
    std::vector<int> block_n;
    std::vector<int> block_k;
    std::vector<int> group_m;
    std::vector<int> num_stages;
    std::vector<int> num_warps;
};

/// Every combination of the axes, block_m outermost and num_warps innermost. An empty
/// axis gives no configs; throws InputError when a value is not positive.
std::vector<core::GemmConfig> expand_grid(const ConfigAxes& axes);

/// The EXHAUSTIVE axes: block_m/n/k in {16..256}, group_m 8, stages 1..5, warps {2,4,8}.
ConfigAxes exhaustive_axes();

/// Inductor's 20 CUDA mm configs (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps), group_m 8.
std::vector<core::GemmConfig> default_configs();
/// Inductor's 11 int8 configs (int8_mm_configs, what it autotunes torch._int_mm with),
/// group_m 8: the DEFAULT space of int8 problems.
std::vector<core::GemmConfig> int8_default_configs();
/// expand_grid(exhaustive_axes()): 1875 configs before any backend prunes them.
std::vector<core::GemmConfig> exhaustive_configs();
std::vector<core::GemmConfig> configs_for(SearchSpace space);

/// The configs as Inductor's Triton template heuristics build them for `shape` (torch 2.11,
/// template_heuristics/triton.py): each block size capped at its dimension's next power of
/// two and raised to at least 16; num_warps capped at one warp per 256 tile elements; tiles
/// whose accumulator would take more than 255 registers a thread dropped; repeats dropped,
/// first kept. A small problem runs these, not the listed tiles: a 128-row tile becomes 16
/// rows for M = 1. Other fields are copied.
std::vector<core::GemmConfig> inductor_scaled_configs(const std::vector<core::GemmConfig>& configs,
                                                      const core::MMShape& shape);

/// Shared memory the Inductor worker assumes a Triton tile needs, in bytes:
/// num_stages · block_k · (block_m + block_n) · element size (what it checks before compiling).
std::int64_t inductor_shared_memory_bytes(const core::GemmConfig& config, int element_bytes);

/// torch-diode's config name for an op: "mm_config", "addmm_config", "bmm_config".
std::string config_name(const std::string& op);

/// A config with the fields Inductor sets per problem: its name, EVEN_K when K is a
/// multiple of block_k, ALLOW_TF32 for float32 when allowed, ACC_TYPE from the dtype.
core::GemmConfig specialize_config(const core::GemmConfig& config, const Problem& problem,
                                   bool allow_tf32);
std::vector<core::GemmConfig> specialize_configs(const std::vector<core::GemmConfig>& configs,
                                                 const Problem& problem, bool allow_tf32);

/// The vendor-library entry of a problem, named as Inductor's extern choice
/// ("aten_mm", "aten_addmm", "aten_bmm"); it has no tiles, so its tile fields are all 1.
core::GemmConfig reference_config(const Problem& problem);
/// True for entries reference_config() makes (name starts with "aten_").
bool is_reference_config(const core::GemmConfig& config);

/// A short label for logs and traces: "64x64x32 g8 s2 w4" (" tma" added for Inductor's
/// persistent TMA template), or the name for references.
std::string describe_config(const core::GemmConfig& config);

}  // namespace mmt::collect
