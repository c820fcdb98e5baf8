// The CUDA backend on a real GPU: every DEFAULT config agrees with cuBLAS, timings are
// sane, and a second backend on the same disk cache compiles nothing.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>
#include <thread>

#include "cuda/cuda_backend_impl.hpp"
#include "cuda_test_support.hpp"
#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/collect/cuda_backend.hpp"

namespace mmt::collect::cuda {
namespace {

using test::problem;

class CudaBackendTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!cuda_backend_device_available()) GTEST_SKIP() << "no CUDA device";
        m_dir = std::filesystem::temp_directory_path() /
                ("mmt_cuda_backend_test_" + std::to_string(std::random_device{}()));
    }
    void TearDown() override { std::filesystem::remove_all(m_dir); }

    CudaBackendOptions options() const {
        CudaBackendOptions o;
        o.cache_dir = m_dir;
        return o;
    }
    std::filesystem::path m_dir;
};

// Every DEFAULT config of one dtype (float32 with or without TF32), for every op and
// layout, on aligned problems (16-byte loads) and on odd ones (element loads), against
// cuBLAS; on aligned problems both main loops (fragments pipelined across k-tiles or not)
// where the rule could pick either (3+ stages); on sm_90 also the wgmma kernel of every
// config the backend would run with it. All kernels are handed to the compile
// workers first, in the order they are verified, so NVRTC runs on every core while the
// GPU verifies. One test per dtype, so a run reports progress and a failure names its dtype.
// int8 (torch._int_mm): mm only, checked exactly against the integer reference kernel.
void expect_every_default_config_matches_cublas(CudaBackend& backend, const std::string& dtype, bool tf32,
                                                std::size_t min_checked) {
    std::vector<std::pair<KernelSpec, Problem>> specs;
    const DeviceLimits limits = backend.limits();
    const bool hopper = backend.device().cc_major == 9 && backend.device().cc_minor == 0;
    const std::vector<std::string> ops =
        dtype == "int8" ? std::vector<std::string>{"mm"} : std::vector<std::string>{"mm", "addmm", "bmm"};
    for (const std::string& op : ops)
        for (const std::string layout : {"nn", "nt", "tn", "tt"})
            for (const bool aligned : {true, false}) {
                const Problem p = aligned ? problem(op == "bmm" ? 2 : 1, 512, 512, 512, dtype, op, layout)
                                          : problem(op == "bmm" ? 2 : 1, 333, 257, 391, dtype, op, layout);
                for (const auto& c : specialize_configs(default_configs(), p, tf32)) {
                    const KernelSpec spec = make_spec(c, p);
                    if (unsupported_reason(spec, limits)) continue;  // the prune rule, as prune() applies it
                    specs.emplace_back(spec, p);
                    // On sm_90 the backend runs the configs the wgmma rule admits with the
                    // Hopper kernel instead, and problems of few tiles with the SPLIT_K
                    // variant: verify the kernel it chose and, where that is another, the
                    // persistent TMA kernel.
                    const KernelSpec chosen = backend.spec_for(c, p);
                    if (spec_key(chosen) != spec_key(spec)) specs.emplace_back(chosen, p);
                    KernelSpec tma = spec;
                    if (hopper && select_wgmma(tma, limits, 1, true) && spec_key(tma) != spec_key(chosen))
                        specs.emplace_back(tma, p);
                    if (aligned && spec.math != MathPath::fma && c.num_stages >= 3) {
                        specs.emplace_back(spec, p);
                        specs.back().first.frag_pipeline = !spec.frag_pipeline;
                    }
                }
            }
    std::vector<KernelSpec> order;
    for (const auto& sp : specs) order.push_back(sp.first);
    backend.precompile(order);

    std::vector<std::string> failures, errors;
    for (const auto& sp : specs) {
        try {
            const Verification v = backend.verify(sp.first);
            if (!v.passed) failures.push_back(spec_name(sp.first) + ": " + v.message);
        } catch (const std::exception& e) {  // compile or launch error: reported, the rest still run
            errors.push_back(spec_name(sp.first) + ": " + std::string(e.what()).substr(0, 2000));
        }
    }
    EXPECT_TRUE(failures.empty()) << failures.size() << " of " << specs.size() << " wrong; first: "
                                  << (failures.empty() ? "" : failures[0]);
    EXPECT_TRUE(errors.empty()) << errors.size() << " of " << specs.size() << " did not run; first: "
                                << (errors.empty() ? "" : errors[0]);
    // 24 problems x the DEFAULT configs the device runs, twice where both main loops can:
    // 624 (float16, bfloat16), 360 (float32), 480 (TF32) on an H100 when this was written.
    EXPECT_GE(specs.size(), min_checked);
    EXPECT_EQ(backend.stats().kernels_verified, specs.size() - errors.size());
    EXPECT_EQ(backend.stats().verification_failures, failures.size());
}

TEST_F(CudaBackendTest, EveryDefaultConfigMatchesCublasFloat16) {
    CudaBackend backend(options());
    expect_every_default_config_matches_cublas(backend, "float16", false, 600);
}

TEST_F(CudaBackendTest, EveryDefaultConfigMatchesCublasBfloat16) {
    CudaBackend backend(options());
    expect_every_default_config_matches_cublas(backend, "bfloat16", false, 600);
}

TEST_F(CudaBackendTest, EveryDefaultConfigMatchesCublasFloat32) {
    CudaBackend backend(options());
    expect_every_default_config_matches_cublas(backend, "float32", false, 340);
}

TEST_F(CudaBackendTest, EveryDefaultConfigMatchesCublasTf32) {
    CudaBackend backend(options());
    expect_every_default_config_matches_cublas(backend, "float32", true, 460);
}

TEST_F(CudaBackendTest, EveryDefaultConfigIsExactInt8) {
    CudaBackend backend(options());
    expect_every_default_config_matches_cublas(backend, "int8", false, 100);
}

// int8 on a timed-size problem in every layout: the kernel's int32 output equals
// cuBLASLt's (the timed reference, torch._int_mm's call) element for element.
TEST_F(CudaBackendTest, Int8KernelEqualsCublasLtExactly) {
    CudaBackend backend(options());
    for (const std::string layout : {"nn", "nt", "tn", "tt"}) {
        const Problem p = problem(1, 1000, 1504, 776, "int8", "mm", layout);
        backend.prepare(p, 7);
        backend.run_reference_once(p);
        const auto ref = backend.read_output(p);
        const auto c = specialize_config(default_configs()[17], p, false);  // 128x128x64, 3 stages, 4 warps
        backend.run_once(p, c);
        const auto out = backend.read_output(p);
        ASSERT_EQ(out.size(), ref.size());
        std::size_t differ = 0;
        double norm = 0;
        for (std::size_t i = 0; i < out.size(); ++i) {
            differ += out[i] != ref[i];
            norm += std::fabs(ref[i]);
        }
        EXPECT_EQ(differ, 0u) << layout;
        EXPECT_GT(norm, 0.0) << layout;  // the inputs are non-zero
    }
}

// A collection's plan: the kernels of every problem are built before the engine reaches
// them, and timing them then compiles nothing.
TEST_F(CudaBackendTest, PlannedKernelsAreReadyWhenTimed) {
    CudaBackend backend(options());
    std::vector<Problem> problems{problem(1, 640, 384, 320, "float16"), problem(1, 333, 257, 391, "bfloat16", "addmm"),
                                  problem(2, 256, 264, 128, "bfloat16", "bmm", "nt")};
    const auto configs_for = [](const Problem& p) { return specialize_configs(default_configs(), p, false); };
    const std::size_t before = backend.stats().cache.compiled;
    backend.plan(problems, configs_for);
    const std::size_t planned = backend.stats().cache.planned;
    ASSERT_GT(planned, 0u);
    // The workers build the plan without being asked.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (backend.stats().cache.compiled < before + planned && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::size_t compiled = backend.stats().cache.compiled;
    ASSERT_EQ(compiled, before + planned);
    TimingOptions t;
    t.warmup = 1;
    t.repeat = 2;
    std::size_t timed = 0;
    for (auto it = problems.rbegin(); it != problems.rend(); ++it) {
        backend.prepare(*it, 5);
        for (const auto& c : backend.prune(configs_for(*it), *it).kept) {
            backend.time(*it, c, t);
            ++timed;
        }
    }
    // The plan held every kernel the timings load: at most the utility kernels were compiled.
    EXPECT_LE(backend.stats().cache.compiled, compiled + 1);
    EXPECT_GT(timed, 0u);
}

// The timed problem itself (not only the verification problem) gives cuBLAS's answer.
TEST_F(CudaBackendTest, TimedKernelComputesTheProblem) {
    CudaBackend backend(options());
    for (const std::string op : {"mm", "addmm", "bmm"}) {
        const Problem p = problem(op == "bmm" ? 3 : 1, 1000, 1500, 777, "bfloat16", op, "nt");
        backend.prepare(p, 7);
        backend.run_reference_once(p);
        const auto ref = backend.read_output(p);
        auto c = specialize_config(default_configs()[17], p, false);  // 128x128x64, 3 stages, 4 warps
        backend.run_once(p, c);
        const auto out = backend.read_output(p);
        ASSERT_EQ(out.size(), ref.size());
        double worst = 0;
        for (std::size_t i = 0; i < out.size(); ++i)
            worst = std::max(worst, std::fabs(out[i] - ref[i]) / (1e-2 + std::fabs(ref[i])));
        EXPECT_LT(worst, 2e-2) << op;  // bf16 output: 2 ulps
    }
}

// Few tiles and a long K: the tiles are split along K (the split tail) on both
// templates (odd K: the mma.sync kernel; aligned: the wgmma kernel on sm_90), and the
// parts add up to cuBLAS's answer, on a second run too (the tile flags are reset).
TEST_F(CudaBackendTest, SplitTilesComputeTheProblem) {
    CudaBackend backend(options());
    for (const std::string op : {"mm", "addmm", "bmm"})
        for (const std::int64_t K : {4001, 4096}) {
            const Problem p = problem(op == "bmm" ? 3 : 1, 200, 136, K, "bfloat16", op, "nn");
            backend.prepare(p, 11);
            backend.run_reference_once(p);
            const auto ref = backend.read_output(p);
            const auto c = specialize_config(default_configs()[17], p, false);  // 128x128x64: 2 x 2 tiles
            for (int run = 0; run < 2; ++run) {
                const std::size_t splits_before = backend.stats().split_tail_launches;
                backend.run_once(p, c);
                EXPECT_GT(backend.stats().split_tail_launches, splits_before) << op << " K " << K;
                const auto out = backend.read_output(p);
                ASSERT_EQ(out.size(), ref.size());
                double worst = 0;
                for (std::size_t i = 0; i < out.size(); ++i)
                    worst = std::max(worst, std::fabs(out[i] - ref[i]) / (1e-2 + std::fabs(ref[i])));
                EXPECT_LT(worst, 2e-2) << op << " K " << K << " run " << run;  // bf16 output: 2 ulps
            }
        }
}

TEST_F(CudaBackendTest, TimingIsSane) {
    CudaBackend backend(options());
    const Problem p = problem(1, 4096, 4096, 4096, "bfloat16");
    backend.prepare(p, 1);
    const auto configs = specialize_configs(default_configs(), p, false);
    TimingOptions t;
    t.warmup = 2;
    t.repeat = 7;
    const double before = backend.timed_kernel_seconds();
    const Timing timing = backend.time(p, configs[17], t);
    ASSERT_EQ(timing.samples_ms.size(), 7u);
    EXPECT_LE(timing.min_ms, timing.median_ms);
    EXPECT_LE(timing.median_ms, timing.max_ms);
    double sum = 0;
    for (double s : timing.samples_ms) sum += s;
    EXPECT_NEAR(backend.timed_kernel_seconds() - before, sum * 1e-3, 1e-6);
    // 137 GFLOP: under 2000 TFLOP/s is physics, over 1 TFLOP/s means it ran on the GPU.
    const double tflops = p.flops() / (timing.median_ms * 1e-3) / 1e12;
    EXPECT_LT(tflops, 2000.0);
    EXPECT_GT(tflops, 1.0);
    const Timing ref = backend.time_reference(p, t);
    EXPECT_GT(ref.median_ms, 0.0);
    EXPECT_LT(p.flops() / (ref.median_ms * 1e-3) / 1e12, 2000.0);
    // A twice larger K takes longer (the timer measures the kernel, not a constant).
    const Problem p2 = problem(1, 4096, 4096, 8192, "bfloat16");
    backend.prepare(p2, 1);
    const Timing timing2 = backend.time(p2, specialize_config(default_configs()[17], p2, false), t);
    EXPECT_GT(timing2.median_ms, 1.5 * timing.median_ms);
    EXPECT_FALSE(backend.hardware_name().empty());
}

TEST_F(CudaBackendTest, SecondRunHitsTheDiskCache) {
    const Problem p = problem(1, 1024, 1024, 1024, "float16");
    const auto configs = specialize_configs(default_configs(), p, false);
    TimingOptions t;
    t.warmup = 1;
    t.repeat = 3;
    std::size_t kept = 0;
    {
        CudaBackend first(options());
        first.prepare(p, 3);
        const auto pruned = first.prune(configs, p);
        kept = pruned.kept.size();
        for (const auto& c : pruned.kept) first.time(p, c, t);
        EXPECT_GE(first.stats().cache.compiled, kept);  // + the utility kernels
    }
    CudaBackend second(options());
    second.prepare(p, 3);
    const auto pruned = second.prune(configs, p);
    for (const auto& c : pruned.kept) second.time(p, c, t);
    EXPECT_EQ(second.stats().cache.compiled, 0u);
    EXPECT_EQ(second.stats().cache.disk_hits, kept + 1);  // + the utility kernels
}

TEST_F(CudaBackendTest, PrunedConfigsAreReportedWithReasons) {
    CudaBackend backend(options());
    const Problem p = problem(1, 2048, 2048, 2048, "bfloat16");
    const auto all = specialize_configs(exhaustive_configs(), p, false);
    const PruneResult r = backend.prune(all, p);
    EXPECT_EQ(r.kept.size() + r.pruned.size(), 1875u);
    EXPECT_GT(r.pruned.size(), 0u);
    for (const auto& pc : r.pruned) EXPECT_FALSE(pc.reason.empty());
}

}  // namespace
}  // namespace mmt::collect::cuda
