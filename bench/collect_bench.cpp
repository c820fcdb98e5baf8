// Collection throughput on a problem set: configs timed per second, seconds per GEMM and
// the share of wall time spent inside timed kernel runs (the rest is the engine's, the
// backend's setup, compiling and checking, and file writing). Not a test: it prints,
// never fails.
//
//     collect_bench [--backend cpu|native|inductor] [--device cpu|cuda]
//                   [--search-space DEFAULT|EXHAUSTIVE] [--log-normal N] [--seed S]
//                   [--dtype D] [--passes P] [--python PY] [--max-autotune SCRIPT]
//                   [--warmup N] [--repeat N]
//
// Without --log-normal it times a fixed set of six small problems. --passes 2 runs the
// same problems again on a fresh backend: on the inductor backend the first pass starts
// with empty Triton and Inductor caches (fresh folders under $TMPDIR) and the second finds
// them warm. --max-autotune bench/max_autotune_time.py also times plain torch.compile
// max-autotune (fresh caches per problem) on the same problems with the same --python.

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "matmul_toolkit/collect/backend_factory.hpp"
#include "matmul_toolkit/collect/engine.hpp"
#include "matmul_toolkit/collect/inductor_backend.hpp"
#include "matmul_toolkit/collect/problem_generator.hpp"

namespace {

using namespace mmt::collect;
namespace fs = std::filesystem;

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

double median(std::vector<double> values) {
    if (values.empty()) return 0.0;
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::unique_ptr<Backend> make_bench_backend(const BackendSelection& selection, const std::string& python) {
    if (selection.backend != "inductor") return make_backend(selection.device);
    InductorBackendOptions options;
    options.python = python;
    return std::make_unique<InductorBackend>(options);
}

struct PassResult {
    std::vector<double> seconds_per_problem;
    CollectionSummary total;  // counts summed over the problems
    double wall_seconds = 0.0;
};

// Every problem as its own in-memory collection on one backend, so each GEMM's wall time
// (compile, check, benchmark) is seen.
PassResult run_pass(const std::vector<Problem>& problems, const CollectOptions& base, Backend& backend) {
    PassResult pass;
    const auto start = std::chrono::steady_clock::now();
    for (const auto& problem : problems) {
        CollectOptions options = base;
        options.problems = {problem};
        const auto s = run_collection(options, backend);
        pass.seconds_per_problem.push_back(s.wall_seconds);
        pass.total.configs_timed += s.configs_timed;
        pass.total.references_timed += s.references_timed;
        pass.total.timed_kernel_seconds += s.timed_kernel_seconds;
        for (const auto& [reason, n] : s.failed) pass.total.failed[reason] += n;
        pass.total.dataset.merge(s.dataset);
        pass.total.backend = s.backend;
        pass.total.hardware = s.hardware;
    }
    pass.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return pass;
}

void print_pass(const char* label, const PassResult& pass) {
    const auto& s = pass.total;
    std::size_t failed = 0;
    for (const auto& [reason, n] : s.failed) failed += n;
    std::printf("%s: %zu kernels + %zu references timed, %zu failed, %.2f s wall; %.1f configs/s; "
                "per GEMM median %.2f s, mean %.2f s; %.1f %% of wall time in timed kernel runs\n",
                label, s.configs_timed, s.references_timed, failed, pass.wall_seconds,
                static_cast<double>(s.configs_timed + s.references_timed) / pass.wall_seconds,
                median(pass.seconds_per_problem), pass.wall_seconds / pass.seconds_per_problem.size(),
                100.0 * s.timed_kernel_seconds / pass.wall_seconds);
    for (const auto& [reason, n] : s.failed) std::printf("    failed %zu: %s\n", n, reason.c_str());
}

void print_problems(const std::vector<Problem>& problems, const PassResult& pass) {
    std::printf("\n%-40s %9s %12s %10s %12s %10s\n", "problem", "seconds", "best ms", "TFLOP/s", "reference ms",
                "TFLOP/s");
    const auto* hardware = pass.total.dataset.find_hardware(pass.total.hardware);
    for (std::size_t i = 0; i < problems.size(); ++i) {
        const Problem& p = problems[i];
        const auto* op = hardware != nullptr ? hardware->find(p.op_key()) : nullptr;
        const auto* measured = op != nullptr ? op->find(p.shape) : nullptr;
        double best = 0.0, reference = 0.0;
        for (const auto& tc : measured != nullptr ? measured->timed_configs : std::vector<mmt::core::TimedConfig>{}) {
            double& slot = is_reference_config(tc.config) ? reference : best;
            if (slot == 0.0 || tc.time_ms < slot) slot = tc.time_ms;
        }
        auto tflops = [&](double ms) { return ms > 0 ? p.flops() / (ms * 1e9) : 0.0; };
        std::printf("%-40s %9.2f %12.4f %10.2f %12.4f %10.2f\n", describe_problem(p).c_str(),
                    pass.seconds_per_problem[i], best, tflops(best), reference, tflops(reference));
    }
}

// Runs the max-autotune timing script on the problems; its JSON answer, or null.
nlohmann::json time_max_autotune(const std::string& python, const std::string& script,
                                 const std::vector<Problem>& problems, const std::string& space) {
    const fs::path list = fs::temp_directory_path() / ("mmt_bench_problems_" + std::to_string(::getpid()) + ".json");
    nlohmann::json doc = nlohmann::json::array();
    for (const auto& p : problems) {
        doc.push_back({{"op", p.op}, {"layout", p.layout}, {"B", p.shape.B}, {"M", p.shape.M}, {"N", p.shape.N},
                       {"K", p.shape.K}, {"dtype", p.dtype()}});
    }
    std::ofstream(list) << doc.dump();
    const std::string command = python + " " + script + " " + list.string() + " --search-space " + space;
    FILE* pipe = ::popen(command.c_str(), "r");
    std::string text;
    if (pipe != nullptr) {
        char buffer[4096];
        while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) text += buffer;
        ::pclose(pipe);
    }
    fs::remove(list);
    try {
        return nlohmann::json::parse(text.substr(text.find('{')));
    } catch (const std::exception&) {
        std::fprintf(stderr, "max-autotune timing failed: %s\n", text.c_str());
        return nullptr;
    }
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const std::string python = arg_value(argc, argv, "--python", "python3");
        const auto selection = select_backend(arg_value(argc, argv, "--backend", ""),
                                              arg_value(argc, argv, "--device", ""), python);
        const int passes = std::max(1, std::atoi(arg_value(argc, argv, "--passes", "1")));
        if (selection.backend == "inductor") {
            // A cold first pass: Triton's and Inductor's on-disk caches start empty.
            const fs::path caches = fs::temp_directory_path() / ("mmt_bench_cache_" + std::to_string(::getpid()));
            ::setenv("TRITON_CACHE_DIR", (caches / "triton").c_str(), 1);
            ::setenv("TORCHINDUCTOR_CACHE_DIR", (caches / "inductor").c_str(), 1);
        }
        auto backend = make_bench_backend(selection, python);

        CollectOptions options;
        const std::string dtype = arg_value(argc, argv, "--dtype", backend->collection_defaults().dtypes.front().c_str());
        const int log_normal = std::atoi(arg_value(argc, argv, "--log-normal", "0"));
        std::vector<Problem> problems;
        if (log_normal > 0) {
            GeneratorOptions generator;
            generator.num_shapes = log_normal;
            generator.dtypes = {dtype};
            generator.sizes.log_normal = true;
            generator.sizes.max_size = backend->collection_defaults().max_size;
            problems = generate_problems(generator, std::strtoull(arg_value(argc, argv, "--seed", "42"), nullptr, 10));
        } else {
            problems = fixed_problems(dtype);
        }
        options.search_space = parse_search_space(arg_value(argc, argv, "--search-space", "DEFAULT"));
        if (const char* w = arg_value(argc, argv, "--warmup", nullptr)) options.warmup = std::atoi(w);
        if (const char* r = arg_value(argc, argv, "--repeat", nullptr)) options.repeat = std::atoi(r);
        options.problems = problems;
        const auto plan = plan_collection(options, *backend);

        std::printf("machine: %s (%s backend: %s)\n", backend->hardware_name().c_str(), backend->name().c_str(),
                    selection.reason.c_str());
        for (const auto& [name, value] : backend->environment()) std::printf("  %s: %s\n", name.c_str(), value.c_str());
        std::printf("problems: %zu (%s), search space %s, warmup %d, repeat %d\n", problems.size(),
                    log_normal > 0 ? "log-normal" : "fixed set", search_space_name(options.search_space).c_str(),
                    plan.timing.warmup, plan.timing.repeat);

        PassResult first;
        for (int pass = 1; pass <= passes; ++pass) {
            if (pass > 1) backend = make_bench_backend(selection, python);
            const auto result = run_pass(problems, options, *backend);
            const std::string label = passes == 1                                 ? "collection"
                                      : selection.backend == "inductor" && pass == 1 ? "pass 1 (cold caches)"
                                      : selection.backend == "inductor"            ? "pass " + std::to_string(pass) + " (warm caches)"
                                                                                  : "pass " + std::to_string(pass);
            print_pass(label.c_str(), result);
            if (pass == 1) first = result;
        }
        if (const char* script = arg_value(argc, argv, "--max-autotune", nullptr)) {
            const auto answer = time_max_autotune(python, script, problems, search_space_name(options.search_space));
            if (!answer.is_null()) {
                double total = 0.0;
                for (const auto& s : answer.at("seconds")) total += s.get<double>();
                std::printf("torch.compile max-autotune (fresh caches, torch %s): per GEMM median %.2f s, "
                            "mean %.2f s, %.2f s in all\n",
                            answer.at("versions").at("torch").get<std::string>().c_str(),
                            answer.at("median_s").get<double>(), total / problems.size(), total);
            }
        }
        print_problems(problems, first);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
