// GPU benchmark of the CUDA backend (not a test; it never fails on a time).
//   cuda_gemm_bench suite          best EXHAUSTIVE / DEFAULT config vs cuBLAS on the suite
//   cuda_gemm_bench throughput     the whole EXHAUSTIVE grid on one problem, cold and warm kernel cache
//   cuda_gemm_bench repeatability  DEFAULT configs timed in two passes: relative differences
//   cuda_gemm_bench ab             the two main loops (KernelSpec::frag_pipeline) side by side
// Options: --out DIR (tables as .md/.csv there), --quick (fewer problems), --no-wgmma (the
// mma.sync kernel only, also on Hopper), and for suite: --large (only the compute-bound
// problems and the op variants), --hopper-subset (only EXHAUSTIVE configs with 64..256
// tiles, 4 or 8 warps, 2+ stages and BLOCK_K 32..128: the region where the best config of
// either kernel lies on large problems, at a sixth of the compile cost), --only TEXT
// (repeatable: only the problems whose name, e.g. "mm 4096x4096x4096 bf16", contains TEXT),
// --config TEXT (repeatable: only the EXHAUSTIVE configs whose name, e.g. "64x128x128 g8 s4 w4",
// contains TEXT; DEFAULT configs are still ranked among those timed),
// --cluster 1|2 (wgmma kernels in clusters of one, or of two CTAs sharing B by TMA multicast;
// default: the backend's choice per problem, two where B's rows are not 128-byte aligned),
// --no-persistent (wgmma kernels with one tile per CTA instead of the default persistent CTAs),
// --dynamic-tiles (persistent CTAs take tiles from a global counter instead of the default
// static stride), --no-split-tail (no tile split along K: neither the persistent wgmma
// kernel's last partial wave nor the mma.sync kernel's problems of fewer tiles than SMs),
// --max-splits N (at most N parts per split tile; the kernel's bound caps it), --problem "OP [Bx]MxNxK DTYPE" (repeatable: these problems instead of
// the suite, e.g. "mm 256x4096x1024 bf16" for a K sweep), --warm-l2 (no L2 flush
// before timed runs: separates DRAM from on-chip effects; collections always flush),
// --settle-us N (the GPU idles N us after each flush before the timed run, as
// bench/triton_suite.py spins after its flush: both harnesses on the same terms).

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/cuda_backend_impl.hpp"
#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/collect/cuda_backend.hpp"

using namespace mmt;
using namespace mmt::collect;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
    std::string mode;
    std::filesystem::path out = ".";
    bool quick = false;
    bool wgmma = true;
    int cluster = 0;  // 0: the backend's choice (cuda::preferred_cluster_m)
    bool persistent = true;
    bool dynamic_tiles = false;
    bool split_tail = true;
    int max_splits = 0;  // 0: the kernel's bound (cuda::max_tail_splits)
    bool large = false;
    bool hopper_subset = false;
    std::vector<std::string> only;  // suite: problems whose name contains one of these
    std::vector<std::string> configs;  // suite: configs whose name (e.g. "64x128x128 g8 s4 w4") contains one of these
    std::vector<std::string> problems;  // suite: "mm 256x4096x1024 bf16" instead of the suite
    bool warm_l2 = false;
    int settle_us = 0;
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

Problem make_problem(const std::string& op, std::int64_t B, std::int64_t M, std::int64_t N, std::int64_t K,
                     const std::string& dtype, const std::string& layout = "nn") {
    Problem p;
    p.op = op;
    p.layout = layout;
    p.shape = core::make_shape(B, M, N, K, dtype);
    return p;
}

// "mm 256x4096x1024 bf16", "bmm 8x512x512x512 fp16", "addmm_nt 64x64x64 bf16": the names
// shape_text gives, read back.
Problem parse_problem(const std::string& text) {
    std::istringstream in(text);
    std::string op, dims, dtype;
    if (!(in >> op >> dims >> dtype)) throw std::runtime_error("--problem: '" + text + "': want OP [Bx]MxNxK DTYPE");
    std::string layout = "nn";
    if (const auto us = op.find('_'); us != std::string::npos) {
        layout = op.substr(us + 1);
        op = op.substr(0, us);
    }
    std::vector<std::int64_t> d;
    std::istringstream ds(dims);
    for (std::string part; std::getline(ds, part, 'x');) d.push_back(std::stoll(part));
    if (d.size() == 3) d.insert(d.begin(), 1);
    const std::map<std::string, std::string> dtypes{{"bf16", "bfloat16"}, {"fp16", "float16"}, {"fp32", "float32"}};
    if (d.size() != 4 || !dtypes.count(dtype) || (op != "mm" && op != "addmm" && op != "bmm"))
        throw std::runtime_error("--problem: '" + text + "': want OP [Bx]MxNxK DTYPE (bf16, fp16, fp32)");
    return make_problem(op, d[0], d[1], d[2], d[3], dtypes.at(dtype), layout);
}

std::string shape_text(const Problem& p) {
    std::ostringstream o;
    o << p.op;
    if (p.layout != "nn") o << '_' << p.layout;
    o << ' ';
    if (p.shape.B > 1) o << p.shape.B << 'x';
    o << p.shape.M << 'x' << p.shape.N << 'x' << p.shape.K << ' ' << (p.dtype() == "bfloat16" ? "bf16" : p.dtype() == "float16" ? "fp16" : "fp32");
    return o.str();
}

double tflops(const Problem& p, double ms) { return ms > 0 ? p.flops() / (ms * 1e-3) / 1e12 : 0.0; }

void write_file(const std::filesystem::path& path, const std::string& text) {
    std::ofstream(path) << text;
    std::printf("(written %s)\n", path.string().c_str());
}

std::filesystem::path fresh_dir(const std::string& name) {
    auto dir = std::filesystem::temp_directory_path() / (name + std::to_string(std::random_device{}()));
    std::filesystem::remove_all(dir);
    return dir;
}

// Bench-only screen for large problems: tiles under 64x64 cannot win once 64x64 tiles
// already give 4 waves of CTAs (they only add traffic), and timing them at 8192^3 costs
// minutes. The collection itself never applies this.
bool screened_out(const Problem& p, const core::GemmConfig& c, int sms) {
    const std::int64_t tiles64 = ((p.shape.M + 63) / 64) * ((p.shape.N + 63) / 64) * p.shape.B;
    return tiles64 >= 4 * sms && c.block_m * c.block_n < 64 * 64;
}

struct Ranked {
    core::GemmConfig config;
    double ms;
};

// --------------------------------------------------------------------------- suite
bool in_hopper_subset(const core::GemmConfig& c) {
    return c.block_m >= 64 && c.block_n >= 64 && (c.num_warps == 4 || c.num_warps == 8) && c.num_stages >= 2 &&
           c.block_k >= 32 && c.block_k <= 128;
}

void run_suite(const Args& args) {
    cuda::CudaBackendOptions o;
    o.cache_dir = cuda::KernelCache::default_disk_dir();
    o.wgmma = args.wgmma;
    o.wgmma_cluster = args.cluster;
    o.wgmma_persistent = args.persistent;
    o.wgmma_dynamic_tiles = args.dynamic_tiles;
    o.split_tail = args.split_tail;
    o.max_tail_splits = args.max_splits;
    cuda::CudaBackend backend(o);
    const std::string tag = std::string(!args.wgmma                                ? "_no_wgmma"
                                        : args.cluster > 0 ? (args.cluster == 2 ? "_cluster2" : "_cluster1")
                                        : !args.persistent ? "_one_tile_per_cta"
                                        : args.dynamic_tiles ? "_dynamic_tiles"
                                                             : "") +
                            (args.split_tail ? "" : "_no_split_tail") +
                            (args.max_splits > 0 ? "_max_splits" + std::to_string(args.max_splits) : "");
    const std::string out_name = "suite" + tag + (args.warm_l2 ? "_warm_l2" : "") +
                                 (args.settle_us > 0 ? "_settle" + std::to_string(args.settle_us) + "us" : "");
    const int sms = backend.device().multiprocessors;
    // The op variants first: a time-limited run (bench/gpu_suite.sh) should not lose them.
    std::vector<Problem> problems{make_problem("addmm", 1, 4096, 4096, 4096, "bfloat16"),
                                  make_problem("bmm", 32, 1024, 1024, 1024, "bfloat16")};
    if (args.large) {
        // The compute-bound problems first, the op variants last.
        problems = {make_problem("mm", 1, 4096, 4096, 4096, "bfloat16"), make_problem("mm", 1, 8192, 8192, 8192, "bfloat16"),
                    make_problem("mm", 1, 2552, 10616, 7616, "bfloat16"), make_problem("mm", 1, 4096, 4096, 4096, "float16"),
                    make_problem("mm", 1, 2552, 10616, 7616, "float16"), problems[0], problems[1]};
    }
    for (const std::string dtype : {"bfloat16", "float16"}) {
        if (args.large) break;
        problems.push_back(make_problem("mm", 1, 4096, 4096, 4096, dtype));
        if (!args.quick) problems.push_back(make_problem("mm", 1, 8192, 8192, 8192, dtype));
        problems.push_back(make_problem("mm", 1, 2552, 10616, 7616, dtype));
        problems.push_back(make_problem("mm", 1, 256, 4096, 4096, dtype));
        problems.push_back(make_problem("mm", 1, 1376, 80, 216, dtype));
    }

    if (!args.problems.empty()) {
        problems.clear();
        for (const auto& text : args.problems) problems.push_back(parse_problem(text));
    }
    if (!args.only.empty())
        problems.erase(std::remove_if(problems.begin(), problems.end(),
                                      [&](const Problem& p) {
                                          for (const auto& text : args.only)
                                              if (shape_text(p).find(text) != std::string::npos) return false;
                                          return true;
                                      }),
                       problems.end());
    auto exhaustive = exhaustive_configs();
    if (args.hopper_subset)
        exhaustive.erase(std::remove_if(exhaustive.begin(), exhaustive.end(),
                                        [](const core::GemmConfig& c) { return !in_hopper_subset(c); }),
                         exhaustive.end());
    if (!args.configs.empty())
        exhaustive.erase(std::remove_if(exhaustive.begin(), exhaustive.end(),
                                        [&](const core::GemmConfig& c) {
                                            for (const auto& text : args.configs)
                                                if (describe_config(c).find(text) != std::string::npos) return false;
                                            return true;
                                        }),
                         exhaustive.end());
    const auto defaults = default_configs();
    const TimingOptions screen{1, 3, !args.warm_l2, args.settle_us};
    const TimingOptions confirm{3, 20, !args.warm_l2, args.settle_us};
    std::ostringstream md, csv;
    md << "# CUDA backend vs cuBLAS on " << backend.hardware_name()
       << (args.wgmma ? " (wgmma path where the rule admits the config" : " (mma.sync only")
       << (args.wgmma && args.cluster > 1 ? ", clusters of " + std::to_string(args.cluster) : "")
       << (args.wgmma && args.cluster == 0 ? ", clusters of two where B's rows are not 128-byte aligned; elsewhere" : "")
       << (args.wgmma && args.cluster != 2
               ? (args.persistent ? std::string(", persistent CTAs where they fit and pay off, ") +
                                        (args.dynamic_tiles ? "dynamic tiles)" : "static tiles)")
                                  : std::string(", one tile per CTA)"))
               : std::string(")"))
       << (args.split_tail ? ", split tail" : ", no split tail")
       << (args.max_splits > 0 ? " (at most " + std::to_string(args.max_splits) + " parts)" : "")
       << (args.hopper_subset ? ", EXHAUSTIVE configs of the Hopper subset" : "")
       << (args.warm_l2 ? ", WARM L2 (no flush)" : "")
       << (args.settle_us > 0 ? ", GPU idle " + std::to_string(args.settle_us) + " us after each flush" : "") << "\n\n"
       << "| problem | cuBLAS TFLOP/s | best EXHAUSTIVE config | TFLOP/s | ratio | best DEFAULT config | TFLOP/s | "
          "ratio | timed / pruned / screened / failed |\n|---|---|---|---|---|---|---|---|---|\n";
    csv << "problem,cublas_ms,cublas_tflops,best_config,best_ms,best_tflops,ratio,default_config,default_ms,"
           "default_tflops,default_ratio\n";
    std::printf("device: %s, wgmma %s\n", backend.hardware_name().c_str(), args.wgmma ? "on" : "off");
    for (const Problem& p : problems) {
        const auto start = Clock::now();
        backend.prepare(p, 42);
        // Screen before pruning, so screened-out kernels are not even compiled.
        std::vector<core::GemmConfig> candidates;
        std::size_t screened = 0, failed = 0;
        for (const auto& c : specialize_configs(exhaustive, p, false)) {
            if (screened_out(p, c, sms))
                ++screened;
            else
                candidates.push_back(c);
        }
        const PruneResult pruned = backend.prune(candidates, p);
        std::vector<Ranked> ranked;
        std::string first_failure;
        for (const auto& c : pruned.kept) {
            try {
                ranked.push_back({c, backend.time(p, c, screen).median_ms});
            } catch (const std::exception& e) {
                if (failed++ == 0) first_failure = e.what();
            }
        }
        std::sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) { return a.ms < b.ms; });
        // Re-time the leaders with more runs; the screen's 3 runs only rank.
        const std::size_t top = std::min<std::size_t>(ranked.size(), 6);
        for (std::size_t i = 0; i < top; ++i) ranked[i].ms = backend.time(p, ranked[i].config, confirm).median_ms;
        std::sort(ranked.begin(), ranked.begin() + top, [](const Ranked& a, const Ranked& b) { return a.ms < b.ms; });
        for (std::size_t i = 0; i < top; ++i)
        {
            const cuda::KernelSpec spec = backend.spec_for(ranked[i].config, p);
            const bool wg = spec.math == cuda::MathPath::wgmma;
            std::printf("  #%zu %-24s %.4f ms %.1f TFLOP/s %s\n", i + 1, describe_config(ranked[i].config).c_str(),
                        ranked[i].ms, tflops(p, ranked[i].ms),
                        !wg                  ? (spec.split_k ? "mma.sync, tiles split along K" : "mma.sync")
                        : spec.cluster_m > 1 ? "wgmma clusters of 2"
                        : spec.dynamic_tiles ? "wgmma persistent dynamic"
                        : spec.persistent    ? "wgmma persistent"
                                             : "wgmma");
        }
        // Best DEFAULT config: rank by the screen, confirm its leader.
        Ranked best_default{{}, 1e30};
        const auto default_specialized = specialize_configs(defaults, p, false);
        for (const auto& r : ranked)
            for (const auto& d : default_specialized)
                if (r.config == d && r.ms < best_default.ms) best_default = r;
        if (best_default.ms < 1e30) best_default.ms = backend.time(p, best_default.config, confirm).median_ms;
        const double ref_ms = backend.time_reference(p, confirm).median_ms;
        const double best_ms = ranked.empty() ? 0 : ranked[0].ms;
        const std::string best_name = ranked.empty() ? "-" : describe_config(ranked[0].config);
        const std::string def_name = best_default.ms < 1e30 ? describe_config(best_default.config) : "-";
        const double def_ms = best_default.ms < 1e30 ? best_default.ms : 0;
        char line[512];
        std::snprintf(line, sizeof line, "| %s | %.1f | %s | %.1f | %.2f | %s | %.1f | %.2f | %zu / %zu / %zu / %zu |\n",
                      shape_text(p).c_str(), tflops(p, ref_ms), best_name.c_str(), tflops(p, best_ms),
                      best_ms > 0 ? ref_ms / best_ms : 0.0, def_name.c_str(), tflops(p, def_ms),
                      def_ms > 0 ? ref_ms / def_ms : 0.0, ranked.size(), pruned.pruned.size(), screened, failed);
        md << line;
        std::printf("%s  [%.1f s]\n", line, seconds_since(start));
        if (failed) std::printf("  first failure: %s\n", first_failure.substr(0, 400).c_str());
        std::fflush(stdout);
        csv << shape_text(p) << ',' << ref_ms << ',' << tflops(p, ref_ms) << ',' << best_name << ',' << best_ms << ','
            << tflops(p, best_ms) << ',' << (best_ms > 0 ? ref_ms / best_ms : 0) << ',' << def_name << ',' << def_ms
            << ',' << tflops(p, def_ms) << ',' << (def_ms > 0 ? ref_ms / def_ms : 0) << '\n';
    }
    const auto st = backend.stats();
    md << "\nratio = cuBLAS time / kernel time (>1: faster than cuBLAS). Kernels compiled " << st.cache.compiled
       << ", read from the disk cache " << st.cache.disk_hits << ", verified " << st.kernels_verified
       << ", wrong " << st.verification_failures << ".\n";
    std::printf("%s", md.str().c_str());
    write_file(args.out / (out_name + ".md"), md.str());
    write_file(args.out / (out_name + ".csv"), csv.str());
}

// ---------------------------------------------------------------------- throughput
struct PassResult {
    std::size_t timed = 0, pruned = 0, failed = 0;
    double wall = 0, timed_seconds = 0, compile_wait = 0, compile_cpu = 0;
    std::size_t compiled = 0, disk_hits = 0;
};

PassResult collect_once(const std::filesystem::path& cache_dir, const Problem& p) {
    const auto start = Clock::now();
    cuda::CudaBackendOptions o;
    o.cache_dir = cache_dir;
    cuda::CudaBackend backend(o);
    const TimingOptions timing = backend.collection_defaults().timing;
    PassResult r;
    // What the engine does per problem: prepare, prune (compiles start), time each kept
    // config, then the reference.
    backend.prepare(p, 42);
    const PruneResult pruned = backend.prune(specialize_configs(exhaustive_configs(), p, false), p);
    r.pruned = pruned.pruned.size();
    for (const auto& c : pruned.kept) {
        try {
            backend.time(p, c, timing);
            ++r.timed;
        } catch (const std::exception&) {
            ++r.failed;
        }
    }
    backend.time_reference(p, timing);
    r.wall = seconds_since(start);
    const auto st = backend.stats();
    r.timed_seconds = st.timed_seconds;
    r.compile_wait = st.cache.wait_seconds;
    r.compile_cpu = st.cache.compile_seconds;
    r.compiled = st.cache.compiled;
    r.disk_hits = st.cache.disk_hits;
    return r;
}

void run_throughput(const Args& args) {
    const Problem p = make_problem("mm", 1, 2048, 2048, 2048, "bfloat16");
    const auto dir = fresh_dir("mmt_bench_cache_");
    const PassResult cold = collect_once(dir, p);
    const PassResult warm = collect_once(dir, p);
    std::filesystem::remove_all(dir);
    std::ostringstream md;
    md << "# Collection throughput: EXHAUSTIVE grid on " << shape_text(p) << "\n\n"
       << "| cache | configs timed | pruned | failed | wall s | configs/s | timed-kernel share | compiled | disk hits | "
          "compile CPU s | GPU waited for compiler s |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& [name, r] : {std::pair<const char*, PassResult>{"cold", cold}, {"warm", warm}}) {
        char line[400];
        std::snprintf(line, sizeof line, "| %s | %zu | %zu | %zu | %.1f | %.1f | %.1f%% | %zu | %zu | %.1f | %.1f |\n",
                      name, r.timed, r.pruned, r.failed, r.wall, r.timed / r.wall, 100.0 * r.timed_seconds / r.wall,
                      r.compiled, r.disk_hits, r.compile_cpu, r.compile_wait);
        md << line;
    }
    md << "\nWall time includes backend start (context, cuBLAS handle), compilation waits, verification of every "
          "kernel against cuBLAS, L2 flushes and host overhead; timing uses the backend's defaults.\n";
    std::printf("%s", md.str().c_str());
    write_file(args.out / "throughput.md", md.str());
}

// ------------------------------------------------------------------- repeatability
void run_repeatability(const Args& args) {
    cuda::CudaBackendOptions o;
    o.cache_dir = cuda::KernelCache::default_disk_dir();
    cuda::CudaBackend backend(o);
    const TimingOptions timing = backend.collection_defaults().timing;
    std::vector<Problem> problems{make_problem("mm", 1, 4096, 4096, 4096, "bfloat16"),
                                  make_problem("mm", 1, 256, 4096, 4096, "float16"),
                                  make_problem("mm", 1, 1376, 80, 216, "bfloat16"),
                                  make_problem("bmm", 8, 512, 768, 1000, "float16", "nt")};
    std::map<std::string, std::vector<double>> first;
    std::vector<double> diffs;
    std::ostringstream md;
    md << "# Repeatability on " << backend.hardware_name() << " (warmup " << timing.warmup << ", repeat "
       << timing.repeat << ")\n\n| problem | configs | median rel. diff | p90 rel. diff | max rel. diff |\n"
       << "|---|---|---|---|---|\n";
    std::map<std::string, std::vector<double>> per_problem;
    for (int pass = 0; pass < 2; ++pass)
        for (const Problem& p : problems) {
            backend.prepare(p, 42);
            const auto kept = backend.prune(specialize_configs(default_configs(), p, false), p).kept;
            std::vector<double> times;
            for (const auto& c : kept) times.push_back(backend.time(p, c, timing).median_ms);
            const std::string key = shape_text(p);
            if (pass == 0) {
                first[key] = times;
            } else {
                for (std::size_t i = 0; i < times.size(); ++i) {
                    const double a = first[key][i], b = times[i];
                    per_problem[key].push_back(std::fabs(a - b) / std::min(a, b));
                }
            }
        }
    const auto quantile = [](std::vector<double> v, double q) {
        std::sort(v.begin(), v.end());
        return v.empty() ? 0.0 : v[static_cast<std::size_t>(q * (v.size() - 1) + 0.5)];
    };
    for (const auto& [key, d] : per_problem) {
        char line[300];
        std::snprintf(line, sizeof line, "| %s | %zu | %.2f%% | %.2f%% | %.2f%% |\n", key.c_str(), d.size(),
                      100 * quantile(d, 0.5), 100 * quantile(d, 0.9), 100 * quantile(d, 1.0));
        md << line;
        diffs.insert(diffs.end(), d.begin(), d.end());
    }
    char line[200];
    std::snprintf(line, sizeof line, "| all | %zu | %.2f%% | %.2f%% | %.2f%% |\n", diffs.size(), 100 * quantile(diffs, 0.5),
                  100 * quantile(diffs, 0.9), 100 * quantile(diffs, 1.0));
    md << line << "\nrel. diff = |t1 - t2| / min(t1, t2) per config, two passes over all problems in one process.\n";
    std::printf("%s", md.str().c_str());
    write_file(args.out / "repeatability.md", md.str());
}

// ---------------------------------------------------------------------- main-loop A/B
// The same configs with fragments double-buffered across k-tiles (frag_pipeline 1) and
// only within a tile (0), on the problems where the kernel is compute-bound.
void run_ab(const Args& args) {
    cuda::CudaBackendOptions off, on;
    off.frag_pipeline = 0;
    on.frag_pipeline = 1;
    // The A/B is about the mma.sync main loop: on Hopper too, no config goes to wgmma.
    off.wgmma = on.wgmma = false;
    off.cache_dir = on.cache_dir = cuda::KernelCache::default_disk_dir();
    cuda::CudaBackend a(off), b(on);
    std::vector<Problem> problems{make_problem("mm", 1, 4096, 4096, 4096, "bfloat16"),
                                  make_problem("mm", 1, 2552, 10616, 7616, "float16"),
                                  make_problem("mm", 1, 4096, 4096, 4096, "float32")};
    std::vector<core::GemmConfig> configs = default_configs();
    for (const auto& [bm, bn, bk, st, w] : std::vector<std::array<int, 5>>{
             {128, 256, 32, 3, 8}, {128, 256, 32, 4, 8}, {256, 128, 32, 3, 8}, {128, 256, 64, 3, 8},
             {128, 128, 32, 4, 4}, {128, 128, 64, 4, 8}, {64, 256, 32, 4, 4}, {256, 64, 32, 4, 4}}) {
        core::GemmConfig c;
        c.block_m = bm, c.block_n = bn, c.block_k = bk, c.num_stages = st, c.num_warps = w;
        configs.push_back(c);
    }
    const TimingOptions t{3, 15};
    std::ostringstream md;
    md << "# Main loop A/B on " << a.hardware_name()
       << ": fragments double-buffered across k-tiles (on) or within a tile (off)\n\n"
       << "| problem | config | off TFLOP/s | on TFLOP/s | on/off | rule picks |\n|---|---|---|---|---|---|\n";
    for (const Problem& p : problems) {
        a.prepare(p, 42);
        b.prepare(p, 42);
        const auto specialized = specialize_configs(configs, p, /*allow_tf32=*/true);  // float32: the tf32 path
        const auto kept = a.prune(specialized, p).kept;
        b.prune(kept, p);
        for (const auto& c : kept) {
            if (c.num_stages < 2) continue;
            try {
                const double t0 = a.time(p, c, t).median_ms, t1 = b.time(p, c, t).median_ms;
                char line[300];
                std::snprintf(line, sizeof line, "| %s | %s | %.1f | %.1f | %.3f | %s |\n", shape_text(p).c_str(),
                              describe_config(c).c_str(), tflops(p, t0), tflops(p, t1), t0 / t1,
                              cuda::make_spec(c, p).frag_pipeline ? "on" : "off");
                md << line;
            } catch (const std::exception& e) {
                md << "| " << shape_text(p) << " | " << describe_config(c) << " | failed: " << e.what() << " |||\n";
            }
        }
    }
    std::printf("%s", md.str().c_str());
    write_file(args.out / "ab.md", md.str());
}

// The integer after option argv[i] into `value` (and i past it), or one error line and false
// when it is missing or below `least`.
bool int_value(int argc, char** argv, int& i, int least, const char* want, int& value) {
    const int n = i + 1 < argc ? std::atoi(argv[i + 1]) : 0;
    if (n < least) {
        std::fprintf(stderr, "error: %s: want %s\n", argv[i], want);
        return false;
    }
    value = n;
    ++i;
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Args args;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--out" && i + 1 < argc)
            args.out = argv[++i];
        else if (a == "--quick")
            args.quick = true;
        else if (a == "--no-wgmma")
            args.wgmma = false;
        else if (a == "--no-persistent")
            args.persistent = false;
        else if (a == "--dynamic-tiles")
            args.dynamic_tiles = true;
        else if (a == "--no-split-tail")
            args.split_tail = false;
        else if (a == "--max-splits") {
            if (!int_value(argc, argv, i, 2, "an integer >= 2", args.max_splits)) return 2;
        }
        else if (a == "--cluster" && i + 1 < argc && (std::string(argv[i + 1]) == "1" || std::string(argv[i + 1]) == "2"))
            args.cluster = std::stoi(argv[++i]);
        else if (a == "--large")
            args.large = true;
        else if (a == "--hopper-subset")
            args.hopper_subset = true;
        else if (a == "--only" && i + 1 < argc)
            args.only.push_back(argv[++i]);
        else if (a == "--config" && i + 1 < argc)
            args.configs.push_back(argv[++i]);
        else if (a == "--problem" && i + 1 < argc)
            args.problems.push_back(argv[++i]);
        else if (a == "--warm-l2")
            args.warm_l2 = true;
        else if (a == "--settle-us") {
            if (!int_value(argc, argv, i, 1, "a number of microseconds >= 1", args.settle_us)) return 2;
        }
        else if (args.mode.empty() && a[0] != '-')
            args.mode = a;
        else {
            std::fprintf(stderr, "error: %s: unknown argument\n", a.c_str());
            return 2;
        }
    }
    if (args.mode != "suite" && args.mode != "throughput" && args.mode != "repeatability" && args.mode != "ab") {
        std::fprintf(stderr, "usage: cuda_gemm_bench suite|throughput|repeatability|ab [--out DIR] [--quick] [--no-wgmma] "
                             "[--large] [--hopper-subset] [--only TEXT]... [--config TEXT]... [--cluster 1|2] [--no-persistent] [--dynamic-tiles] [--no-split-tail] [--max-splits N] [--problem TEXT]... [--warm-l2] [--settle-us N]\n");
        return 2;
    }
    try {
        for (const auto& text : args.problems) parse_problem(text);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 2;
    }
    if (!cuda_backend_device_available()) {
        std::fprintf(stderr, "no CUDA device: nothing to measure\n");
        return 1;
    }
    try {
        std::filesystem::create_directories(args.out);
        if (args.mode == "suite") run_suite(args);
        if (args.mode == "throughput") run_throughput(args);
        if (args.mode == "repeatability") run_repeatability(args);
        if (args.mode == "ab") run_ab(args);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
