#pragma once
// Private: what an mmt_rank_model is, in C++. The model, opened once, and the CandidateRankers
// its calls rank with: a ranker serves one call at a time, so concurrent calls each borrow one
// (made the first time, kept for the next call of the same space), and every answer is what a
// fresh ranker gives. Throws core::InputError for bad input, like the rest of the project; the
// C boundary (mmt_rank.cpp) turns exceptions into status codes.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "matmul_toolkit/model/inference_model.hpp"
#include "matmul_toolkit/model/recommend.hpp"

namespace mmt::rank {

class RankModel {
public:
    /// Opens a checkpoint; "" opens the default model (recommend's --model default).
    explicit RankModel(const std::string& path);

    /// A number no other RankModel of this process has.
    std::uint64_t serial() const { return m_serial; }

    /// mmt_rank_info's document.
    std::string info_json() const;
    /// mmt_rank_recommend: what `recommend --json --no-prune` prints for the request.
    std::string recommend_json(const std::string& request) const;
    /// mmt_rank_decide: the decision policy's table for one problem.
    std::string decide_json(const std::string& request) const;

private:
    /// Rankers by (space, ALLOW_TF32).
    using RankerKey = std::pair<int, bool>;

    /// A ranker lent to one call, given back when the call ends.
    class Borrowed {
    public:
        Borrowed(const RankModel& owner, RankerKey key, std::unique_ptr<model::CandidateRanker> ranker)
            : m_owner(owner), m_key(key), m_ranker(std::move(ranker)) {}
        Borrowed(const Borrowed&) = delete;
        Borrowed& operator=(const Borrowed&) = delete;
        ~Borrowed();
        model::CandidateRanker& operator*() const { return *m_ranker; }

    private:
        const RankModel& m_owner;
        RankerKey m_key;
        std::unique_ptr<model::CandidateRanker> m_ranker;
    };

    /// A ranker for the space and ALLOW_TF32 of `options` (the model's candidate options).
    Borrowed borrow(const model::CandidateOptions& options) const;

    std::uint64_t m_serial;
    std::string m_path;
    std::string m_sha256;
    model::InferenceModel m_model;
    mutable std::mutex m_mutex;  ///< guards m_idle
    mutable std::map<RankerKey, std::vector<std::unique_ptr<model::CandidateRanker>>> m_idle;
};

}  // namespace mmt::rank
