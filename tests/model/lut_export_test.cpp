// Lookup-table writers: Inductor's key format and value entries, torch-diode's Table.

#include "matmul_toolkit/model/lut_export.hpp"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <tuple>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::model {
namespace {

core::GemmConfig tile(int bm, int bn, int bk, int stages, int warps, bool even_k) {
    core::GemmConfig c;
    c.name = "mm_config";
    c.block_m = bm;
    c.block_n = bn;
    c.block_k = bk;
    c.num_stages = stages;
    c.num_warps = warps;
    c.even_k = even_k;
    return c;
}

RankedProblem problem(const std::string& op, std::int64_t b, std::int64_t m, std::int64_t n,
                      std::int64_t k, const std::string& dtype = "float16") {
    RankedProblem p;
    p.hardware = "NVIDIA H100 80GB HBM3";
    p.op = op;
    p.shape = core::make_shape(b, m, n, k, dtype);
    p.configs = {{tile(128, 64, 32, 3, 4, true), 0.5}, {tile(64, 64, 64, 2, 4, false), 0.7}};
    return p;
}

TEST(InductorKey, MmRowMajorOperands) {
    // A [M, K] with stride [K, 1], B [K, N] with stride [N, 1], as Python prints the tuple.
    EXPECT_EQ(inductor_input_key("mm", core::make_shape(1, 64, 256, 128, "float16")),
              "((torch.float16, [64, 128], [128, 1]), (torch.float16, [128, 256], [256, 1]))");
    EXPECT_EQ(inductor_lookup_key("mm", core::make_shape(1, 64, 256, 128, "float16"), ""),
              "((torch.float16, [64, 128], [128, 1]), (torch.float16, [128, 256], [256, 1]))+mm");
}

TEST(InductorKey, TransposedLayoutsUseColumnMajorStrides) {
    // mm_tn: A is the transpose of a contiguous [K, M]; B row-major.
    EXPECT_EQ(inductor_input_key("mm_tn", core::make_shape(1, 64, 256, 128, "bfloat16")),
              "((torch.bfloat16, [64, 128], [1, 64]), (torch.bfloat16, [128, 256], [256, 1]))");
    // mm_nt: B is the transpose of a contiguous [N, K] (a Linear weight).
    EXPECT_EQ(inductor_input_key("mm_nt", core::make_shape(1, 64, 256, 128, "bfloat16")),
              "((torch.bfloat16, [64, 128], [128, 1]), (torch.bfloat16, [128, 256], [1, 128]))");
}

TEST(InductorKey, AddmmPutsTheExpandedBiasFirstAndItsScalars) {
    EXPECT_EQ(inductor_lookup_key("addmm", core::make_shape(1, 128, 256, 64, "float16"), "NVIDIA H100"),
              "NVIDIA H100+((torch.float16, [128, 256], [0, 1]), (torch.float16, [128, 64], [64, 1]), "
              "(torch.float16, [64, 256], [256, 1]))+alpha=1&beta=1+addmm");
}

TEST(InductorKey, BmmHasBatchedOperands) {
    EXPECT_EQ(inductor_lookup_key("bmm", core::make_shape(4, 32, 48, 16, "float32"), ""),
              "((torch.float32, [4, 32, 16], [512, 16, 1]), (torch.float32, [4, 16, 48], [768, 48, 1]))+bmm");
    EXPECT_EQ(inductor_input_key("bmm_tt", core::make_shape(4, 32, 48, 16, "float32")),
              "((torch.float32, [4, 32, 16], [512, 1, 32]), (torch.float32, [4, 16, 48], [768, 1, 16]))");
}

TEST(InductorKey, TemplateIds) {
    EXPECT_EQ(inductor_template_id("mm"), "triton::mm");
    EXPECT_EQ(inductor_template_id("addmm_nt"), "triton::mm");
    EXPECT_EQ(inductor_template_id("bmm"), "triton::bmm");
}

TEST(InductorLut, ParsesAndHoldsTemplateConfigsInRankOrder) {
    const auto text = inductor_lut_json({problem("mm", 1, 64, 256, 128), problem("bmm", 2, 32, 32, 32)});

    const auto table = nlohmann::json::parse(text);

    ASSERT_EQ(table.size(), 2u);
    const auto key = "((torch.float16, [64, 128], [128, 1]), (torch.float16, [128, 256], [256, 1]))+mm";
    ASSERT_TRUE(table.contains(key)) << text;
    const auto& entries = table.at(key);
    // The two configs, then ATen: a list Inductor benchmarks keeps its extern fallback.
    ASSERT_EQ(entries.size(), 3u);
    EXPECT_EQ(entries[2], nlohmann::json({{"template_id", "aten::mm"}}));
    const auto& first = entries[0];
    EXPECT_EQ(first.at("template_id"), "triton::mm");
    EXPECT_EQ(first.at("BLOCK_M"), 128);
    EXPECT_EQ(first.at("BLOCK_N"), 64);
    EXPECT_EQ(first.at("BLOCK_K"), 32);
    EXPECT_EQ(first.at("GROUP_M"), 8);
    EXPECT_EQ(first.at("num_stages"), 3);
    EXPECT_EQ(first.at("num_warps"), 4);
    EXPECT_EQ(first.at("EVEN_K"), true);
    EXPECT_FALSE(first.contains("ALLOW_TF32"));  // Inductor sets it; a second value collides
    EXPECT_EQ(first.at("USE_FAST_ACCUM"), false);
    EXPECT_EQ(first.at("ACC_TYPE"), "tl.float32");
    EXPECT_EQ(entries[1].at("BLOCK_K"), 64);
    // Every value entry is a template kwarg Inductor accepts, nothing else.
    EXPECT_EQ(first.size(), 10u);
    for (const auto& [k, entries_of_key] : table.items()) {
        EXPECT_EQ(k.rfind("((torch.", 0), 0u) << k;
        for (const auto& entry : entries_of_key) EXPECT_TRUE(entry.contains("template_id"));
    }
    // One config is used as is: no ATen added.
    auto single = problem("mm", 1, 64, 256, 128);
    single.configs.resize(1);
    EXPECT_EQ(nlohmann::json::parse(inductor_lut_json({single})).at(key).size(), 1u);
    // --with-aten: the pick, then ATen, which Inductor times against it.
    InductorLutOptions with_aten;
    with_aten.with_aten = true;
    const auto offered = nlohmann::json::parse(inductor_lut_json({single}, with_aten)).at(key);
    ASSERT_EQ(offered.size(), 2u);
    EXPECT_EQ(offered[0].at("template_id"), "triton::mm");
    EXPECT_EQ(offered[1], nlohmann::json({{"template_id", "aten::mm"}}));
}

TEST(InductorLut, TheVendorEntryBecomesInductorsAtenChoice) {
    core::GemmConfig aten;
    aten.name = "aten_mm";
    aten.block_m = aten.block_n = aten.block_k = aten.group_m = aten.num_stages = aten.num_warps = 1;
    auto mm = problem("mm", 1, 64, 256, 128);
    mm.configs.insert(mm.configs.begin(), {aten, 0.1});
    auto addmm = problem("addmm", 1, 64, 256, 128);
    aten.name = "aten_addmm";
    addmm.configs = {{aten, 0.1}};
    auto bmm = problem("bmm", 2, 64, 250, 130);  // misaligned: its padded key gets ATen too
    aten.name = "aten_bmm";
    bmm.configs = {{aten, 0.1}};

    const auto table = nlohmann::json::parse(inductor_lut_json({mm, addmm, bmm}));

    const auto& mm_entries = table.at(inductor_lookup_key("mm", mm.shape, ""));
    ASSERT_EQ(mm_entries.size(), 3u);
    EXPECT_EQ(mm_entries[0], nlohmann::json({{"template_id", "aten::mm"}}));  // ranked first, stays first
    EXPECT_EQ(mm_entries[1].at("template_id"), "triton::mm");
    // addmm's two ATen kernels: Inductor times them, no compile.
    EXPECT_EQ(table.at(inductor_lookup_key("addmm", addmm.shape, "")),
              nlohmann::json::parse(R"([{"template_id": "aten::bias_addmm"}, {"template_id": "aten::addmm"}])"));
    const auto padded = inductor_padded_problem("bmm", bmm.shape);
    ASSERT_TRUE(padded.has_value());
    EXPECT_EQ(table.at(inductor_lookup_key("bmm", padded->shape, "")),
              nlohmann::json::parse(R"([{"template_id": "aten::bmm"}])"));
}

// A config named `name`: "aten_mm" makes the vendor entry, as reference_config does.
core::GemmConfig named(const std::string& name) {
    core::GemmConfig config;
    config.name = name;
    if (name == "aten_mm") {
        config.block_m = config.block_n = config.block_k = config.group_m = config.num_stages = config.num_warps = 1;
    }
    return config;
}

using Names = std::vector<std::string>;

Names names(const std::vector<RankedConfig>& ranked) {
    Names out;
    for (const auto& r : ranked) out.push_back(r.config.name);
    return out;
}

// --with-aten tables: the first k kernel configs, and ATen where it ranks among them.
TEST(InductorLut, KernelConfigsAndVendorKeepKKernelConfigs) {
    const auto aten = named("aten_mm"), a = named("a"), b = named("b"), c = named("c");
    // ATen ranked first: the best kernel config joins it.
    EXPECT_EQ(names(kernel_configs_and_vendor({{aten, 1}, {a, 2}, {b, 3}}, 1)), (Names{"aten_mm", "a"}));
    // ATen after the k-th kernel config: left out (the table adds it anyway).
    EXPECT_EQ(names(kernel_configs_and_vendor({{a, 1}, {aten, 2}}, 1)), (Names{"a"}));
    EXPECT_EQ(names(kernel_configs_and_vendor({{a, 1}, {aten, 2}, {b, 3}, {c, 4}}, 2)), (Names{"a", "aten_mm", "b"}));
    // Fewer candidates than k: all of them.
    EXPECT_EQ(names(kernel_configs_and_vendor({{aten, 1}, {a, 2}}, 3)), (Names{"aten_mm", "a"}));
}

// --aten-within / --aten-from: ATen joins the best kernel config only where predicted close
// to it, or where the faster of the two is predicted slow enough.
TEST(InductorLut, KernelOrVendorPairedByMarginOrTime) {
    const auto aten = named("aten_mm"), a = named("a"), b = named("b");
    auto within = [](double margin) { return AtenPairing{margin}; };
    // Kernel 1.0 ms, ATen 1.2 ms: paired within 20 % or more, the kernel alone below.
    EXPECT_EQ(names(kernel_or_vendor({{a, 1.0}, {b, 1.1}, {aten, 1.2}}, within(0.25))), (Names{"a", "aten_mm"}));
    EXPECT_EQ(names(kernel_or_vendor({{a, 1.0}, {b, 1.1}, {aten, 1.2}}, within(0.2))), (Names{"a", "aten_mm"}));
    EXPECT_EQ(names(kernel_or_vendor({{a, 1.0}, {b, 1.1}, {aten, 1.2}}, within(0.1))), (Names{"a"}));
    // ATen predicted faster by half: alone, unless the margin covers 50 %.
    EXPECT_EQ(names(kernel_or_vendor({{aten, 2.0}, {a, 3.0}, {b, 4.0}}, within(0.25))), (Names{"aten_mm"}));
    EXPECT_EQ(names(kernel_or_vendor({{aten, 2.0}, {a, 3.0}, {b, 4.0}}, within(0.5))), (Names{"aten_mm", "a"}));
    // From 2 ms on every pair is timed by Inductor; ATen at 1.5 ms stays alone.
    EXPECT_EQ(names(kernel_or_vendor({{aten, 2.0}, {a, 3.0}}, AtenPairing{0.0, 2.0})), (Names{"aten_mm", "a"}));
    EXPECT_EQ(names(kernel_or_vendor({{aten, 1.5}, {a, 3.0}}, AtenPairing{0.0, 2.0})), (Names{"aten_mm"}));
    EXPECT_EQ(names(kernel_or_vendor({{a, 1.5}, {aten, 1.6}}, AtenPairing{0.1, 2.0})), (Names{"a", "aten_mm"}));
    EXPECT_THROW(kernel_or_vendor({{a, 1.0}, {b, 2.0}}, within(0.1)), core::Error);
    EXPECT_THROW(kernel_or_vendor({{aten, 1.0}}, within(0.1)), core::Error);
}

// --aten-alone-from: ATen predicted faster and slow enough stands alone, whatever the pairing
// rule says; a kernel predicted faster is still paired.
TEST(InductorLut, KernelOrVendorLeavesSlowAtenAlone) {
    const auto aten = named("aten_mm"), a = named("a");
    AtenPairing rule{0.25, 0.0};  // pairs everything
    rule.vendor_alone_from_ms = 2.0;
    EXPECT_EQ(names(kernel_or_vendor({{aten, 2.0}, {a, 2.1}}, rule)), (Names{"aten_mm"}));
    EXPECT_EQ(names(kernel_or_vendor({{aten, 1.9}, {a, 2.1}}, rule)), (Names{"aten_mm", "a"}));
    EXPECT_EQ(names(kernel_or_vendor({{a, 2.0}, {aten, 2.1}}, rule)), (Names{"a", "aten_mm"}));
}

core::GemmConfig tile(const std::string& name, int block_m, int block_n, int warps) {
    core::GemmConfig config = named(name);
    config.block_m = block_m;
    config.block_n = block_n;
    config.num_warps = warps;
    return config;
}

TEST(InductorLut, AccumulatorRegistersPerThread) {
    EXPECT_EQ(accumulator_registers(tile("a", 128, 128, 4)), 128);
    EXPECT_EQ(accumulator_registers(tile("b", 128, 128, 8)), 64);
    EXPECT_EQ(accumulator_registers(tile("c", 16, 32, 2)), 8);
    EXPECT_EQ(accumulator_registers(tile("d", 16, 16, 4)), 2);  // rounded up
}

// --compile-margin: within the margin of the best kernel config, the one with the fewest
// accumulator registers goes first; ATen and the configs outside the margin stay in place.
TEST(InductorLut, PreferFastCompileWithinTheMargin) {
    const auto heavy = tile("heavy", 128, 128, 4), light = tile("light", 128, 128, 8),
               lighter = tile("lighter", 64, 64, 4), aten = named("aten_mm");
    std::vector<RankedConfig> ranked{{aten, 0.9}, {heavy, 1.0}, {light, 1.04}, {lighter, 1.2}};
    auto moved = ranked;
    EXPECT_TRUE(prefer_fast_compile(moved, 0.05, 768));
    EXPECT_EQ(names(moved), (Names{"aten_mm", "light", "heavy", "lighter"}));
    moved = ranked;
    EXPECT_TRUE(prefer_fast_compile(moved, 0.25, 768));
    EXPECT_EQ(names(moved), (Names{"aten_mm", "lighter", "heavy", "light"}));
    moved = ranked;
    EXPECT_FALSE(prefer_fast_compile(moved, 0.0, 768));
    EXPECT_EQ(names(moved), names(ranked));
    // Equal registers: the faster predicted stays first.
    std::vector<RankedConfig> tied{{light, 1.0}, {tile("same", 64, 128, 4), 1.01}};
    EXPECT_FALSE(prefer_fast_compile(tied, 0.05, 768));
    EXPECT_EQ(names(tied), (Names{"light", "same"}));
    std::vector<RankedConfig> only_aten{{aten, 1.0}};
    EXPECT_FALSE(prefer_fast_compile(only_aten, 0.05, 768));
    EXPECT_EQ(names(only_aten), (Names{"aten_mm"}));
    // A K loop too long to unroll compiles fast whatever the tile: the best stays first.
    moved = ranked;
    EXPECT_TRUE(prefer_fast_compile(moved, 0.05, kLongestUnrolledK));
    moved = ranked;
    EXPECT_FALSE(prefer_fast_compile(moved, 0.25, kLongestUnrolledK + 1));
    EXPECT_EQ(names(moved), names(ranked));
    // So does a K loop short enough: unrolled, but cheap for every tile.
    EXPECT_FALSE(prefer_fast_compile(moved, 0.25, kLongestCheapK));
    EXPECT_EQ(names(moved), names(ranked));
    EXPECT_TRUE(prefer_fast_compile(moved, 0.25, kLongestCheapK + 1));
}

// --aten-alone-gemv: one row of A (M = 1) and the vendor entry ranked first.
TEST(InductorLut, VendorAloneForGemvOnlyWhereRankedFirstAtOneRow) {
    const auto kernel = tile("kernel", 16, 32, 2), aten = named("aten_mm");
    const auto gemv = core::make_shape(1, 1, 4096, 11008, "bfloat16");
    const auto rows = core::make_shape(1, 2, 4096, 11008, "bfloat16");
    EXPECT_TRUE(vendor_alone_for_gemv({{aten, 0.026}, {kernel, 0.035}}, gemv));
    EXPECT_FALSE(vendor_alone_for_gemv({{kernel, 0.020}, {aten, 0.026}}, gemv));
    EXPECT_FALSE(vendor_alone_for_gemv({{aten, 0.026}, {kernel, 0.035}}, rows));
    EXPECT_FALSE(vendor_alone_for_gemv({}, gemv));
}

// --paired-compile-margin: a pair's kernel is chosen again with the wider margin from the
// ranking before any --compile-margin move; a table that is not a pair stays.
TEST(InductorLut, LightenPairedPickOnlyWherePaired) {
    const auto heavy = tile("heavy", 128, 128, 4), light = tile("light", 128, 128, 8),
               lighter = tile("lighter", 64, 64, 4), aten = named("aten_mm");
    const std::vector<RankedConfig> ranked{{heavy, 1.0}, {aten, 1.05}, {light, 1.08}, {lighter, 1.12}};
    const AtenPairing everything{0.25, 0.0};
    auto table = kernel_or_vendor(ranked, everything);
    EXPECT_TRUE(lighten_paired_pick(table, ranked, everything, 0.15, 768));
    EXPECT_EQ(names(table), (Names{"lighter", "aten_mm"}));
    table = kernel_or_vendor(ranked, everything);
    EXPECT_TRUE(lighten_paired_pick(table, ranked, everything, 0.10, 768));
    EXPECT_EQ(names(table), (Names{"light", "aten_mm"}));
    // Nothing lighter within the margin, or a K loop that compiles fast anyway: no change.
    table = kernel_or_vendor(ranked, everything);
    EXPECT_FALSE(lighten_paired_pick(table, ranked, everything, 0.05, 768));
    EXPECT_FALSE(lighten_paired_pick(table, ranked, everything, 0.15, kLongestUnrolledK + 1));
    EXPECT_EQ(names(table), (Names{"heavy", "aten_mm"}));
    // The same kernel as the table's: unchanged, not counted.
    auto already_light = std::vector<RankedConfig>{{light, 1.08}, {aten, 1.05}};
    EXPECT_FALSE(lighten_paired_pick(already_light, ranked, everything, 0.10, 768));
    // A pick alone stays alone, however wide the margin.
    const AtenPairing close{0.01};
    table = kernel_or_vendor(ranked, close);
    ASSERT_EQ(names(table), (Names{"heavy"}));
    EXPECT_FALSE(lighten_paired_pick(table, ranked, close, 0.15, 768));
    EXPECT_EQ(names(table), (Names{"heavy"}));
    // Where the rule would not pair the lighter kernel, the one it predicts faster stands
    // alone: ATen, which the pair was predicted to deliver anyway.
    const AtenPairing within_six{0.06};
    table = kernel_or_vendor(ranked, within_six);
    ASSERT_EQ(names(table), (Names{"heavy", "aten_mm"}));
    EXPECT_TRUE(lighten_paired_pick(table, ranked, within_six, 0.15, 768));
    EXPECT_EQ(names(table), (Names{"aten_mm"}));
}

// --heavy-pick-alone: a heavy kernel pick predicted faster than ATen by more than the margin
// loses ATen where K makes it compile slowly; nothing else changes.
TEST(InductorLut, UnpairHeavyPickOnlyWhereItCompilesSlowly) {
    const auto heavy = tile("heavy", 128, 128, 4), light = tile("light", 128, 128, 8), aten = named("aten_mm");
    const std::vector<RankedConfig> pair{{heavy, 1.0}, {aten, 1.2}};
    auto table = pair;
    EXPECT_TRUE(unpair_heavy_pick(table, 0.05, 768));
    EXPECT_EQ(names(table), (Names{"heavy"}));
    // ATen within the margin, K outside (256, 2048], a lighter pick, ATen first: unchanged.
    for (const auto& [candidate, margin, k] :
         {std::tuple{pair, 0.25, std::int64_t{768}}, std::tuple{pair, 0.05, std::int64_t{256}},
          std::tuple{pair, 0.05, std::int64_t{4096}},
          std::tuple{std::vector<RankedConfig>{{light, 1.0}, {aten, 1.2}}, 0.05, std::int64_t{768}},
          std::tuple{std::vector<RankedConfig>{{aten, 0.9}, {heavy, 1.0}}, 0.05, std::int64_t{768}},
          std::tuple{std::vector<RankedConfig>{{heavy, 1.0}}, 0.05, std::int64_t{768}}}) {
        table = candidate;
        EXPECT_FALSE(unpair_heavy_pick(table, margin, k));
        EXPECT_EQ(names(table), names(candidate));
    }
}

// --runner-up-within: a pair gains the best other kernel config within the margin of its
// pick, the lightest of those where K makes heavy kernels compile slowly; nothing else does.
TEST(InductorLut, RunnerUpJoinsOnlyAPairWithinTheMargin) {
    const auto heavy = tile("heavy", 128, 128, 4), light = tile("light", 128, 128, 8),
               lighter = tile("lighter", 64, 64, 4), aten = named("aten_mm");
    const std::vector<RankedConfig> ranked{{heavy, 1.0}, {aten, 1.02}, {light, 1.04}, {lighter, 1.06}};
    const std::vector<RankedConfig> pair{{heavy, 1.0}, {aten, 1.02}};
    auto table = pair;
    EXPECT_TRUE(add_runner_up(table, ranked, 0.05, 4096));
    EXPECT_EQ(names(table), (Names{"heavy", "light", "aten_mm"}));
    // Outside the margin: the pair stays a pair.
    table = pair;
    EXPECT_FALSE(add_runner_up(table, ranked, 0.03, 4096));
    EXPECT_EQ(names(table), (Names{"heavy", "aten_mm"}));
    // Where the K loop is unrolled in full, the fewest registers within the margin.
    table = pair;
    EXPECT_TRUE(add_runner_up(table, ranked, 0.10, 768));
    EXPECT_EQ(names(table), (Names{"heavy", "lighter", "aten_mm"}));
    table = pair;
    EXPECT_TRUE(add_runner_up(table, ranked, 0.10, 4096));
    EXPECT_EQ(names(table), (Names{"heavy", "light", "aten_mm"}));
    // The lightest within the margin of the second best (lighter, 1.08) is outside the
    // pick's margin: the lightest within the pick's margin joins instead.
    const std::vector<RankedConfig> spread{{heavy, 1.0}, {aten, 1.02}, {light, 1.04}, {lighter, 1.08}};
    table = pair;
    EXPECT_TRUE(add_runner_up(table, spread, 0.05, 768));
    EXPECT_EQ(names(table), (Names{"heavy", "light", "aten_mm"}));
    // A heavy pick (128 registers) where K compiles slowly: no second heavy kernel.
    const auto heavy_too = tile("heavy_too", 128, 128, 4);
    const std::vector<RankedConfig> two_heavy{{heavy, 1.0}, {aten, 1.02}, {heavy_too, 1.01}};
    table = pair;
    EXPECT_FALSE(add_runner_up(table, two_heavy, 0.05, 768));
    EXPECT_EQ(names(table), (Names{"heavy", "aten_mm"}));
    table = pair;
    EXPECT_TRUE(add_runner_up(table, two_heavy, 0.05, 4096));
    EXPECT_EQ(names(table), (Names{"heavy", "heavy_too", "aten_mm"}));
    // ATen first in the pair: the runner-up still follows the kernel pick.
    table = {{aten, 0.9}, {heavy, 1.0}};
    EXPECT_TRUE(add_runner_up(table, ranked, 0.05, 4096));
    EXPECT_EQ(names(table), (Names{"aten_mm", "heavy", "light"}));
    // A pick alone, ATen alone, or two kernels without ATen: unchanged.
    for (std::vector<RankedConfig> other : {std::vector<RankedConfig>{{heavy, 1.0}},
                                            std::vector<RankedConfig>{{aten, 1.02}},
                                            std::vector<RankedConfig>{{heavy, 1.0}, {light, 1.04}}}) {
        const auto before = names(other);
        EXPECT_FALSE(add_runner_up(other, ranked, 1.0, 4096));
        EXPECT_EQ(names(other), before);
    }
    // A pick alone that the writer pairs with ATen (--with-aten without a pairing rule).
    table = {{heavy, 1.0}};
    EXPECT_TRUE(add_runner_up(table, ranked, 0.05, 4096, true));
    EXPECT_EQ(names(table), (Names{"heavy", "light"}));
    table = {{heavy, 1.0}, {light, 1.04}};
    EXPECT_FALSE(add_runner_up(table, ranked, 1.0, 4096, true));
    // No other kernel config in the ranking.
    table = pair;
    EXPECT_FALSE(add_runner_up(table, {{heavy, 1.0}, {aten, 1.02}}, 1.0, 4096));
}

// --score: a table gets its fastest entry's measured time; ATen counts where the table
// holds it or the writer adds it.
TEST(TableScore, ATableGetsItsFastestEntry) {
    const auto a = tile("a", 64, 64, 4), b = tile("b", 128, 64, 4), c = tile("c", 32, 32, 4), aten = named("aten_mm");
    const std::vector<core::TimedConfig> measured{{a, 2.0}, {b, 1.0}, {c, 4.0}};
    auto outcome = table_outcome({{a, 1.0}}, measured, 1.5);
    EXPECT_DOUBLE_EQ(outcome.best_ms, 1.0);
    EXPECT_DOUBLE_EQ(outcome.offered_ms, 2.0);
    EXPECT_EQ(outcome.entries, 1u);
    outcome = table_outcome({{a, 1.0}, {b, 1.1}}, measured, 1.5);
    EXPECT_DOUBLE_EQ(outcome.offered_ms, 1.0);
    EXPECT_EQ(outcome.entries, 2u);
    // ATen: from the vendor time where no measured row is named so, and the best where faster.
    outcome = table_outcome({{c, 1.0}, {aten, 1.2}}, measured, 0.5);
    EXPECT_DOUBLE_EQ(outcome.best_ms, 0.5);
    EXPECT_DOUBLE_EQ(outcome.offered_ms, 0.5);
    // Added by the writer: one entry more, and its time counts.
    outcome = table_outcome({{c, 1.0}}, measured, 1.5, true);
    EXPECT_DOUBLE_EQ(outcome.offered_ms, 1.5);
    EXPECT_EQ(outcome.entries, 2u);
    outcome = table_outcome({{c, 1.0}, {aten, 1.2}}, measured, 1.5, true);
    EXPECT_EQ(outcome.entries, 2u);
    // An entry nobody measured is an error, not a silent guess.
    EXPECT_THROW(table_outcome({{tile("d", 16, 16, 2), 1.0}}, measured, 1.5), core::Error);
    EXPECT_THROW(table_outcome({{aten, 1.0}}, measured, std::nullopt), core::Error);
    EXPECT_THROW(table_outcome({{a, 1.0}}, measured, std::nullopt, true), core::Error);
}

TEST(TableScore, SeveralConfigsOrWithAtenAddTheVendorEntry) {
    const auto a = tile("a", 64, 64, 4), b = tile("b", 128, 64, 4), aten = named("aten_mm");
    EXPECT_FALSE(inductor_table_adds_vendor({{a, 1.0}}, false));
    EXPECT_TRUE(inductor_table_adds_vendor({{a, 1.0}}, true));
    EXPECT_TRUE(inductor_table_adds_vendor({{a, 1.0}, {b, 1.1}}, false));
    EXPECT_FALSE(inductor_table_adds_vendor({{a, 1.0}, {aten, 1.1}}, true));  // held already
    EXPECT_FALSE(inductor_table_adds_vendor({{aten, 1.0}}, true));
}

TEST(TableScore, AggregatesOverProblems) {
    // Fractions best / offered: 1, 0.5, 0.8, 1.
    const std::vector<TableOutcome> outcomes{{1.0, 1.0, 1}, {1.0, 2.0, 2}, {0.8, 1.0, 3}, {2.0, 2.0, 2}};
    const auto score = score_tables(outcomes);
    EXPECT_EQ(score.problems, 4u);
    EXPECT_NEAR(score.geomean, std::pow(0.5 * 0.8, 0.25), 1e-12);
    EXPECT_DOUBLE_EQ(score.median, 0.9);
    EXPECT_DOUBLE_EQ(score.worst, 0.5);
    EXPECT_DOUBLE_EQ(score.p5, 0.5);  // nearest rank: the first of 4
    EXPECT_EQ(score.below_85, 2u);
    EXPECT_EQ(score.timed, 3u);
    EXPECT_DOUBLE_EQ(score.entries_per_table, 2.0);
    // Forty problems: the 5th percentile is the second worst.
    std::vector<TableOutcome> forty(40, TableOutcome{1.0, 1.0, 1});
    forty[3].offered_ms = 4.0;
    forty[7].offered_ms = 2.0;
    EXPECT_DOUBLE_EQ(score_tables(forty).p5, 0.5);
    EXPECT_DOUBLE_EQ(score_tables(forty).worst, 0.25);
    EXPECT_TRUE(std::isnan(score_tables({}).geomean));
}

TEST(InductorLut, DeviceKeysUseTheHardwareNameOrAnOverride) {
    InductorLutOptions from_hardware;
    from_hardware.include_device = true;
    auto table = nlohmann::json::parse(inductor_lut_json({problem("mm", 1, 16, 16, 16)}, from_hardware));
    EXPECT_EQ(table.begin().key().rfind("NVIDIA H100 80GB HBM3+((", 0), 0u);

    InductorLutOptions fixed = from_hardware;
    fixed.device_name = "NVIDIA H100";
    table = nlohmann::json::parse(inductor_lut_json({problem("mm", 1, 16, 16, 16)}, fixed));
    EXPECT_EQ(table.begin().key().rfind("NVIDIA H100+((", 0), 0u);
}

TEST(InductorLut, CollidingKeysAreAnError) {
    auto a = problem("mm", 1, 16, 16, 16);
    auto b = a;
    b.hardware = "another GPU";
    EXPECT_THROW(inductor_lut_json({a, b}), core::InputError);
    InductorLutOptions with_device;
    with_device.include_device = true;
    EXPECT_NO_THROW(inductor_lut_json({a, b}, with_device));
}

TEST(InductorLut, PaddedProblemFollowsPadMm) {
    // bf16 1259 x 4096 x 3437, the problem whose key Inductor never looked up: pad_mm pads
    // M to 1264 and K to 3440 (multiples of 8) and hands the template contiguous copies.
    const auto padded = inductor_padded_problem("mm_nt", core::make_shape(1, 1259, 4096, 3437, "bfloat16"));
    ASSERT_TRUE(padded.has_value());
    EXPECT_EQ(padded->op_key, "mm");
    EXPECT_EQ(padded->shape.M, 1264);
    EXPECT_EQ(padded->shape.N, 4096);
    EXPECT_EQ(padded->shape.K, 3440);
    // float32 aligns to 4 elements; a dimension of 1 is never padded; aligned shapes stay.
    const auto f32 = inductor_padded_problem("bmm", core::make_shape(2, 1, 30, 17, "float32"));
    ASSERT_TRUE(f32.has_value());
    EXPECT_EQ(f32->shape.M, 1);
    EXPECT_EQ(f32->shape.N, 32);
    EXPECT_EQ(f32->shape.K, 20);
    EXPECT_FALSE(inductor_padded_problem("mm", core::make_shape(1, 64, 256, 128, "float16")).has_value());
}

TEST(InductorLut, MisalignedProblemsAlsoGetThePaddedKey) {
    auto p = problem("addmm", 1, 100, 30, 60);
    p.configs = {{tile(128, 64, 32, 3, 4, false), 0.5}, {tile(64, 64, 64, 2, 4, false), 0.7}};  // K = 60

    const auto table = nlohmann::json::parse(inductor_lut_json({p}));

    ASSERT_EQ(table.size(), 2u);
    const auto own = "((torch.float16, [100, 30], [0, 1]), (torch.float16, [100, 60], [60, 1]), "
                     "(torch.float16, [60, 30], [30, 1]))+alpha=1&beta=1+addmm";
    const auto padded = "((torch.float16, [104, 32], [0, 1]), (torch.float16, [104, 64], [64, 1]), "
                        "(torch.float16, [64, 32], [32, 1]))+alpha=1&beta=1+addmm";
    ASSERT_TRUE(table.contains(own)) << table.dump();
    ASSERT_TRUE(table.contains(padded)) << table.dump();
    // Same configs in the same order (then addmm's two ATen choices); EVEN_K follows the K
    // each key describes (60, then 64).
    ASSERT_EQ(table.at(padded).size(), 4u);
    EXPECT_EQ(table.at(padded)[2].at("template_id"), "aten::bias_addmm");
    EXPECT_EQ(table.at(padded)[3].at("template_id"), "aten::addmm");
    EXPECT_EQ(table.at(padded)[0].at("BLOCK_M"), 128);
    EXPECT_EQ(table.at(padded)[1].at("BLOCK_K"), 64);
    for (std::size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(table.at(own)[i].at("EVEN_K"), false);
        EXPECT_EQ(table.at(padded)[i].at("EVEN_K"), true);
    }
}

TEST(InductorLut, ABatchOneBmmAlsoGetsTheMmKeyInductorLowersItTo) {
    // H200, torch 2.11: bmm 1x4096x78x389 was looked up as "+mm" with 2-D operands.
    auto p = problem("bmm_nt", 1, 4096, 78, 389);
    core::GemmConfig aten;
    aten.name = "aten_bmm";
    aten.block_m = aten.block_n = aten.block_k = aten.group_m = aten.num_stages = aten.num_warps = 1;
    p.configs.push_back({aten, 0.9});

    const auto forms = inductor_alternate_problems(p.op, p.shape);
    ASSERT_EQ(forms.size(), 3u);  // bmm padded, the mm (its layout kept), the mm padded
    EXPECT_EQ(forms[0].op_key, "bmm");
    EXPECT_EQ(forms[1].op_key, "mm_nt");
    EXPECT_EQ(forms[2].op_key, "mm");
    EXPECT_EQ(forms[2].shape.N, 80);
    EXPECT_EQ(forms[2].shape.K, 392);

    const auto table = nlohmann::json::parse(inductor_lut_json({p}));
    ASSERT_EQ(table.size(), 4u) << table.dump();
    const auto mm_key = "((torch.float16, [4096, 389], [389, 1]), (torch.float16, [389, 78], [1, 389]))+mm";
    ASSERT_TRUE(table.contains(mm_key)) << table.dump();
    const auto& entries = table.at(mm_key);
    ASSERT_EQ(entries.size(), 3u);
    EXPECT_EQ(entries[0].at("template_id"), "triton::mm");  // the mm template, the same configs
    EXPECT_EQ(entries[0].at("BLOCK_M"), 128);
    EXPECT_EQ(entries[1].at("BLOCK_K"), 64);
    EXPECT_EQ(entries[2], nlohmann::json({{"template_id", "aten::mm"}}));
    const auto& bmm_entries = table.at(inductor_lookup_key("bmm_nt", p.shape, ""));
    EXPECT_EQ(bmm_entries[0].at("template_id"), "triton::bmm");
    EXPECT_EQ(bmm_entries[2], nlohmann::json({{"template_id", "aten::bmm"}}));
    // A batch of two stays a bmm.
    EXPECT_EQ(inductor_alternate_problems("bmm", core::make_shape(2, 64, 64, 64, "float16")).size(), 0u);
}

TEST(InductorLut, AFormRankedOnItsOwnGetsItsOwnConfigs) {
    // mm 64x64x60 float16: pad_mm pads K to 64, where the rows are aligned and another
    // config may be best. A form ranked on its own keeps that ranking; unranked forms
    // (the same call without forms) get the problem's own.
    auto p = problem("mm_nt", 1, 64, 64, 60);
    const auto forms = inductor_alternate_problems(p.op, p.shape);
    ASSERT_EQ(forms.size(), 1u);
    const auto padded_key = inductor_lookup_key(forms[0].op_key, forms[0].shape, "");
    const auto unranked = nlohmann::json::parse(inductor_lut_json({p}));
    EXPECT_EQ(unranked.at(padded_key)[0].at("BLOCK_M"), 128);

    p.forms.push_back({forms[0], {{tile(32, 32, 32, 2, 4, true), 0.4}}});
    const auto table = nlohmann::json::parse(inductor_lut_json({p}));
    ASSERT_EQ(table.size(), 2u);
    const auto& entries = table.at(padded_key);
    ASSERT_EQ(entries.size(), 1u);  // one config: used as it is, no ATen
    EXPECT_EQ(entries[0].at("BLOCK_M"), 32);
    EXPECT_EQ(entries[0].at("EVEN_K"), true);
    EXPECT_EQ(table.at(inductor_lookup_key(p.op, p.shape, "")), unranked.at(inductor_lookup_key(p.op, p.shape, "")));
}

TEST(InductorLut, AProblemsOwnKeyWinsOverAnotherProblemsPaddedKey) {
    // 64 x 64 x 60 pads K to 64, which is the other problem's own key.
    auto odd = problem("mm", 1, 64, 64, 60);
    auto even = problem("mm", 1, 64, 64, 64);
    even.configs.resize(1);

    const auto table = nlohmann::json::parse(inductor_lut_json({odd, even}));

    ASSERT_EQ(table.size(), 2u);
    const auto even_key = "((torch.float16, [64, 64], [64, 1]), (torch.float16, [64, 64], [64, 1]))+mm";
    EXPECT_EQ(table.at(even_key).size(), 1u);
}

TEST(DiodeTable, NestsHardwareOperationSolution) {
    const auto p = problem("addmm", 1, 64, 128, 32);
    const auto table = nlohmann::json::parse(diode_table_json({p, problem("mm", 1, 64, 128, 32)}));

    EXPECT_EQ(table.at("version"), 1);
    const auto& hw = table.at("hardware").at("NVIDIA H100 80GB HBM3");
    EXPECT_EQ(hw.at("version"), 1);
    const auto& op = hw.at("operation").at("addmm");
    EXPECT_EQ(op.at("version"), 1);
    const auto& solution = op.at("solution").at(core::shape_key(p.shape));
    const auto& configs = solution.at("config");
    ASSERT_EQ(configs.size(), 2u);
    EXPECT_EQ(configs[0].at("block_m"), 128);
    EXPECT_EQ(configs[0].at("EVEN_K"), true);
    EXPECT_EQ(configs[0].at("name"), "mm_config");
    EXPECT_EQ(configs[1].at("block_k"), 64);
    EXPECT_TRUE(hw.at("operation").contains("mm"));
}

TEST(DiodeTable, DuplicateProblemIsAnError) {
    const auto p = problem("mm", 1, 64, 128, 32);
    EXPECT_THROW(diode_table_json({p, p}), core::InputError);
}

TEST(WriteLookupTable, WritesAtomicallyAndReadsBack) {
    const auto path = std::filesystem::temp_directory_path() /
                      ("mmt_lut_" + std::to_string(::getpid()) + ".json");
    write_lookup_table(path, {problem("mm", 1, 64, 128, 32)}, LutFormat::diode);
    const auto table = nlohmann::json::parse(core::read_file(path));
    EXPECT_TRUE(table.at("hardware").contains("NVIDIA H100 80GB HBM3"));
    std::filesystem::remove(path);
}

TEST(LutFormat, ParsesNamesAndRejectsOthers) {
    EXPECT_EQ(parse_lut_format("inductor"), LutFormat::inductor);
    EXPECT_EQ(parse_lut_format("diode"), LutFormat::diode);
    EXPECT_THROW(parse_lut_format("csv"), core::InputError);
}

}  // namespace
}  // namespace mmt::model
