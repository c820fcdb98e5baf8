#pragma once
/// The fast path a compiler calls: rank a config space for a problem with a loaded model
/// and keep the K configs with the lowest predicted time. Also the checks shared by the
/// commands that apply a model to a dataset (is it the model's hardware?).

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "matmul_toolkit/collect/backend.hpp"
#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/core/dataset.hpp"
#include "matmul_toolkit/model/config_ranker.hpp"
#include "matmul_toolkit/model/lut_export.hpp"
#include "matmul_toolkit/model/inference_model.hpp"

namespace mmt::model {

/// Where a problem's candidate configs come from.
struct CandidateOptions {
    collect::SearchSpace space = collect::SearchSpace::default_space;
    bool allow_tf32 = false;  ///< ALLOW_TF32 on float32 problems, as collect --allow-tf32
    /// When set, the backend prunes the space as collection does (the CPU backend fixes
    /// stages/warps and drops repeats; the CUDA backend drops what the GPU can't run).
    const collect::Backend* backend = nullptr;
    /// The configs as Inductor runs them for the shape (collect::inductor_scaled_configs):
    /// a table entry is used as written, so a 128-row tile for M = 1 would run as one.
    bool inductor_scaling = false;
    /// Drop configs whose shared memory (collect::inductor_shared_memory_bytes) exceeds this:
    /// they fail to compile. 0 keeps every config.
    std::int64_t shared_memory_bytes = 0;
    /// Offer the problem's vendor-library entry (collect::reference_config) as a candidate.
    bool with_reference = false;
};

/// The candidate options that fit a model: Inductor's scaling and the shared-memory limit
/// of a GPU in the hardware table (lookup_hardware) the model was trained on, and the
/// vendor entry when it learned vendor rows. Space, ALLOW_TF32 and backend stay as given.
CandidateOptions candidate_options_for(const ModelInfo& info, CandidateOptions options);

/// The space's configs set for the problem as Inductor does (name, EVEN_K, ALLOW_TF32,
/// ACC_TYPE), pruned by the backend when one is given, duplicates removed.
std::vector<core::GemmConfig> candidate_configs(const std::string& op_key, const core::MMShape& shape,
                                                const CandidateOptions& options);

/// The `top_k` distinct candidates with the lowest predicted time, fastest first (ties
/// keep candidate order). Fewer when there are fewer candidates. `parallel_units` 0: the
/// model's own hardware.
std::vector<RankedConfig> top_k_configs(const InferenceModel& model, const std::string& op_key,
                                        const core::MMShape& shape,
                                        const std::vector<core::GemmConfig>& candidates,
                                        std::size_t top_k, int parallel_units = 0);

/// Ranks one problem after another with ConfigRankers, each prepared once for the space as
/// Inductor's scaling leaves it at a problem's sizes (that depends on a size only below the
/// largest block, so a few rankers serve every problem; the most recently used are kept),
/// without the configs over the shared-memory limit at the problem's element size. A
/// model's vendor entry is predicted on its own and merged in. With a backend, which prunes
/// per problem: candidate_configs + top_k_configs.
class CandidateRanker {
public:
    /// The ranker keeps a share of `model`; one ranker serves one thread at a time.
    CandidateRanker(const InferenceModel& model, const CandidateOptions& options);
    /// The `top_k` candidates with the lowest predicted time, fastest first; `candidates`
    /// (when given) receives how many were ranked.
    std::vector<RankedConfig> top_k(const std::string& op_key, const core::MMShape& shape, std::size_t top_k,
                                    std::size_t* candidates = nullptr);
    /// The beginning of the same ranking of every candidate (ConfigRanker::top_within): the
    /// kernel configs predicted within the factor `factor` of the best one, at least
    /// `at_least` entries, and the model's vendor entry wherever it ranks. A decision policy's
    /// rules look no further (DecisionPolicy::ranking_margin), so they decide on it as on
    /// top_k of every candidate.
    std::vector<RankedConfig> top_within(const std::string& op_key, const core::MMShape& shape, double factor,
                                         std::size_t at_least);
    /// How many prepared rankers are kept now (at most kMaxPrepared).
    std::size_t prepared_count() const { return m_prepared.size(); }

    static constexpr std::size_t kMaxPrepared = 16;

private:
    /// M, N and K as the space's scaling sees them: the size's power of two where that is
    /// below the largest block, else a size no block reaches.
    using ScalingKey = std::array<std::int64_t, 3>;
    /// The scaling key and the element size where a shared-memory limit applies (else 0):
    /// a prepared space holds only the configs under the limit, so none is predicted in vain.
    using PreparedKey = std::array<std::int64_t, 4>;
    struct Prepared {
        ConfigRanker ranker;
        std::uint64_t last_use = 0;
    };
    ScalingKey scaling_key(const core::MMShape& shape) const;
    Prepared& prepared_for(const core::MMShape& shape);
    bool over_shared_memory(const core::GemmConfig& config, int element_bytes) const;
    /// Places the vendor entry among the ranker's best-first `ranked` (at most top_k kept).
    void add_vendor_entry(const std::string& op_key, const core::MMShape& shape, std::size_t top_k,
                          std::vector<RankedConfig>& ranked) const;

    InferenceModel m_model;
    CandidateOptions m_options;
    int m_max_block_m = 0, m_max_block_n = 0, m_max_block_k = 0;
    std::map<PreparedKey, Prepared> m_prepared;
    std::uint64_t m_uses = 0;
};

/// A problem to rank: a dataset op key ("mm", "addmm_nt", ...) and a shape.
struct ProblemToRank {
    std::string op_key;
    core::MMShape shape;
};

/// What `recommend` ranks, as its options name it (the CLI binds them; libmmt_rank's
/// mmt_rank_recommend takes the same names in its request): one problem from op, m, n, k,
/// batch, dtype and layout, or every shape of a shapeset file.
struct RecommendRequest {
    /// Not a size anyone types: tells "not given" from a bad value.
    static constexpr std::int64_t kUnset = std::numeric_limits<std::int64_t>::min();

    std::string op = "mm";
    std::int64_t m = kUnset;
    std::int64_t n = kUnset;
    std::int64_t k = kUnset;
    std::int64_t batch = 1;
    std::string dtype;  ///< empty: float16 for a GPU model, float32 for a CPU model
    std::string layout = "nn";
    std::string shapeset;
    std::size_t top_k = 5;
    std::string search_space = "DEFAULT";
    bool allow_tf32 = false;
};

/// The dtype recommend ranks without --dtype: float16 for a model of a GPU in the hardware
/// table (lookup_hardware), float32 for a CPU model.
std::string default_dtype(const ModelInfo& info);

/// The request's problems: every shape of its shapeset, or the one problem its options give.
/// Throws core::InputError naming the option ("--m": "required (or give --shapeset)", ...)
/// or the shapeset file.
std::vector<ProblemToRank> problems_to_rank(const RecommendRequest& request, const ModelInfo& info);

/// The request's space and ALLOW_TF32 (no backend: the caller adds one to prune). Throws
/// core::InputError("--top-k", ...) for a top_k of 0, ("--search-space", ...) for an unknown space.
CandidateOptions candidate_options_of(const RecommendRequest& request);

/// One problem ranked: its candidates, the K best and how long the ranking took.
struct Recommendation {
    ProblemToRank problem;
    std::size_t candidates = 0;
    double milliseconds = 0.0;  ///< wall time of CandidateRanker::top_k for this problem
    std::vector<RankedConfig> top;
};

/// Ranks each problem with `ranker` and keeps its `top_k` best, timing each ranking.
std::vector<Recommendation> recommend(CandidateRanker& ranker, const std::vector<ProblemToRank>& problems,
                                      std::size_t top_k);

/// `recommend --json`'s document: {"model", "model_hardware", "search_space", "pruned",
/// "problems": [{"op", "shape", "candidates", "ranking_ms", "top_k": [{"rank", "predicted_ms",
/// "config"}]}]}, as text (2-space indent, a newline at the end), the same for the CLI and
/// libmmt_rank. `pruned`: a backend pruned the space.
std::string recommendation_json(const std::vector<Recommendation>& results, const std::string& model_path,
                                const ModelInfo& info, collect::SearchSpace space, bool pruned);

/// The hardware names a model was trained on (ModelInfo::hardware_name joins them with ", ").
std::vector<std::string> model_hardware_names(const ModelInfo& info);

/// Hardware names of the dataset the model was not trained on, in dataset order.
std::vector<std::string> foreign_hardware(const ModelInfo& info, const core::Dataset& dataset);

/// Throws core::InputError("--model", ...) when the dataset holds hardware the model was
/// not trained on and `force` is false; with `force` it returns the warning to log
/// instead (empty when everything matches).
std::string check_model_hardware(const ModelInfo& info, const core::Dataset& dataset,
                                 const std::string& model_path, bool force);

}  // namespace mmt::model
