// Using the model library from another C++ program: train a runtime model on a dataset,
// save it, load it back once and rank a problem's configs with it.
//
//     train_example [DATASET] [MODEL_OUT.pt]
//
// Without a dataset it trains on a small synthetic one whose times follow a made-up law
// (padded flops over a tile-size-dependent throughput, plus a launch latency).

#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/model/predictor.hpp"
#include "matmul_toolkit/model/trainer.hpp"

namespace {

using namespace mmt;

std::vector<core::GemmConfig> tile_configs() {
    std::vector<core::GemmConfig> configs;
    for (int bm : {16, 32, 64, 128}) {
        for (int bn : {16, 32, 64, 128}) {
            core::GemmConfig c;
            c.name = "triton_mm";
            c.block_m = bm;
            c.block_n = bn;
            c.block_k = 32;
            configs.push_back(c);
        }
    }
    return configs;
}

core::Dataset synthetic_dataset() {
    core::Dataset dataset;
    for (std::int64_t m : {64, 200, 512, 1000, 2048}) {
        for (std::int64_t n : {96, 384, 1024, 3000}) {
            const auto shape = core::make_shape(1, m, n, 512, "float16");
            for (const auto& c : tile_configs()) {
                const double pm = std::ceil(double(m) / c.block_m) * c.block_m;
                const double pn = std::ceil(double(n) / c.block_n) * c.block_n;
                const double efficiency = std::pow(std::min(1.0, c.block_m * c.block_n / 16384.0), 0.35);
                dataset.add_timing("NVIDIA H100 80GB HBM3", "mm", shape,
                                   {c, 2.0 * pm * pn * 512 / (2e8 * efficiency) + 0.004});
            }
        }
    }
    return dataset;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const bool from_file = argc > 1;
        const auto dataset = from_file ? core::load_dataset_any(argv[1]) : synthetic_dataset();
        const std::filesystem::path model_path =
            argc > 2 ? argv[2] : std::filesystem::temp_directory_path() / "train_example_model.pt";

        model::TrainOptions options;
        options.model.type = model::ModelType::base;
        options.model.hidden_dims = {64, 32};
        options.num_epochs = 40;
        options.learning_rate = 3e-3;
        options.on_epoch = [](const model::EpochStats& e) {
            if (e.epoch % 10 == 0) std::printf("epoch %d: validation loss %.4f\n", e.epoch, e.validation_loss);
        };
        const auto result = model::train_model(dataset, from_file ? argv[1] : "synthetic", options);
        result.model.save(model_path);
        std::printf("trained on %zu rows, best epoch %d, test R2 %.3f, saved to %s\n", result.train_rows,
                    result.best_epoch, result.test_report.overall.r2, model_path.c_str());

        // A compiler would do this part: load once, then rank candidates per problem.
        const auto predictor = model::Predictor::load(model_path);
        const auto problems = model::group_problems(dataset, "dataset");
        const auto& problem = problems.front();
        std::vector<core::GemmConfig> configs;
        for (const auto& t : problem.timings) configs.push_back(t.config);
        const auto predicted = predictor.predict_ms(problem.op_key, problem.shape, configs);
        const auto order = predictor.rank(problem.op_key, problem.shape, configs);
        std::printf("%s M=%lld N=%lld K=%lld: configs ranked by predicted time\n", problem.op_key.c_str(),
                    static_cast<long long>(problem.shape.M), static_cast<long long>(problem.shape.N),
                    static_cast<long long>(problem.shape.K));
        for (std::size_t i = 0; i < order.size() && i < 5; ++i) {
            const auto& c = configs[order[i]];
            std::printf("  %zu. %dx%dx%d  predicted %.4f ms  measured %.4f ms\n", i + 1, c.block_m, c.block_n,
                        c.block_k, predicted[order[i]], problem.timings[order[i]].time_ms);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
