#pragma once
/// Everything that fixes one compiled GEMM kernel: the config's compile-time parameters,
/// the dtype / op / layout, and the operand alignment the problem allows. Also the prune
/// rule: which specs a device can run, and why not.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "matmul_toolkit/collect/backend.hpp"
#include "matmul_toolkit/core/types.hpp"

namespace mmt::collect::cuda {

/// Which instructions do the multiply-adds.
enum class MathPath {
    mma16 = 0,  ///< mma.sync m16n8k16 (float16, bfloat16)
    tf32 = 1,   ///< mma.sync m16n8k8 tf32 (float32 with ALLOW_TF32)
    fma = 2,    ///< CUDA-core FMA (float32 without TF32)
    wgmma = 3,  ///< Hopper warpgroup MMA fed by TMA (gemm_kernel_sm90.cuh, sm_90a only)
    imma = 4,   ///< mma.sync m16n8k32 s8 -> s32 (int8, torch._int_mm; mm only, no split-K)
};

/// Elements per global load of A and B, and per store of C, that a problem's strides allow.
struct OperandAlignment {
    int vec_a = 1;
    int vec_b = 1;
    int vec_c = 1;
};

/// One kernel variant. make_spec() fills every field, the derived ones included.
struct KernelSpec {
    int block_m = 64;
    int block_n = 64;
    int block_k = 32;
    int group_m = 8;
    int num_stages = 2;
    int num_warps = 4;
    bool even_k = false;
    bool allow_tf32 = false;
    std::string dtype = "float16";
    std::string op = "mm";
    std::string layout = "nn";
    OperandAlignment align;

    MathPath math = MathPath::mma16;
    int warps_m = 0;  ///< warp grid over the tile (tensor-core paths); 0 when none fits
    int warps_n = 0;
    int thread_m = 0;  ///< accumulators per thread along M / N (FMA path); 0 when none fits
    int thread_n = 0;
    /// Tensor-core paths: double-buffer fragments across k-tiles too, so the barrier that
    /// publishes tile kt+1 comes before tile kt's last MMAs (mainloop_mma). make_spec turns
    /// it on for num_stages >= 3 when frag_pipeline_registers() fits in 255, or the CTA has
    /// 8 warps on the 16-bit path (one CTA per SM: the barrier stall is exposed). Measured
    /// on H100 (docs/experiments/2026-11-22-cuda-kernels.md): 1.3-1.5x for 16-bit 128x256 / 256x128 tiles with 8
    /// warps (also where ptxas spills a little), 0.6-0.8x for the same tiles in tf32; 0.5x
    /// with 2 stages; 0.5-0.9x for 4-warp 128x128 tiles (spills, and a second CTA per SM
    /// already hides the stall).
    bool frag_pipeline = false;
    /// wgmma path: the C tile of one warpgroup (rows, columns); 0 on the other paths.
    int wg_m = 0;
    int wg_n = 0;
    /// wgmma path: CTAs per cluster along M (1 or 2); a cluster's CTAs share their B tile
    /// through TMA multicast.
    int cluster_m = 1;
    /// wgmma path: persistent CTAs (MMT_PERSISTENT): as many CTAs as fit on the GPU at once,
    /// each looping over output tiles (plan_tiles), the loads of the next tile
    /// overlapping the epilogue, C staged in a buffer of its own. Clusters of one only.
    bool persistent = false;
    /// wgmma path, persistent only (MMT_DYNAMIC_TILES): CTAs take their tiles from a global
    /// counter (the kernel's tile_counter argument) instead of the static stride.
    bool dynamic_tiles = false;
    /// mma.sync / FMA template (MMT_SPLIT_K): the launch runs the tiles as parts along K
    /// (split_k_plan), summed through a float32 workspace. A variant of its own, so the
    /// kernels of problems that do not split keep their registers: with the unit of work a
    /// run-time value ptxas held 14-40 more per thread, and the occupancy of small tiles fell
    /// (docs/experiments/2026-11-22-cuda-kernels.md).
    bool split_k = false;
    /// Test only (MMT_TEST_FAULT_CONFIG): the kernel writes through an illegal address.
    /// Part of the prelude, so a faulting kernel never shares a cache entry with a sound one.
    bool test_fault = false;
};

/// What the prune rule needs to know about a device.
struct DeviceLimits {
    std::size_t max_shared_bytes = 232448;  ///< opt-in shared memory per block (H100: 227 KiB)
    int max_registers_per_thread = 255;
};

/// Row/column strides the kernel gets for a problem stored contiguously in its layout.
struct ProblemStrides {
    std::int64_t lda = 0, ldb = 0, ldc = 0;
    std::int64_t batch_a = 0, batch_b = 0, batch_c = 0;
};

ProblemStrides problem_strides(const Problem& problem);

/// The wgmma path's cluster size when the backend chooses it: 2 (the B tile multicast
/// to two CTAs along M) when B's rows do not start on 128-byte boundaries and the
/// problem is large (M >= 256 and K >= 1024: rows of tiles to pair, a long k-loop whose
/// load rate matters), else 1. TMA loads such rows at a much lower rate (H100, bf16
/// 2552x10616x7616: 0.76 of cuBLAS with N = 10616, 1.04 with N = 10624), and the
/// multicast halves the rows each CTA loads. With aligned rows, and on the small
/// 1376x80x216, clusters measured slower than persistent CTAs (docs/experiments/2026-11-22-cuda-kernels.md).
int preferred_cluster_m(const Problem& problem);

/// The widest loads/stores the problem's strides and extents allow (16 bytes at most).
OperandAlignment alignment_for(const Problem& problem);

/// The spec for a config on a problem (dtype, op, layout and alignment from the problem;
/// EVEN_K and ALLOW_TF32 as the config carries them).
KernelSpec make_spec(const core::GemmConfig& config, const Problem& problem);

/// The spec from explicit parts; derives the math path and the warp / thread layout.
KernelSpec make_spec(const core::GemmConfig& config, const std::string& dtype, const std::string& op,
                     const std::string& layout, const OperandAlignment& align);

/// Shared memory the kernel needs: (block_m + block_n) · block_k · num_stages · dtype size.
std::size_t shared_bytes(const KernelSpec& spec);

/// Registers per thread the kernel is expected to need (accumulators, double-buffered
/// fragments, and a fixed allowance for addresses and indices).
int estimated_registers(const KernelSpec& spec);

/// Registers per thread the mma.sync kernel with KernelSpec::frag_pipeline is expected to
/// need: accumulators, fragments for every k-step of a tile plus the next tile's first
/// (ptxas keeps a tile's fragment loads in flight together), and 4 per 16-byte copy a
/// thread issues per stage (address and predicate). Fitted to ptxas -v (sm_80) over 377
/// sampled EXHAUSTIVE configs x {bf16, tf32}: of the 4- and 2-warp configs it admits, 6
/// spill more than 8 bytes with the pipeline (the previous rule, 200 over a BLOCK_K-blind
/// estimate, admitted 40); 0 for the FMA path.
int frag_pipeline_registers(const KernelSpec& spec);

/// Why the wgmma path (gemm_kernel_sm90.cuh) cannot run an mma16 spec, or nullopt when it
/// can. The rule: float16 / bfloat16 (mma16 path); num_warps 4 or 8 (one or two
/// warpgroups); num_stages >= 2; block_m a multiple of 64; two warpgroups split block_m
/// when it is >= 128, else block_n; a warpgroup's columns (the wgmma N) 8..256; M-/N-major
/// operands are tiled in 64-element boxes, so with B row-major a warpgroup's columns are a
/// multiple of 64; at most 128 accumulators per thread; 16-byte aligned strides of A and B
/// (vec 8: what TMA requires of global strides); shared memory (stages of 1 KiB-rounded
/// tiles, alignment slack, barriers) within the device limit.
std::optional<std::string> wgmma_unsupported_reason(const KernelSpec& spec, const DeviceLimits& limits);

/// Switches an mma16 spec to the wgmma path when wgmma_unsupported_reason() allows it,
/// in clusters of `cluster_m` CTAs (1 or 2) along M; returns whether it did. EVEN_K and
/// frag_pipeline drop out (TMA zero-fills K). With `persistent` (and cluster_m 1) the
/// spec gets persistent CTAs when their shared memory (the stages plus the C buffer)
/// also fits; else it stays one tile per CTA. `dynamic_tiles` makes a persistent spec
/// take its tiles from the global counter (KernelSpec::dynamic_tiles).
bool select_wgmma(KernelSpec& spec, const DeviceLimits& limits, int cluster_m = 1, bool persistent = false,
                  bool dynamic_tiles = false);

/// The wgmma path's K depth of one TMA copy and one wgmma group: BLOCK_K, but at most 64.
/// A deeper stage (BLOCK_K 128) fills and drains in steps of 64, each with its own pair of
/// mbarriers, so the first half of a stage is refilled while the wgmma reads the second:
/// the same shared memory keeps more bytes in flight, which is what bounds one-wave
/// problems with a cold L2 (H200, 256x4096x4096 bf16, 64x128x128 s4 w4: 353 -> 380
/// TFLOP/s; ~5 % slower with a warm L2; docs/experiments/2026-11-22-cuda-kernels.md).
int wgmma_k_step(const KernelSpec& spec);

/// How a launch covers its tiles, on either template. With `capacity` CTAs resident at
/// once, the tiles of the last, partial wave (tiles % capacity; all of them when fewer
/// than capacity) are split into `splits` parts along K, so the wave's parts keep up to
/// `capacity` CTA slots busy ("split tail", gemm_kernel_common.cuh): splits =
/// min(capacity / tail tiles, k_tiles / min_k_tiles_per_split, max_splits), no split
/// below 2. The grid of a persistent launch is min(work units, capacity); a launch of one
/// unit per CTA (the mma.sync / FMA template) runs all `units`.
struct TilePlan {
    long long grid = 1;
    long long split_from = 0;  // tiles [0, split_from) run whole
    int splits = 1;
    long long units = 0;       // split_from + (tiles - split_from) x splits
    long long split_tiles() const { return splits > 1 ? (units - split_from) / splits : 0; }
};
/// The wgmma kernel sums a split tile's parts in a loop unrolled to this bound.
constexpr int kMaxTailSplits = 4;
/// The one-tile-per-CTA template sums them in a run-time loop: its bound only caps the
/// workspace traffic.
constexpr int kMaxTailSplitsOneTilePerCta = 16;
/// Fewer k-tiles per part would not pay for the part's trip through the workspace.
constexpr int kMinKTilesPerSplit = 4;
TilePlan plan_tiles(long long tiles, long long k_tiles, long long capacity, bool split_tail,
                    int min_k_tiles_per_split = kMinKTilesPerSplit, int max_splits = kMaxTailSplits);
/// The most parts plan_tiles may split a tile of `spec` into.
int max_tail_splits(const KernelSpec& spec);
/// How the mma.sync / FMA template splits a problem of `tiles` output tiles (every batch)
/// and `k_tiles` k-tiles on a device of `sms` SMs: when there are fewer tiles than SMs,
/// all of them, in up to sms / tiles parts (plan_tiles with one CTA per SM as the
/// capacity: the parts are there to use idle SMs; a first version with the occupancy as
/// the capacity split problems of 64-128 small tiles, which ran up to 0.7x); else not at all.
TilePlan split_k_plan(long long tiles, long long k_tiles, long long sms, int min_k_tiles_per_split = kMinKTilesPerSplit,
                      int max_splits = kMaxTailSplitsOneTilePerCta);

/// Whether persistent CTAs can do for `problem` anything that one tile per CTA does not:
/// walk more tiles than one wave holds (the next tile's loads then overlap an epilogue) or
/// split a partial wave along K. False when the tiles (every batch) fit one CTA per SM and
/// no split can happen: K is too short for two parts, the split tail is off, or a CTA
/// takes over half an SM's shared memory (`limits`) while the tiles outnumber half the
/// SMs. The one-tile kernel, free of the persistent loop and its per-warpgroup C passes,
/// is the faster there (H200: 1376x80x216 bf16 7.3-7.5 -> 7.6-7.8 TFLOP/s, 256x4096x4096
/// +1-2 %).
bool persistent_pays_off(const KernelSpec& spec, const Problem& problem, long long sms, const DeviceLimits& limits,
                         bool split_tail);

/// CTAs the kernel is launched with along the grid's x axis for an M x N problem (per
/// batch): the tiles, plus on the wgmma path with clusters of two a CTA past the last
/// row of tiles for each column when the row count is odd.
long long grid_ctas(const KernelSpec& spec, long long M, long long N);

/// Threads the kernel is launched with: 32 · num_warps, plus the TMA producer warp on the
/// wgmma path.
int threads_per_block(const KernelSpec& spec);

/// The NVRTC target for a device of compute capability major.minor: "sm_90a" on Hopper
/// (wgmma needs the arch-specific target; the other kernels compile the same for it),
/// else "sm_XY".
std::string nvrtc_arch(int cc_major, int cc_minor);

/// Why the device cannot run the spec, or nullopt when it can. The rule, in order:
/// block sizes are powers of two >= 16 and num_warps is 1..8 (a power of two); int8
/// (imma) needs block_k >= 32 (the MMA's K) and the mm op (torch._int_mm); the
/// warp grid (tensor cores: warps_m x warps_n with 16·warps_m | block_m and
/// 8·warps_n | block_n) or thread grid (FMA: block_m·block_n a multiple of the thread
/// count) divides the tile; shared memory fits the device's opt-in limit; estimated
/// registers fit the per-thread limit.
std::optional<std::string> unsupported_reason(const KernelSpec& spec, const DeviceLimits& limits);

/// The #define lines NVRTC sees in front of the kernel template.
std::string kernel_prelude(const KernelSpec& spec);

/// A short readable name for logs: "bf16_mm_nn_128x256x32_g8_s3_w8_v8.8.2_evenk".
std::string spec_name(const KernelSpec& spec);

/// The canonical text identifying the spec (kernel caches key on it).
std::string spec_key(const KernelSpec& spec);

}  // namespace mmt::collect::cuda
