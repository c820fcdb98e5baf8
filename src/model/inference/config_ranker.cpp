#include "matmul_toolkit/model/config_ranker.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_set>

#include "dense_net.hpp"
#include "matmul_toolkit/model/features.hpp"
#include "inference_model_impl.hpp"

namespace mmt::model {
namespace {

constexpr std::size_t kChunkRows = 128;

std::vector<core::GemmConfig> distinct(const std::vector<core::GemmConfig>& configs) {
    std::unordered_set<core::GemmConfig, core::GemmConfigHash> seen;
    std::vector<core::GemmConfig> out;
    out.reserve(configs.size());
    for (const auto& c : configs) {
        if (seen.insert(c).second) out.push_back(c);
    }
    return out;
}

}  // namespace

// The first layer is linear in the raw features once their standardisation is folded into
// its weights, so it splits into three sums: the problem features' (once per problem), the
// config-only features' (once per config, when the ranker is built) and the rest's (per
// problem and config, a product of width `varying.size()` instead of num_features()).
struct ConfigRanker::Impl {
    InferenceModel shared;  ///< keeps `model` alive
    const InferenceModel::Impl& model;
    std::vector<core::GemmConfig> configs;
    bool allow_tf32;
    SpaceFeatures features;
    std::size_t width = 0;               ///< first layer's outputs
    std::vector<float> problem_weight;   ///< num_problem_features() × width
    std::vector<std::size_t> varying;    ///< config-part indices that depend on the problem
    std::vector<float> varying_weight;   ///< varying.size() × width
    std::vector<float> config_share;     ///< configs × width, raw bias included

    // Reused between calls.
    std::vector<float> config_part, varying_rows, problem_share, log_ms;
    std::vector<std::size_t> order;
    DenseScratch scratch;

    Impl(const InferenceModel& model_in, std::vector<core::GemmConfig> configs_in, bool tf32)
        : shared(model_in), model(shared.impl()), configs(std::move(configs_in)), allow_tf32(tf32), features(configs) {
        const DenseLayer& first = model.dense.chain.front();
        width = first.out;
        const std::size_t num_problem = num_problem_features();
        const std::size_t num_config = num_config_features();
        const auto& mean = model.info.feature_mean;
        const auto& inv_std = model.inv_std;

        // Standardising x_j as (x_j - mean_j) · inv_std_j, folded: raw weight w_j · inv_std_j,
        // bias b - Σ_j w_j · inv_std_j · mean_j.
        std::vector<float> raw_weight(first.weight.size());
        std::vector<double> raw_bias(first.bias.begin(), first.bias.end());
        for (std::size_t j = 0; j < first.in; ++j) {
            for (std::size_t o = 0; o < width; ++o) {
                const double w = static_cast<double>(first.weight[j * width + o]) * inv_std[j];
                raw_weight[j * width + o] = static_cast<float>(w);
                raw_bias[o] -= w * mean[j];
            }
        }
        problem_weight.assign(raw_weight.begin(), raw_weight.begin() + static_cast<std::ptrdiff_t>(num_problem * width));
        std::vector<std::size_t> config_only;
        for (std::size_t c = 0; c < num_config; ++c) {
            // Vendor features are zero on every kernel config's row: they add nothing.
            const std::size_t index = num_problem + c;
            if (is_vendor_feature(index)) continue;
            (is_config_only_feature(index) ? config_only : varying).push_back(c);
        }
        for (std::size_t c : varying) {
            const float* row = raw_weight.data() + (num_problem + c) * width;
            varying_weight.insert(varying_weight.end(), row, row + width);
        }

        // Config-only values are the same for every problem: any valid problem gives them.
        const ProblemFeatures any_problem("mm", core::make_shape(1, 1, 1, 1, "float32"), 1);
        config_part.resize(configs.size() * num_config);
        features.write_config_part(any_problem, false, config_part.data());
        config_share.resize(configs.size() * width);
        for (std::size_t i = 0; i < configs.size(); ++i) {
            float* share = config_share.data() + i * width;
            for (std::size_t o = 0; o < width; ++o) {
                double sum = raw_bias[o];
                for (std::size_t c : config_only) {
                    sum += static_cast<double>(raw_weight[(num_problem + c) * width + o]) *
                           config_part[i * num_config + c];
                }
                share[o] = static_cast<float>(sum);
            }
        }
    }

    bool tf32_for(const core::MMShape& shape) const { return allow_tf32 && shape.M_dtype == "float32"; }

    const std::vector<float>& predict(const std::string& op_key, const core::MMShape& shape, int parallel_units) {
        const ProblemFeatures problem(op_key, shape, parallel_units > 0 ? parallel_units : model.info.parallel_units);
        const std::size_t rows = configs.size();
        const std::size_t num_config = num_config_features();
        config_part.resize(rows * num_config);
        features.write_config_part(problem, tf32_for(shape), config_part.data());

        const auto& p = problem.problem_part();
        problem_share.assign(width, 0.0f);
        for (std::size_t j = 0; j < p.size(); ++j) {
            const float* w = problem_weight.data() + j * width;
            for (std::size_t o = 0; o < width; ++o) problem_share[o] += p[j] * w[o];
        }
        const std::size_t nv = varying.size();
        varying_rows.resize(rows * nv);
        for (std::size_t i = 0; i < rows; ++i) {
            for (std::size_t v = 0; v < nv; ++v) varying_rows[i * nv + v] = config_part[i * num_config + varying[v]];
        }
        // Through the whole network kChunkRows configs at a time: a whole space's activations
        // (megabytes for an ensemble's wide layers) would stream through memory once per
        // layer, a chunk's stay in the core's cache.
        log_ms.resize(rows);
        for (std::size_t begin = 0; begin < rows; begin += kChunkRows) {
            const std::size_t count = std::min(kChunkRows, rows - begin);
            auto& first = scratch.a;
            first.resize(count * width);
            for (std::size_t i = 0; i < count; ++i) {
                const float* share = config_share.data() + (begin + i) * width;
                float* out = first.data() + i * width;
                for (std::size_t o = 0; o < width; ++o) out[o] = share[o] + problem_share[o];
            }
            accumulate_product(varying_rows.data() + begin * nv, count, nv, varying_weight.data(), width,
                               first.data());
            model.dense.forward_from_first(count, log_ms.data() + begin, scratch);
        }
        return log_ms;
    }
};

ConfigRanker::ConfigRanker(const InferenceModel& model, const std::vector<core::GemmConfig>& configs,
                           bool allow_tf32)
    : m_impl(std::make_unique<Impl>(model, distinct(configs), allow_tf32)) {
    // One ranking now sizes every buffer, so no later call allocates them.
    m_impl->predict("mm", core::make_shape(1, 64, 64, 64, "float32"), 0);
    m_impl->order.resize(m_impl->configs.size());
}

ConfigRanker::ConfigRanker(const InferenceModel& model, collect::SearchSpace space, bool allow_tf32)
    : ConfigRanker(model, collect::configs_for(space), allow_tf32) {}

ConfigRanker::ConfigRanker(ConfigRanker&&) noexcept = default;
ConfigRanker& ConfigRanker::operator=(ConfigRanker&&) noexcept = default;
ConfigRanker::~ConfigRanker() = default;

std::size_t ConfigRanker::size() const { return m_impl->configs.size(); }
const std::vector<core::GemmConfig>& ConfigRanker::configs() const { return m_impl->configs; }

const std::vector<float>& ConfigRanker::predict_log_ms(const std::string& op_key, const core::MMShape& shape,
                                                       int parallel_units) {
    return m_impl->predict(op_key, shape, parallel_units);
}

namespace {

/// The ranking's order: lowest predicted time first, NaN last, ties in space order.
float ranking_key(const std::vector<float>& log_ms, std::size_t i) {
    return std::isnan(log_ms[i]) ? std::numeric_limits<float>::infinity() : log_ms[i];
}

/// The first `k` of `order` sorted best first, each config set for the problem.
std::vector<RankedConfig> best_first(std::vector<std::size_t>& order, std::size_t k, const std::vector<float>& log_ms,
                                     const std::vector<core::GemmConfig>& configs, bool allow_tf32,
                                     const std::string& op_key, const core::MMShape& shape) {
    k = std::min(k, order.size());
    if (k == 0) return {};
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [&](std::size_t a, std::size_t b) {
                          const float ka = ranking_key(log_ms, a), kb = ranking_key(log_ms, b);
                          return ka < kb || (ka == kb && a < b);
                      });
    collect::Problem problem;
    std::tie(problem.op, problem.layout) = core::parse_op_key(op_key);
    problem.shape = shape;
    std::vector<RankedConfig> out;
    out.reserve(k);
    for (std::size_t i = 0; i < k; ++i) {
        const std::size_t c = order[i];
        out.push_back(RankedConfig{collect::specialize_config(configs[c], problem, allow_tf32),
                                   std::exp(static_cast<double>(log_ms[c]))});
    }
    return out;
}

}  // namespace

std::vector<RankedConfig> ConfigRanker::top_k(const std::string& op_key, const core::MMShape& shape,
                                              std::size_t top_k, int parallel_units) {
    auto& impl = *m_impl;
    const auto& log_ms = impl.predict(op_key, shape, parallel_units);
    auto& order = impl.order;
    order.resize(log_ms.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    return best_first(order, top_k, log_ms, impl.configs, impl.allow_tf32, op_key, shape);
}

std::vector<RankedConfig> ConfigRanker::top_within(const std::string& op_key, const core::MMShape& shape,
                                                   double factor, std::size_t at_least, int parallel_units) {
    auto& impl = *m_impl;
    const auto& log_ms = impl.predict(op_key, shape, parallel_units);
    auto& order = impl.order;
    order.resize(log_ms.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    float best = std::numeric_limits<float>::infinity();
    for (std::size_t i = 0; i < log_ms.size(); ++i) best = std::min(best, ranking_key(log_ms, i));
    // A little more than the factor: callers compare the times in double after exp(), and a
    // longer prefix of the ranking changes nothing for them.
    const float limit = best + static_cast<float>(std::log(factor)) + 1e-4f;
    const auto within = static_cast<std::size_t>(
        std::count_if(order.begin(), order.end(), [&](std::size_t i) { return ranking_key(log_ms, i) <= limit; }));
    return best_first(order, std::max(within, at_least), log_ms, impl.configs, impl.allow_tf32, op_key, shape);
}

}  // namespace mmt::model
