// recommend's fast path on CPU: the time to build a problem's candidate configs (set per
// problem as Inductor does), predict them all with a loaded model and keep the top K.
// Goal: under 1 ms for 1,000+ configs (EXHAUSTIVE: 1875) once the model is loaded.
//
//   recommend_bench [--model M.pt] [--iterations N] [--m M --n N --k K]
//
// Without --model it trains throwaway base and deep models for one epoch on a synthetic
// dataset: the ranking time depends on the architecture, not on the weights.

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
#include "matmul_toolkit/model/predictor.hpp"
#include "matmul_toolkit/model/recommend.hpp"
#include "matmul_toolkit/model/trainer.hpp"

namespace {

using namespace mmt;
using Clock = std::chrono::steady_clock;

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            const auto colon = line.find(':');
            if (colon != std::string::npos) return line.substr(colon + 2);
        }
    }
    return "unknown CPU";
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

model::Predictor throwaway_model(model::ModelType type) {
    model::TrainOptions options;
    options.model.type = type;
    options.num_epochs = 1;
    options.batch_size = 64;
    options.device = "cpu";
    return std::move(model::train_model(synthetic_dataset(), "synthetic", options).model);
}

struct Stats {
    double median_ms;
    double p90_ms;
    double min_ms;
};

/// Runs `body` (after a tenth as many warm-up runs) and returns its latency distribution.
template <typename Body>
Stats measure(int iterations, Body&& body) {
    std::vector<double> samples;
    const int warmup = iterations / 10 + 3;
    for (int i = 0; i < warmup + iterations; ++i) {
        const auto start = Clock::now();
        body();
        const std::chrono::duration<double, std::milli> elapsed = Clock::now() - start;
        if (i >= warmup) samples.push_back(elapsed.count());
    }
    std::sort(samples.begin(), samples.end());
    return {samples[samples.size() / 2], samples[samples.size() * 9 / 10], samples.front()};
}

void report(const std::string& label, const model::Predictor& predictor, const core::MMShape& shape,
            int iterations) {
    std::printf("%s\n", label.c_str());
    for (auto space : {collect::SearchSpace::default_space, collect::SearchSpace::exhaustive}) {
        model::CandidateOptions options;
        options.space = space;
        const auto configs = model::candidate_configs("mm", shape, options);
        std::size_t sink = 0;
        const auto total = measure(iterations, [&] {
            const auto candidates = model::candidate_configs("mm", shape, options);
            sink += model::top_k_configs(predictor, "mm", shape, candidates, 10).size();
        });
        const auto candidates = measure(iterations, [&] {
            sink += model::candidate_configs("mm", shape, options).size();
        });
        const auto predict = measure(iterations, [&] {
            sink += predictor.predict_log_ms("mm", shape, configs).size();
        });
        if (sink == 0) std::abort();
        std::printf("  %-10s %5zu configs  recommend median %8.3f ms (p90 %8.3f, min %8.3f)  "
                    "%7.0f configs/ms | candidates %7.3f ms | features+forward %8.3f ms\n",
                    collect::search_space_name(space).c_str(), configs.size(), total.median_ms,
                    total.p90_ms, total.min_ms, double(configs.size()) / total.median_ms,
                    candidates.median_ms, predict.median_ms);
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_path;
    int iterations = 200;
    std::int64_t m = 1024, n = 1024, k = 1024;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--model") model_path = argv[i + 1];
        else if (flag == "--iterations") iterations = std::max(10, std::atoi(argv[i + 1]));
        else if (flag == "--m") m = std::atoll(argv[i + 1]);
        else if (flag == "--n") n = std::atoll(argv[i + 1]);
        else if (flag == "--k") k = std::atoll(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: %s [--model M.pt] [--iterations N] [--m M --n N --k K]\n", argv[0]);
            return 2;
        }
    }
    try {
        std::printf("recommend ranking latency (candidates + predict + top-10), mm %lldx%lldx%lld "
                    "float32, %d timed runs\n",
                    static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
                    iterations);
        std::printf("machine: %s, %u hardware threads\n", cpu_model().c_str(),
                    std::thread::hardware_concurrency());
        const auto shape = core::make_shape(1, m, n, k, "float32");
        if (!model_path.empty()) {
            const auto predictor = model::Predictor::load(model_path, "cpu");
            report(model_path + " (" + predictor.info().spec.describe() + ")", predictor, shape, iterations);
            return 0;
        }
        for (auto type : {model::ModelType::base, model::ModelType::deep}) {
            const auto predictor = throwaway_model(type);
            report(predictor.info().spec.describe(), predictor, shape, iterations);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
