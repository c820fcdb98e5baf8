#include "matmul_toolkit/collect/sharding.hpp"

#include <string>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect {

void validate_shard(const Shard& shard) {
    if (shard.count < 1) throw core::InputError("--num-shards", "must be at least 1");
    if (shard.index < 0 || shard.index >= shard.count) {
        throw core::InputError("--shard-index", std::to_string(shard.index) + " is outside 0.." +
                                                    std::to_string(shard.count - 1) +
                                                    " (--num-shards " + std::to_string(shard.count) + ")");
    }
}

std::vector<std::size_t> shard_positions(std::size_t total, const Shard& shard) {
    validate_shard(shard);
    std::vector<std::size_t> positions;
    for (std::size_t i = static_cast<std::size_t>(shard.index); i < total;
         i += static_cast<std::size_t>(shard.count)) {
        positions.push_back(i);
    }
    return positions;
}

std::vector<Problem> shard_problems(const std::vector<Problem>& problems, const Shard& shard) {
    std::vector<Problem> out;
    for (const std::size_t i : shard_positions(problems.size(), shard)) out.push_back(problems[i]);
    return out;
}

std::filesystem::path shard_output_path(const std::filesystem::path& output, const Shard& shard) {
    validate_shard(shard);
    if (shard.is_whole()) return output;
    return output.parent_path() / (output.stem().string() + "_shard" + std::to_string(shard.index) +
                                   "of" + std::to_string(shard.count) + output.extension().string());
}

}  // namespace mmt::collect
