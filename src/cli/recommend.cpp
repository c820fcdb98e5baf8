// `recommend`: rank a config space with the model and print the K best configs per problem.

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "command.hpp"
#include "matmul_toolkit/collect/backend_factory.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/config_ranker.hpp"
#include "matmul_toolkit/model/default_model.hpp"
#include "matmul_toolkit/model/features.hpp"
#include "matmul_toolkit/model/inference_model.hpp"
#include "matmul_toolkit/model/recommend.hpp"

namespace mmt::cli {
namespace {

using Request = model::RecommendRequest;

struct RecommendOptions {
    std::string model;
    Request request;  ///< the problems, K, the space: defaults in the library's struct
    bool no_prune = false;
    bool json = false;

    void add_to(CLI::App& cmd) {
        Request& r = request;
        cmd.add_option("--model", model,
                       "Trained model checkpoint (.pt); default: the shipped data/models/inductor_h200.pt (Inductor timings, NVIDIA H200)");
        auto* op_opt = cmd.add_option("--op", r.op, "Operation: mm, addmm or bmm")->capture_default_str();
        auto* m_opt = cmd.add_option("--m", r.m, "Rows of A and of the output");
        auto* n_opt = cmd.add_option("--n", r.n, "Columns of B and of the output");
        auto* k_opt = cmd.add_option("--k", r.k, "Columns of A, rows of B");
        auto* b_opt = cmd.add_option("--batch", r.batch, "Batch size (bmm only)")->capture_default_str();
        auto* d_opt = cmd.add_option("--dtype", r.dtype,
                                     "Operand dtype (default: float16 for a GPU model, float32 for a CPU model)");
        auto* l_opt = cmd.add_option("--layout", r.layout, "Operand layouts: nn, nt, tn or tt")
                          ->capture_default_str();
        auto* s_opt = cmd.add_option("--shapeset", r.shapeset,
                                     "Rank every problem of a shapeset file instead of one problem");
        for (auto* single : {op_opt, m_opt, n_opt, k_opt, b_opt, d_opt, l_opt}) s_opt->excludes(single);
        cmd.add_option("--top-k", r.top_k, "Configs to print per problem")->capture_default_str();
        cmd.add_option("--search-space", r.search_space, "Config space to rank: DEFAULT or EXHAUSTIVE")
            ->capture_default_str();
        cmd.add_flag("--allow-tf32", r.allow_tf32, "Set ALLOW_TF32 on float32 problems (as collect --allow-tf32)");
        cmd.add_flag("--no-prune", no_prune,
                     "Rank the whole space, even where this machine's backend for the model's "
                     "hardware would prune configs");
        cmd.add_flag("--json", json, "Print the recommendations as JSON");
    }
};

/// This machine's backend, when it measures the hardware the model was trained on: its
/// prune() then turns the space into what collection would have timed there.
std::unique_ptr<collect::Backend> pruning_backend(const model::ModelInfo& info,
                                                  const GlobalOptions& global) {
    auto backend = collect::backend_for_hardware(model::model_hardware_names(info), resolved_device(global));
    if (!backend) {
        spdlog::info("ranking the whole space: the model's hardware '{}' is not this "
                     "machine's", info.hardware_name);
    }
    return backend;
}

std::string shape_label(const model::ProblemToRank& p) {
    const auto& s = p.shape;
    std::string label = p.op_key + " M=" + std::to_string(s.M) + " N=" + std::to_string(s.N) +
                        " K=" + std::to_string(s.K);
    if (s.B != 1) label += " B=" + std::to_string(s.B);
    return label + " " + s.M_dtype;
}

void print_table(const std::vector<model::Recommendation>& results, const std::string& space) {
    for (const auto& r : results) {
        std::printf("%s: %zu %s candidates ranked in %.3f ms\n", shape_label(r.problem).c_str(),
                    r.candidates, space.c_str(), r.milliseconds);
        std::printf("%5s %8s %8s %8s %8s %7s %6s %7s %13s\n", "rank", "block_m", "block_n",
                    "block_k", "group_m", "stages", "warps", "EVEN_K", "predicted_ms");
        for (std::size_t i = 0; i < r.top.size(); ++i) {
            const auto& c = r.top[i].config;
            if (collect::is_reference_config(c)) {  // ATen has no tiles
                std::printf("%5zu %-47s %13.6g\n", i + 1, c.name.c_str(), r.top[i].predicted_ms);
                continue;
            }
            std::printf("%5zu %8d %8d %8d %8d %7d %6d %7s %13.6g\n", i + 1, c.block_m, c.block_n,
                        c.block_k, c.group_m, c.num_stages, c.num_warps, c.even_k ? "yes" : "no",
                        r.top[i].predicted_ms);
        }
    }
}

int run_recommend(const RecommendOptions& o, const GlobalOptions& global) {
    model::CandidateOptions candidates = model::candidate_options_of(o.request);
    const std::string model_path = model::model_or_default(o.model);
    if (o.model.empty()) spdlog::info("--model not given: using the default model {}", model_path);
    const auto trained_model = model::InferenceModel::load(model_path);
    const auto& info = trained_model.info();
    const auto problems = model::problems_to_rank(o.request, info);
    std::unique_ptr<collect::Backend> backend;
    if (!o.no_prune) backend = pruning_backend(info, global);
    candidates.backend = backend.get();
    model::CandidateRanker ranker(trained_model, model::candidate_options_for(info, candidates));
    const auto results = model::recommend(ranker, problems, o.request.top_k);
    if (o.json) {
        std::cout << model::recommendation_json(results, model_path, info, candidates.space, backend != nullptr);
    } else {
        print_table(results, collect::search_space_name(candidates.space));
    }
    return core::kExitOk;
}

}  // namespace

void register_recommend(CLI::App& app, const GlobalOptions& global) {
    auto options = std::make_shared<RecommendOptions>();
    auto* cmd = app.add_subcommand(
        "recommend", "Rank a config space (DEFAULT or EXHAUSTIVE) with the model and print the "
                     "K configs with the lowest predicted time, for one problem or a shapeset");
    options->add_to(*cmd);
    cmd->callback([options, &global] { exit_code() = run_recommend(*options, global); });
}

}  // namespace mmt::cli
