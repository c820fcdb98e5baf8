// The CUDA kernel spec: math path, warp/thread layout, alignment and the prune rule.
// Expected values are worked out by hand from the rule in kernel_spec.hpp.

#include <gtest/gtest.h>

#include "cuda/kernel_spec.hpp"
#include "cuda_test_support.hpp"
#include "matmul_toolkit/collect/config_space.hpp"

namespace mmt::collect::cuda {
namespace {

using test::problem;
using test::config;

const DeviceLimits kH100{232448, 255};

TEST(CudaKernelSpec, MathPathFollowsDtypeAndTf32) {
    auto c = config(64, 64, 32, 2, 4);
    EXPECT_EQ(make_spec(c, problem(1, 64, 64, 64, "float16")).math, MathPath::mma16);
    EXPECT_EQ(make_spec(c, problem(1, 64, 64, 64, "bfloat16")).math, MathPath::mma16);
    EXPECT_EQ(make_spec(c, problem(1, 64, 64, 64, "float32")).math, MathPath::fma);
    c.allow_tf32 = true;
    EXPECT_EQ(make_spec(c, problem(1, 64, 64, 64, "float32")).math, MathPath::tf32);
    // ALLOW_TF32 means nothing for 16-bit inputs.
    EXPECT_FALSE(make_spec(c, problem(1, 64, 64, 64, "bfloat16")).allow_tf32);
}

TEST(CudaKernelSpec, Int8RunsOnTheIntegerMmaWithoutSplitsOrWgmma) {
    const auto p = problem(1, 1024, 1024, 1024, "int8");
    KernelSpec s = make_spec(config(128, 128, 64, 3, 4), p);
    EXPECT_EQ(s.math, MathPath::imma);
    EXPECT_EQ(spec_name(s).rfind("i8_mm_nn_128x128x64", 0), 0u) << spec_name(s);
    EXPECT_NE(kernel_prelude(s).find("#define MMT_DTYPE 3\n#define MMT_MATH 4"), std::string::npos)
        << kernel_prelude(s);
    // 1-byte elements: (128 + 128) * 64 * 3 bytes of shared memory, 16 per vector.
    EXPECT_EQ(shared_bytes(s), 49152u);
    EXPECT_EQ(alignment_for(p).vec_a, 16);
    EXPECT_FALSE(unsupported_reason(s, kH100).has_value());
    // The MMA's K is 32.
    auto r = unsupported_reason(make_spec(config(64, 64, 16, 2, 4), p), kH100);
    ASSERT_TRUE(r.has_value());
    EXPECT_NE(r->find("block_k"), std::string::npos);
    // torch._int_mm is mm only.
    auto addmm = p;
    addmm.op = "addmm";
    r = unsupported_reason(make_spec(config(64, 64, 32, 2, 4), addmm), kH100);
    ASSERT_TRUE(r.has_value());
    EXPECT_NE(r->find("mm only"), std::string::npos);
    // Hopper's wgmma path is float16 / bfloat16 only.
    EXPECT_TRUE(wgmma_unsupported_reason(s, kH100).has_value());
    EXPECT_FALSE(select_wgmma(s, kH100));
}

TEST(CudaKernelSpec, WarpGridMinimisesFragmentTraffic) {
    // 128x256 over 8 warps: 2x4 gives 64x64 warp tiles (1/64 + 1/64), better than 1x8
    // (128x32) or 4x2 (32x128).
    const auto s = make_spec(config(128, 256, 32, 3, 8), problem(1, 512, 512, 512, "bfloat16"));
    EXPECT_EQ(s.warps_m, 2);
    EXPECT_EQ(s.warps_n, 4);
    // 16x16 over 2 warps: only 1x2 (16x8 warp tiles) fits.
    const auto small = make_spec(config(16, 16, 16, 1, 2), problem(1, 512, 512, 512, "float16"));
    EXPECT_EQ(small.warps_m, 1);
    EXPECT_EQ(small.warps_n, 2);
    EXPECT_FALSE(unsupported_reason(small, kH100).has_value());
}

TEST(CudaKernelSpec, FmaThreadGrid) {
    // 64x64 over 128 threads: 32 accumulators each; 8x4 and 4x8 both cost 12 loads, ties
    // go to the larger thread_m.
    const auto s = make_spec(config(64, 64, 32, 2, 4), problem(1, 512, 512, 512, "float32"));
    EXPECT_EQ(s.thread_m, 8);
    EXPECT_EQ(s.thread_n, 4);
}

TEST(CudaKernelSpec, FragmentPipelineRule) {
    const auto p = problem(1, 4096, 4096, 4096, "bfloat16");
    // 8 warps, 3 stages: on (one CTA per SM, the barrier stall is exposed).
    EXPECT_TRUE(make_spec(config(128, 256, 32, 3, 8), p).frag_pipeline);
    // ...also where the estimate is past 255 (ptxas spilled 88 bytes, and the A/B still
    // measured 1.08-1.22x).
    EXPECT_GT(frag_pipeline_registers(make_spec(config(128, 256, 64, 3, 8), p)), 255);
    EXPECT_TRUE(make_spec(config(128, 256, 64, 3, 8), p).frag_pipeline);
    // 4 warps with 64x64 warp tiles: 128 + 32 x 3 + 4 x 8 = 256 registers: off.
    EXPECT_EQ(frag_pipeline_registers(make_spec(config(128, 128, 32, 3, 4), p)), 256);
    EXPECT_FALSE(make_spec(config(128, 128, 32, 3, 4), p).frag_pipeline);
    // Small warp tiles leave room: 64x64 over 4 warps is 32x32 per warp.
    EXPECT_TRUE(make_spec(config(64, 64, 32, 3, 4), p).frag_pipeline);
    // BLOCK_K counts: 8 k-steps of 32x64 warp tiles (ptxas: 255 registers and a 44-byte
    // spill with the pipeline, 254 without); the old BLOCK_K-blind estimate said 152.
    EXPECT_FALSE(make_spec(config(64, 128, 128, 4, 4), p).frag_pipeline);
    EXPECT_TRUE(make_spec(config(64, 128, 32, 3, 4), p).frag_pipeline);
    // tf32 takes k-steps of 8 and 4-byte elements (64x128x64: a 184-byte spill with it).
    auto tf32 = config(64, 128, 64, 3, 4);
    tf32.allow_tf32 = true;
    EXPECT_FALSE(make_spec(tf32, problem(1, 4096, 4096, 4096, "float32")).frag_pipeline);
    // ...and no 8-warp exemption: 128x256x32 w8 ran at 0.6-0.75x with the pipeline.
    auto tf32_w8 = config(128, 256, 32, 3, 8);
    tf32_w8.allow_tf32 = true;
    EXPECT_FALSE(make_spec(tf32_w8, problem(1, 4096, 4096, 4096, "float32")).frag_pipeline);
    // Two stages: the next tile would land only one k-step ahead: off.
    EXPECT_FALSE(make_spec(config(64, 64, 32, 2, 4), p).frag_pipeline);
    // No fragments on the FMA path.
    EXPECT_FALSE(make_spec(config(64, 64, 32, 3, 4), problem(1, 64, 64, 64, "float32")).frag_pipeline);
    EXPECT_EQ(frag_pipeline_registers(make_spec(config(64, 64, 32, 3, 4), problem(1, 64, 64, 64, "float32"))), 0);
}

TEST(CudaKernelSpec, SharedMemoryFormula) {
    // (128 + 256) · 32 · 4 stages · 2 bytes
    EXPECT_EQ(shared_bytes(make_spec(config(128, 256, 32, 4, 8), problem(1, 64, 64, 64, "float16"))), 98304u);
    // (64 + 64) · 64 · 3 · 4 bytes
    EXPECT_EQ(shared_bytes(make_spec(config(64, 64, 64, 3, 4), problem(1, 64, 64, 64, "float32"))), 98304u);
}

TEST(CudaKernelSpec, PruneReasons) {
    const auto p = problem(1, 1024, 1024, 1024, "bfloat16");
    // 16x16 has no 4-warp grid of 16x8 pieces.
    auto r = unsupported_reason(make_spec(config(16, 16, 32, 2, 4), p), kH100);
    ASSERT_TRUE(r.has_value());
    EXPECT_NE(r->find("warp layout"), std::string::npos);
    // (256 + 256) · 128 · 2 · 2 = 262144 bytes > 232448.
    r = unsupported_reason(make_spec(config(256, 256, 128, 2, 8), p), kH100);
    ASSERT_TRUE(r.has_value());
    EXPECT_NE(r->find("shared memory"), std::string::npos);
    // 256x256 over 8 warps: 128x64 warp tiles, 256 accumulators per thread.
    r = unsupported_reason(make_spec(config(256, 256, 16, 1, 8), p), kH100);
    ASSERT_TRUE(r.has_value());
    EXPECT_NE(r->find("registers"), std::string::npos);
    // Triton-incompatible sizes.
    r = unsupported_reason(make_spec(config(48, 64, 32, 2, 4), p), kH100);
    ASSERT_TRUE(r.has_value());
    EXPECT_NE(r->find("powers of two"), std::string::npos);
    // The cuBLAS-class tile is kept.
    EXPECT_FALSE(unsupported_reason(make_spec(config(128, 256, 64, 3, 8), p), kH100).has_value());
}

TEST(CudaKernelSpec, DefaultSpaceOnH100) {
    // Of Inductor's 20 configs only (128,128,128,4,8) overflows shared memory in 16-bit:
    // 256 · 128 · 4 · 2 = 262144 bytes.
    const auto p = problem(1, 4096, 4096, 4096, "float16");
    int pruned = 0;
    for (const auto& c : default_configs())
        if (unsupported_reason(make_spec(c, p), kH100)) ++pruned;
    EXPECT_EQ(pruned, 1);
}

TEST(CudaKernelSpec, AlignmentFromStrides) {
    // Row-major everything, all sizes multiples of 8: 16-byte loads, paired stores.
    auto a = alignment_for(problem(1, 4096, 4096, 4096, "float16"));
    EXPECT_EQ(a.vec_a, 8);
    EXPECT_EQ(a.vec_b, 8);
    EXPECT_EQ(a.vec_c, 2);
    // Odd K: A's rows (K contiguous) start anywhere; B's rows are N = 4096 long.
    a = alignment_for(problem(1, 64, 4096, 1001, "bfloat16"));
    EXPECT_EQ(a.vec_a, 1);
    EXPECT_EQ(a.vec_b, 8);
    // tn: A is stored K x M, M = 100 contiguous -> 4 elements; B row-major with odd N = 33
    // -> single elements, single stores.
    a = alignment_for(problem(1, 100, 33, 64, "float16", "mm", "tn"));
    EXPECT_EQ(a.vec_a, 4);
    EXPECT_EQ(a.vec_b, 1);
    EXPECT_EQ(a.vec_c, 1);
    // nt: B is stored N x K, K = 64 contiguous -> 8 elements.
    a = alignment_for(problem(1, 100, 33, 64, "float16", "mm", "nt"));
    EXPECT_EQ(a.vec_b, 8);
    // float32: 16 bytes are 4 elements.
    a = alignment_for(problem(1, 64, 64, 64, "float32"));
    EXPECT_EQ(a.vec_a, 4);
    // bmm: the batch stride must keep the alignment too (M·K = 3·6 = 18 -> 2).
    a = alignment_for(problem(2, 3, 8, 6, "float16", "bmm", "nn"));
    EXPECT_EQ(a.vec_a, 2);
}

TEST(CudaKernelSpec, KeyAndPreludeCoverEveryParameter) {
    const auto p = problem(1, 4096, 4096, 4096, "bfloat16");
    auto c = config(128, 128, 32, 3, 4);
    const auto base = make_spec(c, p);
    EXPECT_NE(kernel_prelude(base).find("#define MMT_BLOCK_M 128\n"), std::string::npos);
    EXPECT_NE(kernel_prelude(base).find("#define MMT_DTYPE 1\n"), std::string::npos);
    c.even_k = true;
    EXPECT_NE(spec_key(make_spec(c, p)), spec_key(base));
    EXPECT_NE(spec_key(make_spec(config(128, 128, 32, 3, 4), problem(1, 4096, 4096, 4095, "bfloat16"))),
              spec_key(base));
    EXPECT_NE(spec_key(make_spec(config(128, 128, 32, 3, 4), problem(1, 4096, 4096, 4096, "float16"))),
              spec_key(base));
    EXPECT_NE(spec_key(make_spec(config(128, 128, 32, 3, 4), problem(1, 4096, 4096, 4096, "bfloat16", "addmm"))),
              spec_key(base));
    EXPECT_NE(spec_key(make_spec(config(128, 128, 32, 3, 4), problem(1, 4096, 4096, 4096, "bfloat16", "mm", "nt"))),
              spec_key(base));
    EXPECT_EQ(spec_name(base), "bf16_mm_nn_128x128x32_g8_s3_w4_v8.8.2");
    // The SPLIT_K variant is a kernel of its own; the wgmma path has none.
    auto split = base;
    split.split_k = true;
    EXPECT_NE(spec_key(split), spec_key(base));
    EXPECT_NE(kernel_prelude(split).find("#define MMT_SPLIT_K 1\n"), std::string::npos);
    EXPECT_EQ(spec_name(split), "bf16_mm_nn_128x128x32_g8_s3_w4_v8.8.2_splitk");
    ASSERT_TRUE(select_wgmma(split, kH100));
    EXPECT_FALSE(split.split_k);
    EXPECT_EQ(kernel_prelude(split).find("MMT_SPLIT_K"), std::string::npos);
}

// The wgmma rule (kernel_spec.hpp, wgmma_unsupported_reason), case by case.
TEST(CudaKernelSpec, WgmmaRuleAdmitsHopperShapedConfigs) {
    const auto p = problem(1, 4096, 4096, 4096, "bfloat16");
    auto s = make_spec(config(128, 256, 64, 3, 8), p);
    ASSERT_TRUE(select_wgmma(s, kH100));
    EXPECT_EQ(s.math, MathPath::wgmma);
    // Two warpgroups split block_m = 128: 64 x 256 each, 128 accumulators per thread.
    EXPECT_EQ(s.wg_m, 64);
    EXPECT_EQ(s.wg_n, 256);
    EXPECT_FALSE(s.even_k);
    EXPECT_FALSE(s.frag_pipeline);
    EXPECT_EQ(estimated_registers(s), 128 + 40);
    // Stages of 128·64·2 + 256·64·2 bytes, 1 KiB of alignment slack, three mbarriers per stage.
    EXPECT_EQ(shared_bytes(s), 1024u + 3u * 49152u + 72u);
    EXPECT_FALSE(unsupported_reason(s, kH100).has_value());
    // A short BLOCK_K: the epilogue's padded C tile (64 x 264 x 2 bytes) outgrows the stages.
    auto narrow = make_spec(config(64, 256, 16, 2, 4), problem(1, 4096, 4096, 4096, "bfloat16", "mm", "nt"));
    ASSERT_TRUE(select_wgmma(narrow, kH100));
    EXPECT_EQ(shared_bytes(narrow), 1024u + 33792u + 48u);
    EXPECT_EQ(threads_per_block(narrow), 160);  // one warpgroup and the TMA producer warp
    // block_m = 64 with two warpgroups: they split block_n.
    s = make_spec(config(64, 256, 32, 4, 8), p);
    ASSERT_TRUE(select_wgmma(s, kH100));
    EXPECT_EQ(s.wg_m, 64);
    EXPECT_EQ(s.wg_n, 128);
    // One warpgroup, two m64 rows: 128 x 128.
    s = make_spec(config(128, 128, 64, 4, 4), p);
    ASSERT_TRUE(select_wgmma(s, kH100));
    EXPECT_EQ(s.wg_m, 128);
    EXPECT_EQ(s.wg_n, 128);
    // Column-major B (K-major tiles) takes narrow tiles; row-major B needs 64 columns per warpgroup.
    s = make_spec(config(64, 32, 32, 3, 4), problem(1, 4096, 4096, 4096, "float16", "mm", "nt"));
    EXPECT_TRUE(select_wgmma(s, kH100));
    s = make_spec(config(64, 32, 32, 3, 4), p);
    EXPECT_FALSE(select_wgmma(s, kH100));
    EXPECT_EQ(s.math, MathPath::mma16);
}

TEST(CudaKernelSpec, DeepWgmmaStagesRunInKStepsOf64) {
    const auto p = problem(1, 256, 4096, 4096, "bfloat16");
    // BLOCK_K 128: two K steps per stage, so 8 full/empty/cluster mbarrier triples for 4 stages.
    auto deep = make_spec(config(64, 128, 128, 4, 4), p);
    ASSERT_TRUE(select_wgmma(deep, kH100));
    EXPECT_EQ(wgmma_k_step(deep), 64);
    EXPECT_EQ(shared_bytes(deep), 1024u + 4u * 49152u + 24u * 8u);
    EXPECT_NE(kernel_prelude(deep).find("#define MMT_K_STEP 64\n"), std::string::npos);
    // The same shared memory as 64 x 128 x 64 in 8 stages, whose K step is its BLOCK_K.
    auto shallow = make_spec(config(64, 128, 64, 8, 4), p);
    ASSERT_TRUE(select_wgmma(shallow, kH100));
    EXPECT_EQ(wgmma_k_step(shallow), 64);
    EXPECT_EQ(shared_bytes(shallow), shared_bytes(deep));
    auto narrow = make_spec(config(64, 128, 32, 4, 4), p);
    ASSERT_TRUE(select_wgmma(narrow, kH100));
    EXPECT_EQ(wgmma_k_step(narrow), 32);
    EXPECT_NE(kernel_prelude(narrow).find("#define MMT_K_STEP 32\n"), std::string::npos);
    // The K step is no part of the other kernels.
    EXPECT_EQ(kernel_prelude(make_spec(config(64, 128, 128, 4, 4), p)).find("MMT_K_STEP"), std::string::npos);
}

TEST(CudaKernelSpec, PersistentCtasWhereTheyCanDoMoreThanOneTileEach) {
    const long long sms = 132;
    const auto pays = [&](const core::GemmConfig& c, const Problem& p, bool split_tail = true) {
        auto s = make_spec(c, p);
        EXPECT_TRUE(select_wgmma(s, kH100, 1, true));
        EXPECT_TRUE(s.persistent);
        return persistent_pays_off(s, p, sms, kH100, split_tail);
    };
    // More tiles than SMs: the persistent loop overlaps a tile's epilogue with the next loads.
    EXPECT_TRUE(pays(config(128, 256, 64, 4, 8), problem(1, 4096, 4096, 4096, "bfloat16")));
    // 128 tiles of 64 x 128 on 132 SMs, 201 KiB each: one CTA per SM, no room to split.
    EXPECT_FALSE(pays(config(64, 128, 128, 4, 4), problem(1, 256, 4096, 4096, "bfloat16")));
    // 44 tiles, K = 216: 4 k-tiles of 64, too few for two parts of kMinKTilesPerSplit.
    EXPECT_FALSE(pays(config(64, 64, 64, 4, 4), problem(1, 1376, 80, 216, "bfloat16")));
    // The same tiles over K = 4096 may split: 64 KiB CTAs can share an SM.
    EXPECT_TRUE(pays(config(64, 64, 64, 4, 4), problem(1, 1376, 80, 4096, "bfloat16")));
    EXPECT_FALSE(pays(config(64, 64, 64, 4, 4), problem(1, 1376, 80, 4096, "bfloat16"), false));
    // 32 tiles of 128 x 256 on 132 SMs: the split tail runs them in up to 4 parts.
    EXPECT_TRUE(pays(config(128, 256, 64, 4, 8), problem(1, 256, 4096, 4096, "bfloat16")));
    // Every batch's tiles count: 4 x 128 tiles are several waves.
    EXPECT_TRUE(pays(config(64, 128, 128, 4, 4), problem(4, 256, 4096, 4096, "bfloat16", "bmm")));
}

TEST(CudaKernelSpec, WgmmaRuleRejectsWhatTheKernelCannotRun) {
    const auto p = problem(1, 4096, 4096, 4096, "bfloat16");
    const auto reason = [&](const core::GemmConfig& c, const Problem& q) {
        auto r = wgmma_unsupported_reason(make_spec(c, q), kH100);
        return r ? *r : std::string();
    };
    EXPECT_NE(reason(config(128, 128, 64, 3, 2), p).find("num_warps"), std::string::npos);
    EXPECT_NE(reason(config(128, 128, 64, 1, 4), p).find("num_stages"), std::string::npos);
    EXPECT_NE(reason(config(32, 128, 64, 3, 4), p).find("block_m"), std::string::npos);
    // 128 x 256 on one warpgroup: 256 accumulators per thread.
    EXPECT_NE(reason(config(128, 256, 64, 3, 4), p).find("accumulators"), std::string::npos);
    // 256 x 128 x 128, 4 stages: 4 · 96 KiB.
    EXPECT_NE(reason(config(256, 128, 128, 4, 8), problem(1, 4096, 4096, 4096, "float16", "mm", "nt")).find("shared"),
              std::string::npos);
    // K = 4095: A's rows are not 16-byte aligned, which TMA requires of global strides.
    EXPECT_NE(reason(config(128, 128, 64, 3, 4), problem(1, 4096, 4096, 4095, "bfloat16")).find("16-byte"),
              std::string::npos);
    // float32 keeps its paths.
    EXPECT_NE(reason(config(128, 128, 32, 3, 4), problem(1, 4096, 4096, 4096, "float32")).find("float16"),
              std::string::npos);
    EXPECT_EQ(reason(config(128, 128, 64, 3, 4), p), "");
}

TEST(CudaKernelSpec, WgmmaSpecsHaveTheirOwnKeyAndArch) {
    const auto p = problem(1, 4096, 4096, 4096, "bfloat16");
    const auto mma = make_spec(config(128, 128, 64, 3, 4), p);
    auto wg = mma;
    ASSERT_TRUE(select_wgmma(wg, kH100));
    EXPECT_NE(spec_key(wg), spec_key(mma));
    EXPECT_NE(kernel_prelude(wg).find("#define MMT_WGMMA 1\n"), std::string::npos);
    EXPECT_EQ(kernel_prelude(mma).find("MMT_WGMMA"), std::string::npos);
    EXPECT_EQ(spec_name(wg), "bf16_mm_nn_128x128x64_g8_s3_w4_v8.8.2_wgmma");
    // Clusters of two: their own kernel; an odd number of tile rows gets a spare CTA per column.
    auto clustered = mma;
    ASSERT_TRUE(select_wgmma(clustered, kH100, 2));
    EXPECT_EQ(spec_name(clustered), "bf16_mm_nn_128x128x64_g8_s3_w4_v8.8.2_wgmma_c2");
    EXPECT_NE(kernel_prelude(clustered).find("#define MMT_CLUSTER_M 2\n"), std::string::npos);
    EXPECT_EQ(grid_ctas(clustered, 2552, 10616), 20 * 83);
    EXPECT_EQ(grid_ctas(clustered, 2500, 10616), 20 * 83);  // 19.5 rows -> 10 pairs
    EXPECT_EQ(grid_ctas(wg, 2500, 10616), 20 * 83);
    EXPECT_EQ(grid_ctas(wg, 2300, 10616), 18 * 83);
    EXPECT_EQ(grid_ctas(clustered, 2300, 10616), 18 * 83);
    EXPECT_EQ(grid_ctas(clustered, 2200, 10616), 18 * 83);  // 18 rows (17.2) -> 9 pairs
    EXPECT_EQ(grid_ctas(clustered, 2100, 10616), 18 * 83);  // 17 rows -> 9 pairs, one spare
    EXPECT_EQ(grid_ctas(wg, 2100, 10616), 17 * 83);
    EXPECT_EQ(nvrtc_arch(9, 0), "sm_90a");
    EXPECT_EQ(nvrtc_arch(8, 0), "sm_80");
    EXPECT_EQ(nvrtc_arch(10, 0), "sm_100");
}

TEST(CudaKernelSpec, PersistentWgmmaSpecsWhereTheirSharedMemoryFits) {
    const auto p = problem(1, 2552, 10616, 7616, "bfloat16");
    const auto mma = make_spec(config(256, 128, 64, 4, 8), p);
    auto one_tile = mma, persistent = mma;
    ASSERT_TRUE(select_wgmma(one_tile, kH100));
    ASSERT_TRUE(select_wgmma(persistent, kH100, 1, true));
    EXPECT_FALSE(one_tile.persistent);
    EXPECT_TRUE(persistent.persistent);
    EXPECT_NE(spec_key(persistent), spec_key(one_tile));
    EXPECT_NE(kernel_prelude(persistent).find("#define MMT_PERSISTENT 1\n"), std::string::npos);
    EXPECT_NE(kernel_prelude(one_tile).find("#define MMT_PERSISTENT 0\n"), std::string::npos);
    EXPECT_EQ(spec_name(persistent), "bf16_mm_nn_256x128x64_g8_s4_w8_v8.8.2_wgmma_p");
    // Stages (4 x 48 KiB) plus 32 rows of 136 elements per warpgroup, instead of the
    // 256 x 136 C tile aliasing the stages.
    EXPECT_EQ(shared_bytes(persistent), 1024u + 4 * 49152 + 2 * 32 * 136 * 2 + 24 * 4);
    EXPECT_EQ(shared_bytes(one_tile), 1024u + 4 * 49152 + 24 * 4);
    // 128 x 256 x 64, 4 stages, two warpgroups of 64 x 256: 1024 + 196608 + 2 * 32 * 264 * 2 fits 227 KiB.
    auto wide = make_spec(config(128, 256, 64, 4, 8), p);
    ASSERT_TRUE(select_wgmma(wide, kH100, 1, true));
    EXPECT_TRUE(wide.persistent);
    EXPECT_LE(shared_bytes(wide), kH100.max_shared_bytes);
    // Stages that fill the limit leave no room for the C buffer: one tile per CTA then
    // (128 x 128 x 64, 7 stages: 224 KiB + 8.5 KiB).
    auto full = make_spec(config(128, 128, 64, 7, 4), p);
    ASSERT_TRUE(select_wgmma(full, kH100, 1, true));
    EXPECT_FALSE(full.persistent);
    // No persistent clusters.
    auto clustered = mma;
    ASSERT_TRUE(select_wgmma(clustered, kH100, 2, true));
    EXPECT_FALSE(clustered.persistent);
    // Without the split tail the grid is min(tiles, SMs x resident CTAs); tiles count
    // every batch.
    EXPECT_EQ(plan_tiles(grid_ctas(persistent, 2552, 10616), 119, 132, false).grid, 132);
    EXPECT_EQ(plan_tiles(grid_ctas(persistent, 300, 200), 119, 132, false).grid, 4);
    EXPECT_EQ(plan_tiles(grid_ctas(persistent, 300, 200) * 40, 119, 132, false).grid, 132);
    EXPECT_EQ(plan_tiles(grid_ctas(persistent, 1024, 1024) * 32, 119, 264, false).grid, 264);
}

TEST(CudaKernelSpec, ClustersWhereBsRowsAreNotAlignedTo128Bytes) {
    // Row-major B (nn): rows of N elements; N = 10616 bf16 is 21232 bytes, 10624 is 166 x 128.
    EXPECT_EQ(preferred_cluster_m(problem(1, 2552, 10616, 7616, "bfloat16")), 2);
    EXPECT_EQ(preferred_cluster_m(problem(1, 2552, 10624, 7616, "bfloat16")), 1);
    EXPECT_EQ(preferred_cluster_m(problem(1, 256, 4096, 4096, "float16")), 1);
    // Column-major B (nt): rows of K elements, 7616 x 2 bytes = 119 x 128.
    EXPECT_EQ(preferred_cluster_m(problem(1, 2552, 10616, 7616, "bfloat16", "mm", "nt")), 1);
    EXPECT_EQ(preferred_cluster_m(problem(1, 2552, 10616, 7608, "bfloat16", "mm", "nt")), 2);
    // A's rows do not matter (the cluster shares B only); float32 counts 4 bytes.
    EXPECT_EQ(preferred_cluster_m(problem(1, 2552, 10624, 7616, "bfloat16", "mm", "tn")), 1);
    EXPECT_EQ(preferred_cluster_m(problem(1, 512, 32, 2048, "float32")), 1);
    EXPECT_EQ(preferred_cluster_m(problem(1, 512, 40, 2048, "float32")), 2);
    EXPECT_EQ(preferred_cluster_m(problem(4, 256, 80, 1024, "bfloat16", "bmm")), 2);
    // Small problems stay unclustered: too few rows of tiles, or too short a k-loop.
    EXPECT_EQ(preferred_cluster_m(problem(1, 1376, 80, 216, "bfloat16")), 1);
    EXPECT_EQ(preferred_cluster_m(problem(1, 128, 10616, 7616, "bfloat16")), 1);
}

TEST(CudaKernelSpec, SplitTailSpreadsTheLastWaveOverIdleSms) {
    // 2552 x 10616 in 256 x 128 tiles: 830 = 6 waves of 132 + 38; the 38 split in 3
    // (132 / 38), 119 k-tiles of 64: 792 whole tiles, then 114 parts, all on 132 CTAs.
    TilePlan p = plan_tiles(830, 119, 132, true);
    EXPECT_EQ(p.splits, 3);
    EXPECT_EQ(p.split_from, 792);
    EXPECT_EQ(p.units, 792 + 38 * 3);
    EXPECT_EQ(p.split_tiles(), 38);
    EXPECT_EQ(p.grid, 132);
    // Fewer tiles than SMs (256 x 4096 in 128 x 128: 64): all split, one part per CTA,
    // at most kMaxTailSplits parts.
    p = plan_tiles(64, 64, 132, true);
    EXPECT_EQ(p.splits, 2);
    EXPECT_EQ(p.split_from, 0);
    EXPECT_EQ(p.grid, 128);
    p = plan_tiles(16, 64, 132, true);
    EXPECT_EQ(p.splits, kMaxTailSplits);
    EXPECT_EQ(p.grid, 16 * kMaxTailSplits);
    // Parts keep at least kMinKTilesPerSplit k-tiles: K = 216 in 64-deep tiles is 4.
    p = plan_tiles(11, 4, 132, true);
    EXPECT_EQ(p.splits, 1);
    EXPECT_EQ(p.split_tiles(), 0);
    EXPECT_EQ(p.units, 11);
    EXPECT_EQ(p.split_from, 11);
    EXPECT_EQ(p.grid, 11);
    EXPECT_EQ(plan_tiles(11, 8, 132, true).splits, 2);
    EXPECT_EQ(plan_tiles(11, 4, 132, true, 1).splits, 4);
    // A nearly full last wave (120 of 132) or full waves: nothing to split.
    EXPECT_EQ(plan_tiles(252, 119, 132, true).splits, 1);
    EXPECT_EQ(plan_tiles(264, 119, 132, true).splits, 1);
    EXPECT_EQ(plan_tiles(264, 119, 132, true).grid, 132);
    // Off: the plain grid.
    p = plan_tiles(830, 119, 132, false);
    EXPECT_EQ(p.splits, 1);
    EXPECT_EQ(p.units, 830);
    EXPECT_EQ(p.grid, 132);
    // The one-tile-per-CTA template allows more parts: 8 tiles of a 4096-deep K in 128-deep
    // k-tiles split in 8 (k-tiles / 4), 3 tiles of K = 16384 in 16 (its bound), on 132 SMs;
    // the wgmma kernel stops at kMaxTailSplits.
    const Problem few = problem(1, 110, 106, 4096, "bfloat16");
    const KernelSpec mma = make_spec(config(64, 32, 128, 5, 4), few);
    ASSERT_EQ(mma.math, MathPath::mma16);
    EXPECT_EQ(max_tail_splits(mma), kMaxTailSplitsOneTilePerCta);
    EXPECT_EQ(plan_tiles(8, 32, 132, true, kMinKTilesPerSplit, max_tail_splits(mma)).splits, 8);
    EXPECT_EQ(plan_tiles(3, 128, 132, true, kMinKTilesPerSplit, max_tail_splits(mma)).splits, 16);
    // split_k_plan: all tiles split when there are fewer than SMs, never a tail of a
    // larger problem (the template runs several CTAs per SM; its waves are not the SMs).
    EXPECT_EQ(split_k_plan(8, 32, 132).splits, 8);
    EXPECT_EQ(split_k_plan(8, 32, 132).split_from, 0);
    EXPECT_EQ(split_k_plan(8, 32, 132, kMinKTilesPerSplit, 4).splits, 4);
    EXPECT_EQ(split_k_plan(128, 64, 132).splits, 1);
    EXPECT_EQ(split_k_plan(140, 64, 132).splits, 1);
    EXPECT_EQ(split_k_plan(60, 7, 132).splits, 1);
    KernelSpec wgmma = make_spec(config(128, 128, 64, 4, 4), problem(1, 128, 256, 16384, "bfloat16"));
    ASSERT_TRUE(select_wgmma(wgmma, kH100, 1, true));
    EXPECT_EQ(max_tail_splits(wgmma), kMaxTailSplits);
    EXPECT_EQ(plan_tiles(2, 256, 132, true, kMinKTilesPerSplit, max_tail_splits(wgmma)).splits, kMaxTailSplits);
}

TEST(CudaKernelSpec, DynamicTilesArePersistentOnly) {
    const auto p = problem(1, 2552, 10616, 7616, "bfloat16");
    const auto mma = make_spec(config(256, 128, 64, 4, 8), p);
    auto stat = mma, dyn = mma;
    ASSERT_TRUE(select_wgmma(stat, kH100, 1, true, false));
    ASSERT_TRUE(select_wgmma(dyn, kH100, 1, true, true));
    EXPECT_TRUE(dyn.persistent);
    EXPECT_TRUE(dyn.dynamic_tiles);
    EXPECT_FALSE(stat.dynamic_tiles);
    EXPECT_NE(spec_key(dyn), spec_key(stat));
    EXPECT_NE(kernel_prelude(dyn).find("#define MMT_DYNAMIC_TILES 1\n"), std::string::npos);
    EXPECT_NE(kernel_prelude(stat).find("#define MMT_DYNAMIC_TILES 0\n"), std::string::npos);
    EXPECT_EQ(spec_name(dyn), "bf16_mm_nn_256x128x64_g8_s4_w8_v8.8.2_wgmma_pd");
    // Two tile ids and their two mbarrier pairs on top of the static schedule's bytes.
    EXPECT_EQ(shared_bytes(dyn), shared_bytes(stat) + 48);
    // The 128 x 256 x 64 s4 w8 leader still fits persistent with them.
    auto wide = make_spec(config(128, 256, 64, 4, 8), p);
    ASSERT_TRUE(select_wgmma(wide, kH100, 1, true, true));
    EXPECT_TRUE(wide.persistent && wide.dynamic_tiles);
    EXPECT_LE(shared_bytes(wide), kH100.max_shared_bytes);
    // No persistence, no dynamic tiles: one tile per CTA, clusters, and specs whose stages
    // leave no room for the C buffer.
    auto one_tile = mma;
    ASSERT_TRUE(select_wgmma(one_tile, kH100, 1, false, true));
    EXPECT_FALSE(one_tile.dynamic_tiles);
    EXPECT_NE(kernel_prelude(one_tile).find("#define MMT_DYNAMIC_TILES 0\n"), std::string::npos);
    auto clustered = mma;
    ASSERT_TRUE(select_wgmma(clustered, kH100, 2, true, true));
    EXPECT_FALSE(clustered.persistent || clustered.dynamic_tiles);
    auto full = make_spec(config(128, 128, 64, 7, 4), p);
    ASSERT_TRUE(select_wgmma(full, kH100, 1, true, true));
    EXPECT_FALSE(full.persistent || full.dynamic_tiles);
    auto full_one_tile = make_spec(config(128, 128, 64, 7, 4), p);
    ASSERT_TRUE(select_wgmma(full_one_tile, kH100));
    EXPECT_EQ(shared_bytes(full), shared_bytes(full_one_tile));
}

}  // namespace
}  // namespace mmt::collect::cuda
