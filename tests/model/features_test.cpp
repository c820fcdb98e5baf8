#include "matmul_toolkit/model/features.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <gtest/gtest.h>

#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::model {
namespace {

std::map<std::string, float> named(const std::vector<float>& values) {
    std::map<std::string, float> out;
    for (std::size_t i = 0; i < values.size(); ++i) out[feature_names()[i]] = values[i];
    return out;
}

core::GemmConfig config(int bm, int bn, int bk, int group, int stages, int warps) {
    core::GemmConfig c;
    c.block_m = bm;
    c.block_n = bn;
    c.block_k = bk;
    c.group_m = group;
    c.num_stages = stages;
    c.num_warps = warps;
    return c;
}

TEST(Features, NamesSplitIntoProblemAndConfigParts) {
    EXPECT_EQ(num_features(), feature_names().size());
    EXPECT_EQ(num_problem_features() + num_config_features(), num_features());
    EXPECT_EQ(feature_names().front(), "op_mm");
    EXPECT_EQ(feature_names()[num_problem_features()], "log2_block_m");
}

// addmm, layout nt, B=1 M=100 N=200 K=300 float16; config 64x128x32, group 8, 3 stages,
// 4 warps, on a 132-SM GPU. Every value below is worked out by hand from those numbers.
TEST(Features, AddmmTransposedBMatchesHandComputedValues) {
    const auto shape = core::make_shape(1, 100, 200, 300, "float16");
    auto f = named(compute_features("addmm_nt", shape, config(64, 128, 32, 8, 3, 4), 132));

    EXPECT_EQ(f["op_mm"], 0.0f);
    EXPECT_EQ(f["op_addmm"], 1.0f);
    EXPECT_EQ(f["op_bmm"], 0.0f);
    EXPECT_EQ(f["a_transposed"], 0.0f);
    EXPECT_EQ(f["b_transposed"], 1.0f);
    EXPECT_EQ(f["dtype_size"], 2.0f);
    EXPECT_EQ(f["dtype_float16"], 1.0f);
    EXPECT_EQ(f["dtype_bfloat16"], 0.0f);
    EXPECT_EQ(f["dtype_float32"], 0.0f);
    EXPECT_FLOAT_EQ(f["log2_B"], 0.0f);
    EXPECT_FLOAT_EQ(f["log2_M"], 6.6438562f);
    EXPECT_FLOAT_EQ(f["log2_N"], 7.6438562f);
    EXPECT_FLOAT_EQ(f["log2_K"], 8.2288189f);
    // flops 2·100·200·300 = 12,000,000
    EXPECT_FLOAT_EQ(f["log2_flops"], static_cast<float>(std::log2(12000000.0)));
    // bytes 2·(100·300 + 300·200 + 100·200) + 2·200 (bias row) = 220,400
    EXPECT_FLOAT_EQ(f["log2_bytes"], static_cast<float>(std::log2(220400.0)));
    EXPECT_FLOAT_EQ(f["log2_arithmetic_intensity"], static_cast<float>(std::log2(12000000.0 / 220400.0)));

    EXPECT_FLOAT_EQ(f["log2_block_m"], 6.0f);
    EXPECT_FLOAT_EQ(f["log2_block_n"], 7.0f);
    EXPECT_FLOAT_EQ(f["log2_block_k"], 5.0f);
    EXPECT_FLOAT_EQ(f["log2_group_m"], 3.0f);
    EXPECT_FLOAT_EQ(f["num_stages"], 3.0f);
    EXPECT_FLOAT_EQ(f["log2_num_warps"], 2.0f);
    EXPECT_EQ(f["even_k"], 0.0f);
    EXPECT_EQ(f["allow_tf32"], 0.0f);
    // tiles ceil(100/64)·ceil(200/128) = 2·2 = 4; waves 4/132
    EXPECT_FLOAT_EQ(f["log2_tiles"], 2.0f);
    EXPECT_FLOAT_EQ(f["log2_waves"], static_cast<float>(std::log2(4.0 / 132.0)));
    EXPECT_FLOAT_EQ(f["last_wave_utilisation"], 4.0f / 132.0f);
    // padded output 128·256 = 32768 for 20000 useful elements
    EXPECT_FLOAT_EQ(f["mn_padding_waste"], 1.0f - 20000.0f / 32768.0f);
    // K: 10 iterations of 32 = 320 for 300
    EXPECT_FLOAT_EQ(f["k_padding_waste"], 0.0625f);
    EXPECT_FLOAT_EQ(f["log2_k_iterations"], static_cast<float>(std::log2(10.0)));
    // (64 + 128)·32·3 stages·2 bytes = 36864
    EXPECT_FLOAT_EQ(f["log2_smem_bytes_per_cta"], static_cast<float>(std::log2(36864.0)));
    // 2·128·256·320 = 20,971,520 = 1.25·2^24
    EXPECT_FLOAT_EQ(f["log2_padded_flops"], static_cast<float>(24.0 + std::log2(1.25)));
    // A's rows (K = 300 halves, 600 bytes) and B's (transposed: K too) are 8-byte aligned:
    // 4 elements a load, and cp.async copies them (no loads staged in registers)
    EXPECT_FLOAT_EQ(f["log2_a_row_alignment"], 3.0f);
    EXPECT_FLOAT_EQ(f["log2_b_row_alignment"], 3.0f);
    EXPECT_FLOAT_EQ(f["log2_loads_per_thread"], static_cast<float>(std::log2(48.0)));  // (64 + 128)·32 / 128
    EXPECT_FLOAT_EQ(f["log2_load_instructions_per_thread"], static_cast<float>(std::log2(12.0)));  // 48 / 4
    EXPECT_FLOAT_EQ(f["log2_staged_load_registers"], 0.0f);
    // 4 tiles, 4 CTAs an SM (registers: 4 warps of 64 + 40): one round of 10 K steps
    EXPECT_FLOAT_EQ(f["log2_serial_iterations"], static_cast<float>(std::log2(10.0)));
}

// mm bfloat16 321x241x3241: A's rows are 6482 bytes apart, B's 482: both only 2-byte
// aligned, so every element is its own load and the loads go through registers, num_stages - 1
// K steps ahead.
TEST(Features, MisalignedRowsLoadElementByElement) {
    const auto shape = core::make_shape(1, 321, 241, 3241, "bfloat16");
    auto f = named(compute_features("mm", shape, config(64, 64, 128, 8, 5, 4), 132));
    EXPECT_FLOAT_EQ(f["log2_a_row_alignment"], 1.0f);
    EXPECT_FLOAT_EQ(f["log2_b_row_alignment"], 1.0f);
    // (64·128 + 128·64) / 128 threads, one element each
    EXPECT_FLOAT_EQ(f["log2_loads_per_thread"], 7.0f);
    EXPECT_FLOAT_EQ(f["log2_load_instructions_per_thread"], 7.0f);
    // 16384 elements · 4 stages ahead · 2 bytes / 4 bytes a register / 128 threads = 256, plus 1
    EXPECT_FLOAT_EQ(f["log2_staged_load_registers"], static_cast<float>(std::log2(257.0)));
    // 6·4 = 24 tiles, one CTA an SM (160 KiB of shared memory): one round of 26 K steps
    EXPECT_FLOAT_EQ(f["log2_serial_iterations"], static_cast<float>(std::log2(26.0)));
    // One stage loads nothing ahead.
    auto single = named(compute_features("mm", shape, config(64, 64, 128, 8, 1, 4), 132));
    EXPECT_FLOAT_EQ(single["log2_staged_load_registers"], 0.0f);
    // With 4 SMs the 24 tiles take 6 rounds.
    auto few_sms = named(compute_features("mm", shape, config(64, 64, 128, 8, 5, 4), 4));
    EXPECT_FLOAT_EQ(few_sms["log2_serial_iterations"], static_cast<float>(std::log2(6.0 * 26.0)));
}

// The vendor row (aten_bmm) sees the problem through inputs of its own; kernel rows see zeros there.
TEST(Features, VendorFeaturesDescribeTheProblemOnTheVendorRowAlone) {
    const auto shape = core::make_shape(2, 32, 255, 4096, "bfloat16");
    collect::Problem problem;
    problem.op = "bmm";
    problem.layout = "nn";
    problem.shape = shape;
    const auto vendor = named(compute_features("bmm", shape, collect::reference_config(problem), 132));
    const auto kernel = named(compute_features("bmm", shape, config(32, 64, 128, 8, 3, 4), 132));
    std::size_t vendor_features = 0;
    for (std::size_t i = 0; i < num_features(); ++i) {
        if (!is_vendor_feature(i)) continue;
        ++vendor_features;
        EXPECT_EQ(kernel.at(feature_names()[i]), 0.0f) << feature_names()[i];
    }
    EXPECT_EQ(vendor_features, num_problem_features() + 7);
    EXPECT_EQ(vendor.at("vendor"), 1.0f);
    for (std::size_t i = 0; i < num_problem_features(); ++i) {
        const std::string& name = feature_names()[i];
        EXPECT_EQ(vendor.at("vendor_" + name), vendor.at(name)) << name;
    }
    // B's rows are 255 · 2 bytes apart: only 2-byte aligned. A's (4096 · 2 bytes) are aligned.
    EXPECT_EQ(vendor.at("vendor_b_rows_unaligned_bfloat16"), 1.0f);
    EXPECT_EQ(vendor.at("vendor_b_rows_unaligned_float16"), 0.0f);
    EXPECT_EQ(vendor.at("vendor_a_rows_unaligned_bfloat16"), 0.0f);
    EXPECT_FALSE(is_vendor_feature(num_problem_features()));
}

// bmm B=4 M=N=K=256 bfloat16, layout tn, 128x128x64, evenly dividing, 8 SMs: 4·2·2 = 16
// tiles in exactly two waves, nothing padded.
TEST(Features, BmmFullWavesHaveNoWaste) {
    const auto shape = core::make_shape(4, 256, 256, 256, "bfloat16");
    auto c = config(128, 128, 64, 8, 4, 8);
    c.even_k = true;
    auto f = named(compute_features("bmm_tn", shape, c, 8));
    EXPECT_EQ(f["op_bmm"], 1.0f);
    EXPECT_EQ(f["a_transposed"], 1.0f);
    EXPECT_EQ(f["b_transposed"], 0.0f);
    EXPECT_EQ(f["dtype_bfloat16"], 1.0f);
    EXPECT_FLOAT_EQ(f["log2_B"], 2.0f);
    EXPECT_FLOAT_EQ(f["log2_tiles"], 4.0f);
    EXPECT_FLOAT_EQ(f["log2_waves"], 1.0f);
    EXPECT_FLOAT_EQ(f["last_wave_utilisation"], 1.0f);
    EXPECT_FLOAT_EQ(f["mn_padding_waste"], 0.0f);
    EXPECT_FLOAT_EQ(f["k_padding_waste"], 0.0f);
    EXPECT_FLOAT_EQ(f["log2_k_iterations"], 2.0f);
    EXPECT_EQ(f["even_k"], 1.0f);
    // bytes: 2·4·(3·65536) = 1,572,864; flops 2·4·256³ = 134,217,728
    EXPECT_FLOAT_EQ(f["log2_arithmetic_intensity"], static_cast<float>(std::log2(134217728.0 / 1572864.0)));
}

TEST(Features, OccupancyFeaturesFollowHopperLimits) {
    // 128x128x64, 3 stages, 4 warps, float16 on 132 SMs; M = N = 1024: 64 tiles.
    auto f = named(compute_features("mm", core::make_shape(1, 1024, 1024, 1024, "float16"),
                                    config(128, 128, 64, 8, 3, 4), 132));
    EXPECT_FLOAT_EQ(f["log2_accumulators_per_thread"], 7.0f);  // 128·128 / 128 threads
    EXPECT_FLOAT_EQ(f["log2_tile_intensity"], 7.0f);           // 2·128·128 / 256
    // (128 + 128)·64·3·2 bytes = 96 KiB of 227 KiB
    EXPECT_FLOAT_EQ(f["smem_fraction"], 96.0f / 227.0f);
    // shared memory allows 2 CTAs (228 KiB / 96 KiB), warps 16, registers 3: 2
    EXPECT_FLOAT_EQ(f["log2_ctas_per_sm"], 1.0f);
    EXPECT_NEAR(f["log2_resident_waves"], std::log2(64.0 / (132.0 * 2.0)), 1e-6);
    // 8 warps of (128 + 40) registers a thread: registers hold one CTA per SM
    auto big = named(compute_features("mm", core::make_shape(1, 1024, 1024, 1024, "float16"),
                                      config(256, 128, 32, 8, 2, 8), 132));
    EXPECT_FLOAT_EQ(big["log2_accumulators_per_thread"], 7.0f);
    EXPECT_FLOAT_EQ(big["log2_ctas_per_sm"], 0.0f);
}

TEST(Features, Float32UsesFourBytesAndTf32Flag) {
    const auto shape = core::make_shape(1, 64, 64, 64, "float32");
    auto c = config(32, 32, 16, 1, 1, 1);
    c.allow_tf32 = true;
    auto f = named(compute_features("mm", shape, c, 1));
    EXPECT_EQ(f["dtype_size"], 4.0f);
    EXPECT_EQ(f["dtype_float32"], 1.0f);
    EXPECT_EQ(f["allow_tf32"], 1.0f);
    EXPECT_FLOAT_EQ(f["log2_group_m"], 0.0f);
    // (32 + 32)·16·1·4 = 4096
    EXPECT_FLOAT_EQ(f["log2_smem_bytes_per_cta"], 12.0f);
    // one core: 4 tiles are 4 waves
    EXPECT_FLOAT_EQ(f["log2_waves"], 2.0f);
}

TEST(Features, ProblemPartIsSharedByEveryConfig) {
    const auto shape = core::make_shape(1, 300, 500, 700, "float16");
    const ProblemFeatures problem("mm", shape, 132);
    std::vector<float> a(num_features()), b(num_features());
    problem.write(config(64, 64, 32, 8, 3, 4), a.data());
    problem.write(config(128, 32, 64, 4, 2, 8), b.data());
    for (std::size_t i = 0; i < num_problem_features(); ++i) EXPECT_EQ(a[i], b[i]) << feature_names()[i];
    EXPECT_NE(a[num_problem_features()], b[num_problem_features()]);
}

TEST(Features, RejectsBadInput) {
    EXPECT_THROW(compute_features("mm", core::make_shape(1, 0, 8, 8, "float16"), config(16, 16, 16, 1, 1, 1), 1),
                 core::InputError);
    EXPECT_THROW(compute_features("conv", core::make_shape(1, 8, 8, 8, "float16"), config(16, 16, 16, 1, 1, 1), 1),
                 core::InputError);
    EXPECT_THROW(compute_features("mm", core::make_shape(1, 8, 8, 8, "float16"), config(0, 16, 16, 1, 1, 1), 1),
                 core::InputError);
    EXPECT_THROW(compute_features("mm", core::make_shape(1, 8, 8, 8, "float16"), config(16, 16, 16, 1, 1, 1), 0),
                 core::InputError);
}

// The per-space fast path must compute what ProblemFeatures::write computes for each config
// as Inductor sets it for the problem (EVEN_K from K, ALLOW_TF32 for float32 when allowed).
TEST(SpaceFeatures, MatchPerConfigFeaturesOfTheSpecialisedConfigs) {
    const auto configs = collect::exhaustive_configs();
    const SpaceFeatures space(configs);
    ASSERT_EQ(space.size(), configs.size());
    struct Case {
        const char* op_key;
        core::MMShape shape;
        int units;
        bool allow_tf32;
    };
    const Case cases[] = {{"mm", core::make_shape(1, 4096, 4096, 1024, "float16"), 132, false},
                          {"addmm_nt", core::make_shape(1, 100, 200, 300, "bfloat16"), 114, false},
                          {"bmm_tn", core::make_shape(12, 77, 1, 4097, "float32"), 132, true},
                          {"mm", core::make_shape(1, 1, 50000, 64, "float32"), 1, false},
                          {"mm_tt", core::make_shape(1, 321, 241, 3241, "bfloat16"), 132, false}};
    const std::size_t width = num_config_features();
    for (const auto& c : cases) {
        const ProblemFeatures problem(c.op_key, c.shape, c.units);
        std::vector<float> fast(configs.size() * width);
        space.write_config_part(problem, c.allow_tf32, fast.data());
        collect::Problem p;
        std::tie(p.op, p.layout) = core::parse_op_key(c.op_key);
        p.shape = c.shape;
        std::vector<float> row(num_features());
        for (std::size_t i = 0; i < configs.size(); ++i) {
            problem.write(collect::specialize_config(configs[i], p, c.allow_tf32), row.data());
            for (std::size_t j = 0; j < width; ++j) {
                const float expected = row[num_problem_features() + j];
                ASSERT_NEAR(fast[i * width + j], expected, 1e-5f * std::max(1.0f, std::abs(expected)))
                    << c.op_key << " config " << i << " feature " << feature_names()[num_problem_features() + j];
            }
        }
    }
}

TEST(SpaceFeatures, ConfigOnlyFeaturesDoNotDependOnTheProblem) {
    const std::vector<core::GemmConfig> configs{config(32, 64, 16, 8, 3, 4), config(128, 16, 128, 4, 1, 8)};
    const SpaceFeatures space(configs);
    const ProblemFeatures small("mm", core::make_shape(1, 8, 8, 8, "float32"), 1);
    const ProblemFeatures large("bmm_tt", core::make_shape(7, 5000, 3000, 999, "bfloat16"), 132);
    std::vector<float> a(configs.size() * num_config_features()), b(a.size());
    space.write_config_part(small, false, a.data());
    space.write_config_part(large, true, b.data());
    std::size_t config_only = 0;
    for (std::size_t j = 0; j < num_features(); ++j) {
        if (!is_config_only_feature(j)) continue;
        ++config_only;
        ASSERT_GE(j, num_problem_features());
        for (std::size_t i = 0; i < configs.size(); ++i) {
            const std::size_t at = i * num_config_features() + (j - num_problem_features());
            EXPECT_EQ(a[at], b[at]) << feature_names()[j];
        }
    }
    EXPECT_EQ(config_only, 9u);
    EXPECT_FALSE(is_config_only_feature(0));
    EXPECT_THROW(SpaceFeatures({config(16, 16, 0, 8, 1, 4)}), core::InputError);
}

TEST(Hardware, SmCountsByGpuName) {
    EXPECT_EQ(lookup_hardware("NVIDIA H100 80GB HBM3").parallel_units, 132);
    EXPECT_EQ(lookup_hardware("NVIDIA H100 PCIe").parallel_units, 114);
    EXPECT_EQ(lookup_hardware("NVIDIA H200").parallel_units, 132);
    EXPECT_EQ(lookup_hardware("NVIDIA A100-SXM4-80GB").parallel_units, 108);
    EXPECT_EQ(lookup_hardware("NVIDIA L40S").parallel_units, 142);
    EXPECT_EQ(lookup_hardware("NVIDIA GeForce RTX 4090").parallel_units, 128);
    EXPECT_EQ(lookup_hardware("NVIDIA A10G").parallel_units, 80);
    EXPECT_EQ(lookup_hardware("NVIDIA L4").parallel_units, 58);
    EXPECT_TRUE(lookup_hardware("NVIDIA H200").is_gpu);
}

TEST(Hardware, UnknownGpuAndCpuFallBackToDocumentedDefaults) {
    const auto unknown = lookup_hardware("NVIDIA Future GPU");
    EXPECT_TRUE(unknown.is_gpu);
    EXPECT_GT(unknown.parallel_units, 0);
    const auto cpu = lookup_hardware("AMD EPYC 9654 96-Core Processor");
    EXPECT_FALSE(cpu.is_gpu);
    EXPECT_EQ(cpu.parallel_units, kCpuParallelUnits);
}

}  // namespace
}  // namespace mmt::model
