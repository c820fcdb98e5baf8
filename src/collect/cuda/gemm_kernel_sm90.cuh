// The Hopper (sm_90a) GEMM kernel template: warpgroup MMA (wgmma) fed by TMA. Embedded and
// compiled by NVRTC like gemm_kernel.cuh; the host selects it (KernelSpec::math ==
// MathPath::wgmma, prelude MMT_WGMMA 1) for the configs kernel_spec.cpp's wgmma rule admits,
// and compiles it for sm_90a (wgmma and its descriptors exist on no other target).
//
// The config keeps Triton's meaning on Hopper: a CTA computes a BLOCK_M x BLOCK_N tile of
// C, tiles in GROUP_M-swizzled order; K is walked BLOCK_K at a time through a NUM_STAGES
// ring of shared-memory stages; NUM_WARPS 4 is one warpgroup, 8 is two, which split
// BLOCK_M (or BLOCK_N when BLOCK_M is 64). A stage deeper than 64 (BLOCK_K 128) is filled
// and consumed in K steps of 64 (MMT_K_STEP, the host's wgmma_k_step), each with its own
// mbarriers and wgmma group: the ring is NUM_STAGES x BLOCK_K / K_STEP steps long, and a
// step's half of a stage is refilled while the wgmma still reads the other half.
//
// Loads: one thread issues TMA copies (cp.async.bulk.tensor, tensor maps built on the host
// by cuTensorMapEncodeTiled and passed as __grid_constant__ parameters) that complete on a
// per-step "full" mbarrier. TMA zero-fills everything outside the tensor, so ragged M, N
// and K need no masks on the load side. Every thread arrives on the step's "empty"
// mbarrier once the wgmma that read it has completed; the producer waits on it before
// refilling that part of the stage.
//
// Shared layout: each operand tile keeps its global orientation, in boxes whose rows are
// at most 128 bytes, swizzled by TMA (128B, or 64B / 32B for K-major tiles with BLOCK_K
// of 32 / 16); wgmma reads it through matrix descriptors with the same swizzle and the
// transpose bit for M-/N-major operands.
//
// Warps: NUM_WARPS consumer warps (the warpgroups above) plus one producer warp, one
// thread of which issues the TMA copies. Epilogue: the C tile is staged in shared memory
// and written back in 16-byte pieces, masked to M and N.
//
// MMT_PERSISTENT 1: the grid holds at most as many CTAs as fit on the GPU at once; each
// walks the output tiles (all batches) t = blockIdx.x, + gridDim.x, ... in the same
// GROUP_M-swizzled order. The stage ring and its barriers run on across tiles, so the
// producer loads the next tile's first stages while the consumers run the epilogue; C
// is then staged in a buffer of its own (32 rows per warpgroup at a time), not in the
// stages.
//
// MMT_DYNAMIC_TILES 1 (persistent only): the CTAs take tiles from a global counter
// instead of the stride, so a CTA that runs slower takes fewer tiles (with one tile per
// CTA the hardware balances the same way). The producer warp fetches the tile ids and
// hands them to the consumers in order through a ring of two ids in shared memory
// guarded by an mbarrier pair per id.
//
// Split tail (persistent, either schedule): the host may split the tiles of the last,
// partial wave along K (plan_tiles in kernel_spec.cpp), so they keep every SM busy
// instead of leaving most idle. The CTAs then walk work units: tiles [0, split_from)
// whole, then `splits` parts of each later tile, part p taking k-tiles [p·kt/splits,
// (p+1)·kt/splits). Each part's warpgroups store their float32 partial sums in the
// workspace and count themselves on the tile's flag (one per warpgroup); the one that
// arrives last adds the parts in part order (the same sum whoever is last), runs the
// epilogue and sets the flag back to zero for the next launch. Nobody waits for another
// CTA, so no schedule can deadlock.

namespace {

// BM, BN, BK, GROUP_M, STAGES, WARPS, THREADS, ADDMM and smem_addr: gemm_kernel_common.cuh.
constexpr int WARPGROUPS = WARPS / 4;
constexpr int WG_M = MMT_WG_M;  // rows of C per warpgroup
constexpr int WG_N = MMT_WG_N;  // columns of C per warpgroup (the wgmma N)
constexpr int WGS_ALONG_M = BM / WG_M;
constexpr int MT = WG_M / 64;   // m64 instructions per k16 step
constexpr int ACC = WG_N / 2;   // accumulators per thread per m64 instruction
constexpr bool A_MN_MAJOR = MMT_A_KMAJOR == 0;  // A column-major: M contiguous
constexpr bool B_MN_MAJOR = MMT_B_KMAJOR == 0;  // B row-major: N contiguous
// MMT_CLUSTER_M 2: CTAs run in clusters of two along M that share their B tile: each
// loads half of it and multicasts the half to both (halving B's L2 -> SM traffic).
#ifndef MMT_CLUSTER_M
#define MMT_CLUSTER_M 1
#endif
constexpr int CLUSTER = MMT_CLUSTER_M;
#ifndef MMT_PERSISTENT
#define MMT_PERSISTENT 0
#endif
constexpr bool PERSISTENT = MMT_PERSISTENT != 0;
#ifndef MMT_DYNAMIC_TILES
#define MMT_DYNAMIC_TILES 0
#endif
constexpr bool DYNAMIC_TILES = MMT_DYNAMIC_TILES != 0;
static_assert(!DYNAMIC_TILES || PERSISTENT, "dynamic tiles are a persistent schedule");
static_assert(!PERSISTENT || CLUSTER == 1, "persistent CTAs run without clusters");
static_assert(WARPGROUPS * 4 == WARPS && WGS_ALONG_M * (BN / WG_N) == WARPGROUPS, "warpgroup layout");
static_assert(WG_M % 64 == 0 && WG_N % 8 == 0 && WG_N <= 256, "wgmma shape");

#if MMT_DTYPE == 0
#define MMT_WG_TYPE "f16"
#else
#define MMT_WG_TYPE "bf16"
#endif
typedef unsigned short elem_t;
constexpr int ELT = 2;

// K-major tiles are stored as BK / KB boxes of [rows][KB]; M/N-major tiles as rows / 64
// boxes of [BK][64]. Every box row is SW bytes, swizzled in SW-byte spans.
constexpr int KB = BK < 64 ? BK : 64;
constexpr int SW_K = KB * ELT;          // swizzle span of K-major tiles: 32, 64 or 128 bytes
constexpr int MNB = 64;                 // elements per box row of M/N-major tiles (128 bytes)
constexpr int ROUND = 1024;
constexpr int A_BYTES = (BM * BK * ELT + ROUND - 1) / ROUND * ROUND;
constexpr int B_BYTES = (BN * BK * ELT + ROUND - 1) / ROUND * ROUND;
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
// The epilogue stages the C tile in the same memory, rows padded by 8 elements.
constexpr int C_PITCH = BN + 8;
constexpr int C_BYTES = BM * C_PITCH * ELT;
constexpr int C_ROUNDED = (C_BYTES + ROUND - 1) / ROUND * ROUND;
// Persistent: per warpgroup, 32 rows of its C columns (one row half of an m64 block),
// rows padded by 8 elements, after the stages.
constexpr int WG_C_PITCH = WG_N + 8;
constexpr int WG_C_BYTES = 32 * WG_C_PITCH * ELT;
constexpr int DATA_BYTES = PERSISTENT ? STAGES * STAGE_BYTES + WARPGROUPS * WG_C_BYTES
                           : STAGES * STAGE_BYTES > C_ROUNDED ? STAGES * STAGE_BYTES
                                                              : C_ROUNDED;
constexpr int K_STEP = MMT_K_STEP;             // K depth of one TMA copy and one wgmma group
constexpr int STEPS_PER_STAGE = BK / K_STEP;
constexpr int RING = STAGES * STEPS_PER_STAGE;  // full/empty mbarrier pairs
static_assert(BK % K_STEP == 0 && (K_STEP == BK || K_STEP % KB == 0), "k step");
constexpr unsigned TX_BYTES = (BM + BN) * K_STEP * ELT;  // per step; TMA counts zero-filled bytes too

// The 128-byte CUtensorMap of cuda.h (NVRTC has no cuda.h): opaque to the kernel.
struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    // Labels inside a { } block are local to it, so every inlined copy may reuse them.
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "MMT_WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra MMT_WAIT;\n"
        "}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}

__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap* map, unsigned bar, int c0, int c1, int c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
        "[%5];\n" ::"r"(dst),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
        : "memory");
}

// The same copy, multicast to the same shared offset (and barrier) of every CTA of the
// cluster in `mask`.
__device__ __forceinline__ void tma_load_multicast(unsigned dst, const TensorMap* map, unsigned bar, int c0, int c1,
                                                   int c2, unsigned short mask) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
        "[%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(dst),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(mask)
        : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Arrives on the mbarrier at the same shared offset in CTA `rank` of the cluster. It
// orders nothing but the stage's reuse, whose reads (wgmma) have completed already, so
// the default .release.cta semantics suffice (as in CUTLASS's cluster barriers); with
// .release.cluster every clustered kernel ran at half speed (bench/NOTES_cuda.md).
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned rank) {
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
        "}\n" ::"r"(bar),
        "r"(rank)
        : "memory");
}

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator reads or writes across wgmma fences/waits.
template <int R>
__device__ __forceinline__ void pin(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Matrix descriptor: start address, leading / stride byte offsets (16-byte units) and
// the swizzle mode (1: 128B, 2: 64B, 3: 32B).
__device__ __forceinline__ unsigned long long make_desc(unsigned addr, unsigned lbo, unsigned sbo, unsigned mode) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
           ((unsigned long long)(sbo >> 4) << 32) | ((unsigned long long)mode << 62);
}

constexpr unsigned SW_K_MODE = SW_K == 128 ? 1u : SW_K == 64 ? 2u : 3u;

// Descriptor of the k16 slice `kk` of an operand tile at `tile` for its rows [r0, r0 +
// extent) (M for A, N for B). K-major: rows of SW_K bytes, 8-row groups SW_K * 8 apart,
// the k16 slice 32 bytes further along the row (inside box kk * 16 / KB). M/N-major:
// rows of 64 elements (128 bytes) per k, 8-k groups 1024 bytes apart (SBO), 64-element
// boxes BK * 128 bytes apart (LBO), the k16 slice 16 rows further down. Only the start
// address differs between slices: the tile's descriptor plus the slice's offset in
// 16-byte units (shared addresses stay below 2^18, so the 14-bit field never carries),
// which keeps it to one add per wgmma instead of rebuilding every field.
template <bool MN_MAJOR, int ROWS>
__device__ __forceinline__ unsigned long long tile_desc(unsigned tile, int r0, int kk) {
    if constexpr (MN_MAJOR) {
        return make_desc(tile + (r0 / MNB) * (BK * 128), BK * 128, 1024, 1) + (kk * 16 * 128 >> 4);
    } else {
        constexpr int K_PER_BOX = KB / 16;  // k16 slices per box
        return make_desc(tile + r0 * SW_K, 16, 8 * SW_K, SW_K_MODE) +
               (((kk / K_PER_BOX) * (ROWS * SW_K) + (kk % K_PER_BOX) * 32) >> 4);
    }
}

#if MMT_WG_N == 8
__device__ __forceinline__ void wgmma(float (&d)[4], unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32." MMT_WG_TYPE "." MMT_WG_TYPE " "
        "{"
        "%0, %1, %2, %3"
        "}, "
        "%4, %5, p, 1, 1, %7, %8;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "l"(da), "l"(db), "r"(1), "n"(A_MN_MAJOR ? 1 : 0), "n"(B_MN_MAJOR ? 1 : 0));
}
#endif
#if MMT_WG_N == 16
__device__ __forceinline__ void wgmma(float (&d)[8], unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32." MMT_WG_TYPE "." MMT_WG_TYPE " "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7"
        "}, "
        "%8, %9, p, 1, 1, %11, %12;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(da), "l"(db), "r"(1), "n"(A_MN_MAJOR ? 1 : 0), "n"(B_MN_MAJOR ? 1 : 0));
}
#endif
#if MMT_WG_N == 32
__device__ __forceinline__ void wgmma(float (&d)[16], unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32." MMT_WG_TYPE "." MMT_WG_TYPE " "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
        "}, "
        "%16, %17, p, 1, 1, %19, %20;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(da), "l"(db), "r"(1), "n"(A_MN_MAJOR ? 1 : 0), "n"(B_MN_MAJOR ? 1 : 0));
}
#endif
#if MMT_WG_N == 64
__device__ __forceinline__ void wgmma(float (&d)[32], unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32." MMT_WG_TYPE "." MMT_WG_TYPE " "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, "
        "%32, %33, p, 1, 1, %35, %36;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db), "r"(1), "n"(A_MN_MAJOR ? 1 : 0), "n"(B_MN_MAJOR ? 1 : 0));
}
#endif
#if MMT_WG_N == 128
__device__ __forceinline__ void wgmma(float (&d)[64], unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." MMT_WG_TYPE "." MMT_WG_TYPE " "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, "
        "%64, %65, p, 1, 1, %67, %68;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(1), "n"(A_MN_MAJOR ? 1 : 0), "n"(B_MN_MAJOR ? 1 : 0));
}
#endif
#if MMT_WG_N == 256
__device__ __forceinline__ void wgmma(float (&d)[128], unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32." MMT_WG_TYPE "." MMT_WG_TYPE " "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, "
        "%128, %129, p, 1, 1, %131, %132;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(1), "n"(A_MN_MAJOR ? 1 : 0), "n"(B_MN_MAJOR ? 1 : 0));
}
#endif

__device__ __forceinline__ float to_float(elem_t v) {
#if MMT_DTYPE == 0
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v));
    return f;
#else
    return __int_as_float(((unsigned)v) << 16);
#endif
}

__device__ __forceinline__ elem_t from_float(float f) {
    unsigned short h;
#if MMT_DTYPE == 0
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
#else
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
#endif
    return h;
}

// Byte offset of K step `step` inside an operand tile of `rows` rows (M for A, N for B):
// K-major tiles hold a box per KB of k, M/N-major tiles a box per 64 rows whose box rows
// are k, so a step is whole boxes of the first, a band of box rows of the second.
template <bool MN_MAJOR, int ROWS>
__device__ __forceinline__ unsigned step_offset(int step) {
    return MN_MAJOR ? step * (K_STEP * 128) : step * (K_STEP / KB) * (ROWS * SW_K);
}

// Issues the TMA copies of K step `step` of k-tile `kt` into the stage at `stage`,
// completing on `bar`. In a cluster, CTA `rank` loads half of the shared B tile (rows of
// K-major boxes, k rows of M/N-major ones) and multicasts it; the full B tile lands in
// both CTAs either way.
__device__ __forceinline__ void load_step(unsigned stage, int step, unsigned bar, const TensorMap* map_a,
                                          const TensorMap* map_b, int kt, int m_base, int n_base, int batch,
                                          int rank) {
    mbar_expect_tx(bar, TX_BYTES);
    const int k0 = kt * BK + step * K_STEP;
    const unsigned sa = stage + step_offset<A_MN_MAJOR, BM>(step);
    const unsigned sb = stage + A_BYTES + step_offset<B_MN_MAJOR, BN>(step);
    if constexpr (A_MN_MAJOR) {
#pragma unroll
        for (int j = 0; j < BM / MNB; ++j) tma_load(sa + j * (BK * 128), map_a, bar, m_base + j * MNB, k0, batch);
    } else {
#pragma unroll
        for (int j = 0; j < K_STEP / KB; ++j) tma_load(sa + j * (BM * SW_K), map_a, bar, k0 + j * KB, m_base, batch);
    }
    if constexpr (CLUSTER == 1) {
        if constexpr (B_MN_MAJOR) {
#pragma unroll
            for (int j = 0; j < BN / MNB; ++j) tma_load(sb + j * (BK * 128), map_b, bar, n_base + j * MNB, k0, batch);
        } else {
#pragma unroll
            for (int j = 0; j < K_STEP / KB; ++j)
                tma_load(sb + j * (BN * SW_K), map_b, bar, k0 + j * KB, n_base, batch);
        }
    } else {
        constexpr unsigned short ALL = (1u << CLUSTER) - 1;
        if constexpr (B_MN_MAJOR) {
            constexpr int HALF = K_STEP / CLUSTER;  // k rows per CTA: a multiple of 8, so whole swizzle atoms
#pragma unroll
            for (int j = 0; j < BN / MNB; ++j)
                tma_load_multicast(sb + j * (BK * 128) + rank * (HALF * 128), map_b, bar, n_base + j * MNB,
                                   k0 + rank * HALF, batch, ALL);
        } else {
            constexpr int HALF = BN / CLUSTER;  // rows per CTA: a multiple of 8
#pragma unroll
            for (int j = 0; j < K_STEP / KB; ++j)
                tma_load_multicast(sb + j * (BN * SW_K) + rank * (HALF * SW_K), map_b, bar, k0 + j * KB,
                                   n_base + rank * HALF, batch, ALL);
        }
    }
}


// Next slot of a ring of N, flipping the phase bit each time the ring wraps.
template <int N>
__device__ __forceinline__ void advance(int& slot, unsigned& phase) {
    if (++slot == N) {
        slot = 0;
        phase ^= 1;
    }
}

// addmm's epilogue math on this thread's accumulators, alpha · acc + beta · bias[n], with
// each column's bias loaded once per tile (inside the per-row-half store passes, after
// their barriers, it was loaded 2 · MT times). `n0`: the warpgroup's first column.
// Accumulator register 4j + 2h + e holds column 8j + 2(lane % 4) + e in both row halves h.
__device__ __forceinline__ void apply_bias(float (&acc)[MT][ACC], const elem_t* __restrict__ bias, int n0, int N,
                                           float alpha, float beta) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < WG_N / 8; ++j) {
        const int n = n0 + 8 * j + 2 * (lane & 3);
        const float b0 = n < N ? beta * to_float(bias[n]) : 0.f;
        const float b1 = n + 1 < N ? beta * to_float(bias[n + 1]) : 0.f;
#pragma unroll
        for (int i = 0; i < MT; ++i) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                acc[i][4 * j + 2 * h] = alpha * acc[i][4 * j + 2 * h] + b0;
                acc[i][4 * j + 2 * h + 1] = alpha * acc[i][4 * j + 2 * h + 1] + b1;
            }
        }
    }
}

// Issues the wgmma group of K step `step` of the stage at `stage` and waits until it is
// the only one in flight: the previous step's group has completed and its part of a stage
// may be refilled once every warp has got here.
__device__ __forceinline__ void mma_step(float (&acc)[MT][ACC], unsigned stage, int step, int wg_m0, int wg_n0) {
    const unsigned sa = stage + step_offset<A_MN_MAJOR, BM>(step);
    const unsigned sb = stage + A_BYTES + step_offset<B_MN_MAJOR, BN>(step);
#pragma unroll
    for (int i = 0; i < MT; ++i) pin(acc[i]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < K_STEP / 16; ++kk) {
        const unsigned long long db = tile_desc<B_MN_MAJOR, BN>(sb, wg_n0, kk);
#pragma unroll
        for (int i = 0; i < MT; ++i) wgmma(acc[i], tile_desc<A_MN_MAJOR, BM>(sa, wg_m0 + 64 * i, kk), db);
    }
    wgmma_commit();
#pragma unroll
    for (int i = 0; i < MT; ++i) pin(acc[i]);
    wgmma_wait<1>();
#pragma unroll
    for (int i = 0; i < MT; ++i) pin(acc[i]);
}

// The consumers' main loop over one output tile's k-tiles, accumulating into `acc` (zeroed
// here). One wgmma group stays in flight: K step s's part of a stage is released once the
// group of s + 1 has been issued and s's has completed. Ends with every group complete and
// the LAST step not released: the caller decides when it may be refilled. `slot` and
// `phase` carry the ring of K steps across calls; a k-tile's steps take consecutive slots
// from a multiple of STEPS_PER_STAGE, so slot / STEPS_PER_STAGE is its stage.
__device__ __forceinline__ void consume_k_tiles(float (&acc)[MT][ACC], int k_tiles, unsigned base, unsigned full_bar,
                                                unsigned empty_bar, int wg_m0, int wg_n0, int& slot,
                                                unsigned& phase) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < ACC; ++j) acc[i][j] = 0.f;
    for (int kt = 0; kt < k_tiles; ++kt) {
        const unsigned stage = base + (slot / STEPS_PER_STAGE) * STAGE_BYTES;
#pragma unroll
        for (int step = 0; step < STEPS_PER_STAGE; ++step) {
            mbar_wait(full_bar + 8 * slot, phase);
            mma_step(acc, stage, step, wg_m0, wg_n0);
            // Release the previous step. Every thread arrives: ptxas serialises the wgmma
            // pipeline around a lane-predicated arrival.
            if (kt > 0 || step > 0) mbar_arrive(empty_bar + 8 * (slot == 0 ? RING - 1 : slot - 1));
            advance<RING>(slot, phase);
        }
    }
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < MT; ++i) pin(acc[i]);
}

}  // namespace

#if MMT_PERSISTENT
namespace {

// Barrier of one warpgroup's 128 threads (ids 2 and 3; 1 is the consumers' barrier):
// immediate ids, so ptxas reserves only these.
__device__ __forceinline__ void warpgroup_sync(int warpgroup) {
    if (warpgroup == 0)
        asm volatile("bar.sync 2, 128;\n" ::: "memory");
    else
        asm volatile("bar.sync 3, 128;\n" ::: "memory");
}

// The same barrier, returning whether any of the warpgroup's threads passed true.
__device__ __forceinline__ bool warpgroup_any(int warpgroup, bool v) {
    unsigned r;
    if (warpgroup == 0)
        asm volatile("{\n.reg .pred p, q;\nsetp.ne.u32 q, %1, 0;\nbar.red.or.pred p, 2, 128, q;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(r)
                     : "r"(v ? 1u : 0u)
                     : "memory");
    else
        asm volatile("{\n.reg .pred p, q;\nsetp.ne.u32 q, %1, 0;\nbar.red.or.pred p, 3, 128, q;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(r)
                     : "r"(v ? 1u : 0u)
                     : "memory");
    return r != 0;
}

constexpr int MAX_SPLITS = MMT_MAX_SPLITS;  // the host's kMaxTailSplits: most parts of a split tile

// A split tile's part, per warpgroup: stores its partial sums in its workspace slice
// (slices of one tile: [part][warpgroup], WG_M x WG_N floats each, in accumulator order,
// 16 bytes per thread and step) and counts itself on the tile's flag. The last part to
// arrive gets true and `acc` replaced by the sum of all parts, in part order.
__device__ __forceinline__ bool reduce_split(float (&acc)[MT][ACC], float* tile_ws, unsigned* flag, int part,
                                             int splits, int warpgroup, int tid_in_wg) {
    constexpr int SLICE = WG_M * WG_N;
    const unsigned long long mine =
        reinterpret_cast<unsigned long long>(tile_ws + (part * WARPGROUPS + warpgroup) * SLICE) + 16 * tid_in_wg;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int q = 0; q < ACC / 4; ++q)
            asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(mine + 16 * 128 * (i * (ACC / 4) + q)),
                         "f"(acc[i][4 * q]), "f"(acc[i][4 * q + 1]), "f"(acc[i][4 * q + 2]), "f"(acc[i][4 * q + 3])
                         : "memory");
    // Stores, fence, barrier, then one counted arrival: whoever counts last sees them all.
    asm volatile("membar.gl;\n" ::: "memory");
    warpgroup_sync(warpgroup);
    bool last = false;
    if (tid_in_wg == 0) {
        unsigned ticket;
        asm volatile("atom.global.add.u32 %0, [%1], 1;\n"
                     : "=r"(ticket)
                     : "l"(reinterpret_cast<unsigned long long>(flag))
                     : "memory");
        last = ticket == static_cast<unsigned>(splits) - 1;
        // Every part has arrived: nothing else touches the flag in this launch.
        if (last) asm volatile("st.global.u32 [%0], 0;\nmembar.gl;\n" ::"l"(reinterpret_cast<unsigned long long>(flag)) : "memory");
    }
    if (!warpgroup_any(warpgroup, last)) return false;
    // Every part from the workspace, this one's too: the same sum whichever part is last.
    constexpr int VECTORS = MT * ACC / 4;
    const unsigned long long first = mine - static_cast<long long>(part) * WARPGROUPS * SLICE * 4;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < ACC; ++j) acc[i][j] = 0.f;
    // A loop of constant trip count: with a run-time one ptxas allocates ~250 registers.
#pragma unroll
    for (int p = 0; p < MAX_SPLITS; ++p) {
        if (p >= splits) break;
        const unsigned long long slice = first + static_cast<long long>(p) * WARPGROUPS * SLICE * 4;
#pragma unroll
        for (int x = 0; x < VECTORS; ++x) {
            float* a = &acc[x / (ACC / 4)][4 * (x % (ACC / 4))];
            float v0, v1, v2, v3;
            // Other SMs wrote these: read them from L2 (.cg), past this SM's L1.
            asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                         : "=f"(v0), "=f"(v1), "=f"(v2), "=f"(v3)
                         : "l"(slice + 16 * 128 * x)
                         : "memory");
            a[0] += v0;
            a[1] += v1;
            a[2] += v2;
            a[3] += v3;
        }
    }
    return true;
}

__device__ __forceinline__ void persistent_gemm(const TensorMap& map_a, const TensorMap& map_b, elem_t* __restrict__ c,
                                                const elem_t* __restrict__ bias, int M, int N, int K, long long ldc,
                                                long long stride_c, float alpha, float beta, int batches,
                                                unsigned* tile_counter, float* split_workspace,
                                                unsigned* split_flags, int split_from, int splits,
                                                unsigned char* smem_raw) {
    const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const unsigned full_bar = base + DATA_BYTES;
    const unsigned empty_bar = full_bar + RING * 8;
    // Dynamic tiles: 2 "id written" and 2 "id read" mbarriers, then the 2 ids (the host's
    // shared_bytes() adds 48 bytes for them).
    const unsigned id_full_bar = empty_bar + RING * 8;
    const unsigned id_empty_bar = id_full_bar + 16;
    const unsigned id_slots = id_empty_bar + 16;
    const int grid_m = (M + BM - 1) / BM;
    const int grid_n = (N + BN - 1) / BN;
    const int tiles = grid_m * grid_n * batches;
    const int units = split_from + (tiles - split_from) * splits;
    const int tid = threadIdx.x;
    const int k_tiles = (K + BK - 1) / BK;

    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < RING; ++s) {
            mbar_init(full_bar + 8 * s, 1);
            mbar_init(empty_bar + 8 * s, THREADS);
        }
        if constexpr (DYNAMIC_TILES) {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                mbar_init(id_full_bar + 8 * r, 1);         // the producer thread
                mbar_init(id_empty_bar + 8 * r, THREADS);  // every consumer thread
            }
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    __syncthreads();

    if (tid >= THREADS) {
        // The producer runs through every tile's k-tiles without a break: it refills a
        // stage as soon as the consumers release it, the next tile's included.
        if (tid == THREADS) {
            asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(&map_a)) : "memory");
            asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(&map_b)) : "memory");
            int slot = 0, issued = 0;
            unsigned phase = 0;
            int id_slot = 0;
            unsigned id_phase = 0;
            int fetched = 0;
            for (int u = blockIdx.x;; u += gridDim.x) {
                if constexpr (DYNAMIC_TILES) {
                    // Every CTA takes tickets until one is past the last unit, so one launch
                    // hands out exactly units + gridDim.x tickets. The CTA holding the last
                    // one is the last to touch the counter in this launch: it sets it back to
                    // zero, and the next launch on the stream starts from 0 without a memset
                    // (the backend zeroes the counter once, when it allocates it).
                    unsigned ticket;
                    asm volatile("atom.global.add.u32 %0, [%1], 1;\n"
                                 : "=r"(ticket)
                                 : "l"(reinterpret_cast<unsigned long long>(tile_counter))
                                 : "memory");
                    if (ticket == static_cast<unsigned>(units) + gridDim.x - 1)
                        asm volatile("st.global.u32 [%0], 0;\n" ::"l"(reinterpret_cast<unsigned long long>(tile_counter))
                                     : "memory");
                    u = ticket < static_cast<unsigned>(units) ? static_cast<int>(ticket) : units;
                    // Publish the id in pipeline order: wait until the consumers have read the
                    // id this slot held two tiles ago, write, then arrive (release) on its
                    // "written" barrier, which the consumers wait on (acquire) before reading.
                    if (fetched >= 2) mbar_wait(id_empty_bar + 8 * id_slot, id_phase ^ 1);
                    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(id_slots + 4 * id_slot), "r"(u) : "memory");
                    mbar_arrive(id_full_bar + 8 * id_slot);
                    ++fetched;
                    advance<2>(id_slot, id_phase);
                }
                if (u >= units) break;
                const Unit w = unit_at(u, split_from, splits, k_tiles, grid_m, grid_n);
                for (int kt = w.kb; kt < w.ke; ++kt, ++issued) {
                    const unsigned stage = base + (slot / STEPS_PER_STAGE) * STAGE_BYTES;
#pragma unroll
                    for (int step = 0; step < STEPS_PER_STAGE; ++step) {
                        if (issued >= STAGES) mbar_wait(empty_bar + 8 * slot, phase ^ 1);
                        load_step(stage, step, full_bar + 8 * slot, &map_a, &map_b, kt, w.m_base, w.n_base, w.batch,
                                  0);
                        advance<RING>(slot, phase);
                    }
                }
            }
        }
        return;
    }

    // A constant with one warpgroup: the wgmma descriptors then fold to uniform values.
    const int warpgroup = WARPGROUPS == 1 ? 0 : tid / 128;
    const int wg_m0 = (warpgroup % WGS_ALONG_M) * WG_M;
    const int wg_n0 = (warpgroup / WGS_ALONG_M) * WG_N;
    const int lane = tid & 31;
    const int warp_in_wg = (tid / 32) & 3;
    const int tid_in_wg = tid & 127;
    const unsigned cbuf = base + STAGES * STAGE_BYTES + warpgroup * WG_C_BYTES;
    const bool wide =
        (ldc % 8) == 0 && (reinterpret_cast<unsigned long long>(c) % 16) == 0 && (batches == 1 || stride_c % 8 == 0);
    float acc[MT][ACC];
    int slot = 0;
    unsigned phase = 0;
    int id_slot = 0;
    unsigned id_phase = 0;
    for (int u = blockIdx.x;; u += gridDim.x) {
        if constexpr (DYNAMIC_TILES) {
            // The next id the producer fetched (units: no more), then free its slot.
            mbar_wait(id_full_bar + 8 * id_slot, id_phase);
            asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(u) : "r"(id_slots + 4 * id_slot) : "memory");
            mbar_arrive(id_empty_bar + 8 * id_slot);
            advance<2>(id_slot, id_phase);
        }
        if (u >= units) break;
        const Unit w = unit_at(u, split_from, splits, k_tiles, grid_m, grid_n);
        const int m_base = w.m_base, n_base = w.n_base, batch = w.batch;
        consume_k_tiles(acc, w.ke - w.kb, base, full_bar, empty_bar, wg_m0, wg_n0, slot, phase);
        // The unit's last step is free now: the producer may refill it during the epilogue.
        if (w.ke > w.kb) mbar_arrive(empty_bar + 8 * (slot == 0 ? RING - 1 : slot - 1));
        if (w.part >= 0) {
            const int tail = w.t - split_from;
            float* tile_ws = split_workspace + static_cast<long long>(tail) * splits * BM * BN;
            if (!reduce_split(acc, tile_ws, split_flags + tail * WARPGROUPS + warpgroup, w.part, splits, warpgroup,
                              tid_in_wg))
                continue;  // another part finishes this tile
        }

        if constexpr (ADDMM) apply_bias(acc, bias, n_base + wg_n0, N, alpha, beta);
        // Epilogue, per warpgroup and row half of each m64 block: 32 rows (rows 16w + lane/4
        // + 8h of the block, buffer row 8w + lane/4) through the warpgroup's buffer.
        elem_t* cb = c + static_cast<long long>(batch) * stride_c;
        constexpr int CHUNKS = WG_N / 8;
#pragma unroll
        for (int i = 0; i < MT; ++i) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                // The previous pass's reads of the buffer are done.
                warpgroup_sync(warpgroup);
                const int rb = 8 * warp_in_wg + (lane >> 2);
#pragma unroll
                for (int j = 0; j < WG_N / 8; ++j) {
                    const int col = 8 * j + 2 * (lane & 3);
                    const unsigned pair = (unsigned)from_float(acc[i][4 * j + 2 * h]) |
                                          ((unsigned)from_float(acc[i][4 * j + 2 * h + 1]) << 16);
                    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(cbuf + (rb * WG_C_PITCH + col) * ELT), "r"(pair)
                                 : "memory");
                }
                warpgroup_sync(warpgroup);
#pragma unroll
                for (int u = tid_in_wg; u < 32 * CHUNKS; u += 128) {
                    const int r = u / CHUNKS, cc = u % CHUNKS;
                    const int m = m_base + wg_m0 + 64 * i + 16 * (r >> 3) + (r & 7) + 8 * h;
                    const int n = n_base + wg_n0 + cc * 8;
                    if (m >= M || n >= N) continue;
                    unsigned w0, w1, w2, w3;
                    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                                 : "=r"(w0), "=r"(w1), "=r"(w2), "=r"(w3)
                                 : "r"(cbuf + (r * WG_C_PITCH + cc * 8) * ELT));
                    elem_t* dst = cb + m * ldc + n;
                    if (wide && n + 8 <= N) {
                        asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst), "r"(w0), "r"(w1),
                                     "r"(w2), "r"(w3)
                                     : "memory");
                    } else {
                        const unsigned w[4] = {w0, w1, w2, w3};
#pragma unroll
                        for (int e = 0; e < 8; ++e)
                            if (n + e < N) dst[e] = static_cast<elem_t>(w[e / 2] >> (16 * (e % 2)));
                    }
                }
            }
        }
    }
}

}  // namespace
#endif

// C[b] = A[b] · B[b] (mm, bmm) or alpha · A · B + beta · bias (addmm, bias [N] broadcast
// over rows). The tensor maps describe A as [batch][M][K] or [batch][K][M] and B as
// [batch][K][N] or [batch][N][K] in their storage order (innermost first on the host);
// C is row-major [batch][M][N] with row stride ldc. tile_counter: MMT_DYNAMIC_TILES's tile
// counter (zero at launch, zero again when the launch ends). split_*: the persistent
// kernel's split tail (split_from = the tile count and splits = 1 for none): float32
// workspace for (tiles - split_from) x splits x BM x BN partial sums, and a flag per
// split tile and warpgroup (zero at launch, zero again at the end). Unused otherwise.
#if MMT_CLUSTER_M > 1
#define MMT_CLUSTER_DIMS __cluster_dims__(MMT_CLUSTER_M, 1, 1)
#else
#define MMT_CLUSTER_DIMS
#endif

extern "C" __global__ void MMT_CLUSTER_DIMS __launch_bounds__(THREADS + 32)
    mmt_gemm(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b, elem_t* __restrict__ c,
             const elem_t* __restrict__ bias, int M, int N, int K, long long ldc, long long stride_c, float alpha,
             float beta, int batches, unsigned* tile_counter, float* split_workspace, unsigned* split_flags,
             int split_from, int splits) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
#ifdef MMT_TEST_FAULT
    // Test only (as in gemm_kernel.cuh): an illegal address, a sticky fault.
    if (blockIdx.x == 0 && threadIdx.x == 0) *reinterpret_cast<volatile int*>(16ull) = M;
#endif
#if MMT_PERSISTENT
    persistent_gemm(map_a, map_b, c, bias, M, N, K, ldc, stride_c, alpha, beta, batches, tile_counter, split_workspace,
                    split_flags, split_from, splits, smem_raw);
    return;
#endif
    // Swizzled boxes and descriptors assume 1024-byte aligned stages (base offset 0).
    const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const unsigned full_bar = base + DATA_BYTES;  // RING mbarriers, 8 bytes each
    const unsigned empty_bar = full_bar + RING * 8;
    // Clusters: per K step, a barrier on which each CTA's producer signals (to every CTA)
    // that its consumers released the step; a producer refills it once all have.
    const unsigned cluster_bar = empty_bar + RING * 8;

    // GROUP_M-swizzled tile order, as Triton's template computes it; in clusters the order
    // runs over pairs of row tiles (a cluster's CTAs take consecutive rows of one column,
    // the second one past the last row when grid_m is odd: it loads, computes, stores
    // nothing) and GROUP_M counts rows.
    unsigned rank = 0;
    if constexpr (CLUSTER > 1) asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    const int pid = blockIdx.x / CLUSTER;
    const int grid_m = (M + BM * CLUSTER - 1) / (BM * CLUSTER);
    const int grid_n = (N + BN - 1) / BN;
    constexpr int GROUP = GROUP_M / CLUSTER > 0 ? GROUP_M / CLUSTER : 1;
    const int width = GROUP * grid_n;
    const int group_id = pid / width;
    const int group_size = min(grid_m - group_id * GROUP, GROUP);
    const int pid_m = (group_id * GROUP + (pid % group_size)) * CLUSTER + static_cast<int>(rank);
    const int pid_n = (pid % width) / group_size;
    const int m_base = pid_m * BM;
    const int n_base = pid_n * BN;
    const int batch = blockIdx.z;

    const int tid = threadIdx.x;
    const int k_tiles = (K + BK - 1) / BK;

    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < RING; ++s) {
            mbar_init(full_bar + 8 * s, 1);
            mbar_init(empty_bar + 8 * s, THREADS);  // every consumer thread
            if constexpr (CLUSTER > 1) mbar_init(cluster_bar + 8 * s, CLUSTER);  // every producer of the cluster
        }
        // Makes the initialised barriers visible to the async proxy (TMA).
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    // The peer's copies and arrivals target these barriers: both CTAs initialise first.
    if constexpr (CLUSTER > 1)
        cluster_sync();
    else
        __syncthreads();

    if (tid >= THREADS) {
        // The producer: one extra warp, one thread of it issues every TMA copy, so no
        // consumer warp ever waits for a stage to drain.
        if (tid == THREADS) {
            asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(&map_a)) : "memory");
            asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(&map_b)) : "memory");
            int slot = 0;
            unsigned phase = 0;
            for (int t = 0; t < k_tiles; ++t) {
                const unsigned stage = base + (slot / STEPS_PER_STAGE) * STAGE_BYTES;
#pragma unroll
                for (int step = 0; step < STEPS_PER_STAGE; ++step) {
                    // Use t / STAGES of the slot: wait for the release of use t / STAGES - 1.
                    if (t >= STAGES) {
                        mbar_wait(empty_bar + 8 * slot, phase ^ 1);
                        if constexpr (CLUSTER > 1) {
                            // One remote arrival per CTA and step, forwarded by the producer
                            // (consumer warpgroups arriving remotely themselves measured the same).
#pragma unroll
                            for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(cluster_bar + 8 * slot, r);
                            mbar_wait(cluster_bar + 8 * slot, phase ^ 1);
                        }
                    }
                    load_step(stage, step, full_bar + 8 * slot, &map_a, &map_b, t, m_base, n_base, batch,
                              static_cast<int>(rank));
                    advance<RING>(slot, phase);
                }
            }
        }
        // No CTA of a cluster leaves while the other may still write to its shared memory.
        if constexpr (CLUSTER > 1) {
            __syncwarp();
            cluster_sync();
        }
        return;
    }

    // A constant with one warpgroup: the wgmma descriptors then fold to uniform values.
    const int warpgroup = WARPGROUPS == 1 ? 0 : tid / 128;
    const int wg_m0 = (warpgroup % WGS_ALONG_M) * WG_M;
    const int wg_n0 = (warpgroup / WGS_ALONG_M) * WG_N;
    float acc[MT][ACC];
    int slot = 0;
    unsigned phase = 0;
    consume_k_tiles(acc, k_tiles, base, full_bar, empty_bar, wg_m0, wg_n0, slot, phase);

    // Epilogue through shared memory: every stage has been consumed (each consumer passed
    // the last full barrier, and the barrier below waits for the last wgmma reads), so
    // the tile of C is staged there, rows padded by 16 bytes (conflict-free pair writes),
    // then written back in coalesced 16-byte pieces.
    if constexpr (ADDMM) apply_bias(acc, bias, n_base + wg_n0, N, alpha, beta);
    asm volatile("bar.sync 1, %0;\n" ::"n"(THREADS) : "memory");
    // Accumulator layout of m64nN: warp w of the warpgroup owns rows 16w + lane/4 (+8);
    // register 4j + 2h + e is column 8j + 2(lane%4) + e of row half h.
    const int lane = tid & 31;
    const int warp_in_wg = (tid / 32) & 3;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = wg_m0 + 64 * i + 16 * warp_in_wg + (lane >> 2) + 8 * h;
#pragma unroll
            for (int j = 0; j < WG_N / 8; ++j) {
                const int col = wg_n0 + 8 * j + 2 * (lane & 3);
                const unsigned pair = (unsigned)from_float(acc[i][4 * j + 2 * h]) |
                                      ((unsigned)from_float(acc[i][4 * j + 2 * h + 1]) << 16);
                asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(base + (r * C_PITCH + col) * ELT), "r"(pair) : "memory");
            }
        }
    }
    asm volatile("bar.sync 1, %0;\n" ::"n"(THREADS) : "memory");
    c += static_cast<long long>(batch) * stride_c;
    const bool wide = (ldc % 8) == 0 && (reinterpret_cast<unsigned long long>(c) % 16) == 0;
    constexpr int CHUNKS = BN / 8;  // 16-byte pieces per row
#pragma unroll 4
    for (int u = tid; u < BM * CHUNKS; u += THREADS) {
        const int r = u / CHUNKS, cc = u % CHUNKS;
        const int m = m_base + r, n = n_base + cc * 8;
        if (m >= M || n >= N) continue;
        unsigned w0, w1, w2, w3;
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(w0), "=r"(w1), "=r"(w2), "=r"(w3)
                     : "r"(base + (r * C_PITCH + cc * 8) * ELT));
        elem_t* dst = c + m * ldc + n;
        if (wide && n + 8 <= N) {
            asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst), "r"(w0), "r"(w1), "r"(w2), "r"(w3)
                         : "memory");
        } else {
            const unsigned w[4] = {w0, w1, w2, w3};
#pragma unroll
            for (int e = 0; e < 8; ++e)
                if (n + e < N) dst[e] = static_cast<elem_t>(w[e / 2] >> (16 * (e % 2)));
        }
    }
    if constexpr (CLUSTER > 1) cluster_sync();
}
