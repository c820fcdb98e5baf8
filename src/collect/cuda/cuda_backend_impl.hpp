#pragma once
/// The CUDA backend: NVRTC-compiled GEMM kernels timed with CUDA events against a cuBLAS
/// reference. make_cuda_backend() (matmul_toolkit/collect/cuda_backend.hpp) builds one;
/// tests and benchmarks use this class for its counters.

#include <cuda.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "cublas_reference.hpp"
#include "device_runtime.hpp"
#include "kernel_cache.hpp"
#include "kernel_spec.hpp"
#include "matmul_toolkit/collect/backend.hpp"

namespace mmt::collect::cuda {

/// At most this many kernels are planned ahead; later ones compile when prune() reaches
/// them. With a disk cache a planned kernel costs only its prelude in memory until used.
inline constexpr std::size_t kMaxPlannedKernels = 16384;

struct CudaBackendOptions {
    int device_index = 0;
    /// Kernel disk cache; empty means KernelCache::default_disk_dir().
    std::filesystem::path cache_dir;
    bool disk_cache = true;
    /// NVRTC worker threads (0: hardware threads - 1).
    int compile_threads = 0;
    /// Forces KernelSpec::frag_pipeline on (1) or off (0) for every kernel; -1 keeps
    /// make_spec's rule. For benchmarks comparing the two main loops.
    int frag_pipeline = -1;
    /// Runs the configs the wgmma rule admits (wgmma_unsupported_reason) with the Hopper
    /// kernel (gemm_kernel_sm90.cuh) on sm_90 devices; false keeps mma.sync everywhere.
    bool wgmma = true;
    /// wgmma path: CTAs per cluster along M (1 or 2, TMA multicast of the shared B tile);
    /// 0 chooses per problem (preferred_cluster_m: 2 where B's rows are not 128-byte
    /// aligned). Clusters run one tile per CTA, without the persistent schedule.
    int wgmma_cluster = 0;
    /// wgmma path: persistent CTAs (KernelSpec::persistent) wherever their shared memory
    /// fits and they pay off (persistent_pays_off: not on one wave that cannot split).
    /// Measured on an H200 against one tile per CTA (docs/experiments/2026-11-22-cuda-kernels.md): +1-8 % on the
    /// large suite shapes.
    bool wgmma_persistent = true;
    /// wgmma path, persistent CTAs: take tiles from a global counter (KernelSpec::
    /// dynamic_tiles) rather than the static stride blockIdx.x, + gridDim.x, ... Off: measured
    /// (docs/experiments/2026-11-22-cuda-kernels.md) +4-5 % on 2552x10616x7616 on an H100 but 0.5-4 % slower on the
    /// other large shapes there and 1-3 % slower on every large shape on an H200.
    bool wgmma_dynamic_tiles = false;
    /// Split tiles along K, so they spread over SMs that would stay idle: on the wgmma path
    /// (persistent CTAs) the last, partial wave's tiles (plan_tiles); on the mma.sync / FMA
    /// template every tile of a problem with fewer tiles than SMs (split_k_plan, the
    /// kernel's SPLIT_K variant).
    bool split_tail = true;
    /// Most parts of a split tile; 0: the template's bound (max_tail_splits), which also
    /// caps a larger value.
    int max_tail_splits = 0;
    /// Test only: caps a persistent launch's grid (0: multiprocessors x resident CTAs), so
    /// small problems too make each CTA walk several tiles.
    int wgmma_max_ctas = 0;
};

/// What the CUDA backend supports and suggests, without a device.
std::vector<std::string> cuda_supported_dtypes();
std::vector<std::string> cuda_supported_ops();
CollectionDefaults cuda_collection_defaults();

/// Counters over the backend's life.
struct CudaBackendStats {
    KernelCacheStats cache;
    std::size_t modules_loaded = 0;
    std::size_t kernels_verified = 0;
    std::size_t verification_failures = 0;
    std::size_t split_tail_launches = 0;  ///< launches that split tiles along K
    double verify_seconds = 0.0;
    double timed_seconds = 0.0;
};

/// Result of checking one kernel against cuBLAS.
struct Verification {
    bool passed = false;
    double max_abs_error = 0.0;   ///< largest |out - ref|
    double max_scaled_error = 0.0;  ///< largest |out - ref| / (atol + rtol·|ref|); <= 1 passes
    std::string problem;          ///< the problem it ran on, e.g. "bmm_nt 2x145x33x64 bfloat16"
    std::string message;          ///< why it failed
};

class CudaBackend final : public Backend {
public:
    explicit CudaBackend(const CudaBackendOptions& options = {});
    ~CudaBackend() override;

    std::string name() const override { return "cuda"; }
    std::string hardware_name() const override { return m_context.info().name; }
    std::vector<std::string> supported_dtypes() const override;
    std::vector<std::string> supported_ops() const override;
    CollectionDefaults collection_defaults() const override;
    PruneResult prune(const std::vector<core::GemmConfig>& configs, const Problem& problem) const override;
    void prepare(const Problem& problem, std::uint64_t seed) override;
    Timing time(const Problem& problem, const core::GemmConfig& config, const TimingOptions& options) override;
    Timing time_reference(const Problem& problem, const TimingOptions& options) override;
    double timed_kernel_seconds() const override { return m_timer->timed_seconds(); }
    /// Hands every runnable kernel the problems need (first kMaxPlannedKernels, in order of
    /// use) to the compile workers, which build them while the GPU times earlier problems.
    void plan(const std::vector<Problem>& problems, const ConfigsForProblem& configs_for) override;

    /// Kernels to build in the background, in this order, ahead of an earlier plan's rest.
    void precompile(const std::vector<KernelSpec>& specs);

    /// The kernel this backend runs for `config` on `problem` (path, cluster, schedule).
    KernelSpec spec_for(const core::GemmConfig& config, const Problem& problem) const;

    const DeviceInfo& device() const { return m_context.info(); }
    DeviceLimits limits() const;
    CudaBackendStats stats() const;

    /// Runs the spec's kernel and cuBLAS on a small odd-sized problem of the spec's
    /// dtype / op / layout / alignment and compares them (fresh inputs in [-1, 1]). int8
    /// kernels are compared element for element with an exact integer kernel instead
    /// (mmt_reference_int8; inputs non-zero integers in [-4, 4]).
    Verification verify(const KernelSpec& spec);

    /// Copies the prepared problem's output C to the host as float (tests).
    std::vector<float> read_output(const Problem& problem);
    /// Runs `config` once on the prepared problem (no timing).
    void run_once(const Problem& problem, const core::GemmConfig& config);
    /// Runs cuBLAS once on the prepared problem.
    void run_reference_once(const Problem& problem);

private:
    struct LoadedKernel {
        CUmodule module = nullptr;
        CUfunction function = nullptr;
        unsigned shared_bytes = 0;
        int ctas_per_sm = 1;  // resident at once (persistent wgmma grids; the driver's occupancy query)
        std::optional<Verification> verification;
    };

    LoadedKernel& load(const KernelSpec& spec);
    LoadedKernel& load_verified(const KernelSpec& spec);
    CUfunction utility_function(const char* name);
    /// `verifying`: the launch plans for fewer CTA slots than tiles and splits down to one
    /// k-tile per part, so the small verification problem takes whole tiles (on a
    /// persistent spec several per CTA) and split ones (when the split tail is on).
    void launch(const KernelSpec& spec, LoadedKernel& kernel, const Problem& problem, const GemmOperands& ops,
                bool verifying = false);
    /// Enqueues the exact int8 GEMM (mm) the int8 kernels are verified against.
    void run_int8_reference(const Problem& problem, const GemmOperands& operands);
    void fill(CUdeviceptr ptr, const std::string& dtype, std::size_t count, std::uint64_t seed, float lo, float hi);
    std::vector<float> download(CUdeviceptr ptr, const std::string& dtype, std::size_t count);
    bool reference_tf32(const Problem& problem) const;
    /// The most parts a tile of `spec` splits into: max_tail_splits, capped by the option.
    int max_splits(const KernelSpec& spec) const;

    PrimaryContext m_context;
    int m_frag_pipeline = -1;
    bool m_wgmma = false;  // the option, on an sm_90 device
    int m_wgmma_cluster = 0;
    bool m_wgmma_persistent = false;
    bool m_wgmma_dynamic_tiles = false;
    bool m_split_tail = false;
    int m_max_tail_splits = 0;
    int m_wgmma_max_ctas = 0;
    CUstream m_stream = nullptr;
    std::unique_ptr<KernelCache> m_cache;
    std::unique_ptr<EventTimer> m_timer;
    std::unique_ptr<CublasReference> m_cublas;
    std::unordered_map<std::string, LoadedKernel> m_kernels;  // by spec key
    CUmodule m_utility = nullptr;

    // The prepared problem and its operands.
    std::optional<Problem> m_problem;
    DeviceBuffer m_a, m_b, m_c, m_bias;
    // The dynamic-tile kernels' tile counter (one unsigned, zeroed once; each launch leaves
    // it at zero again, gemm_kernel_sm90.cuh). One stream, so launches never share it.
    DeviceBuffer m_tile_counter;
    // The split tail's float32 partial sums, and its flags (zeroed when allocated; each
    // launch leaves them at zero again).
    DeviceBuffer m_split_workspace, m_split_flags;
    // Verification operands (kept apart so the prepared problem stays intact).
    DeviceBuffer m_va, m_vb, m_vc, m_vref, m_vbias;

    // Problems whose pruned configs asked for TF32 (float32 only): their cuBLAS reference
    // runs with TF32 too, as torch does under allow_tf32.
    mutable std::unordered_set<std::string> m_tf32_problems;

    CudaBackendStats m_stats;
};

/// Plans a collection on a device without creating a context (cuDeviceGetName and the
/// attributes need none): the parent of `collect`'s worker processes holds no context and
/// no NVRTC workers. It measures nothing: prune, prepare and time throw.
class CudaPlanningBackend final : public Backend {
public:
    explicit CudaPlanningBackend(int device_index);

    std::string name() const override { return "cuda"; }
    std::string hardware_name() const override { return m_info.name; }
    std::vector<std::string> supported_dtypes() const override;
    std::vector<std::string> supported_ops() const override;
    CollectionDefaults collection_defaults() const override;
    PruneResult prune(const std::vector<core::GemmConfig>& configs, const Problem& problem) const override;
    void prepare(const Problem& problem, std::uint64_t seed) override;
    Timing time(const Problem& problem, const core::GemmConfig& config, const TimingOptions& options) override;
    Timing time_reference(const Problem& problem, const TimingOptions& options) override;
    double timed_kernel_seconds() const override { return 0.0; }

private:
    DeviceInfo m_info;
};

}  // namespace mmt::collect::cuda
