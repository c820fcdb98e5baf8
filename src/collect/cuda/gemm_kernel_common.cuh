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

}  // namespace

#endif  // MMT_UTILITY
