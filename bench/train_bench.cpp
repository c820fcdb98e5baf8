// Training throughput and ranking latency of the runtime model.
//
//   train_bench [--device cpu|cuda] [--problems N] [--epochs E] [--iterations I]
//
// 1. Training rows per second per epoch (batch 64, the whole dataset as tensors on the
//    device) for train's default architecture and torch-diode's base and deep, on a synthetic dataset of
//    N problems × 48 configs whose times follow a made-up law.
// 2. The time to predict (rank) 1,000 configs of one problem on CPU with a loaded model,
//    for the defaults and for smaller architectures: the recommend fast path's core.
// Numbers only; nothing here fails on a time.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "matmul_toolkit/core/dataset.hpp"
#include "matmul_toolkit/model/features.hpp"
#include "matmul_toolkit/model/predictor.hpp"
#include "matmul_toolkit/model/trainer.hpp"

namespace {

using namespace mmt;
using Clock = std::chrono::steady_clock;

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    }
    return "unknown CPU";
}

std::vector<core::GemmConfig> grid(std::size_t count) {
    std::vector<core::GemmConfig> configs;
    const int tiles[] = {16, 32, 64, 128, 256};
    for (int stages = 1; configs.size() < count; stages = stages % 5 + 1) {
        for (int bm : tiles) {
            for (int bn : tiles) {
                for (int bk : tiles) {
                    for (int warps : {2, 4, 8}) {
                        if (configs.size() == count) return configs;
                        core::GemmConfig c;
                        c.name = "triton_mm";
                        c.block_m = bm;
                        c.block_n = bn;
                        c.block_k = bk;
                        c.num_stages = stages;
                        c.num_warps = warps;
                        configs.push_back(c);
                    }
                }
            }
        }
    }
    return configs;
}

core::Dataset synthetic_dataset(int problems) {
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> log_size(5.0, 12.0);
    const auto configs = grid(48);
    core::Dataset dataset;
    for (int p = 0; p < problems; ++p) {
        const auto m = static_cast<std::int64_t>(std::exp2(log_size(rng)));
        const auto n = static_cast<std::int64_t>(std::exp2(log_size(rng)));
        const auto k = static_cast<std::int64_t>(std::exp2(log_size(rng)));
        const auto shape = core::make_shape(1, m, n, k, "bfloat16");
        for (const auto& c : configs) {
            const double pm = std::ceil(double(m) / c.block_m) * c.block_m;
            const double pn = std::ceil(double(n) / c.block_n) * c.block_n;
            const double pk = std::ceil(double(k) / c.block_k) * c.block_k;
            dataset.add_timing("NVIDIA H100 80GB HBM3", "mm", shape, {c, 2 * pm * pn * pk / 4e8 + 0.005});
        }
    }
    return dataset;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

model::ModelSpec spec(model::ModelType type, std::vector<int> dims, int width, int layers) {
    model::ModelSpec s;
    s.type = type;
    s.hidden_dims = std::move(dims);
    s.hidden_dim = width;
    s.num_layers = layers;
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    std::string device = "cpu";
    int problems = 500, epochs = 3, iterations = 50;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--device") device = argv[i + 1];
        else if (flag == "--problems") problems = std::max(10, std::atoi(argv[i + 1]));
        else if (flag == "--epochs") epochs = std::max(1, std::atoi(argv[i + 1]));
        else if (flag == "--iterations") iterations = std::max(5, std::atoi(argv[i + 1]));
        else {
            std::fprintf(stderr, "usage: %s [--device cpu|cuda] [--problems N] [--epochs E] [--iterations I]\n", argv[0]);
            return 2;
        }
    }
    try {
        std::printf("machine: %s, %u hardware threads; training device: %s\n", cpu_model().c_str(),
                    std::thread::hardware_concurrency(), device.c_str());
        const auto dataset = synthetic_dataset(problems);

        std::printf("\ntraining throughput: %d problems x 48 configs, batch 64, %d epochs (median epoch)\n",
                    problems, epochs);
        auto row = [&](const std::string& label, model::TrainOptions options) {
            options.num_epochs = epochs;
            options.patience = epochs;
            options.device = device;
            const auto start = Clock::now();
            const auto result = model::train_model(dataset, "synthetic", options);
            const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
            std::vector<double> rates, epoch_seconds;
            for (const auto& e : result.history) rates.push_back(e.rows_per_second), epoch_seconds.push_back(e.seconds);
            std::printf("  %-50s %9.0f rows/s  (%zu training rows, %.2f s per epoch incl. validation, %.1f s total)\n",
                        label.c_str(), median(rates), result.train_rows, median(epoch_seconds), seconds);
        };
        for (const auto& s : {model::ModelSpec{}, spec(model::ModelType::base, {256, 512, 256, 128, 64}, 0, 0),
                              spec(model::ModelType::deep, {}, 128, 10)}) {
            model::TrainOptions options;
            options.model = s;
            row(s.describe(), options);
        }
        // What each training option costs on the default model.
        std::printf("\ntraining options on the default model (rows/s of the first member, total seconds):\n");
        for (const int batch : {256, 1024}) {
            model::TrainOptions options;
            options.batch_size = batch;
            row("--batch-size " + std::to_string(batch), options);
        }
        {
            model::TrainOptions options;
            options.eval_every = 5;
            row("--eval-every 5", options);
            options = {};
            options.ranking_weight = 0.0;
            row("--ranking-weight 0 (rows shuffled, not batched by problem)", options);
            options = {};
            options.ensemble = 3;
            row("--ensemble 3", options);
            // On a GPU the rows above replay one captured step; the reference launches every
            // kernel of every step from the host.
            if (device == "cuda") {
                options = {};
                options.model = spec(model::ModelType::deep, {}, 128, 10);
                options.cuda_graph = false;
                row("deep, --no-cuda-graph", options);
            }
            // The automatic CPU thread count (one per 512 rows) against every core.
            options = {};
            options.model = spec(model::ModelType::deep, {}, 128, 10);
            options.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
            row("deep, --threads " + std::to_string(options.threads) + " (every core)", options);
        }

        std::printf("\nranking latency on CPU: predict 1000 configs of one problem (mm 4096x4096x1024 "
                    "bfloat16), %d runs\n",
                    iterations);
        const auto configs = grid(1000);
        const auto shape = core::make_shape(1, 4096, 4096, 1024, "bfloat16");
        const auto small = synthetic_dataset(12);
        for (const auto& s : {spec(model::ModelType::base, {256, 512, 256, 128, 64}, 0, 0),
                              spec(model::ModelType::deep, {}, 128, 10),
                              spec(model::ModelType::base, {128, 64}, 0, 0),
                              spec(model::ModelType::base, {64, 32}, 0, 0),
                              spec(model::ModelType::deep, {}, 64, 3)}) {
            model::TrainOptions options;
            options.model = s;
            options.num_epochs = 1;
            const auto predictor = std::move(model::train_model(small, "synthetic", options).model);
            std::vector<double> samples;
            double sink = 0;
            for (int i = 0; i < iterations + 5; ++i) {
                const auto start = Clock::now();
                const auto order = predictor.rank("mm", shape, configs);
                const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
                sink += static_cast<double>(order.front());
                if (i >= 5) samples.push_back(ms);
            }
            std::sort(samples.begin(), samples.end());
            std::printf("  %-50s median %7.3f ms  p90 %7.3f ms  min %7.3f ms%s\n", s.describe().c_str(),
                        samples[samples.size() / 2], samples[samples.size() * 9 / 10], samples.front(),
                        sink < 0 ? " " : "");
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
