#pragma once
// Problems and configs that the CUDA backend tests write out by hand.

#include <cstdint>
#include <string>

#include "matmul_toolkit/collect/backend.hpp"
#include "matmul_toolkit/core/types.hpp"

namespace mmt::collect::cuda::test {

inline Problem problem(std::int64_t B, std::int64_t M, std::int64_t N, std::int64_t K,
                       const std::string& dtype = "bfloat16", const std::string& op = "mm",
                       const std::string& layout = "nn") {
    Problem p;
    p.op = op;
    p.layout = layout;
    p.shape = core::make_shape(B, M, N, K, dtype);
    return p;
}

/// GROUP_M stays at its default (8), as in Inductor's configs.
inline core::GemmConfig config(int bm, int bn, int bk, int stages, int warps) {
    core::GemmConfig c;
    c.block_m = bm;
    c.block_n = bn;
    c.block_k = bk;
    c.num_stages = stages;
    c.num_warps = warps;
    return c;
}

}  // namespace mmt::collect::cuda::test
