// The Hopper kernel (gemm_kernel_sm90.cuh: wgmma + TMA) on a real sm_90 GPU: every dtype,
// op and layout over configs that cover its shapes (one and two warpgroups, both splits,
// 32/64/128-byte K-major swizzles, several K boxes per stage) agrees with cuBLAS, and the
// backend runs it for the timed problem itself. Skips without an sm_90 device.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "cuda/cuda_backend_impl.hpp"
#include "cuda_test_support.hpp"
#include "matmul_toolkit/collect/cuda_backend.hpp"

namespace mmt::collect::cuda {
namespace {

using test::problem;
using test::config;

class CudaWgmmaTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!cuda_backend_device_available()) GTEST_SKIP() << "no CUDA device";
        const DeviceInfo info = read_device_info(0);
        if (info.cc_major != 9 || info.cc_minor != 0) GTEST_SKIP() << "no sm_90 device (" << info.name << ")";
        m_dir = std::filesystem::temp_directory_path() / ("mmt_cuda_wgmma_test_" + std::to_string(std::random_device{}()));
    }
    void TearDown() override { std::filesystem::remove_all(m_dir); }

    CudaBackendOptions options() const {
        CudaBackendOptions o;
        o.cache_dir = m_dir;
        return o;
    }
    std::filesystem::path m_dir;
};

const std::vector<core::GemmConfig>& wgmma_configs() {
    static const std::vector<core::GemmConfig> configs{
        config(128, 128, 64, 3, 4),  config(128, 256, 64, 3, 8), config(64, 256, 32, 4, 8),
        config(256, 128, 64, 3, 8),  config(64, 64, 16, 2, 4),   config(128, 64, 128, 2, 4),
        config(64, 128, 256, 2, 4),  config(256, 64, 32, 5, 8)};
    return configs;
}

// Persistent CTAs with dynamic and with static tiles (grid capped at 3 CTAs, so each
// walks several tiles and, for bmm, both batches; one backend verifies one kernel after
// another, so a tile counter left non-zero by a launch would leave the next one's C
// unwritten), the same uncapped (verification then runs on 2/3 as many CTAs as tiles and
// splits the last wave's tiles along K: whole tiles, split ones, and flags that must be
// back at zero for the next kernel), one tile per CTA, and clusters of two CTAs (TMA
// multicast of B); the verification problem has 9 rows of tiles, so a cluster's second
// CTA also runs past the last row.
TEST_F(CudaWgmmaTest, EveryDtypeOpAndLayoutMatchesCublas) {
    std::vector<std::string> failures;
    std::size_t checked = 0, persistent = 0, dynamic = 0, split = 0;
    struct Variant {
        int cluster;
        bool persist, dynamic_tiles;
        int max_ctas;
    };
    for (const auto& [cluster, persist, dynamic_tiles, max_ctas] : std::vector<Variant>{{1, true, true, 3},
                                                                                        {1, true, false, 3},
                                                                                        {1, true, false, 0},
                                                                                        {1, true, true, 0},
                                                                                        {1, false, false, 3},
                                                                                        {2, false, false, 3}}) {
    CudaBackendOptions o = options();
    o.wgmma_cluster = cluster;
    o.wgmma_persistent = persist;
    o.wgmma_dynamic_tiles = dynamic_tiles;
    o.wgmma_max_ctas = max_ctas;
    CudaBackend backend(o);
    for (const std::string dtype : {"float16", "bfloat16"})
        for (const std::string op : {"mm", "addmm", "bmm"})
            for (const std::string layout : {"nn", "nt", "tn", "tt"}) {
                // K long enough for every config's tiles to split: the backend keeps its
                // persistent CTAs (persistent_pays_off). Verification runs its own problem.
                const Problem p = problem(op == "bmm" ? 2 : 1, 512, 512, 2056, dtype, op, layout);
                backend.prune(wgmma_configs(), p);  // queues the compiles on the worker processes
                for (const auto& c : wgmma_configs()) {
                    const KernelSpec spec = backend.spec_for(c, p);
                    if (spec.math != MathPath::wgmma) continue;
                    const std::size_t splits_before = backend.stats().split_tail_launches;
                    const Verification v = backend.verify(spec);
                    split += backend.stats().split_tail_launches > splits_before ? 1 : 0;
                    ++checked;
                    persistent += spec.persistent ? 1 : 0;
                    dynamic += spec.dynamic_tiles ? 1 : 0;
                    if (!v.passed) failures.push_back(spec_name(spec) + ": " + v.message);
                }
            }
    }
    std::string listed;
    for (std::size_t i = 0; i < failures.size() && i < 60; ++i) listed += "\n  " + failures[i];
    EXPECT_TRUE(failures.empty()) << failures.size() << " of " << checked << " wrong:" << listed;
    EXPECT_GE(checked, 1080u);  // 6 variants x 180 specs
    EXPECT_GE(persistent, 720u);
    EXPECT_GE(dynamic, 360u);
    EXPECT_GE(split, 360u);
}

// The path the collection takes (prune, time, the launch with tensor maps) on a ragged
// problem larger than the verification one, with and without the wgmma option; with
// persistent CTAs also on a problem of fewer tiles than SMs, whose tiles the split tail
// divides along K (500 x 1064 in 128 x 128 tiles: 36, K = 2000 in 32 k-tiles).
TEST_F(CudaWgmmaTest, TimedProblemMatchesCublasOnBothPaths) {
    for (const auto& [wgmma, cluster] : std::vector<std::pair<bool, int>>{
             {true, 1}, {true, -1}, {true, 2}, {false, 1}, {true, 0}, {true, 3}, {true, -3}}) {
        CudaBackendOptions o = options();
        o.wgmma = wgmma;
        // cluster 0: one tile per CTA; 1: persistent CTAs, dynamic tiles; -1: static tiles;
        // 3 / -3: the same on the split problem.
        o.wgmma_cluster = cluster == 2 ? 2 : 1;
        o.wgmma_persistent = cluster != 0 && cluster != 2;
        o.wgmma_dynamic_tiles = cluster > 0;
        CudaBackend backend(o);
        const bool split_problem = cluster == 3 || cluster == -3;
        const Problem p = split_problem ? problem(1, 500, 1064, 2000, "bfloat16", "addmm", "nn")
                                        : problem(1, 1000, 1064, 776, "bfloat16", "addmm", "nn");
        backend.prepare(p, 7);
        const core::GemmConfig c = config(128, 128, 64, 3, 4);
        ASSERT_EQ(backend.prune({c}, p).kept.size(), 1u);
        backend.time(p, c, TimingOptions{1, 2});
        const std::vector<float> ours = backend.read_output(p);
        backend.run_reference_once(p);
        const std::vector<float> ref = backend.read_output(p);
        ASSERT_EQ(ours.size(), ref.size());
        double worst = 0;
        for (std::size_t i = 0; i < ref.size(); ++i)
            worst = std::max(worst, std::fabs(static_cast<double>(ours[i]) - ref[i]) / (1.0 + std::fabs(ref[i])));
        EXPECT_LT(worst, 2e-2) << (wgmma ? "wgmma, cluster " + std::to_string(cluster) : "mma.sync");
        // Stale tiles would pass as zeros nowhere: the output is the product, not a leftover.
        EXPECT_GT(std::fabs(ours[ours.size() / 2]), 1.0f);
        if (split_problem) EXPECT_GT(backend.stats().split_tail_launches, 0u);
    }
}

}  // namespace
}  // namespace mmt::collect::cuda
