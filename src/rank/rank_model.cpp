#include "rank_model.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <set>

#include "matmul_toolkit/build_config.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/core/json_codec.hpp"
#include "matmul_toolkit/model/decision_policy.hpp"
#include "matmul_toolkit/model/default_model.hpp"
#include "matmul_toolkit/model/features.hpp"
#include "sha256.hpp"

namespace mmt::rank {
namespace {

using core::OrderedJson;

constexpr const char* kRequest = "request";

/// A request object with typed reads: wrong types and unknown keys are InputErrors naming
/// the key, so a typo is refused rather than ignored.
class Request {
public:
    Request(const std::string& text, const std::set<std::string>& keys) : m_json(core::parse_json_text(text, kRequest)) {
        if (!m_json.is_object()) fail("must be a JSON object, got " + core::json_type_name(m_json));
        for (auto it = m_json.begin(); it != m_json.end(); ++it) {
            if (keys.count(it.key()) == 0) fail("unknown key '" + it.key() + "'");
        }
    }

    bool has(const char* key) const { return m_json.contains(key); }
    const OrderedJson& at(const char* key) const { return m_json.at(key); }

    std::string string(const char* key, const std::string& fallback) const {
        if (!has(key)) return fallback;
        const auto& v = at(key);
        if (!v.is_string()) fail("'" + std::string(key) + "' must be a string");
        return v.get<std::string>();
    }

    std::int64_t integer(const char* key, std::int64_t fallback) const {
        if (!has(key)) return fallback;
        const auto& v = at(key);
        if (!v.is_number_integer()) fail("'" + std::string(key) + "' must be an integer");
        if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
            fail("'" + std::string(key) + "' is too large");
        }
        return v.get<std::int64_t>();
    }

    bool boolean(const char* key, bool fallback) const {
        if (!has(key)) return fallback;
        const auto& v = at(key);
        if (!v.is_boolean()) fail("'" + std::string(key) + "' must be true or false");
        return v.get<bool>();
    }

    [[noreturn]] static void fail(const std::string& what) { throw core::InputError(kRequest, what); }

private:
    OrderedJson m_json;
};

/// The recommend options a request may carry, besides "problems".
const char* const kProblemOptions[] = {"op", "m", "n", "k", "batch", "dtype", "layout", "shapeset"};

model::RecommendRequest recommend_request(const Request& r) {
    model::RecommendRequest request;
    request.op = r.string("op", request.op);
    request.m = r.integer("m", request.m);
    request.n = r.integer("n", request.n);
    request.k = r.integer("k", request.k);
    request.batch = r.integer("batch", request.batch);
    request.dtype = r.string("dtype", request.dtype);
    request.layout = r.string("layout", request.layout);
    request.shapeset = r.string("shapeset", request.shapeset);
    // recommend's own check for a K it can't take (CLI11 refuses a negative one).
    const std::int64_t top_k = r.integer("top_k", static_cast<std::int64_t>(request.top_k));
    if (top_k < 1) throw core::InputError("--top-k", "must be at least 1");
    request.top_k = static_cast<std::size_t>(top_k);
    request.search_space = r.string("search_space", request.search_space);
    request.allow_tf32 = r.boolean("allow_tf32", request.allow_tf32);
    return request;
}

model::ProblemToRank problem_of(const OrderedJson& op, const OrderedJson& shape, const std::string& where) {
    if (!op.is_string()) Request::fail(where + "op: must be a dataset op key (mm, addmm_nt, ...)");
    model::ProblemToRank problem;
    problem.op_key = op.get<std::string>();
    (void)core::parse_op_key(problem.op_key);  // throws for an unknown op or layout
    problem.shape = core::shape_from_document(shape, kRequest, where + "shape");
    return problem;
}

/// The "problems" form: [{"op": "mm_nt", "shape": {...}}, ...].
std::vector<model::ProblemToRank> listed_problems(const Request& r) {
    for (const char* option : kProblemOptions) {
        if (r.has(option)) Request::fail("'problems' and '" + std::string(option) + "' exclude each other");
    }
    const auto& list = r.at("problems");
    if (!list.is_array() || list.empty()) Request::fail("'problems' must be a non-empty list");
    std::vector<model::ProblemToRank> problems;
    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string where = "problems[" + std::to_string(i) + "].";
        const auto& p = list[i];
        if (!p.is_object() || !p.contains("op") || !p.contains("shape") || p.size() != 2) {
            Request::fail(where.substr(0, where.size() - 1) + ": must be {\"op\": ..., \"shape\": {...}}");
        }
        problems.push_back(problem_of(p.at("op"), p.at("shape"), where));
    }
    return problems;
}

}  // namespace

RankModel::Borrowed::~Borrowed() {
    const std::lock_guard<std::mutex> lock(m_owner.m_mutex);
    m_owner.m_idle[m_key].push_back(std::move(m_ranker));
}

RankModel::RankModel(const std::string& path) : m_path(model::model_or_default(path)) {
    static std::atomic<std::uint64_t> opened{0};
    m_serial = ++opened;
    std::string bytes = core::read_file(m_path);
    m_sha256 = sha256_hex(bytes);
    m_model = model::InferenceModel::from_bytes(std::move(bytes), m_path);
}

RankModel::Borrowed RankModel::borrow(const model::CandidateOptions& options) const {
    const RankerKey key{static_cast<int>(options.space), options.allow_tf32};
    {
        const std::lock_guard<std::mutex> lock(m_mutex);
        auto& idle = m_idle[key];
        if (!idle.empty()) {
            auto ranker = std::move(idle.back());
            idle.pop_back();
            return Borrowed(*this, key, std::move(ranker));
        }
    }
    // Every thread busy with one: another, prepared outside the lock.
    return Borrowed(*this, key, std::make_unique<model::CandidateRanker>(m_model, options));
}

std::string RankModel::info_json() const {
    const auto& info = m_model.info();
    OrderedJson hidden = OrderedJson::array();
    if (info.spec.type == model::ModelType::base) {
        for (int width : info.spec.hidden_dims) hidden.push_back(width);
    } else {
        hidden.push_back(info.spec.hidden_dim);
    }
    OrderedJson doc = {{"path", m_path},
                       {"hardware", info.hardware_name},
                       {"is_gpu", model::lookup_hardware(info.hardware_name).is_gpu},
                       {"default_dtype", model::default_dtype(info)},
                       {"sha256", m_sha256},
                       {"toolkit_version", info.toolkit_version},
                       {"library_version", MMT_VERSION_STRING},
                       {"feature_names", info.feature_names},
                       {"vendor_rows", info.vendor_rows},
                       {"ensemble", info.ensemble},
                       {"model_type", model::to_string(info.spec.type)},
                       {"hidden_dims", hidden}};
    if (info.spec.type == model::ModelType::deep) doc["num_layers"] = info.spec.num_layers;
    return core::python_json_dumps(doc);
}

std::string RankModel::recommend_json(const std::string& text) const {
    std::set<std::string> keys{"problems", "top_k", "search_space", "allow_tf32"};
    keys.insert(std::begin(kProblemOptions), std::end(kProblemOptions));
    const Request r(text, keys);
    const auto request = recommend_request(r);
    // In recommend's order: K and the space, then the problems.
    const model::CandidateOptions candidates = model::candidate_options_of(request);
    const auto& info = m_model.info();
    const auto problems = r.has("problems") ? listed_problems(r) : model::problems_to_rank(request, info);
    const Borrowed ranker = borrow(model::candidate_options_for(info, candidates));
    const auto results = model::recommend(*ranker, problems, request.top_k);
    return model::recommendation_json(results, m_path, info, candidates.space, /*pruned=*/false);
}

std::string RankModel::decide_json(const std::string& text) const {
    const Request r(text, {"op", "shape", "policy", "search_space", "allow_tf32"});
    if (!r.has("op") || !r.has("shape")) Request::fail("needs 'op' and 'shape'");
    const model::DecisionPolicy policy = model::policy_named(r.string("policy", model::kDefaultPolicy));
    policy.validate();
    const auto& info = m_model.info();
    model::check_vendor_predictions(policy, info.vendor_rows, m_path);
    model::CandidateOptions candidates;
    candidates.space = collect::parse_search_space(r.string("search_space", "DEFAULT"));
    candidates.allow_tf32 = r.boolean("allow_tf32", false);
    const auto problem = problem_of(r.at("op"), r.at("shape"), "");
    const Borrowed ranker = borrow(model::candidate_options_for(info, candidates));
    auto ranked = (*ranker).top_within(problem.op_key, problem.shape, policy.ranking_margin(), policy.ranked_at_least());
    const auto decided = model::decide_problem(policy, problem.op_key, problem.shape, std::move(ranked));
    return core::python_json_dumps(model::decision_document(policy, decided));
}

}  // namespace mmt::rank
