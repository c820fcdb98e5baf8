// What both GEMM kernel templates (gemm_kernel.cuh, gemm_kernel_sm90.cuh) start from: the
// config's compile-time constants from the MMT_* prelude (kernel_spec.cpp) and the
// helpers neither path can do without. kernel_source.cpp puts it in front of the two; the
// utility kernels (MMT_UTILITY) have no config and skip it.

#ifndef MMT_UTILITY

namespace {

constexpr int BM = MMT_BLOCK_M;
constexpr int BN = MMT_BLOCK_N;
constexpr int BK = MMT_BLOCK_K;
constexpr int GROUP_M = MMT_GROUP_M;
constexpr int STAGES = MMT_NUM_STAGES;
constexpr int WARPS = MMT_NUM_WARPS;
constexpr int THREADS = WARPS * 32;
constexpr bool ADDMM = MMT_ADDMM != 0;

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned long long a;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
    return (unsigned)a;
}

// Tile `pid` of one batch in GROUP_M-swizzled order, as Triton's template maps its
// program id.
__device__ __forceinline__ void tile_origin(int pid, int grid_m, int grid_n, int& m_base, int& n_base) {
    const int width = GROUP_M * grid_n;
    const int group_id = pid / width;
    const int group_size = min(grid_m - group_id * GROUP_M, GROUP_M);
    m_base = (group_id * GROUP_M + (pid % group_size)) * BM;
    n_base = ((pid % width) / group_size) * BN;
}

// Output tile `t` of all batches, batch by batch.
__device__ __forceinline__ void tile_coords(int t, int grid_m, int grid_n, int& m_base, int& n_base, int& batch) {
    const int per_batch = grid_m * grid_n;
    batch = t / per_batch;
    tile_origin(t - batch * per_batch, grid_m, grid_n, m_base, n_base);
}

// The split both templates share (kernel_spec.hpp: plan_tiles, split_k_plan): tiles split
// along K into `splits` parts fill SMs that would stay idle. Work unit `u`: tile u whole
// (u < split_from), else part (u - split_from) % splits of tile split_from + (u -
// split_from) / splits, with that part's k-tiles [kb, ke) and the tile's place (as
// tile_coords gives it). part is -1 for a whole tile.
struct Unit {
    int t, part, kb, ke, m_base, n_base, batch;
};
// maybe_unused: kernels that never split have no units (NVRTC would warn).
[[maybe_unused]] __device__ __forceinline__ Unit unit_at(int u, int split_from, int splits, int k_tiles, int grid_m,
                                                         int grid_n) {
    Unit w;
    if (u < split_from || splits == 1) {
        w.t = u;
        w.part = -1;
        w.kb = 0;
        w.ke = k_tiles;
    } else {
        const int v = u - split_from;
        w.t = split_from + v / splits;
        w.part = v % splits;
        w.kb = w.part * k_tiles / splits;
        w.ke = (w.part + 1) * k_tiles / splits;
    }
    tile_coords(w.t, grid_m, grid_n, w.m_base, w.n_base, w.batch);
    return w;
}

}  // namespace

#endif  // MMT_UTILITY
