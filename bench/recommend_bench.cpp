// recommend's ranking latency on CPU, once the model is loaded: for one problem, the
// features of every config of the search space, the forward pass and the top-K.
// Goal: under 1 ms for 1,000+ configs (EXHAUSTIVE: 1875).
//
//   recommend_bench [--model M.pt]... [--iterations N] [--m M --n N --k K] [--top-k K]
//                   [--library libmmt_rank.so]
//
// The paths per model and space:
//   ranker     model::ConfigRanker, the space prepared once
//   per-call   candidate_configs + top_k_configs, the space built and predicted
//              (InferenceModel::predict_log_ms) for every problem (what runs when a backend
//              prunes the space, or where Inductor's scaling changes the space for a small
//              problem)
//   recommend  model::CandidateRanker with the model's own candidate options (Inductor's
//              scaling and shared-memory limit on GPU models, the vendor entry for models
//              with vendor rows): what recommend and export-lut --shapeset run; a ranker
//              prepared for each way the scaling changes the space, reused
//   first call the same on a new CandidateRanker: where a small problem's scaling is new,
//              its ranker is prepared first (export-lut pays that once per scaling)
//   C API      libmmt_rank.so, loaded with dlopen as a host process (the Python hook) loads
//              it: mmt_rank_decide per problem with each policy (request JSON in, table JSON
//              out: what use_model pays per GEMM inside torch.compile, ctypes aside), and
//              mmt_rank_recommend for one problem per request. The library is
//              $MMT_RANK_LIBRARY, --library, or the build's (../src/cli/libmmt_rank.so).
// Without --model it trains throwaway models of the architecture `train` builds by default
// and of torch-diode's two architectures, one epoch on a synthetic dataset: the ranking time
// depends on the architecture, not on the weights. Problems cycle through a few shapes.

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/core/dataset.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/mmt_rank.h"
#include "matmul_toolkit/model/config_ranker.hpp"
#include "matmul_toolkit/model/inference_model.hpp"
#include "matmul_toolkit/model/predictor.hpp"
#include "matmul_toolkit/model/recommend.hpp"
#include "matmul_toolkit/model/trainer.hpp"

namespace {

using namespace mmt;
using Clock = std::chrono::steady_clock;

std::string first_line_of(const char* path, const char* prefix) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        if (prefix == nullptr) return line;
        if (line.rfind(prefix, 0) == 0) {
            const auto colon = line.find(':');
            if (colon != std::string::npos) return line.substr(colon + 2);
        }
    }
    return "unknown";
}

/// A few problems timed with a made-up law (padded flops over a throughput plus a
/// latency), enough for the trainer to build a model of the wanted architecture.
core::Dataset synthetic_dataset() {
    core::Dataset dataset;
    const std::int64_t sizes[][3] = {{64, 64, 64},    {128, 256, 64},  {256, 128, 512},
                                     {512, 512, 512}, {96, 384, 160},  {1024, 256, 128},
                                     {320, 640, 96},  {2048, 64, 256}, {48, 48, 1024}};
    for (const auto& s : sizes) {
        const auto shape = core::make_shape(1, s[0], s[1], s[2], "float32");
        collect::Problem problem;
        problem.shape = shape;
        for (const auto& c : collect::specialize_configs(collect::default_configs(), problem, false)) {
            const double m = std::ceil(double(s[0]) / c.block_m) * c.block_m;
            const double n = std::ceil(double(s[1]) / c.block_n) * c.block_n;
            const double k = std::ceil(double(s[2]) / c.block_k) * c.block_k;
            dataset.add_timing("synthetic", "mm", shape, {c, 2 * m * n * k / 1e9 + 0.01});
        }
    }
    return dataset;
}

model::Predictor throwaway_model(const model::ModelSpec& spec) {
    model::TrainOptions options;
    options.model = spec;
    options.num_epochs = 1;
    options.batch_size = 64;
    options.device = "cpu";
    return std::move(model::train_model(synthetic_dataset(), "synthetic", options).model);
}

struct Stats {
    double median_ms;
    double p99_ms;
    double min_ms;
    int runs;
};

/// Runs `body(i)` `iterations` times after warm-up runs and returns its latency
/// distribution; slow bodies (over 5 ms) get 100 runs, enough for a p99.
template <typename Body>
Stats measure(int iterations, Body&& body) {
    auto time_once = [&](int i) {
        const auto start = Clock::now();
        body(i);
        return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    };
    double first = 0.0;
    for (int i = 0; i < 5; ++i) first = time_once(i);
    if (first > 5.0) iterations = std::min(iterations, 100);
    std::vector<double> samples;
    samples.reserve(static_cast<std::size_t>(iterations));
    for (int i = 0; i < iterations; ++i) samples.push_back(time_once(i));
    std::sort(samples.begin(), samples.end());
    const auto at = [&](double q) {
        return samples[std::min(samples.size() - 1, static_cast<std::size_t>(q * static_cast<double>(samples.size())))];
    };
    return {at(0.5), at(0.99), samples.front(), iterations};
}

struct Problem {
    std::string op_key;
    core::MMShape shape;
};

/// libmmt_rank.so's API, looked up in the library dlopen loaded.
struct RankLibrary {
    decltype(&mmt_rank_open) open = nullptr;
    decltype(&mmt_rank_close) close = nullptr;
    decltype(&mmt_rank_decide) decide = nullptr;
    decltype(&mmt_rank_recommend) recommend = nullptr;
    std::string path;

    explicit operator bool() const { return open != nullptr; }
};

/// $MMT_RANK_LIBRARY, else `given`, else the build tree's copy beside the binary.
RankLibrary load_rank_library(std::string given) {
    RankLibrary lib;
    if (const char* env = std::getenv("MMT_RANK_LIBRARY"); env != nullptr && *env != '\0') given = env;
    if (given.empty()) {
        char self[4096];
        const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
        if (n > 0) {
            self[n] = '\0';
            const std::string dir = std::string(self).substr(0, std::string(self).rfind('/'));
            given = dir + "/../src/cli/libmmt_rank.so";
        }
    }
    void* handle = ::dlopen(given.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        std::printf("C API rows left out: %s\n", ::dlerror());
        return lib;
    }
    lib.open = reinterpret_cast<decltype(&mmt_rank_open)>(::dlsym(handle, "mmt_rank_open"));
    lib.close = reinterpret_cast<decltype(&mmt_rank_close)>(::dlsym(handle, "mmt_rank_close"));
    lib.decide = reinterpret_cast<decltype(&mmt_rank_decide)>(::dlsym(handle, "mmt_rank_decide"));
    lib.recommend = reinterpret_cast<decltype(&mmt_rank_recommend)>(::dlsym(handle, "mmt_rank_recommend"));
    lib.path = given;
    if (!lib.close || !lib.decide || !lib.recommend) lib.open = nullptr;
    return lib;
}

/// mmt_rank_decide (both policies) and mmt_rank_recommend on each problem, through the C API.
void report_c_api(const RankLibrary& lib, const std::string& model_path, collect::SearchSpace space,
                  const std::vector<Problem>& problems, int iterations, std::size_t top_k) {
    char error[512];
    mmt_rank_model* opened = lib.open(model_path.c_str(), error, sizeof error);
    if (opened == nullptr) {
        std::printf("  C API: %s\n", error);
        return;
    }
    const std::string space_name = collect::search_space_name(space);
    std::vector<char> out(1 << 22);
    auto run = [&](const char* what, const std::vector<std::string>& requests, auto call) {
        const auto stats = measure(iterations, [&](int i) {
            const std::string& request = requests[static_cast<std::size_t>(i) % requests.size()];
            size_t needed = 0;
            if (call(opened, request.c_str(), out.data(), out.size(), &needed, error, sizeof error) != MMT_RANK_OK) {
                std::fprintf(stderr, "%s: %s\n", what, error);
                std::abort();
            }
        });
        std::printf("  %-10s %5s          C API %-15s median %7.3f ms  p99 %7.3f  min %7.3f  (%4d runs)\n", "", "",
                    what, stats.median_ms, stats.p99_ms, stats.min_ms, stats.runs);
    };
    for (const char* policy : {"graph", "isolated"}) {
        std::vector<std::string> requests;
        for (const auto& p : problems) {
            requests.push_back(core::OrderedJson{{"op", p.op_key},
                                                 {"shape", core::shape_to_document(p.shape)},
                                                 {"policy", policy},
                                                 {"search_space", space_name}}
                                   .dump());
        }
        run((std::string("decide ") + policy).c_str(), requests, lib.decide);
    }
    std::vector<std::string> requests;
    for (const auto& p : problems) {
        requests.push_back(core::OrderedJson{{"problems", {{{"op", p.op_key}, {"shape", core::shape_to_document(p.shape)}}}},
                                             {"top_k", top_k},
                                             {"search_space", space_name}}
                               .dump());
    }
    run("recommend", requests, lib.recommend);
    lib.close(opened);
}

void report(const std::string& label, const model::InferenceModel& predictor, const std::vector<Problem>& problems,
            int iterations, std::size_t top_k, const RankLibrary& lib = {}, const std::string& model_path = {}) {
    std::printf("%s\n", label.c_str());
    for (auto space : {collect::SearchSpace::default_space, collect::SearchSpace::exhaustive}) {
        model::ConfigRanker ranker(predictor, space);
        model::CandidateOptions options;
        options.space = space;
        std::size_t sink = 0;
        const auto& pick = [&](int i) -> const Problem& { return problems[static_cast<std::size_t>(i) % problems.size()]; };
        const auto fast = measure(iterations, [&](int i) {
            sink += ranker.top_k(pick(i).op_key, pick(i).shape, top_k).size();
        });
        const auto per_call = measure(iterations, [&](int i) {
            const auto candidates = model::candidate_configs(pick(i).op_key, pick(i).shape, options);
            sink += model::top_k_configs(predictor, pick(i).op_key, pick(i).shape, candidates, top_k).size();
        });
        model::CandidateRanker candidate_ranker(predictor, model::candidate_options_for(predictor.info(), options));
        const auto recommend = measure(iterations, [&](int i) {
            sink += candidate_ranker.top_k(pick(i).op_key, pick(i).shape, top_k).size();
        });
        // The first ranking after the CandidateRanker is built: a small problem whose sizes
        // scale the space as none before prepares a ranker for it first (later ones reuse it).
        std::vector<double> first_calls;
        const auto candidate_options = model::candidate_options_for(predictor.info(), options);
        for (std::size_t i = 0; i < std::max<std::size_t>(problems.size(), 30); ++i) {
            model::CandidateRanker fresh(predictor, candidate_options);
            const Problem& p = problems[i % problems.size()];
            const auto start = Clock::now();
            sink += fresh.top_k(p.op_key, p.shape, top_k).size();
            first_calls.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
        }
        std::sort(first_calls.begin(), first_calls.end());
        if (sink == 0) std::abort();
        const std::string name = collect::search_space_name(space);
        std::printf("  %-10s %5zu configs  ranker   median %7.3f ms  p99 %7.3f  min %7.3f  (%4d runs) %6.0f configs/ms\n",
                    name.c_str(), ranker.size(), fast.median_ms, fast.p99_ms, fast.min_ms, fast.runs,
                    double(ranker.size()) / fast.median_ms);
        std::printf("  %-10s %5s          per-call median %7.3f ms  p99 %7.3f  min %7.3f  (%4d runs)\n", "", "",
                    per_call.median_ms, per_call.p99_ms, per_call.min_ms, per_call.runs);
        std::printf("  %-10s %5s          recommend median %6.3f ms  p99 %7.3f  min %7.3f  (%4d runs)\n", "", "",
                    recommend.median_ms, recommend.p99_ms, recommend.min_ms, recommend.runs);
        std::printf("  %-10s %5s          first call median %5.3f ms  max %7.3f  (%4zu runs; a new ranker's first problem)\n",
                    "", "", first_calls[first_calls.size() / 2], first_calls.back(), first_calls.size());
        if (lib && !model_path.empty()) report_c_api(lib, model_path, space, problems, iterations, top_k);
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> model_paths;
    int iterations = 1000;
    std::size_t top_k = 10;
    std::int64_t m = 0, n = 0, k = 0;
    std::string library;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--model") model_paths.push_back(argv[i + 1]);
        else if (flag == "--library") library = argv[i + 1];
        else if (flag == "--iterations") iterations = std::max(100, std::atoi(argv[i + 1]));
        else if (flag == "--top-k") top_k = static_cast<std::size_t>(std::max(1, std::atoi(argv[i + 1])));
        else if (flag == "--m") m = std::atoll(argv[i + 1]);
        else if (flag == "--n") n = std::atoll(argv[i + 1]);
        else if (flag == "--k") k = std::atoll(argv[i + 1]);
        else {
            std::fprintf(stderr,
                         "usage: %s [--model M.pt]... [--iterations N] [--top-k K] [--m M --n N --k K] [--library L]\n",
                         argv[0]);
            return 2;
        }
    }
    if (argc % 2 == 0) {
        std::fprintf(stderr, "usage: %s [--model M.pt]... [--iterations N] [--top-k K] [--m M --n N --k K] [--library L]\n",
                     argv[0]);
        return 2;
    }
    try {
        std::vector<Problem> problems;
        if (m > 0 && n > 0 && k > 0) {
            problems.push_back({"mm", core::make_shape(1, m, n, k, "float16")});
        } else {
            // Transformer-like problems: decode and prefill token counts, an attention bmm.
            problems = {{"mm", core::make_shape(1, 1, 4096, 4096, "float16")},
                        {"mm", core::make_shape(1, 2048, 11008, 4096, "bfloat16")},
                        {"addmm", core::make_shape(1, 512, 3072, 768, "float16")},
                        {"mm_nt", core::make_shape(1, 8192, 1024, 4096, "bfloat16")},
                        {"bmm", core::make_shape(32, 2048, 2048, 128, "float16")},
                        {"mm", core::make_shape(1, 127, 333, 4097, "float32")}};
        }
        std::printf("recommend ranking latency on CPU: top-%zu of a search space per problem, %zu problem "
                    "shape(s) in turn, up to %d timed runs\n",
                    top_k, problems.size(), iterations);
        std::printf("machine: %s, %u hardware threads, load average %s\n",
                    first_line_of("/proc/cpuinfo", "model name").c_str(), std::thread::hardware_concurrency(),
                    first_line_of("/proc/loadavg", nullptr).c_str());
        const RankLibrary lib = load_rank_library(library);
        if (lib) std::printf("C API: %s\n", lib.path.c_str());
        if (!model_paths.empty()) {
            for (const auto& path : model_paths) {
                const auto loaded = model::InferenceModel::load(path);
                report(path + " (" + loaded.info().spec.describe() + ")", loaded, problems, iterations, top_k, lib, path);
            }
        } else {
            model::ModelSpec deep;
            deep.type = model::ModelType::deep;
            deep.hidden_dim = 128;
            deep.num_layers = 10;
            model::ModelSpec diode_base;
            diode_base.type = model::ModelType::base;
            diode_base.hidden_dims = {256, 512, 256, 128, 64};
            const std::pair<const char*, model::ModelSpec> specs[] = {
                {"train's default", model::ModelSpec{}}, {"torch-diode deep", deep}, {"torch-diode base", diode_base}};
            for (const auto& [what, spec] : specs) {
                const auto predictor = throwaway_model(spec);
                // Saved, so the C API opens it as a file.
                const std::string saved = "/tmp/recommend_bench_" + std::to_string(::getpid()) + ".pt";
                predictor.save(saved);
                report(std::string(what) + ": " + spec.describe(), predictor.inference(), problems, iterations, top_k, lib,
                       saved);
                std::remove(saved.c_str());
            }
        }
        std::printf("load average after: %s\n", first_line_of("/proc/loadavg", nullptr).c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
