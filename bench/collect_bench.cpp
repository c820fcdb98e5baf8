// Collection throughput on a fixed small problem set: configs timed per second and the
// share of wall time spent inside timed kernel runs (the rest is the engine's, the
// backend's setup and checking, and file writing). Not a test: it prints, never fails.
//
//     collect_bench [--device cpu|cuda] [--search-space DEFAULT|EXHAUSTIVE]
//                   [--warmup N] [--repeat N] [--output FILE]

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "matmul_toolkit/collect/backend_factory.hpp"
#include "matmul_toolkit/collect/engine.hpp"

namespace {

using namespace mmt::collect;

// Square, skinny, ragged, transposed, addmm and bmm problems, small enough for a CPU.
std::vector<Problem> fixed_problems(const std::string& dtype) {
    return {
        make_problem("mm", "nn", 1, 256, 256, 256, dtype),
        make_problem("mm", "nt", 1, 512, 128, 384, dtype),
        make_problem("mm", "tn", 1, 64, 1024, 256, dtype),
        make_problem("mm", "nn", 1, 511, 257, 129, dtype),
        make_problem("addmm", "nn", 1, 384, 192, 256, dtype),
        make_problem("bmm", "nn", 8, 128, 128, 64, dtype),
    };
}

const char* arg_value(int argc, char** argv, const char* flag, const char* fallback) {
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], flag) == 0) return argv[i + 1];
    }
    return fallback;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const std::string device = arg_value(argc, argv, "--device", "cpu");
        const auto backend = make_backend(device);
        CollectOptions options;
        options.problems = fixed_problems(backend->collection_defaults().dtypes.front());
        options.search_space = parse_search_space(arg_value(argc, argv, "--search-space", "DEFAULT"));
        if (const char* w = arg_value(argc, argv, "--warmup", nullptr)) options.warmup = std::atoi(w);
        if (const char* r = arg_value(argc, argv, "--repeat", nullptr)) options.repeat = std::atoi(r);
        options.output = arg_value(argc, argv, "--output", "");
        const auto plan = plan_collection(options, *backend);

        const auto s = run_collection(options, *backend);
        const double rate = static_cast<double>(s.configs_timed + s.references_timed) / s.wall_seconds;
        std::printf("machine: %s (%s backend)\n", s.hardware.c_str(), s.backend.c_str());
        std::printf("problems: %zu (fixed set), search space %s, warmup %d, repeat %d\n",
                    s.problems_collected, search_space_name(options.search_space).c_str(),
                    plan.timing.warmup, plan.timing.repeat);
        std::printf("configs timed: %zu kernels + %zu references in %.3f s wall\n", s.configs_timed,
                    s.references_timed, s.wall_seconds);
        std::printf("throughput: %.1f configs/s\n", rate);
        std::printf("inside timed kernel runs: %.1f %% of wall time (%.3f s)\n",
                    100.0 * s.timed_kernel_seconds / s.wall_seconds, s.timed_kernel_seconds);

        std::printf("\n%-34s %12s %10s %12s %10s\n", "problem", "best ms", "GFLOP/s", "reference ms",
                    "GFLOP/s");
        for (const auto& entry : s.dataset.to_table()) {
            const auto [op, layout] = mmt::core::parse_op_key(entry.op);
            const Problem p = make_problem(op, layout, entry.shape.B, entry.shape.M, entry.shape.N,
                                           entry.shape.K, entry.shape.M_dtype);
            double best = 0.0, reference = 0.0;
            for (const auto& tc : entry.sorted_configs) {
                if (is_reference_config(tc.config)) {
                    if (reference == 0.0) reference = tc.time_ms;
                } else if (best == 0.0) {
                    best = tc.time_ms;
                }
            }
            auto gflops = [&](double ms) { return ms > 0 ? p.flops() / (ms * 1e6) : 0.0; };
            std::printf("%-34s %12.4f %10.1f %12.4f %10.1f\n", describe_problem(p).c_str(), best,
                        gflops(best), reference, gflops(reference));
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
