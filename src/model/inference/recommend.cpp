#include "matmul_toolkit/model/recommend.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_set>

#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/features.hpp"

namespace mmt::model {

std::vector<core::GemmConfig> candidate_configs(const std::string& op_key, const core::MMShape& shape,
                                                const CandidateOptions& options) {
    const auto [op, layout] = core::parse_op_key(op_key);
    collect::Problem problem;
    problem.op = op;
    problem.layout = layout;
    problem.shape = shape;
    auto space = collect::configs_for(options.space);
    if (options.inductor_scaling) space = collect::inductor_scaled_configs(space, shape);
    auto configs = collect::specialize_configs(space, problem, options.allow_tf32);
    if (options.backend != nullptr) configs = options.backend->prune(configs, problem).kept;
    if (options.shared_memory_bytes > 0) {
        const int element_bytes = core::dtype_size(shape.M_dtype);
        configs.erase(std::remove_if(configs.begin(), configs.end(),
                                     [&](const core::GemmConfig& c) {
                                         return collect::inductor_shared_memory_bytes(c, element_bytes) >
                                                options.shared_memory_bytes;
                                     }),
                      configs.end());
    }
    if (options.with_reference) configs.push_back(collect::reference_config(problem));

    std::unordered_set<core::GemmConfig, core::GemmConfigHash> seen;
    std::vector<core::GemmConfig> distinct;
    distinct.reserve(configs.size());
    for (auto& c : configs) {
        if (seen.insert(c).second) distinct.push_back(std::move(c));
    }
    return distinct;
}

std::vector<RankedConfig> top_k_configs(const InferenceModel& model, const std::string& op_key,
                                        const core::MMShape& shape,
                                        const std::vector<core::GemmConfig>& candidates,
                                        std::size_t top_k, int parallel_units) {
    if (candidates.empty() || top_k == 0) return {};
    const auto log_ms = model.predict_log_ms(op_key, shape, candidates, parallel_units);

    // Repeated candidates would take several of the K places with one kernel.
    std::unordered_set<core::GemmConfig, core::GemmConfigHash> seen;
    std::vector<std::size_t> order;
    order.reserve(candidates.size());
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        if (seen.insert(candidates[i]).second) order.push_back(i);
    }
    auto key = [&](std::size_t i) {
        return std::isnan(log_ms[i]) ? std::numeric_limits<double>::infinity() : log_ms[i];
    };
    const std::size_t k = std::min(top_k, order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [&](std::size_t a, std::size_t b) {
                          return key(a) < key(b) || (key(a) == key(b) && a < b);
                      });
    std::vector<RankedConfig> out;
    out.reserve(k);
    for (std::size_t i = 0; i < k; ++i) {
        out.push_back(RankedConfig{candidates[order[i]], std::exp(log_ms[order[i]])});
    }
    return out;
}

CandidateOptions candidate_options_for(const ModelInfo& info, CandidateOptions options) {
    const auto names = model_hardware_names(info);
    const HardwareInfo hardware = lookup_hardware(names.empty() ? std::string() : names.front());
    options.inductor_scaling = hardware.is_gpu;
    options.shared_memory_bytes = hardware.shared_memory_per_block;
    options.with_reference = info.vendor_rows;
    return options;
}

namespace {

// Scaling to a problem this large changes no block size: what stays is the shape-free
// part (num_warps capped by the tile, spilling tiles dropped, repeats merged).
constexpr std::int64_t kUnboundedDim = std::int64_t{1} << 30;

std::int64_t next_power_of_two(std::int64_t x) {
    std::int64_t p = 1;
    while (p < x) p *= 2;
    return p;
}

}  // namespace

CandidateRanker::CandidateRanker(const InferenceModel& model, const CandidateOptions& options)
    : m_model(model), m_options(options) {
    if (options.backend != nullptr) return;
    for (const auto& c : collect::configs_for(options.space)) {
        m_max_block_m = std::max(m_max_block_m, c.block_m);
        m_max_block_n = std::max(m_max_block_n, c.block_n);
        m_max_block_k = std::max(m_max_block_k, c.block_k);
    }
    // Large 16-bit problems, the common case, are ranked from the first call on.
    prepared_for(core::make_shape(1, kUnboundedDim, kUnboundedDim, kUnboundedDim, "bfloat16"));
}

CandidateRanker::ScalingKey CandidateRanker::scaling_key(const core::MMShape& shape) const {
    if (!m_options.inductor_scaling) return {0, 0, 0};
    // inductor_scaled_configs caps each block at max(next power of two of the size, 16).
    auto cap = [](std::int64_t size, int max_block) {
        const std::int64_t c = std::max<std::int64_t>(next_power_of_two(size), 16);
        return c < max_block ? c : kUnboundedDim;
    };
    return {cap(shape.M, m_max_block_m), cap(shape.N, m_max_block_n), cap(shape.K, m_max_block_k)};
}

CandidateRanker::Prepared& CandidateRanker::prepared_for(const core::MMShape& shape) {
    const ScalingKey scaling = scaling_key(shape);
    const int element_bytes = m_options.shared_memory_bytes > 0 ? core::dtype_size(shape.M_dtype) : 0;
    const PreparedKey key{scaling[0], scaling[1], scaling[2], element_bytes};
    auto at = m_prepared.find(key);
    if (at == m_prepared.end()) {
        if (m_prepared.size() >= kMaxPrepared) {
            m_prepared.erase(std::min_element(m_prepared.begin(), m_prepared.end(), [](const auto& a, const auto& b) {
                return a.second.last_use < b.second.last_use;
            }));
        }
        auto space = collect::configs_for(m_options.space);
        if (m_options.inductor_scaling) {
            space = collect::inductor_scaled_configs(space, core::make_shape(1, key[0], key[1], key[2], "float32"));
        }
        // What fails to compile is no candidate; the rest keep their order (ties go by it).
        if (element_bytes > 0) {
            space.erase(std::remove_if(space.begin(), space.end(),
                                       [&](const core::GemmConfig& c) { return over_shared_memory(c, element_bytes); }),
                        space.end());
        }
        at = m_prepared.emplace(key, Prepared{ConfigRanker(m_model, space, m_options.allow_tf32), 0}).first;
    }
    at->second.last_use = ++m_uses;
    return at->second;
}

bool CandidateRanker::over_shared_memory(const core::GemmConfig& config, int element_bytes) const {
    return m_options.shared_memory_bytes > 0 &&
           collect::inductor_shared_memory_bytes(config, element_bytes) > m_options.shared_memory_bytes;
}

void CandidateRanker::add_vendor_entry(const std::string& op_key, const core::MMShape& shape, std::size_t top_k,
                                       std::vector<RankedConfig>& ranked) const {
    const auto [op, layout] = core::parse_op_key(op_key);
    collect::Problem problem;
    problem.op = op;
    problem.layout = layout;
    problem.shape = shape;
    const core::GemmConfig vendor = collect::reference_config(problem);
    const double log_ms = m_model.predict_log_ms(op_key, shape, {vendor}).front();
    if (std::isnan(log_ms)) {
        if (ranked.size() < top_k) ranked.push_back(RankedConfig{vendor, std::exp(log_ms)});
        return;
    }
    // As candidate_configs lists it last: after the kernel configs predicted as fast.
    const double ms = std::exp(log_ms);
    const auto at = std::find_if(ranked.begin(), ranked.end(),
                                 [&](const RankedConfig& r) { return r.predicted_ms > ms || std::isnan(r.predicted_ms); });
    ranked.insert(at, RankedConfig{vendor, ms});
    if (ranked.size() > top_k) ranked.pop_back();
}

std::vector<RankedConfig> CandidateRanker::top_k(const std::string& op_key, const core::MMShape& shape,
                                                 std::size_t top_k, std::size_t* candidates) {
    if (m_options.backend != nullptr) {
        const auto configs = candidate_configs(op_key, shape, m_options);
        if (candidates != nullptr) *candidates = configs.size();
        return top_k_configs(m_model, op_key, shape, configs, top_k);
    }
    Prepared& prepared = prepared_for(shape);
    auto ranked = prepared.ranker.top_k(op_key, shape, top_k);
    if (m_options.with_reference && top_k > 0) add_vendor_entry(op_key, shape, top_k, ranked);
    if (candidates != nullptr) *candidates = prepared.ranker.size() + (m_options.with_reference ? 1 : 0);
    return ranked;
}

std::vector<RankedConfig> CandidateRanker::top_within(const std::string& op_key, const core::MMShape& shape,
                                                      double factor, std::size_t at_least) {
    if (m_options.backend != nullptr) return top_k(op_key, shape, std::numeric_limits<std::size_t>::max());
    auto ranked = prepared_for(shape).ranker.top_within(op_key, shape, factor, at_least);
    if (m_options.with_reference) add_vendor_entry(op_key, shape, std::numeric_limits<std::size_t>::max(), ranked);
    return ranked;
}

std::string default_dtype(const ModelInfo& info) {
    return lookup_hardware(info.hardware_name).is_gpu ? "float16" : "float32";
}

std::vector<ProblemToRank> problems_to_rank(const RecommendRequest& o, const ModelInfo& info) {
    if (!o.shapeset.empty()) {
        const auto shapeset = core::load_shapeset(o.shapeset);
        std::vector<ProblemToRank> problems;
        for (const auto& entry : shapeset.operations) {
            for (const auto& shape : entry.shapes) problems.push_back({entry.op, shape});
        }
        if (problems.empty()) throw core::InputError(o.shapeset, "the shapeset holds no shapes");
        return problems;
    }
    if (!core::is_known_op(o.op)) {
        throw core::InputError("--op", "unknown operation '" + o.op + "' (expected mm, addmm or bmm)");
    }
    if (!core::is_known_layout(o.layout)) {
        throw core::InputError("--layout", "unknown layout '" + o.layout + "' (expected nn, nt, tn or tt)");
    }
    const std::pair<const char*, std::int64_t> sizes[] = {{"--m", o.m}, {"--n", o.n}, {"--k", o.k}};
    for (const auto& [name, value] : sizes) {
        if (value <= 0) {
            throw core::InputError(name, value == RecommendRequest::kUnset
                                             ? "required (or give --shapeset)"
                                             : "must be positive, got " + std::to_string(value));
        }
    }
    if (o.batch <= 0) throw core::InputError("--batch", "must be positive");
    if (o.op != "bmm" && o.batch != 1) throw core::InputError("--batch", "only bmm takes a batch size");
    std::string dtype = o.dtype;
    if (dtype.empty()) dtype = default_dtype(info);
    if (!core::is_known_dtype(dtype)) throw core::InputError("--dtype", "unknown dtype '" + dtype + "'");
    return {{core::op_key(o.op, o.layout), core::make_shape(o.batch, o.m, o.n, o.k, dtype)}};
}

CandidateOptions candidate_options_of(const RecommendRequest& request) {
    if (request.top_k == 0) throw core::InputError("--top-k", "must be at least 1");
    CandidateOptions options;
    options.space = collect::parse_search_space(request.search_space);
    options.allow_tf32 = request.allow_tf32;
    return options;
}

std::vector<Recommendation> recommend(CandidateRanker& ranker, const std::vector<ProblemToRank>& problems,
                                      std::size_t top_k) {
    std::vector<Recommendation> results;
    results.reserve(problems.size());
    for (const auto& problem : problems) {
        const auto start = std::chrono::steady_clock::now();
        Recommendation ranked{problem, 0, 0.0, {}};
        ranked.top = ranker.top_k(problem.op_key, problem.shape, top_k, &ranked.candidates);
        const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
        ranked.milliseconds = elapsed.count();
        results.push_back(std::move(ranked));
    }
    return results;
}

std::string recommendation_json(const std::vector<Recommendation>& results, const std::string& model_path,
                                const ModelInfo& info, collect::SearchSpace space, bool pruned) {
    core::OrderedJson problems = core::OrderedJson::array();
    for (const auto& r : results) {
        core::OrderedJson top = core::OrderedJson::array();
        for (std::size_t i = 0; i < r.top.size(); ++i) {
            top.push_back({{"rank", i + 1},
                           {"predicted_ms", r.top[i].predicted_ms},
                           {"config", core::config_to_document(r.top[i].config)}});
        }
        problems.push_back({{"op", r.problem.op_key},
                            {"shape", core::shape_to_document(r.problem.shape)},
                            {"candidates", r.candidates},
                            {"ranking_ms", r.milliseconds},
                            {"top_k", top}});
    }
    const core::OrderedJson doc = {{"model", model_path},
                                   {"model_hardware", info.hardware_name},
                                   {"search_space", collect::search_space_name(space)},
                                   {"pruned", pruned},
                                   {"problems", problems}};
    return core::python_json_dumps(doc, 2) + "\n";
}

std::vector<std::string> model_hardware_names(const ModelInfo& info) {
    std::vector<std::string> names;
    const std::string& all = info.hardware_name;
    std::size_t start = 0;
    while (start <= all.size()) {
        const auto comma = all.find(", ", start);
        const auto end = comma == std::string::npos ? all.size() : comma;
        if (end > start) names.push_back(all.substr(start, end - start));
        if (comma == std::string::npos) break;
        start = comma + 2;
    }
    return names;
}

std::vector<std::string> foreign_hardware(const ModelInfo& info, const core::Dataset& dataset) {
    const auto known = model_hardware_names(info);
    std::vector<std::string> foreign;
    for (const auto& hw : dataset.hardware()) {
        if (std::find(known.begin(), known.end(), hw.name) == known.end()) foreign.push_back(hw.name);
    }
    return foreign;
}

std::string check_model_hardware(const ModelInfo& info, const core::Dataset& dataset,
                                 const std::string& model_path, bool force) {
    const auto foreign = foreign_hardware(info, dataset);
    if (foreign.empty()) return {};
    std::string names;
    for (const auto& name : foreign) names += (names.empty() ? "'" : ", '") + name + "'";
    const std::string message = "the model was trained on '" + info.hardware_name +
                                "', the dataset holds " + names +
                                ": its predictions for other hardware are not trustworthy";
    if (!force) throw core::InputError(model_path, message + " (pass --force to go on anyway)");
    return message;
}

}  // namespace mmt::model
