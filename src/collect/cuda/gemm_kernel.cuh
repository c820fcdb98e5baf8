// The GEMM kernel template of the CUDA backend. It is embedded into the binary at build
// time and compiled at run time by NVRTC, once per kernel variant; the host prepends a
// prelude of MMT_* macros (kernel_spec.cpp, kernel_prelude()) that fixes every parameter.
//
// Semantics follow Triton's matmul template (the one PyTorch Inductor's mm/addmm/bmm use):
// one CTA computes a BLOCK_M x BLOCK_N tile of C; tiles are visited in GROUP_M-swizzled
// order; K is walked BLOCK_K at a time through a NUM_STAGES-deep shared-memory ring filled
// by cp.async (2-byte operands whose rows allow no wider copy: through registers,
// ElementTile); NUM_WARPS warps share the tile. Math paths:
//   MMT_MATH 0: mma.sync m16n8k16 (float16 / bfloat16 operands, float32 accumulators), with
//               ldmatrix fragment loads;
//   MMT_MATH 1: mma.sync m16n8k8 tf32 (float32 operands, ALLOW_TF32);
//   MMT_MATH 2: FMA on CUDA cores (float32 without TF32);
//   MMT_MATH 4: mma.sync m16n8k32 s8 (int8 operands, int32 accumulators and output C, as
//               torch._int_mm): ldmatrix for K-major operands, byte gathers for the others
//               (ldmatrix.trans moves 16-bit elements, not bytes). No addmm, no split-K
//               (the split's partial sums are float32).
// Rows and columns outside M / N are clamped on load (as Triton's `rm % M`: the values
// land in rows that are never stored; element loads read zero there); K beyond the end is
// zero-filled unless EVEN_K.
//
// The source uses no header: NVRTC builds it with its builtins only, so neither the
// toolkit's include directory nor cuda_fp16.h is needed at run time.

#ifndef MMT_UTILITY

namespace {

// BM, BN, BK, GROUP_M, STAGES, WARPS, THREADS, ADDMM and smem_addr: gemm_kernel_common.cuh.
constexpr bool EVEN_K = MMT_EVEN_K != 0;
constexpr int MATH = MMT_MATH;
constexpr bool A_KMAJOR = MMT_A_KMAJOR != 0;  // A is row-major: its K index is contiguous
constexpr bool B_KMAJOR = MMT_B_KMAJOR != 0;  // B is column-major: its K index is contiguous
constexpr int VEC_A = MMT_VEC_A;               // elements per global load of A
constexpr int VEC_B = MMT_VEC_B;
constexpr int VEC_C = MMT_VEC_C;               // 2 when pairs of C elements may be stored together
// MMT_FRAG_PIPELINE 1: fragments double-buffered across k-tiles too (mainloop_mma);
// 0: across the k-steps of a tile only. The prelude always sets it.
#ifndef MMT_FRAG_PIPELINE
#define MMT_FRAG_PIPELINE 0
#endif

#if MMT_DTYPE == 2
typedef float elem_t;
typedef float acc_t;
typedef float out_t;
constexpr int ELT = 4;
#elif MMT_DTYPE == 3
// int8 as raw bytes: loads zero-extend, so two of them pack into a register unmixed
// (ElementTile); the MMA reads the bits as s8.
typedef unsigned char elem_t;
typedef int acc_t;
typedef int out_t;
constexpr int ELT = 1;
#else
typedef unsigned short elem_t;
typedef float acc_t;
typedef elem_t out_t;
constexpr int ELT = 2;
#endif
// Elements in 16 bytes: one ldmatrix row, one swizzle chunk.
constexpr int CHUNK_ELEMS = 16 / ELT;

// Shared-memory tiles as stored: [rows][cols], cols contiguous, each operand in its
// global orientation (so cp.async copies straight through and ldmatrix(.trans) fixes
// the orientation).
constexpr int A_ROWS = A_KMAJOR ? BM : BK;
constexpr int A_COLS = A_KMAJOR ? BK : BM;
constexpr int B_ROWS = B_KMAJOR ? BN : BK;
constexpr int B_COLS = B_KMAJOR ? BK : BN;
constexpr int A_TILE = BM * BK;
constexpr int B_TILE = BN * BK;
constexpr int STAGE_ELEMS = A_TILE + B_TILE;

// Bank-conflict-free placement of element (row, col) of a [rows][COLS] tile. Storage is
// cut into 16-byte chunks; the chunk index inside each 128-byte line is XORed with the
// line's (or row's) index modulo 8, so the 8 row addresses of one ldmatrix phase, and the
// 16-byte cp.async stores of 8 consecutive threads, hit 8 distinct groups of 4 banks.
template <int COLS>
__device__ __forceinline__ int swizzle(int row, int col) {
    constexpr int CE = CHUNK_ELEMS;
    constexpr int CPR = COLS / CE;     // chunks per row
    const int chunk = col / CE;
    const int within = col % CE;
    if constexpr (CPR >= 8) {
        return row * COLS + ((chunk ^ (row & 7)) * CE) + within;
    } else {
        const int idx = row * CPR + chunk;
        const int line = idx >> 3;
        return ((line << 3) | ((idx ^ line) & 7)) * CE + within;
    }
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// Copies VEC elements global -> shared, or zero-fills them when !valid.
template <int VEC>
__device__ __forceinline__ void copy_vec(elem_t* dst, const elem_t* src, bool valid) {
    constexpr int BYTES = VEC * ELT;
    if constexpr (BYTES == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                     "r"(valid ? 16 : 0)
                     : "memory");
    } else if constexpr (BYTES >= 4) {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_addr(dst)), "l"(src),
                     "n"(BYTES), "r"(valid ? BYTES : 0)
                     : "memory");
    } else {
        static_assert(BYTES >= 4, "2-byte elements go through ElementTile");
    }
}

// Operand tiles of 2-byte elements that no wider load can reach (VEC 1: cp.async copies 4,
// 8 or 16 bytes) are staged in registers: fetch() issues plain loads, two elements packed
// per register, before the MMAs of the current k-tile; deposit() stores them into the
// stage after those MMAs, so the loads' latency hides behind the math. (A load and a store
// per element inside the copy loop waited for each load in turn: 0.38-0.61 of cuBLAS on
// H200 problems with odd K and N, bench/NOTES_cuda.md.) Thread tid takes elements tid,
// tid + THREADS, ...: with power-of-two tiles they all lie in one column, rows THREADS /
// COLS apart, or each row holds COLS / THREADS of them, so one running pointer reaches
// them all (with an address per element ptxas kept them live and spilled: 64x64x32 w4,
// 255 registers and 44 bytes). Elements outside the operand (row_end, col_end: its extents
// from the tile origin) read as zero; those rows and columns are never stored.
template <int ROWS, int COLS>
struct ElementTile {
    static constexpr int ITERS = ROWS * COLS / THREADS;
    static_assert(ITERS * THREADS == ROWS * COLS && (COLS % THREADS == 0 || THREADS % COLS == 0),
                  "power-of-two tiles of at least THREADS elements");
    static constexpr int PER_ROW = COLS > THREADS ? COLS / THREADS : 1;    // elements per row and thread
    static constexpr int ROW_STEP = COLS > THREADS ? 1 : THREADS / COLS;  // rows between a thread's rows
    unsigned v[(ITERS + 1) / 2];

    // Row and column (as stored) of thread tid's j-th element.
    __device__ __forceinline__ static int row(int tid, int j) {
        return (COLS > THREADS ? 0 : tid / COLS) + (j / PER_ROW) * ROW_STEP;
    }
    __device__ __forceinline__ static int col(int tid, int j) {
        return (COLS > THREADS ? tid : tid % COLS) + (j % PER_ROW) * THREADS;
    }

    __device__ __forceinline__ void fetch(const elem_t* g, long long ld, int row_end, int col_end, int tid) {
        const elem_t* p = g + row(tid, 0) * ld + col(tid, 0);
#pragma unroll
        for (int j = 0; j < ITERS; ++j) {
            const bool valid = row(tid, j) < row_end && col(tid, j) < col_end;
            const unsigned e = valid ? p[(j % PER_ROW) * THREADS] : 0u;
            v[j / 2] = j % 2 == 0 ? e : v[j / 2] | (e << 16);
            if (j % PER_ROW == PER_ROW - 1) p += ROW_STEP * ld;
        }
    }

    __device__ __forceinline__ void deposit(elem_t* s, int tid) const {
#pragma unroll
        for (int j = 0; j < ITERS; ++j)
            s[swizzle<COLS>(row(tid, j), col(tid, j))] = static_cast<elem_t>(v[j / 2] >> (16 * (j % 2)));
    }
};

// Whether an operand loaded VEC elements at a time goes through ElementTile.
template <int VEC>
constexpr bool BY_ELEMENT = VEC * ELT < 4;

// Loads one operand tile ([ROWS][COLS] as stored) of k-tile `k0` into shared memory.
// `g` points at the tile's origin (row r0, col c0 of the operand as stored); `row_end` and
// `col_end` are the operand's extents minus r0 / c0. K_IS_ROW says which index is K.
template <int ROWS, int COLS, int VEC, bool K_IS_ROW>
__device__ __forceinline__ void load_tile(elem_t* s, const elem_t* g, long long ld, int row_end, int col_end,
                                          int tid) {
    constexpr int UPR = COLS / VEC;
    constexpr int UNITS = ROWS * UPR;
    constexpr int ITERS = (UNITS + THREADS - 1) / THREADS;
    static_assert(!BY_ELEMENT<VEC>, "2-byte elements go through ElementTile");
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
        const int u = tid + it * THREADS;
        if (UNITS % THREADS != 0 && u >= UNITS) break;
        const int r = u / UPR;
        const int c = (u % UPR) * VEC;
        bool valid = true;
        int gr = r, gc = c;
        if constexpr (K_IS_ROW) {
            if constexpr (!EVEN_K) valid = r < row_end;
            gc = min(c, col_end - VEC);  // M / N edge: clamp (never stored)
        } else {
            if constexpr (!EVEN_K) valid = c < col_end;
            gr = min(r, row_end - 1);
        }
        const elem_t* src = valid ? g + gr * ld + gc : g;
        copy_vec<VEC>(s + swizzle<COLS>(r, c), src, valid);
    }
}

// One operand's share of a stage: cp.async copies into `s`, or element loads into `regs`
// (deposited later). `mn_left` / `k_left`: the operand's M (or N) and K extents from the
// tile origin; a K-major operand stores M (or N) along rows, the other K.
template <int ROWS, int COLS, int VEC, bool KMAJOR>
__device__ __forceinline__ void fetch_operand(ElementTile<ROWS, COLS>& regs, elem_t* s, const elem_t* g, long long ld,
                                              int mn_left, int k_left, int tid) {
    const int row_end = KMAJOR ? mn_left : k_left;
    const int col_end = KMAJOR ? k_left : mn_left;
    if constexpr (BY_ELEMENT<VEC>)
        regs.fetch(g, ld, row_end, col_end, tid);
    else
        load_tile<ROWS, COLS, VEC, !KMAJOR>(s, g, ld, row_end, col_end, tid);
}

#if MMT_DTYPE != 3
__device__ __forceinline__ float to_float(elem_t v) {
#if MMT_DTYPE == 0
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v));
    return f;
#elif MMT_DTYPE == 1
    return __int_as_float(((unsigned)v) << 16);
#else
    return v;
#endif
}

__device__ __forceinline__ elem_t from_float(float f) {
#if MMT_DTYPE == 0
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#elif MMT_DTYPE == 1
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#else
    return f;
#endif
}

// Writes a pair of C elements (columns n, n+1 of row m), masked to the matrix.
__device__ __forceinline__ void store_pair(elem_t* c_row, const elem_t* bias, int n, int N, float v0, float v1,
                                           float alpha, float beta) {
    if constexpr (ADDMM) {
        v0 = alpha * v0 + (n < N ? beta * to_float(bias[n]) : 0.f);
        v1 = alpha * v1 + (n + 1 < N ? beta * to_float(bias[n + 1]) : 0.f);
    }
    if (VEC_C == 2 && n + 1 < N) {
#if MMT_DTYPE == 2
        float2 p;
        p.x = v0;
        p.y = v1;
        *reinterpret_cast<float2*>(c_row + n) = p;
#else
        const unsigned p = (unsigned)from_float(v0) | ((unsigned)from_float(v1) << 16);
        *reinterpret_cast<unsigned*>(c_row + n) = p;
#endif
    } else {
        if (n < N) c_row[n] = from_float(v0);
        if (n + 1 < N) c_row[n + 1] = from_float(v1);
    }
}
#else
// int32 C (torch._int_mm): a pair of columns n, n+1 of row m, masked to the matrix.
__device__ __forceinline__ void store_pair(out_t* c_row, const elem_t*, int n, int N, int v0, int v1, float, float) {
    if (VEC_C == 2 && n + 1 < N) {
        int2 p;
        p.x = v0;
        p.y = v1;
        *reinterpret_cast<int2*>(c_row + n) = p;
    } else {
        if (n < N) c_row[n] = v0;
        if (n + 1 < N) c_row[n + 1] = v1;
    }
}
#endif

#if MMT_MATH != 2
// ---------------------------------------------------------------- tensor-core paths
constexpr int WARPS_M = MMT_WARPS_M;
constexpr int WARPS_N = MMT_WARPS_N;
constexpr int WTM = BM / WARPS_M;  // warp tile
constexpr int WTN = BN / WARPS_N;
constexpr int MT = WTM / 16;       // m16 tiles per warp
constexpr int NT = WTN / 8;        // n8 tiles per warp
constexpr int KSTEP = MATH == 0 ? 16 : MATH == 4 ? 32 : 8;
constexpr int KSTEPS = BK / KSTEP;
static_assert(WARPS_M * WARPS_N == WARPS, "warp layout");
static_assert(WTM % 16 == 0 && WTN % 8 == 0, "warp tile");

struct Frags {
    unsigned a[MT][4];
    unsigned b[NT][2];
};

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2(unsigned (&r)[2], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2_trans(unsigned (&r)[2], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}

// Per-thread byte offsets (inside a stage) of this thread's ldmatrix rows at k-step 0.
struct FragBase {
    unsigned a[MT];
    unsigned b[(NT + 1) / 2];
};

__device__ __forceinline__ void init_frag_base(FragBase& fb, int wm0, int wn0, int lane) {
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        const int m0 = wm0 + i * 16;
        fb.a[i] = ELT * (A_KMAJOR ? swizzle<A_COLS>(m0 + (lane & 7) + ((lane >> 3) & 1) * 8, (lane >> 4) * CHUNK_ELEMS)
                                  : swizzle<A_COLS>((lane & 7) + (lane >> 4) * 8, m0 + ((lane >> 3) & 1) * 8));
    }
#pragma unroll
    for (int j = 0; j < NT; j += 2) {
        const int n0 = wn0 + j * 8;
        const int l = j + 1 < NT ? lane : (lane & 15);  // x2 loads use lanes 0-15 only
        fb.b[j / 2] = ELT * (B_KMAJOR ? swizzle<B_COLS>(n0 + (l & 7) + (l >> 4) * 8, ((l >> 3) & 1) * CHUNK_ELEMS)
                                      : swizzle<B_COLS>((l & 7) + ((l >> 3) & 1) * 8, n0 + (l >> 4) * 8));
    }
}

// The offset at k-step ks from the k-step-0 offset. K-major tiles move along the row by
// 32 bytes (16 2-byte or 32 int8 elements): the swizzle turns that into an XOR of the chunk
// bits. Otherwise the tile moves down 16 rows (16-bit elements only): an add, plus for
// 2-chunk rows (16 elements) a flip of the line parity bit.
// (Checked against swizzle() for every tile shape, lane and step.)
template <bool KMAJOR, int COLS>
__device__ __forceinline__ unsigned frag_offset(unsigned off0, int ks) {
    if constexpr (KMAJOR) {
        return off0 ^ static_cast<unsigned>(32 * ks);
    } else {
        constexpr int CPR = COLS * ELT / 16;
        const unsigned flip = CPR == 2 ? 64u * (ks & 1) : 0u;
        return (off0 ^ flip) + static_cast<unsigned>(16 * ks * COLS * ELT);
    }
}

#if MMT_MATH == 4
// Four int8 elements (k .. k+3 at row / column `mn`) of a tile stored with K along its
// rows, packed low byte first, as an s8 MMA fragment register holds them.
template <int COLS>
__device__ __forceinline__ unsigned gather4(const elem_t* s, int k, int mn) {
    return (unsigned)s[swizzle<COLS>(k, mn)] | ((unsigned)s[swizzle<COLS>(k + 1, mn)] << 8) |
           ((unsigned)s[swizzle<COLS>(k + 2, mn)] << 16) | ((unsigned)s[swizzle<COLS>(k + 3, mn)] << 24);
}
#endif

// Fragments of k-step `ks` of the stage at shared address `stage` (`sf` is the same stage
// as a pointer, for the tf32 and int8 gathers), for the warp tile at (wm0, wn0).
__device__ __forceinline__ void load_frags(Frags& f, unsigned stage, const float* sf, const FragBase& fb, int wm0,
                                           int wn0, int ks, int lane) {
#if MMT_MATH == 0 || MMT_MATH == 4
    const unsigned sb = stage + A_TILE * ELT;
#if MMT_MATH == 4
    // m16n8k32 s8: register q of A holds row g (+8 for odd q), k 4t..4t+3 (+16 for q >= 2);
    // of B, column g, k 4t..4t+3 (+16 for q = 1).
    const elem_t* se = reinterpret_cast<const elem_t*>(sf);
    const int g = lane >> 2, t = lane & 3, k0 = ks * KSTEP + 4 * t;
#endif
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        const unsigned addr = stage + frag_offset<A_KMAJOR, A_COLS>(fb.a[i], ks);
        if constexpr (A_KMAJOR) {
            ldmatrix_x4(f.a[i], addr);
        } else {
#if MMT_MATH == 4
#pragma unroll
            for (int q = 0; q < 4; ++q)
                f.a[i][q] = gather4<A_COLS>(se, k0 + (q >> 1) * 16, wm0 + i * 16 + g + (q & 1) * 8);
#else
            ldmatrix_x4_trans(f.a[i], addr);
#endif
        }
    }
#if MMT_MATH == 4
    if constexpr (!B_KMAJOR) {
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int q = 0; q < 2; ++q) f.b[j][q] = gather4<B_COLS>(se + A_TILE, k0 + q * 16, wn0 + j * 8 + g);
        return;
    }
#endif
#pragma unroll
    for (int j = 0; j < NT; j += 2) {
        const unsigned addr = sb + frag_offset<B_KMAJOR, B_COLS>(fb.b[j / 2], ks);
        if (j + 1 < NT) {
            unsigned r[4];
            if constexpr (B_KMAJOR)
                ldmatrix_x4(r, addr);
            else
                ldmatrix_x4_trans(r, addr);
            f.b[j][0] = r[0];
            f.b[j][1] = r[1];
            f.b[(j + 1) % NT][0] = r[2];
            f.b[(j + 1) % NT][1] = r[3];
        } else {
            unsigned r[2];
            if constexpr (B_KMAJOR)
                ldmatrix_x2(r, addr);
            else
                ldmatrix_x2_trans(r, addr);
            f.b[j][0] = r[0];
            f.b[j][1] = r[1];
        }
    }
#else
    const int k0 = ks * KSTEP;
    // tf32: 32-bit elements; ldmatrix cannot transpose them, so fragments come from
    // single-word shared loads (the swizzle keeps the 8 rows of a phase on distinct banks).
    const float* as = sf;
    const float* bs = sf + A_TILE;
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        const int m0 = wm0 + i * 16;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int m = m0 + g + (q & 1) * 8;
            const int k = k0 + t + (q >> 1) * 4;
            const int off = A_KMAJOR ? swizzle<A_COLS>(m, k) : swizzle<A_COLS>(k, m);
            f.a[i][q] = __float_as_uint(as[off]);
        }
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
        const int n = wn0 + j * 8 + g;
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int k = k0 + t + q * 4;
            const int off = B_KMAJOR ? swizzle<B_COLS>(n, k) : swizzle<B_COLS>(k, n);
            f.b[j][q] = __float_as_uint(bs[off]);
        }
    }
#endif
}

__device__ __forceinline__ void mma(acc_t (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#if MMT_MATH == 4
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif MMT_MATH == 0
#if MMT_DTYPE == 0
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
#else
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

struct Accum {
    acc_t c[MT][NT][4];
};

__device__ __forceinline__ void compute_stage(Accum& acc, const elem_t* stage, int wm0, int wn0, int lane) {
    FragBase fb;
    init_frag_base(fb, wm0, wn0, lane);
    const unsigned sa = smem_addr(stage);
    const float* sf = reinterpret_cast<const float*>(stage);
    // Register double-buffering: fragments of step ks+1 load while step ks multiplies.
    Frags f[2];
    load_frags(f[0], sa, sf, fb, wm0, wn0, 0, lane);
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
        if (ks + 1 < KSTEPS) load_frags(f[(ks + 1) & 1], sa, sf, fb, wm0, wn0, ks + 1, lane);
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j) mma(acc.c[i][j], f[ks & 1].a[i], f[ks & 1].b[j]);
    }
}

__device__ __forceinline__ void mma_all(Accum& acc, const Frags& f) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) mma(acc.c[i][j], f.a[i], f.b[j]);
}

// The pipelined main loop of the tensor-core paths (num_stages >= 2). Besides the cp.async
// ring, fragments are double-buffered in registers across k-steps and across k-tiles: the
// barrier that publishes tile kt+1 comes before the last k-step's MMAs of tile kt, so the
// first fragments of tile kt+1 load while those MMAs run.
template <typename FetchStage, typename DepositStage>
__device__ __forceinline__ void mainloop_mma(Accum& acc, elem_t* smem, int k_tiles, FetchStage& fetch_stage,
                                             DepositStage& deposit_stage, int wm0, int wn0, int lane) {
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < k_tiles) {
            fetch_stage(s, s);
            deposit_stage(s);
        }
        cp_async_commit();
    }
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const unsigned base = smem_addr(smem);
    constexpr unsigned STAGE_BYTES = STAGE_ELEMS * ELT;
    FragBase fb;
    init_frag_base(fb, wm0, wn0, lane);
    Frags f[2];
    load_frags(f[0], base, reinterpret_cast<const float*>(smem), fb, wm0, wn0, 0, lane);
    int read_slot = 0;
    int write_slot = STAGES - 1;
    for (int kt = 0; kt < k_tiles; ++kt) {
        const unsigned sa = base + read_slot * STAGE_BYTES;
        const float* sf = reinterpret_cast<const float*>(smem + read_slot * STAGE_ELEMS);
        const int next_slot = read_slot + 1 == STAGES ? 0 : read_slot + 1;
#pragma unroll
        for (int ks = 0; ks < KSTEPS; ++ks) {
            if (ks == 0) {
                // write_slot held tile kt-1, whose last fragments were read before the
                // barrier that ended tile kt-1.
                if (kt + STAGES - 1 < k_tiles) fetch_stage(kt + STAGES - 1, write_slot);
                cp_async_commit();
            }
            if (ks == KSTEPS - 1) {
                // Before the barrier below, which publishes it when STAGES is 2.
                if (kt + STAGES - 1 < k_tiles) deposit_stage(write_slot);
                cp_async_wait<STAGES - 2>();  // tile kt+1 has landed (this thread's copies)
                __syncthreads();              // ... and every other thread's
                if (kt + 1 < k_tiles)
                    load_frags(f[(ks + 1) & 1], base + next_slot * STAGE_BYTES,
                               reinterpret_cast<const float*>(smem + next_slot * STAGE_ELEMS), fb, wm0, wn0, 0, lane);
            } else {
                load_frags(f[(ks + 1) & 1], sa, sf, fb, wm0, wn0, ks + 1, lane);
            }
            mma_all(acc, f[ks & 1]);
            if constexpr (KSTEPS == 1) f[0] = f[1];  // keeps buffer indices compile-time
        }
        read_slot = next_slot;
        write_slot = write_slot + 1 == STAGES ? 0 : write_slot + 1;
    }
    cp_async_wait<0>();
}

__device__ __forceinline__ void epilogue(const Accum& acc, out_t* c, const elem_t* bias, int m_base, int n_base,
                                         int M, int N, long long ldc, float alpha, float beta, int wm0, int wn0,
                                         int lane) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = m_base + wm0 + i * 16 + g + h * 8;
            if (m >= M) continue;
            out_t* row = c + m * ldc;
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const int n = n_base + wn0 + j * 8 + 2 * t;
                store_pair(row, bias, n, N, acc.c[i][j][2 * h], acc.c[i][j][2 * h + 1], alpha, beta);
            }
        }
    }
}

#else
// ---------------------------------------------------------------- FMA path (float32)
constexpr int TM = MMT_THREAD_M;  // rows per thread (strided by TY)
constexpr int TN = MMT_THREAD_N;  // columns per thread (strided by TX)
constexpr int TX = BN / TN;
constexpr int TY = BM / TM;
static_assert(TX * TY == THREADS, "thread layout");

struct Accum {
    float c[TM][TN];
};

__device__ __forceinline__ void compute_stage(Accum& acc, const elem_t* stage, int, int, int tid) {
    const float* as = stage;
    const float* bs = stage + A_TILE;
    const int ty = tid / TX, tx = tid % TX;
#pragma unroll 4
    for (int k = 0; k < BK; ++k) {
        float a[TM], b[TN];
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int m = ty + i * TY;
            a[i] = as[A_KMAJOR ? swizzle<A_COLS>(m, k) : swizzle<A_COLS>(k, m)];
        }
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int n = tx + j * TX;
            b[j] = bs[B_KMAJOR ? swizzle<B_COLS>(n, k) : swizzle<B_COLS>(k, n)];
        }
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc.c[i][j] = fmaf(a[i], b[j], acc.c[i][j]);
    }
}

__device__ __forceinline__ void epilogue(const Accum& acc, out_t* c, const elem_t* bias, int m_base, int n_base,
                                         int M, int N, long long ldc, float alpha, float beta, int, int, int tid) {
    const int ty = tid / TX, tx = tid % TX;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m_base + ty + i * TY;
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int n = n_base + tx + j * TX;
            if (n >= N) continue;
            float v = acc.c[i][j];
            if constexpr (ADDMM) v = alpha * v + beta * bias[n];
            c[m * ldc + n] = v;
        }
    }
}
#endif

#if MMT_SPLIT_K
// blockIdx.x read so the compiler cannot merge two reads (see mmt_gemm).
__device__ __forceinline__ int block_index() {
    int x;
    asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(x));
    return x;
}

// A split tile's part: stores its partial sums (the CTA's accumulators, 16 bytes per
// thread and step where they allow, so each warp's stores are contiguous) in its slice of
// the tile's workspace, counts itself on the tile's flag and returns whether it counted
// last; that part gets `acc` replaced by the sum of all parts, in part order.
__device__ __forceinline__ bool reduce_split(Accum& acc, float* tile_ws, unsigned* flag, int part, int splits,
                                             int tid) {
    constexpr int FLOATS = sizeof(Accum) / sizeof(float);
    constexpr int WIDTH = FLOATS % 4 == 0 ? 4 : 1;  // FMA tiles may give a thread 1 or 2
    constexpr int STEPS = FLOATS / WIDTH;
    static_assert(FLOATS * THREADS == BM * BN, "a part's slice is the tile");
    float* f = reinterpret_cast<float*>(&acc);  // constant indices below: stays in registers
    const unsigned long long mine = reinterpret_cast<unsigned long long>(tile_ws) + 4 * WIDTH * tid;
    constexpr long long STEP = 4LL * WIDTH * THREADS;
#pragma unroll
    for (int x = 0; x < STEPS; ++x) {
        const unsigned long long at = mine + (part * STEPS + x) * STEP;
        if constexpr (WIDTH == 4)
            asm volatile("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(at), "f"(f[4 * x]), "f"(f[4 * x + 1]),
                         "f"(f[4 * x + 2]), "f"(f[4 * x + 3])
                         : "memory");
        else
            asm volatile("st.global.cg.f32 [%0], %1;\n" ::"l"(at), "f"(f[x]) : "memory");
    }
    // Stores, fence, barrier, then one counted arrival: whoever counts last sees them all.
    __threadfence();
    __syncthreads();
    __shared__ int last_part;
    if (tid == 0) {
        const unsigned ticket = atomicAdd(flag, 1u);
        last_part = ticket == static_cast<unsigned>(splits) - 1;
        // Every part has arrived: nothing else touches the flag in this launch.
        if (last_part) *flag = 0u;
    }
    __syncthreads();
    if (!last_part) return false;
    __threadfence();
#pragma unroll
    for (int i = 0; i < FLOATS; ++i) f[i] = 0.f;
    for (int p = 0; p < splits; ++p) {
#pragma unroll
        for (int x = 0; x < STEPS; ++x) {
            // Other SMs wrote these: read them from L2 (.cg), past this SM's L1.
            const unsigned long long at = mine + (p * STEPS + x) * STEP;
            if constexpr (WIDTH == 4) {
                float v0, v1, v2, v3;
                asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                             : "=f"(v0), "=f"(v1), "=f"(v2), "=f"(v3)
                             : "l"(at)
                             : "memory");
                f[4 * x] += v0;
                f[4 * x + 1] += v1;
                f[4 * x + 2] += v2;
                f[4 * x + 3] += v3;
            } else {
                float v;
                asm volatile("ld.global.cg.f32 %0, [%1];\n" : "=f"(v) : "l"(at) : "memory");
                f[x] += v;
            }
        }
    }
    return true;
}
#endif  // MMT_SPLIT_K

}  // namespace

// C[b] = A[b] · B[b] (mm, bmm) or alpha · A · B + beta · bias (addmm, bias [N] broadcast
// over rows). A is [batch][M][K] (row-major, lda = its row stride) or its transpose view;
// B likewise [batch][K][N]; C is row-major [batch][M][N]. The grid: the tiles of a batch
// along x, batches along z. With SPLIT_K a 1-D grid of work units (unit_at) over the tiles
// of every batch: the tiles [0, split_from) whole, each later one as `splits` parts along
// K, which add up through float32 partial sums in `split_workspace` ((tiles - split_from)
// x splits x BM x BN floats) and a flag per split tile (zero at launch, zero again at the
// end): the part that counts itself last sums every part in part order (the same sum
// whoever is last) and stores the tile. No CTA waits for another. Without SPLIT_K the
// split arguments are unused.
extern "C" __global__ void __launch_bounds__(THREADS)
    mmt_gemm(const elem_t* __restrict__ a, const elem_t* __restrict__ b, out_t* __restrict__ c,
             const elem_t* __restrict__ bias, int M, int N, int K, long long lda, long long ldb, long long ldc,
             long long stride_a, long long stride_b, long long stride_c, float alpha, float beta,
             float* __restrict__ split_workspace, unsigned* __restrict__ split_flags, int split_from, int splits) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    elem_t* smem = reinterpret_cast<elem_t*>(smem_raw);
#ifdef MMT_TEST_FAULT
    // Test only (MMT_TEST_FAULT_CONFIG): an illegal address, the sticky fault the
    // collection must survive. Address 16 is in no window (global, shared, local).
    if (blockIdx.x == 0 && threadIdx.x == 0) *reinterpret_cast<volatile int*>(16ull) = M;
#endif

    // GROUP_M-swizzled tile order, as Triton's template computes it.
    const int grid_m = (M + BM - 1) / BM;
    const int grid_n = (N + BN - 1) / BN;
#if MMT_SPLIT_K
    // A part of a split tile starts at its first k-tile (K ends in the last part). The
    // unit is worked out again after the main loop rather than kept: its fields derive
    // from kernel arguments, so ptxas would hold them in registers through the loop.
    const auto this_unit = [&] { return unit_at(block_index(), split_from, splits, (K + BK - 1) / BK, grid_m, grid_n); };
    const Unit unit = this_unit();
    const int m_base = unit.m_base;
    const int n_base = unit.n_base;
    const long long batch = unit.batch;
    const int k_first = unit.kb;
    const int k_tiles = unit.ke - unit.kb;
#else
    // Whole tiles, batches along the grid's z. (Written apart from the SPLIT_K case, which
    // costs registers even where its values would be constants: ptxas allocates by the
    // shape of the code.)
    int m_base, n_base;
    tile_origin(blockIdx.x, grid_m, grid_n, m_base, n_base);
    const long long batch = blockIdx.z;
    constexpr int k_first = 0;
    const int k_tiles = (K + BK - 1) / BK;
#endif
    a += batch * stride_a;
    b += batch * stride_b;
    c += batch * stride_c;
    K -= k_first * BK;

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
#if MMT_MATH != 2
    const int wm0 = (warp % WARPS_M) * WTM;
    const int wn0 = (warp / WARPS_M) * WTN;
#else
    const int wm0 = 0, wn0 = 0;
#endif
    (void)lane;

    // Tile origins in each operand's storage order; K advances along rows or columns.
    const long long a_kstep = A_KMAJOR ? BK : BK * lda;
    const long long b_kstep = B_KMAJOR ? BK : BK * ldb;
    const elem_t* ga = (A_KMAJOR ? a + m_base * lda : a + m_base) + k_first * a_kstep;
    const elem_t* gb = (B_KMAJOR ? b + n_base * ldb : b + n_base) + k_first * b_kstep;

    // fetch_stage issues k-tile kt's loads into `slot` (element-wise operands: into
    // registers); deposit_stage stores the registers into the slot. The main loops call
    // deposit after the MMAs that follow the fetch.
    ElementTile<A_ROWS, A_COLS> a_regs;
    ElementTile<B_ROWS, B_COLS> b_regs;
    auto fetch_stage = [&](int kt, int slot) {
        elem_t* sa = smem + slot * STAGE_ELEMS;
        elem_t* sb = sa + A_TILE;
        const int k_left = K - kt * BK;
        const elem_t* pa = ga + kt * a_kstep;
        const elem_t* pb = gb + kt * b_kstep;
        fetch_operand<A_ROWS, A_COLS, VEC_A, A_KMAJOR>(a_regs, sa, pa, lda, M - m_base, k_left, tid);
        fetch_operand<B_ROWS, B_COLS, VEC_B, B_KMAJOR>(b_regs, sb, pb, ldb, N - n_base, k_left, tid);
    };
    auto deposit_stage = [&](int slot) {
        elem_t* sa = smem + slot * STAGE_ELEMS;
        if constexpr (BY_ELEMENT<VEC_A>) a_regs.deposit(sa, tid);
        if constexpr (BY_ELEMENT<VEC_B>) b_regs.deposit(sa + A_TILE, tid);
    };

    Accum acc;
#if MMT_MATH != 2
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc.c[i][j][q] = acc_t(0);
    const int cta_arg = lane;
#else
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc.c[i][j] = 0.f;
    const int cta_arg = tid;
#endif

#if MMT_MATH != 2 && MMT_FRAG_PIPELINE
    if constexpr (STAGES >= 2) {
        mainloop_mma(acc, smem, k_tiles, fetch_stage, deposit_stage, wm0, wn0, lane);
    } else
#endif
    if constexpr (STAGES == 1) {
        for (int kt = 0; kt < k_tiles; ++kt) {
            fetch_stage(kt, 0);
            deposit_stage(0);
            cp_async_commit();
            cp_async_wait<0>();
            __syncthreads();
            compute_stage(acc, smem, wm0, wn0, cta_arg);
            __syncthreads();
        }
    } else {
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < k_tiles) {
                fetch_stage(s, s);
                deposit_stage(s);
            }
            cp_async_commit();
        }
        int read_slot = 0;
        int write_slot = STAGES - 1;
        for (int kt = 0; kt < k_tiles; ++kt) {
            cp_async_wait<STAGES - 2>();
            __syncthreads();
            // The slot refilled here was read by step kt-1, which every thread has left.
            const bool refill = kt + STAGES - 1 < k_tiles;
            if (refill) fetch_stage(kt + STAGES - 1, write_slot);
            cp_async_commit();
            compute_stage(acc, smem + read_slot * STAGE_ELEMS, wm0, wn0, cta_arg);
            // Published by the barrier of step kt + 1 at the latest (STAGES >= 2).
            if (refill) deposit_stage(write_slot);
            read_slot = read_slot + 1 == STAGES ? 0 : read_slot + 1;
            write_slot = write_slot + 1 == STAGES ? 0 : write_slot + 1;
        }
        cp_async_wait<0>();
    }

#if MMT_SPLIT_K
    const Unit done = this_unit();
    if (done.part >= 0) {
        const int tail = done.t - split_from;
        if (!reduce_split(acc, split_workspace + static_cast<long long>(tail) * splits * BM * BN, split_flags + tail,
                          done.part, splits, tid))
            return;
    }
    epilogue(acc, c, bias, done.m_base, done.n_base, M, N, ldc, alpha, beta, wm0, wn0, cta_arg);
#else
    epilogue(acc, c, bias, m_base, n_base, M, N, ldc, alpha, beta, wm0, wn0, cta_arg);
#endif
}

#else  // MMT_UTILITY: kernels the backend needs besides the GEMM

// splitmix64 of (seed, index): a counter-based generator, so fills are seeded and
// independent of the launch shape.
__device__ __forceinline__ float mmt_uniform(unsigned long long seed, unsigned long long i, float lo, float hi) {
    unsigned long long z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u = (float)(z >> 40) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * u;
}

extern "C" __global__ void mmt_fill_f32(float* p, unsigned long long n, unsigned long long seed, float lo, float hi) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        p[i] = mmt_uniform(seed, i, lo, hi);
}

extern "C" __global__ void mmt_fill_f16(unsigned short* p, unsigned long long n, unsigned long long seed, float lo,
                                        float hi) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        unsigned short h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(mmt_uniform(seed, i, lo, hi)));
        p[i] = h;
    }
}

extern "C" __global__ void mmt_fill_bf16(unsigned short* p, unsigned long long n, unsigned long long seed, float lo,
                                         float hi) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        unsigned short h;
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(mmt_uniform(seed, i, lo, hi)));
        p[i] = h;
    }
}

// int8 operands (torch._int_mm): non-zero integers in [-4, -1] u [1, 4], as the CPU backend
// draws them: small enough that no sum of K products leaves int32.
extern "C" __global__ void mmt_fill_i8(signed char* p, unsigned long long n, unsigned long long seed, float, float) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const int u = (int)(mmt_uniform(seed, i, 0.f, 8.f));  // 0..7
        p[i] = (signed char)(u < 4 ? u + 1 : 3 - u);
    }
}

// The exact int8 reference the int8 kernels are verified against: one thread per element
// of C = A·B (M x K times K x N), int32 sums. a_kmajor: A is stored row-major (K contiguous,
// lda between rows), else column-major (lda between columns); b_kmajor: B is stored
// column-major (K contiguous), else row-major.
extern "C" __global__ void mmt_reference_int8(const signed char* a, const signed char* b, int* c, int M, int N, int K,
                                              long long lda, long long ldb, long long ldc, int a_kmajor,
                                              int b_kmajor) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    const int m = blockIdx.y;
    if (n >= N || m >= M) return;
    int sum = 0;
    for (int k = 0; k < K; ++k) {
        const int x = a_kmajor ? a[m * lda + k] : a[k * lda + m];
        const int y = b_kmajor ? b[n * ldb + k] : b[k * ldb + n];
        sum += x * y;
    }
    c[m * ldc + n] = sum;
}

#endif  // MMT_UTILITY
