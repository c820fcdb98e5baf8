#pragma once
/// The model's input features: one definition shared by training, validation and
/// inference. A feature vector is the problem's features followed by the config's
/// features (config fields and their interactions with the problem and the hardware).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "matmul_toolkit/core/types.hpp"

namespace mmt::model {

/// What the features need to know about the hardware a timing was taken on.
struct HardwareInfo {
    std::string name;
    /// Units that run output tiles concurrently: SMs on a GPU, cores on a CPU.
    int parallel_units = 1;
    bool is_gpu = false;
    /// Shared memory one block may opt in to, in bytes (cudaDevAttrMaxSharedMemoryPerBlockOptin);
    /// 0 when unknown (a CPU, or a GPU not in the table).
    std::int64_t shared_memory_per_block = 0;
    /// Where parallel_units came from: the table entry that matched, or the CPU default.
    std::string source;
};

/// Cores assumed for CPU datasets. A dataset does not record the core count of the
/// machine that collected it, and the CPU backend times each kernel on one thread, so
/// one core is the unit that runs tiles.
inline constexpr int kCpuParallelUnits = 1;

/// SM count and opt-in shared memory per block by GPU name (H100 SXM 132, H100 PCIe 114, H200 132, A100 108, L40S 142,
/// RTX 4090 128, ...); any name not in the table is treated as a CPU.
HardwareInfo lookup_hardware(const std::string& hardware_name);

/// Names of every feature, in vector order; checkpoints store them.
const std::vector<std::string>& feature_names();
std::size_t num_features();
/// The first num_problem_features() entries depend only on the problem.
std::size_t num_problem_features();
std::size_t num_config_features();

/// A problem's features computed once, so a batch of configs for one problem costs only
/// the config part. Throws core::InputError on a non-positive size or an unknown op.
class ProblemFeatures {
public:
    ProblemFeatures(const std::string& op_key, const core::MMShape& shape, int parallel_units);

    /// Writes num_features() values for one config to `out`. Throws core::InputError
    /// when a block size, group_m, num_stages or num_warps is not positive.
    void write(const core::GemmConfig& config, float* out) const;

    /// The problem part alone (num_problem_features() values).
    const std::vector<float>& problem_part() const { return m_problem; }

private:
    friend class SpaceFeatures;
    std::vector<float> m_problem;
    std::int64_t m_b, m_m, m_n, m_k;
    int m_dtype_size;
    int m_parallel_units;
    /// Elements per load instruction of A and B (their rows' alignment over the element size).
    double m_a_vector = 1, m_b_vector = 1;
    /// Whether A's and B's rows allow cp.async (4-byte alignment at least), which copies to
    /// shared memory without staging the loads in registers.
    bool m_a_async = true, m_b_async = true;
    /// The vendor features' values on the vendor-library row.
    std::vector<float> m_vendor;
};

/// True for the features that depend on the config alone (log2 of its block sizes and
/// group_m, num_stages, log2 num_warps, accumulators per thread, tile intensity, loads per
/// thread): the same value for every problem.
bool is_config_only_feature(std::size_t index);

/// True for the features of the vendor-library row (aten_*): a flag, the problem's features
/// again and its unaligned rows per dtype. They are zero on every kernel config's row.
bool is_vendor_feature(std::size_t index);

/// A config space prepared for computing the config part of many problems' feature rows:
/// logarithms and tile counts that depend on one block size are computed once per distinct
/// block size and problem, so a problem costs no logarithm per config. The configs are taken
/// as Inductor sets them for each problem (collect::specialize_config): EVEN_K when K is a
/// multiple of block_k, ALLOW_TF32 as given. Values equal ProblemFeatures::write of those
/// configs up to float rounding.
class SpaceFeatures {
public:
    /// Throws core::InputError when a block size, group_m, num_stages or num_warps is not positive.
    explicit SpaceFeatures(const std::vector<core::GemmConfig>& configs);

    std::size_t size() const { return m_configs.size(); }

    /// Writes size() × num_config_features() values: the config part of each config's row
    /// (the configs are kernel configs: their vendor features are zero).
    void write_config_part(const ProblemFeatures& problem, bool allow_tf32, float* out) const;

private:
    struct PerConfig {
        std::uint32_t m, n, k;  ///< indices into the distinct block sizes
        float fixed[9];         ///< the config-only features
        double accumulators;    ///< fp32 accumulators per thread
        int num_warps;
        double smem_elements;   ///< (block_m + block_n) · block_k · num_stages
        double log2_smem_elements;  ///< log2((block_m + block_n) · block_k · num_stages)
        double a_elements, b_elements;  ///< block_m · block_k and block_k · block_n
        double threads;                 ///< 32 · num_warps
        int num_stages;
    };
    std::vector<PerConfig> m_configs;
    std::vector<std::int64_t> m_block_m, m_block_n, m_block_k;  ///< distinct values
};

/// All features of one (problem, config) pair.
std::vector<float> compute_features(const std::string& op_key, const core::MMShape& shape,
                                    const core::GemmConfig& config, int parallel_units);

}  // namespace mmt::model
