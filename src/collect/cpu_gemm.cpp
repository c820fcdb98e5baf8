#include "matmul_toolkit/collect/cpu_gemm.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "matmul_toolkit/core/error.hpp"

// One clone of the inner kernel per x86 feature level is built and the loader picks the
// best, so the kernel uses AVX-512 or AVX2+FMA where the machine has them without
// -march=native.
// (Feature levels, not CPU models: "arch=skylake-avx512" would never match an AMD CPU.)
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define MMT_CPU_KERNEL_CLONES \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MMT_CPU_KERNEL_CLONES
#endif

namespace mmt::collect {
namespace {

// Register tile: MR rows of A times NR columns of B held in accumulators.
constexpr int kMr = 8;
constexpr int kNr = 16;

constexpr std::int64_t round_up(std::int64_t x, std::int64_t to) { return (x + to - 1) / to * to; }

// acc[mp × np] += Ap · Bp over kb steps. Ap holds kMr-row panels ([mp/kMr][block_k][kMr]),
// Bp is row-major [kb][np]; mp and np are multiples of kMr and kNr. The kMr × kNr
// accumulator tile lives in vector registers (GCC/Clang vector extensions; without them
// the plain loops below do the same arithmetic). T: float, or int32 for int8 operands.
template <typename T>
[[gnu::always_inline]] inline void multiply_block_body(std::int64_t mp, std::int64_t np, std::int64_t kb,
                                                       std::int64_t block_k, const T* __restrict ap,
                                                       const T* __restrict bp, T* __restrict acc) {
#if defined(__GNUC__)
    typedef T Row __attribute__((vector_size(kNr * sizeof(T))));
    for (std::int64_t i = 0; i < mp; i += kMr) {
        const T* a_panel = ap + (i / kMr) * block_k * kMr;
        for (std::int64_t j = 0; j < np; j += kNr) {
            Row c[kMr];
            for (int r = 0; r < kMr; ++r) std::memcpy(&c[r], acc + (i + r) * np + j, sizeof(Row));
            for (std::int64_t kk = 0; kk < kb; ++kk) {
                Row b;
                std::memcpy(&b, bp + kk * np + j, sizeof(Row));
                const T* a_col = a_panel + kk * kMr;
                for (int r = 0; r < kMr; ++r) c[r] += a_col[r] * b;
            }
            for (int r = 0; r < kMr; ++r) std::memcpy(acc + (i + r) * np + j, &c[r], sizeof(Row));
        }
    }
#else
    for (std::int64_t i = 0; i < mp; i += kMr) {
        const T* a_panel = ap + (i / kMr) * block_k * kMr;
        for (std::int64_t kk = 0; kk < kb; ++kk) {
            const T* b_row = bp + kk * np;
            for (int r = 0; r < kMr; ++r) {
                const T a = a_panel[kk * kMr + r];
                T* acc_row = acc + (i + r) * np;
                for (std::int64_t j = 0; j < np; ++j) acc_row[j] += a * b_row[j];
            }
        }
    }
#endif
}

// One clone set per accumulator type (target_clones does not apply to templates).
MMT_CPU_KERNEL_CLONES
void multiply_block(std::int64_t mp, std::int64_t np, std::int64_t kb, std::int64_t block_k,
                    const float* __restrict ap, const float* __restrict bp, float* __restrict acc) {
    multiply_block_body(mp, np, kb, block_k, ap, bp, acc);
}

MMT_CPU_KERNEL_CLONES
void multiply_block(std::int64_t mp, std::int64_t np, std::int64_t kb, std::int64_t block_k,
                    const std::int32_t* __restrict ap, const std::int32_t* __restrict bp,
                    std::int32_t* __restrict acc) {
    multiply_block_body(mp, np, kb, block_k, ap, bp, acc);
}

// Panels hold 4-byte elements (float or int32).
void* allocate(std::size_t count) {
    // 64-byte alignment keeps every panel row on cache-line boundaries.
    const std::size_t bytes = round_up(static_cast<std::int64_t>(count * 4), 64);
    void* p = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
}

void check_tile(const CpuTile& t, std::int64_t k) {
    if (t.block_m <= 0 || t.block_n <= 0 || t.block_k <= 0 || t.group_m <= 0) {
        throw core::InputError("cpu kernel", "block sizes and group_m must be positive");
    }
    if (t.even_k && k % t.block_k != 0) {
        throw core::InputError("cpu kernel", "EVEN_K is set but K=" + std::to_string(k) +
                                                 " is not a multiple of block_k=" +
                                                 std::to_string(t.block_k));
    }
}

}  // namespace

void CpuGemmWorkspace::FreeDeleter::operator()(void* p) const { std::free(p); }

void CpuGemmWorkspace::reserve(const CpuTile& tile) {
    const auto mp = round_up(tile.block_m, kMr);
    const auto np = round_up(tile.block_n, kNr);
    const auto a_size = static_cast<std::size_t>(mp * tile.block_k);
    const auto b_size = static_cast<std::size_t>(np * tile.block_k);
    const auto acc_size = static_cast<std::size_t>(mp * np);
    if (a_size > m_a_size) m_a.reset(allocate(m_a_size = a_size));
    if (b_size > m_b_size) m_b.reset(allocate(m_b_size = b_size));
    if (acc_size > m_acc_size) m_acc.reset(allocate(m_acc_size = acc_size));
}

std::pair<std::int64_t, std::int64_t> grouped_tile(std::int64_t pid, std::int64_t num_pid_m,
                                                   std::int64_t num_pid_n, int group_m) {
    const std::int64_t num_pid_in_group = group_m * num_pid_n;
    const std::int64_t group_id = pid / num_pid_in_group;
    const std::int64_t first_pid_m = group_id * group_m;
    const std::int64_t group_size_m = std::min<std::int64_t>(num_pid_m - first_pid_m, group_m);
    const std::int64_t in_group = pid % num_pid_in_group;
    return {first_pid_m + in_group % group_size_m, in_group / group_size_m};
}

namespace {

/// The blocked GEMM over In-typed operands with Acc-typed panels and accumulators;
/// `store(c_row, acc_row, n0, nb)` writes one finished row of a tile.
template <typename Acc, typename Args, typename Store>
[[gnu::always_inline]] inline void blocked_gemm(const Args& g, const CpuTile& t, CpuGemmWorkspace& ws, Store store) {
    check_tile(t, g.k);
    const std::int64_t bm = t.block_m, bn = t.block_n, bk = t.block_k;
    const std::int64_t mp = round_up(bm, kMr), np = round_up(bn, kNr);
    const std::int64_t num_pid_m = (g.m + bm - 1) / bm;
    const std::int64_t num_pid_n = (g.n + bn - 1) / bn;
    Acc* const ap = ws.a_panel<Acc>();
    Acc* const bp = ws.b_panel<Acc>();
    Acc* const acc = ws.acc<Acc>();

    for (std::int64_t batch = 0; batch < g.batch; ++batch) {
        const auto* a = g.a + batch * g.a_stride[0];
        const auto* b = g.b + batch * g.b_stride[0];
        auto* c = g.c + batch * g.m * g.n;
        for (std::int64_t pid = 0; pid < num_pid_m * num_pid_n; ++pid) {
            const auto [pid_m, pid_n] = grouped_tile(pid, num_pid_m, num_pid_n, t.group_m);
            const std::int64_t m0 = pid_m * bm, n0 = pid_n * bn;
            const std::int64_t mb = std::min(bm, g.m - m0), nb = std::min(bn, g.n - n0);
            std::memset(acc, 0, static_cast<std::size_t>(mp * np) * sizeof(Acc));

            for (std::int64_t k0 = 0; k0 < g.k; k0 += bk) {
                const std::int64_t kb = t.even_k ? bk : std::min(bk, g.k - k0);
                // Rows and columns past the matrix edge are packed as zeros, as a GPU
                // kernel's masked loads would fill them.
                for (std::int64_t i = 0; i < mp; ++i) {
                    Acc* dst = ap + (i / kMr) * bk * kMr + i % kMr;
                    if (i < mb) {
                        const auto* src = a + (m0 + i) * g.a_stride[1] + k0 * g.a_stride[2];
                        for (std::int64_t kk = 0; kk < kb; ++kk) dst[kk * kMr] = static_cast<Acc>(src[kk * g.a_stride[2]]);
                    } else {
                        for (std::int64_t kk = 0; kk < kb; ++kk) dst[kk * kMr] = Acc{0};
                    }
                }
                for (std::int64_t kk = 0; kk < kb; ++kk) {
                    Acc* dst = bp + kk * np;
                    const auto* src = b + (k0 + kk) * g.b_stride[1] + n0 * g.b_stride[2];
                    for (std::int64_t j = 0; j < nb; ++j) dst[j] = static_cast<Acc>(src[j * g.b_stride[2]]);
                    for (std::int64_t j = nb; j < np; ++j) dst[j] = Acc{0};
                }
                multiply_block(mp, np, kb, bk, ap, bp, acc);
            }
            for (std::int64_t i = 0; i < mb; ++i) store(c + (m0 + i) * g.n + n0, acc + i * np, n0, nb);
        }
    }
}

}  // namespace

void cpu_gemm(const CpuGemmArgs& g, const CpuTile& t, CpuGemmWorkspace& ws) {
    blocked_gemm<float>(g, t, ws, [&](float* c_row, const float* acc_row, std::int64_t n0, std::int64_t nb) {
        if (g.bias != nullptr) {
            const float* bias = g.bias + n0;
            for (std::int64_t j = 0; j < nb; ++j) c_row[j] = g.beta * bias[j] + g.alpha * acc_row[j];
        } else {
            for (std::int64_t j = 0; j < nb; ++j) c_row[j] = acc_row[j];
        }
    });
}

void cpu_gemm(const CpuGemmInt8Args& g, const CpuTile& t, CpuGemmWorkspace& ws) {
    blocked_gemm<std::int32_t>(g, t, ws, [](std::int32_t* c_row, const std::int32_t* acc_row, std::int64_t, std::int64_t nb) {
        std::memcpy(c_row, acc_row, static_cast<std::size_t>(nb) * sizeof(std::int32_t));
    });
}

void naive_gemm(const CpuGemmArgs& g) {
    for (std::int64_t batch = 0; batch < g.batch; ++batch) {
        const float* a = g.a + batch * g.a_stride[0];
        const float* b = g.b + batch * g.b_stride[0];
        float* c = g.c + batch * g.m * g.n;
        for (std::int64_t i = 0; i < g.m; ++i) {
            for (std::int64_t j = 0; j < g.n; ++j) {
                double sum = 0.0;
                for (std::int64_t kk = 0; kk < g.k; ++kk) {
                    sum += static_cast<double>(a[i * g.a_stride[1] + kk * g.a_stride[2]]) *
                           static_cast<double>(b[kk * g.b_stride[1] + j * g.b_stride[2]]);
                }
                c[i * g.n + j] = g.bias != nullptr
                                     ? static_cast<float>(g.beta * static_cast<double>(g.bias[j]) +
                                                          g.alpha * sum)
                                     : static_cast<float>(sum);
            }
        }
    }
}

void naive_gemm(const CpuGemmInt8Args& g) {
    for (std::int64_t batch = 0; batch < g.batch; ++batch) {
        const std::int8_t* a = g.a + batch * g.a_stride[0];
        const std::int8_t* b = g.b + batch * g.b_stride[0];
        std::int32_t* c = g.c + batch * g.m * g.n;
        for (std::int64_t i = 0; i < g.m; ++i) {
            for (std::int64_t j = 0; j < g.n; ++j) {
                std::int64_t sum = 0;
                for (std::int64_t kk = 0; kk < g.k; ++kk) {
                    sum += static_cast<std::int64_t>(a[i * g.a_stride[1] + kk * g.a_stride[2]]) *
                           b[kk * g.b_stride[1] + j * g.b_stride[2]];
                }
                c[i * g.n + j] = static_cast<std::int32_t>(sum);
            }
        }
    }
}

}  // namespace mmt::collect
