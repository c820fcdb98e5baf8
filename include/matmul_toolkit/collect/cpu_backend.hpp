#pragma once
/// The CPU backend: times cpu_gemm (the config's tiling and group_m walk) on one thread,
/// float32, mm / addmm / bmm in all four layouts, and a BLAS sgemm as the reference entry.
/// It exists so the whole pipeline runs and is tested on machines without a GPU.
///
/// Its config space: num_stages and num_warps mean nothing to a CPU kernel, so prune()
/// fixes them to kCpuNumStages / kCpuNumWarps and prunes the configs that then repeat an
/// earlier tile ("duplicate"). Its own size rule: the packed A and B panels plus the
/// float32 accumulator tile must fit the L2 cache of a core.

#include <cstdint>
#include <string>
#include <vector>

#include "matmul_toolkit/collect/backend.hpp"
#include "matmul_toolkit/collect/cpu_gemm.hpp"

namespace mmt::collect {

/// The values the CPU space fixes num_stages and num_warps to: one stage (no software
/// pipeline) and Inductor's default num_warps.
inline constexpr int kCpuNumStages = 1;
inline constexpr int kCpuNumWarps = 4;

struct CpuBackendOptions {
    std::int64_t cache_bytes = 0;  ///< tile budget; 0: this machine's L2 size (1 MiB if unknown)
};

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(CpuBackendOptions options = {});

    std::string name() const override { return "cpu"; }
    std::string hardware_name() const override;
    /// int8: torch._int_mm (int8 operands, int32 accumulation and output), mm only.
    std::vector<std::string> supported_dtypes() const override { return {"float32", "int8"}; }
    std::vector<std::string> supported_ops() const override { return {"mm", "addmm", "bmm"}; }
    CollectionDefaults collection_defaults() const override;

    PruneResult prune(const std::vector<core::GemmConfig>& configs,
                      const Problem& problem) const override;
    void prepare(const Problem& problem, std::uint64_t seed) override;
    Timing time(const Problem& problem, const core::GemmConfig& config,
                const TimingOptions& options) override;
    Timing time_reference(const Problem& problem, const TimingOptions& options) override;
    double timed_kernel_seconds() const override { return m_timed_seconds; }

    /// The tile budget prune() uses, in bytes.
    std::int64_t cache_bytes() const { return m_cache_bytes; }

private:
    CpuGemmArgs args_for(const Problem& problem, float* out);
    CpuGemmInt8Args int8_args_for(const Problem& problem, std::int32_t* out);
    bool is_int8() const { return m_problem.dtype() == "int8"; }
    void check_prepared(const Problem& problem) const;
    void verify(const Problem& problem, const core::GemmConfig& config) const;

    std::int64_t m_cache_bytes;
    bool m_prepared = false;
    Problem m_problem;
    std::vector<float> m_a, m_b, m_bias, m_out, m_expected;
    std::vector<std::int8_t> m_a8, m_b8;        ///< int8 problems' operands
    std::vector<std::int32_t> m_out32, m_expected32;
    CpuGemmWorkspace m_workspace;
    double m_timed_seconds = 0.0;
};

/// The CPU model from /proc/cpuinfo ("model name"), or "cpu" when it can't be read.
std::string cpu_model_name();
/// The L2 cache size of one core in bytes, or 0 when unknown.
std::int64_t cpu_l2_cache_bytes();
/// True when the reference entry can be timed (the build found a CBLAS); without one,
/// time_reference() throws and kernels are checked against naive_gemm.
bool cpu_reference_available();

}  // namespace mmt::collect
