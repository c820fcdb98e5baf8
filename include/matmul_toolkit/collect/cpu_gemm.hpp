#pragma once
/// The CPU backend's GEMM: a cache-blocked kernel whose tiling is a Triton config's
/// block_m × block_n × block_k and whose tile walk is Triton's group_m swizzle. One
/// thread; float32 storage and accumulation, or int8 storage with int32 accumulation and
/// output (torch._int_mm).

#include <array>
#include <cstdint>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace mmt::collect {

/// Strided float32 operands of C = A·B (mm, bmm) or C = beta·bias + alpha·A·B (addmm).
struct CpuGemmArgs {
    std::int64_t batch = 1;
    std::int64_t m = 0;
    std::int64_t n = 0;
    std::int64_t k = 0;
    const float* a = nullptr;
    std::array<std::int64_t, 3> a_stride{};  ///< element strides of A [batch, m, k]
    const float* b = nullptr;
    std::array<std::int64_t, 3> b_stride{};  ///< element strides of B [batch, k, n]
    const float* bias = nullptr;             ///< addmm: length n, broadcast over rows
    float alpha = 1.0f;
    float beta = 1.0f;
    float* c = nullptr;                      ///< contiguous [batch, m, n]
};

/// Strided int8 operands of C = A·B with int32 accumulation and output (mm and bmm).
struct CpuGemmInt8Args {
    std::int64_t batch = 1;
    std::int64_t m = 0;
    std::int64_t n = 0;
    std::int64_t k = 0;
    const std::int8_t* a = nullptr;
    std::array<std::int64_t, 3> a_stride{};
    const std::int8_t* b = nullptr;
    std::array<std::int64_t, 3> b_stride{};
    std::int32_t* c = nullptr;  ///< contiguous [batch, m, n]
};

/// The parts of a config the CPU kernel uses.
struct CpuTile {
    int block_m = 64;
    int block_n = 64;
    int block_k = 32;
    int group_m = 8;
    bool even_k = false;  ///< K is a multiple of block_k: the K remainder path is skipped
};

/// Packed panels and the accumulator tile, allocated once per tile shape so no timed run
/// allocates. The panels hold the accumulator type (float, or int32 for int8 operands,
/// widened as they are packed); both are 4 bytes, so one workspace serves both.
class CpuGemmWorkspace {
public:
    void reserve(const CpuTile& tile);
    template <typename T>
    T* a_panel() { return static_cast<T*>(m_a.get()); }
    template <typename T>
    T* b_panel() { return static_cast<T*>(m_b.get()); }
    template <typename T>
    T* acc() { return static_cast<T*>(m_acc.get()); }

private:
    struct FreeDeleter {
        void operator()(void* p) const;
    };
    using Buffer = std::unique_ptr<void, FreeDeleter>;
    Buffer m_a, m_b, m_acc;
    std::size_t m_a_size = 0, m_b_size = 0, m_acc_size = 0;
};

/// Triton's grouped tile order: program id -> (pid_m, pid_n), visiting group_m rows of
/// tiles column by column so neighbouring tiles share A and B panels in cache.
std::pair<std::int64_t, std::int64_t> grouped_tile(std::int64_t pid, std::int64_t num_pid_m,
                                                   std::int64_t num_pid_n, int group_m);

/// Runs the blocked GEMM. Throws InputError on a tile that can't apply (non-positive
/// sizes, EVEN_K with K not a multiple of block_k). `workspace` must be reserved for `tile`.
void cpu_gemm(const CpuGemmArgs& args, const CpuTile& tile, CpuGemmWorkspace& workspace);
void cpu_gemm(const CpuGemmInt8Args& args, const CpuTile& tile, CpuGemmWorkspace& workspace);

/// Plain triple loop in double precision: the independent result kernels are checked against.
void naive_gemm(const CpuGemmArgs& args);
/// The exact integer triple loop (int64 sums, stored as int32) the int8 kernel is checked against.
void naive_gemm(const CpuGemmInt8Args& args);

}  // namespace mmt::collect
