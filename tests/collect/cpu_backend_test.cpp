// The CPU backend: its config space rule, prepared operands, checked timings, reference.

#include "matmul_toolkit/collect/cpu_backend.hpp"

#include <map>

#include <gtest/gtest.h>

#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/collect/problem_generator.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect {
namespace {

const std::string kDuplicate = "duplicate on cpu: num_stages and num_warps do not apply";

std::map<std::string, std::size_t> count_reasons(const PruneResult& r) {
    std::map<std::string, std::size_t> counts;
    for (const auto& p : r.pruned) ++counts[p.reason];
    return counts;
}

TEST(CpuBackendPrune, DefaultKeepsItsSixteenTilesWithStagesAndWarpsFixed) {
    CpuBackend backend(CpuBackendOptions{16 << 20});
    const auto p = make_problem("mm", "nn", 1, 100, 100, 100, "float32");
    const auto result = backend.prune(default_configs(), p);
    // 20 configs, 16 distinct tiles: (64,128,32), (128,64,32), (128,128,32) and (128,128,64)
    // appear twice with other stages/warps.
    EXPECT_EQ(result.kept.size(), 16u);
    EXPECT_EQ(count_reasons(result), (std::map<std::string, std::size_t>{{kDuplicate, 4}}));
    for (const auto& c : result.kept) {
        EXPECT_EQ(c.num_stages, kCpuNumStages);
        EXPECT_EQ(c.num_warps, kCpuNumWarps);
    }
}

TEST(CpuBackendPrune, ExhaustiveKeepsOneConfigPerTile) {
    CpuBackend backend(CpuBackendOptions{16 << 20});
    const auto p = make_problem("mm", "nn", 1, 100, 100, 100, "float32");
    const auto result = backend.prune(exhaustive_configs(), p);
    EXPECT_EQ(result.kept.size(), 125u);
    EXPECT_EQ(result.pruned.size(), 1750u);
}

TEST(CpuBackendPrune, TilesWhoseWorkingSetExceedsTheCacheArePrunedWithTheirReason) {
    // With 64 KiB the packed panels + float32 accumulator, (bm + bn)·bk·4 + bm·bn·4 bytes,
    // fit for 10 of the 20 DEFAULT configs (worked out by hand per config):
    // fits: (32,32,16) 8 KiB, (32,32,128) 36, (32,64,32) 20, (64,32,32) 20, (64,32,128) 56,
    //       (64,64,16) 24, (64,64,32) 32, (64,64,64) 48, (64,128,32) 56, (128,64,32) 56;
    // too big: (64,64,128) 80, (64,128,64) 80, (64,128,128) 128, (128,128,*) 96..320 (x5);
    // duplicates: the second (64,128,32) and (128,64,32).
    CpuBackend backend(CpuBackendOptions{64 << 10});
    const auto p = make_problem("addmm", "tt", 1, 100, 100, 100, "float32");
    const auto result = backend.prune(default_configs(), p);
    EXPECT_EQ(result.kept.size(), 10u);
    const std::string too_big =
        "tile working set (packed A and B panels + accumulator) exceeds the L2 cache (64 KiB)";
    EXPECT_EQ(count_reasons(result),
              (std::map<std::string, std::size_t>{{kDuplicate, 2}, {too_big, 8}}));
}

TEST(CpuBackend, SupportsFloat32AndInt8AndEveryOpAndDefaultsAreSmall) {
    CpuBackend backend;
    EXPECT_EQ(backend.name(), "cpu");
    EXPECT_FALSE(backend.hardware_name().empty());
    EXPECT_EQ(backend.supported_dtypes(), (std::vector<std::string>{"float32", "int8"}));
    EXPECT_EQ(backend.supported_ops(), (std::vector<std::string>{"mm", "addmm", "bmm"}));
    const auto defaults = backend.collection_defaults();
    EXPECT_EQ(defaults.dtypes, std::vector<std::string>{"float32"});
    EXPECT_LE(defaults.max_size, 1024);
    EXPECT_GT(backend.cache_bytes(), 0);
}

TEST(CpuBackend, RejectsUnsupportedDtypesAndUnpreparedProblems) {
    CpuBackend backend;
    EXPECT_THROW(backend.prepare(make_problem("mm", "nn", 1, 8, 8, 8, "float16"), 1), core::InputError);
    const auto p = make_problem("mm", "nn", 1, 8, 8, 8, "float32");
    EXPECT_THROW(backend.time(p, default_configs()[0], TimingOptions{}), core::Error);
    backend.prepare(p, 1);
    const auto other = make_problem("mm", "nn", 1, 8, 8, 9, "float32");
    EXPECT_THROW(backend.time(other, default_configs()[0], TimingOptions{}), core::Error);
}

class EveryDefaultConfig : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryDefaultConfig, IsCheckedAgainstTheReferenceAndTimedRepeatTimes) {
    // time() throws when the kernel's result differs from the reference, so every
    // config passing here produced the right result before it was timed.
    CpuBackend backend;
    const std::string layout = GetParam();
    for (const auto& p : {make_problem("mm", layout, 1, 45, 37, 29, "float32"),
                          make_problem("addmm", layout, 1, 31, 67, 41, "float32"),
                          make_problem("bmm", layout, 3, 23, 19, 35, "float32")}) {
        backend.prepare(p, 7);
        const auto kept = backend.prune(specialize_configs(default_configs(), p, false), p).kept;
        for (const auto& config : kept) {
            const Timing t = backend.time(p, config, TimingOptions{1, 3});
            ASSERT_EQ(t.samples_ms.size(), 3u) << describe_config(config);
            EXPECT_GT(t.median_ms, 0.0);
            EXPECT_LE(t.min_ms, t.median_ms);
            EXPECT_GE(t.max_ms, t.median_ms);
            EXPECT_EQ(t.sample_starts_ms.size(), 3u);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, EveryDefaultConfig, ::testing::Values("nn", "nt", "tn", "tt"));

// int8 is torch._int_mm: int8 operands, int32 out, checked exactly (time() throws on any
// differing element); ragged sizes exercise the masked edges; mm only, no BLAS reference.
TEST_P(EveryDefaultConfig, Int8MmIsExactOnEveryConfig) {
    CpuBackend backend;
    const auto p = make_problem("mm", GetParam(), 1, 45, 37, 300, "int8");
    EXPECT_EQ(p.shape.out_dtype, "int32");
    backend.prepare(p, 7);
    const auto kept = backend.prune(specialize_configs(default_configs(), p, false), p).kept;
    ASSERT_FALSE(kept.empty());
    for (const auto& config : kept) EXPECT_GT(backend.time(p, config, TimingOptions{1, 2}).median_ms, 0.0);
    EXPECT_THROW(backend.time_reference(p, TimingOptions{1, 2}), core::Error);
    EXPECT_THROW(backend.prepare(make_problem("addmm", "nn", 1, 8, 8, 8, "int8"), 1), core::InputError);
}

TEST(CpuGemmInt8, AWrongKernelResultIsCaught) {
    // The exact reference against itself with one element changed: the check is exact.
    const std::vector<std::int8_t> a{1, 2, 3, 4}, b{5, 6, 7, 8};
    std::vector<std::int32_t> c(4);
    CpuGemmInt8Args g;
    g.m = g.n = g.k = 2;
    g.a = a.data();
    g.a_stride = {4, 2, 1};
    g.b = b.data();
    g.b_stride = {4, 2, 1};
    g.c = c.data();
    naive_gemm(g);
    EXPECT_EQ(c, (std::vector<std::int32_t>{19, 22, 43, 50}));
    std::vector<std::int32_t> blocked(4);
    g.c = blocked.data();
    CpuGemmWorkspace ws;
    CpuTile tile;
    tile.block_m = tile.block_n = 16;
    tile.block_k = 16;
    ws.reserve(tile);
    cpu_gemm(g, tile, ws);
    EXPECT_EQ(blocked, c);
}

TEST(CpuBackend, AnEvenKConfigOnARaggedKFailsInsteadOfTiming) {
    CpuBackend backend;
    const auto p = make_problem("mm", "nn", 1, 20, 20, 40, "float32");
    backend.prepare(p, 1);
    auto config = default_configs()[0];  // block_k 16: 40 % 16 != 0
    config.even_k = true;
    EXPECT_THROW(backend.time(p, config, TimingOptions{0, 1}), core::Error);
}

TEST(CpuBackend, TimedKernelSecondsGrowWithEveryTimedRun) {
    CpuBackend backend;
    const auto p = make_problem("mm", "nn", 1, 64, 64, 64, "float32");
    backend.prepare(p, 1);
    EXPECT_EQ(backend.timed_kernel_seconds(), 0.0);
    const Timing t = backend.time(p, default_configs()[0], TimingOptions{0, 4});
    double sum = 0.0;
    for (double ms : t.samples_ms) sum += ms / 1000.0;
    EXPECT_NEAR(backend.timed_kernel_seconds(), sum, 1e-12);
}

TEST(CpuBackend, ReferenceIsTimedWithBlasWhenBuiltWithOne) {
    CpuBackend backend;
    const auto p = make_problem("addmm", "nt", 1, 50, 60, 70, "float32");
    backend.prepare(p, 1);
    if (!cpu_reference_available()) {
        EXPECT_THROW(backend.time_reference(p, TimingOptions{0, 1}), core::Error);
        GTEST_SKIP() << "built without a BLAS: no reference entry";
    }
    const Timing t = backend.time_reference(p, TimingOptions{1, 3});
    EXPECT_EQ(t.samples_ms.size(), 3u);
    EXPECT_GT(t.median_ms, 0.0);
}

TEST(CpuModelName, IsReadFromProcCpuinfo) { EXPECT_FALSE(cpu_model_name().empty()); }

}  // namespace
}  // namespace mmt::collect
