#pragma once
/// Splitting one collection across machines: a deterministic partition of the planned
/// problem list into --num-shards slices, each collected by its own run into its own file.

#include <cstddef>
#include <filesystem>
#include <vector>

#include "matmul_toolkit/collect/backend.hpp"

namespace mmt::collect {

/// Which slice of the problem list a run collects; {0, 1} is the whole list.
struct Shard {
    int index = 0;  ///< --shard-index, 0 <= index < count
    int count = 1;  ///< --num-shards

    bool is_whole() const { return count == 1; }
};

/// Throws InputError naming --num-shards or --shard-index when the shard is out of range.
void validate_shard(const Shard& shard);

/// Positions (into a list of `total` problems) of the shard's problems: every count-th one
/// starting at index. Round-robin keeps slices within one problem of each other in size
/// and mixes small and large problems into every slice.
std::vector<std::size_t> shard_positions(std::size_t total, const Shard& shard);

/// The shard's problems, in list order.
std::vector<Problem> shard_problems(const std::vector<Problem>& problems, const Shard& shard);

/// The file a shard writes: "data.json" -> "data_shard2of8.json" (chunks then follow as
/// "data_shard2of8_1.json"); the output itself for the whole list.
std::filesystem::path shard_output_path(const std::filesystem::path& output, const Shard& shard);

}  // namespace mmt::collect
