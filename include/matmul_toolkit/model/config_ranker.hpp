#pragma once
/// recommend's fast path: a config space prepared once for one model, then ranked for one
/// problem after another. What depends on the config alone (its features and their share of
/// the first layer) is computed when the ranker is built; a problem costs its config-dependent
/// features (no logarithm per config), the rest of the forward pass on the calling thread,
/// and a partial sort. Plain C++ over the model's float arrays.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/core/types.hpp"
#include "matmul_toolkit/model/lut_export.hpp"
#include "matmul_toolkit/model/inference_model.hpp"

namespace mmt::model {

class ConfigRanker {
public:
    /// Prepares `configs` (a search space as collect lists it; repeats are dropped) for
    /// `model` (the ranker keeps a share of it). `allow_tf32`: ALLOW_TF32 on float32
    /// problems, as candidate_configs. Throws core::InputError on a config with a
    /// non-positive block size, group_m, num_stages or num_warps.
    ConfigRanker(const InferenceModel& model, const std::vector<core::GemmConfig>& configs,
                 bool allow_tf32 = false);
    /// The space's configs (collect::configs_for).
    ConfigRanker(const InferenceModel& model, collect::SearchSpace space, bool allow_tf32 = false);
    ConfigRanker(ConfigRanker&&) noexcept;
    ConfigRanker& operator=(ConfigRanker&&) noexcept;
    ~ConfigRanker();

    /// Distinct configs ranked per problem.
    std::size_t size() const;
    /// The distinct configs, in the order predictions are given.
    const std::vector<core::GemmConfig>& configs() const;

    /// Predicted ln(time ms) of every config as set for the problem (the order of
    /// configs()); the values InferenceModel::predict_log_ms gives for candidate_configs()
    /// without a backend, up to float rounding. Valid until the next call.
    /// `parallel_units` 0: the model's own hardware. Throws core::InputError on a bad problem.
    /// One ranker serves one thread at a time (its buffers are reused).
    const std::vector<float>& predict_log_ms(const std::string& op_key, const core::MMShape& shape,
                                             int parallel_units = 0);

    /// The `top_k` configs with the lowest predicted time, fastest first (ties keep space
    /// order), each set for the problem as candidate_configs sets it (name, EVEN_K,
    /// ALLOW_TF32, ACC_TYPE). Fewer when the space is smaller.
    std::vector<RankedConfig> top_k(const std::string& op_key, const core::MMShape& shape,
                                    std::size_t top_k, int parallel_units = 0);

    /// The beginning of the same ranking: every config predicted within the factor `factor`
    /// of the best one (a little more, never less), and at least `at_least` configs. What a
    /// rule that compares configs only within a margin of the best needs, without setting
    /// the rest for the problem.
    std::vector<RankedConfig> top_within(const std::string& op_key, const core::MMShape& shape, double factor,
                                         std::size_t at_least, int parallel_units = 0);

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

}  // namespace mmt::model
