// `recommend`: rank a config space with the model and print the K best configs per problem.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
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

// Not a size anyone types: tells "not given" from a bad value.
constexpr std::int64_t kUnset = std::numeric_limits<std::int64_t>::min();

struct RecommendOptions {
    std::string model;
    std::string op = "mm";
    std::int64_t m = kUnset;
    std::int64_t n = kUnset;
    std::int64_t k = kUnset;
    std::int64_t batch = 1;
    std::string dtype;
    std::string layout = "nn";
    std::string shapeset;
    std::size_t top_k = 5;
    std::string search_space = "DEFAULT";
    bool allow_tf32 = false;
    bool no_prune = false;
    bool json = false;

    void add_to(CLI::App& cmd) {
        cmd.add_option("--model", model,
                       "Trained model checkpoint (.pt); default: the shipped data/models/inductor_h200.pt (Inductor timings, NVIDIA H200)");
        auto* op_opt = cmd.add_option("--op", op, "Operation: mm, addmm or bmm")->capture_default_str();
        auto* m_opt = cmd.add_option("--m", m, "Rows of A and of the output");
        auto* n_opt = cmd.add_option("--n", n, "Columns of B and of the output");
        auto* k_opt = cmd.add_option("--k", k, "Columns of A, rows of B");
        auto* b_opt = cmd.add_option("--batch", batch, "Batch size (bmm only)")->capture_default_str();
        auto* d_opt = cmd.add_option("--dtype", dtype,
                                     "Operand dtype (default: float16 for a GPU model, float32 for a CPU model)");
        auto* l_opt = cmd.add_option("--layout", layout, "Operand layouts: nn, nt, tn or tt")
                          ->capture_default_str();
        auto* s_opt = cmd.add_option("--shapeset", shapeset,
                                     "Rank every problem of a shapeset file instead of one problem");
        for (auto* single : {op_opt, m_opt, n_opt, k_opt, b_opt, d_opt, l_opt}) s_opt->excludes(single);
        cmd.add_option("--top-k", top_k, "Configs to print per problem")->capture_default_str();
        cmd.add_option("--search-space", search_space, "Config space to rank: DEFAULT or EXHAUSTIVE")
            ->capture_default_str();
        cmd.add_flag("--allow-tf32", allow_tf32, "Set ALLOW_TF32 on float32 problems (as collect --allow-tf32)");
        cmd.add_flag("--no-prune", no_prune,
                     "Rank the whole space, even where this machine's backend for the model's "
                     "hardware would prune configs");
        cmd.add_flag("--json", json, "Print the recommendations as JSON");
    }
};

struct ProblemToRank {
    std::string op_key;
    core::MMShape shape;
};

std::vector<ProblemToRank> problems_to_rank(const RecommendOptions& o, const model::ModelInfo& info) {
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
            throw core::InputError(name, value == kUnset ? "required (or give --shapeset)"
                                                         : "must be positive, got " + std::to_string(value));
        }
    }
    if (o.batch <= 0) throw core::InputError("--batch", "must be positive");
    if (o.op != "bmm" && o.batch != 1) throw core::InputError("--batch", "only bmm takes a batch size");
    std::string dtype = o.dtype;
    if (dtype.empty()) dtype = model::lookup_hardware(info.hardware_name).is_gpu ? "float16" : "float32";
    if (!core::is_known_dtype(dtype)) throw core::InputError("--dtype", "unknown dtype '" + dtype + "'");
    return {{core::op_key(o.op, o.layout), core::make_shape(o.batch, o.m, o.n, o.k, dtype)}};
}

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

struct Ranked {
    ProblemToRank problem;
    std::size_t candidates = 0;
    double milliseconds = 0.0;
    std::vector<model::RankedConfig> top;
};

std::string shape_label(const ProblemToRank& p) {
    const auto& s = p.shape;
    std::string label = p.op_key + " M=" + std::to_string(s.M) + " N=" + std::to_string(s.N) +
                        " K=" + std::to_string(s.K);
    if (s.B != 1) label += " B=" + std::to_string(s.B);
    return label + " " + s.M_dtype;
}

void print_table(const std::vector<Ranked>& results, const std::string& space) {
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

void print_json(const std::vector<Ranked>& results, const std::string& model_path,
                const model::ModelInfo& info, const std::string& space, bool pruned) {
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
                                   {"search_space", space},
                                   {"pruned", pruned},
                                   {"problems", problems}};
    std::cout << core::python_json_dumps(doc, 2) << "\n";
}

int run_recommend(const RecommendOptions& o, const GlobalOptions& global) {
    if (o.top_k == 0) throw core::InputError("--top-k", "must be at least 1");
    model::CandidateOptions candidates;
    candidates.space = collect::parse_search_space(o.search_space);
    candidates.allow_tf32 = o.allow_tf32;

    const std::string model_path = model::model_or_default(o.model);
    if (o.model.empty()) spdlog::info("--model not given: using the default model {}", model_path);
    const auto trained_model = model::InferenceModel::load(model_path);
    const auto& info = trained_model.info();
    const auto problems = problems_to_rank(o, info);
    std::unique_ptr<collect::Backend> backend;
    if (!o.no_prune) backend = pruning_backend(info, global);
    candidates.backend = backend.get();
    model::CandidateRanker ranker(trained_model, model::candidate_options_for(info, candidates));

    std::vector<Ranked> results;
    for (const auto& problem : problems) {
        const auto start = std::chrono::steady_clock::now();
        Ranked ranked{problem, 0, 0.0, {}};
        ranked.top = ranker.top_k(problem.op_key, problem.shape, o.top_k, &ranked.candidates);
        const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
        ranked.milliseconds = elapsed.count();
        results.push_back(std::move(ranked));
    }
    const std::string space = collect::search_space_name(candidates.space);
    if (o.json) {
        print_json(results, model_path, info, space, backend != nullptr);
    } else {
        print_table(results, space);
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
