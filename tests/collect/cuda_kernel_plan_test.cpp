// The kernel plan: which kernels a collection needs, distinct, runnable, in order of use.
// Pure host code: no device, no compiler.

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "cuda/kernel_plan.hpp"
#include "cuda_test_support.hpp"
#include "matmul_toolkit/collect/config_space.hpp"

namespace mmt::collect::cuda {
namespace {

using test::problem;
using test::config;

// What the CUDA backend does per config: make_spec, then the prune rule.
RunnableSpec rule(const DeviceLimits& limits = {}) {
    return [limits](const core::GemmConfig& c, const Problem& p) -> std::optional<KernelSpec> {
        KernelSpec s = make_spec(c, p);
        if (unsupported_reason(s, limits)) return std::nullopt;
        return s;
    };
}

ConfigsForProblem fixed(const std::vector<core::GemmConfig>& configs) {
    return [configs](const Problem& p) { return specialize_configs(configs, p, false); };
}

std::string key(const core::GemmConfig& c, const Problem& p) { return spec_key(make_spec(specialize_config(c, p, false), p)); }

TEST(CudaKernelPlan, OneKernelPerDistinctSpecInOrderOfFirstUse) {
    const std::vector<core::GemmConfig> configs{config(64, 64, 32, 3, 4), config(128, 128, 64, 3, 4)};
    // p1 and p3 share every spec (same dtype, op, layout, alignment, K mod block_k);
    // p2 differs in alignment (N odd), p4 in dtype.
    const Problem p1 = problem(1, 512, 512, 512), p2 = problem(1, 512, 511, 512), p3 = problem(1, 1024, 256, 1024),
                  p4 = problem(1, 512, 512, 512, "float16");
    const auto specs = plan_kernel_specs({p1, p2, p3, p4}, fixed(configs), rule(), 100);
    ASSERT_EQ(specs.size(), 6u);
    const std::vector<std::string> expected{key(configs[0], p1), key(configs[1], p1), key(configs[0], p2),
                                            key(configs[1], p2), key(configs[0], p4), key(configs[1], p4)};
    for (std::size_t i = 0; i < specs.size(); ++i) EXPECT_EQ(spec_key(specs[i]), expected[i]) << i;
    EXPECT_EQ(specs[2].align.vec_b, 1);  // N = 511: element loads of B
    EXPECT_EQ(specs[0].align.vec_b, 8);
}

TEST(CudaKernelPlan, EvenKIsItsOwnKernel) {
    const std::vector<core::GemmConfig> configs{config(64, 64, 64, 3, 4)};
    // K = 512 is a multiple of block_k 64 (EVEN_K), K = 520 is not; both keep 16-byte loads.
    const auto specs = plan_kernel_specs({problem(1, 256, 256, 512), problem(1, 256, 256, 520)}, fixed(configs),
                                         rule(), 100);
    ASSERT_EQ(specs.size(), 2u);
    EXPECT_TRUE(specs[0].even_k);
    EXPECT_FALSE(specs[1].even_k);
}

TEST(CudaKernelPlan, BmmSharesTheMmKernel) {
    const std::vector<core::GemmConfig> configs{config(64, 64, 32, 2, 4)};
    const auto specs = plan_kernel_specs({problem(1, 256, 256, 256), problem(4, 256, 256, 256, "bfloat16", "bmm")},
                                         fixed(configs), rule(), 100);
    EXPECT_EQ(specs.size(), 1u);
}

TEST(CudaKernelPlan, PrunedConfigsAreLeftOut) {
    // 100 KiB of shared memory: 128x128x64 with 4 stages of bf16 (128 KiB) cannot run,
    // 64x64x32 with 2 stages (16 KiB) can; a 16x16 tile has no 8-warp layout.
    DeviceLimits small;
    small.max_shared_bytes = 100 * 1024;
    const std::vector<core::GemmConfig> configs{config(128, 128, 64, 4, 4), config(64, 64, 32, 2, 4),
                                                config(16, 16, 16, 1, 8)};
    const Problem p = problem(1, 512, 512, 512);
    const auto specs = plan_kernel_specs({p}, fixed(configs), rule(small), 100);
    ASSERT_EQ(specs.size(), 1u);
    EXPECT_EQ(specs[0].block_m, 64);
    // The same configs on a device with the H100's limit keep the big tile.
    EXPECT_EQ(plan_kernel_specs({p}, fixed(configs), rule(), 100).size(), 2u);
}

TEST(CudaKernelPlan, StopsAtTheCap) {
    const auto configs = default_configs();
    const std::vector<Problem> problems{problem(1, 512, 512, 512), problem(1, 333, 257, 391)};
    const auto all = plan_kernel_specs(problems, fixed(configs), rule(), 100000);
    ASSERT_GT(all.size(), 5u);
    const auto capped = plan_kernel_specs(problems, fixed(configs), rule(), 5);
    ASSERT_EQ(capped.size(), 5u);
    for (std::size_t i = 0; i < capped.size(); ++i) EXPECT_EQ(spec_key(capped[i]), spec_key(all[i]));
}

TEST(CudaKernelPlan, DefaultConfigsOverManyProblemsAreDistinct) {
    std::vector<Problem> problems;
    for (int i = 0; i < 40; ++i)
        problems.push_back(problem(1, 100 + 37 * i, 64 + 29 * i, 48 + 41 * i, i % 2 ? "float16" : "bfloat16",
                                   i % 3 == 0 ? "addmm" : "mm", i % 4 == 0 ? "nt" : "nn"));
    const auto specs = plan_kernel_specs(problems, fixed(default_configs()), rule(), 100000);
    std::set<std::string> keys;
    for (const auto& s : specs) EXPECT_TRUE(keys.insert(spec_key(s)).second) << spec_name(s);
    // Every kernel any problem needs is planned.
    for (const auto& p : problems)
        for (const auto& c : specialize_configs(default_configs(), p, false))
            if (!unsupported_reason(make_spec(c, p), DeviceLimits{}))
                EXPECT_EQ(keys.count(spec_key(make_spec(c, p))), 1u);
}

TEST(CudaKernelPlan, AProblemThatThrowsIsSkipped) {
    const std::vector<core::GemmConfig> configs{config(64, 64, 32, 2, 4)};
    const ConfigsForProblem configs_for = [&](const Problem& p) -> std::vector<core::GemmConfig> {
        if (p.shape.M == 13) throw std::runtime_error("no configs for this one");
        return specialize_configs(configs, p, false);
    };
    const auto specs = plan_kernel_specs({problem(1, 13, 64, 64), problem(1, 64, 64, 64, "float16")}, configs_for,
                                         rule(), 100);
    ASSERT_EQ(specs.size(), 1u);
    EXPECT_EQ(specs[0].dtype, "float16");
}

}  // namespace
}  // namespace mmt::collect::cuda
