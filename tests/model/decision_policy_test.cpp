// DecisionPolicy: the graph rule, the presets, validation, and what the Inductor writer makes
// of a policy's tables (bias_addmm_only).

#include "matmul_toolkit/model/decision_policy.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::model {
namespace {

using Names = std::vector<std::string>;

/// A kernel config of the given tile, or the vendor entry (the reference config) for "aten_mm".
core::GemmConfig tile(const std::string& name, int block_m = 64, int block_n = 64, int warps = 4) {
    core::GemmConfig config;
    config.name = name;
    config.block_m = block_m;
    config.block_n = block_n;
    config.block_k = 32;
    config.num_warps = warps;
    if (name == "aten_mm") {
        config.block_m = config.block_n = config.block_k = config.group_m = config.num_stages = config.num_warps = 1;
    }
    return config;
}

Names names(const std::vector<RankedConfig>& ranked) {
    Names out;
    for (const auto& r : ranked) out.push_back(r.config.name);
    return out;
}

/// A shape of K = `k` (768: heavy kernels compile slowly there; 4096: every kernel compiles fast).
core::MMShape shape_with(std::int64_t m, std::int64_t k) { return core::make_shape(1, m, 4096, k, "bfloat16"); }

/// What `policy` leaves of `ranked` for a problem of `shape`.
Names decided(const DecisionPolicy& policy, std::vector<RankedConfig> ranked, const core::MMShape& shape) {
    policy.decide(ranked, shape);
    return names(ranked);
}

class GraphRule : public ::testing::Test {
protected:
    const core::GemmConfig aten = tile("aten_mm"), kernel = tile("kernel"), other = tile("other");
    const core::MMShape shape = shape_with(2048, 4096);
};

TEST_F(GraphRule, KernelAloneWherePredictedFasterByMoreThanTheMargin) {
    // 1.0 ms x 1.10 = 1.1 ms < 1.2 ms.
    EXPECT_EQ(names(kernel_alone_or_vendor({{kernel, 1.0}, {other, 1.05}, {aten, 1.2}}, 0.10)), (Names{"kernel"}));
    EXPECT_EQ(decided(graph_policy(), {{kernel, 1.0}, {other, 1.05}, {aten, 1.2}}, shape), (Names{"kernel"}));
}

TEST_F(GraphRule, AtenAloneWherePredictedFaster) {
    EXPECT_EQ(names(kernel_alone_or_vendor({{aten, 0.9}, {kernel, 1.0}, {other, 1.05}}, 0.10)), (Names{"aten_mm"}));
    EXPECT_EQ(decided(graph_policy(), {{aten, 0.9}, {kernel, 1.0}}, shape), (Names{"aten_mm"}));
}

TEST_F(GraphRule, AtenAloneWhereTheKernelIsFasterWithinTheMargin) {
    // 1.0 ms x 1.10 = 1.1 ms > 1.05 ms: not clearly faster.
    EXPECT_EQ(names(kernel_alone_or_vendor({{kernel, 1.0}, {aten, 1.05}}, 0.10)), (Names{"aten_mm"}));
    EXPECT_EQ(decided(graph_policy(), {{kernel, 1.0}, {aten, 1.05}}, shape), (Names{"aten_mm"}));
}

TEST_F(GraphRule, ExactlyAtTheMarginAtenStaysAlone) {
    // 1.0 x (1 + 0.10) is the double 1.1: faster by exactly the margin, not by more.
    EXPECT_EQ(names(kernel_alone_or_vendor({{kernel, 1.0}, {aten, 1.1}}, 0.10)), (Names{"aten_mm"}));
    EXPECT_EQ(names(kernel_alone_or_vendor({{kernel, 1.0}, {aten, 1.1000001}}, 0.10)), (Names{"kernel"}));
    // A margin of 0: the faster alone, ATen on a tie.
    EXPECT_EQ(names(kernel_alone_or_vendor({{kernel, 1.0}, {aten, 1.0}}, 0.0)), (Names{"aten_mm"}));
}

TEST_F(GraphRule, NeedsTheVendorEntryAndLeavesItAloneWithoutAKernel) {
    EXPECT_THROW(kernel_alone_or_vendor({{kernel, 1.0}, {other, 1.1}}, 0.1), core::Error);
    EXPECT_EQ(names(kernel_alone_or_vendor({{aten, 1.0}}, 0.1)), (Names{"aten_mm"}));
}

// The graph preset's compile margin (5 %) moves a lighter kernel first before the graph rule
// compares it with ATen, where K compiles slowly (768).
TEST_F(GraphRule, TheCompileMarginMovesALighterKernelFirstBeforeTheRule) {
    const auto heavy = tile("heavy", 128, 128, 4), light = tile("light", 128, 128, 8);  // 128, 64 registers
    const auto slow_k = shape_with(2048, 768);
    std::vector<RankedConfig> ranked{{heavy, 1.0}, {light, 1.04}, {aten, 1.2}};
    const Decision decision = graph_policy().decide(ranked, slow_k);
    EXPECT_TRUE(decision.compile_move);
    EXPECT_EQ(names(ranked), (Names{"light"}));  // 1.04 x 1.1 = 1.144 < 1.2
    // The lighter kernel (1.04 ms) is not 10 % faster than ATen at 1.12 ms; the heavy one is.
    EXPECT_EQ(decided(graph_policy(), {{heavy, 1.0}, {light, 1.04}, {aten, 1.12}}, slow_k), (Names{"aten_mm"}));
    EXPECT_EQ(decided(graph_policy(), {{heavy, 1.0}, {light, 1.04}, {aten, 1.12}}, shape), (Names{"heavy"}));
}

TEST(DecisionPolicyWriter, BiasAddmmOnlyWritesAddmmsAtenEntryAsBiasAddmmAlone) {
    const auto aten = tile("aten_mm");
    const auto problem = [&](const std::string& op, std::int64_t batch) {
        RankedProblem p;
        p.hardware = "NVIDIA H200";
        p.op = op;
        p.shape = core::make_shape(batch, 64, 256, 128, "float16");  // aligned: no padded form
        p.configs = {{aten, 0.1}};
        return p;
    };
    const std::vector<RankedProblem> problems{problem("mm", 1), problem("addmm", 1), problem("bmm", 2)};
    const auto key = [&](const RankedProblem& p) { return inductor_lookup_key(p.op, p.shape, ""); };
    const auto ids = [](const nlohmann::json& entries) {
        Names out;
        for (const auto& e : entries) out.push_back(e.at("template_id"));
        return out;
    };

    const auto graph = nlohmann::json::parse(inductor_lut_json(problems, graph_policy().inductor_options()));
    const auto isolated = nlohmann::json::parse(inductor_lut_json(problems, isolated_policy().inductor_options()));

    const auto both = nlohmann::json::parse(inductor_lut_json(problems, graph_both_addmm_policy().inductor_options()));
    EXPECT_EQ(ids(graph.at(key(problems[1]))), (Names{"aten::bias_addmm"}));
    EXPECT_EQ(ids(both.at(key(problems[1]))), (Names{"aten::bias_addmm", "aten::addmm"}));
    EXPECT_EQ(ids(isolated.at(key(problems[1]))), (Names{"aten::bias_addmm", "aten::addmm"}));
    for (const auto& table : {graph, isolated}) {
        EXPECT_EQ(ids(table.at(key(problems[0]))), (Names{"aten::mm"}));
        EXPECT_EQ(ids(table.at(key(problems[2]))), (Names{"aten::bmm"}));
    }
    // The ATen entry the writer adds to a table of several kernel configs follows it too.
    auto two_kernels = problem("addmm", 1);
    two_kernels.configs = {{tile("a"), 0.1}, {tile("b"), 0.2}};
    InductorLutOptions only;
    only.bias_addmm_only = true;
    const auto added = nlohmann::json::parse(inductor_lut_json({two_kernels}, only)).at(key(two_kernels));
    EXPECT_EQ(ids(added), (Names{"triton::mm", "triton::mm", "aten::bias_addmm"}));
}

TEST(DecisionPolicyWriter, OptionsKeepTheDeviceKeys) {
    InductorLutOptions keys;
    keys.include_device = true;
    keys.device_name = "NVIDIA H200";
    const auto graph = graph_policy().inductor_options(keys);
    EXPECT_TRUE(graph.include_device);
    EXPECT_EQ(graph.device_name, "NVIDIA H200");
    EXPECT_TRUE(graph.bias_addmm_only);
    EXPECT_FALSE(graph.with_aten);
    // isolated pairs by rule: the tables hold ATen where chosen, the writer adds none.
    EXPECT_FALSE(isolated_policy().inductor_options().with_aten);
    DecisionPolicy always;
    always.with_aten = true;
    EXPECT_TRUE(always.inductor_options().with_aten);
}

TEST(DecisionPolicyPresets, NamesAndTheUnknownNameError) {
    EXPECT_EQ(policy_names(), (Names{"graph", "graph-both-addmm", "isolated"}));
    EXPECT_EQ(std::string(kDefaultPolicy), "graph");
    EXPECT_EQ(policy_named("graph").name, "graph");
    EXPECT_EQ(policy_named("isolated").name, "isolated");
    try {
        policy_named("fast");
        FAIL() << "no error for an unknown policy";
    } catch (const core::InputError& e) {
        EXPECT_EQ(e.subject(), "--policy");
        EXPECT_EQ(e.detail(), "unknown policy 'fast' (expected one of graph, graph-both-addmm, isolated)");
    }
}

TEST(DecisionPolicyPresets, GraphIsTheKernelMarginAndTheFastCompileMove) {
    const auto graph = policy_named("graph");
    EXPECT_EQ(graph.top_k, 1u);
    EXPECT_EQ(graph.kernel_margin, 0.10);
    EXPECT_TRUE(graph.bias_addmm_only);
    EXPECT_EQ(graph.compile_margin, 0.05);
    EXPECT_FALSE(graph.with_aten);
    EXPECT_FALSE(graph.pairs_by_rule());
    EXPECT_FALSE(graph.paired_compile_margin || graph.runner_up_margin || graph.heavy_pick_alone_margin);
    EXPECT_TRUE(graph.chooses_per_problem());
    EXPECT_NO_THROW(graph.validate());
}

TEST(DecisionPolicyPresets, GraphBothAddmmIsGraphWithBothAtenEntriesOfAnAddmm) {
    const auto graph = policy_named("graph");
    const auto both = policy_named("graph-both-addmm");
    EXPECT_EQ(both.name, "graph-both-addmm");
    EXPECT_FALSE(both.bias_addmm_only);
    EXPECT_EQ(both.kernel_margin, graph.kernel_margin);
    EXPECT_EQ(both.compile_margin, graph.compile_margin);
    EXPECT_EQ(both.top_k, graph.top_k);
    EXPECT_FALSE(both.with_aten || both.pairs_by_rule());
    EXPECT_NO_THROW(both.validate());
}

// --top-k 1 --with-aten --aten-from 10 --compile-margin 5 --aten-alone-from 100
// --aten-alone-gemv --runner-up-within 5 --heavy-pick-alone 5, as export-lut builds it.
DecisionPolicy eight_flags() {
    DecisionPolicy p;
    p.top_k = 1;
    p.with_aten = true;
    p.aten_from_ms = 10.0 / 1000.0;
    p.compile_margin = 5.0 / 100.0;
    p.aten_alone_from_ms = 100.0 / 1000.0;
    p.aten_alone_gemv = true;
    p.runner_up_margin = 5.0 / 100.0;
    p.heavy_pick_alone_margin = 5.0 / 100.0;
    return p;
}

class IsolatedPreset : public ::testing::Test {
protected:
    const DecisionPolicy isolated = policy_named("isolated");
    const core::GemmConfig aten = tile("aten_mm"), a = tile("a"), b = tile("b"),
                           heavy = tile("heavy", 128, 128, 4), light = tile("light", 128, 128, 8);
};

TEST_F(IsolatedPreset, HoldsTheEightFlagsThresholds) {
    const auto flags = eight_flags();
    EXPECT_EQ(isolated.top_k, flags.top_k);
    EXPECT_EQ(isolated.with_aten, flags.with_aten);
    EXPECT_EQ(isolated.aten_within, flags.aten_within);
    EXPECT_EQ(isolated.aten_from_ms, flags.aten_from_ms);
    EXPECT_EQ(isolated.aten_alone_from_ms, flags.aten_alone_from_ms);
    EXPECT_EQ(isolated.aten_alone_gemv, flags.aten_alone_gemv);
    EXPECT_EQ(isolated.compile_margin, flags.compile_margin);
    EXPECT_EQ(isolated.paired_compile_margin, flags.paired_compile_margin);
    EXPECT_EQ(isolated.runner_up_margin, flags.runner_up_margin);
    EXPECT_EQ(isolated.heavy_pick_alone_margin, flags.heavy_pick_alone_margin);
    EXPECT_FALSE(isolated.kernel_margin.has_value());
    EXPECT_FALSE(isolated.bias_addmm_only);
    EXPECT_NO_THROW(isolated.validate());
}

TEST_F(IsolatedPreset, DecidesLikeTheEightFlags) {
    struct Case {
        const char* what;
        std::vector<RankedConfig> ranked;
        core::MMShape shape;
        Names expected;
    };
    const std::vector<Case> cases{
        // Under 10 us and 4 % apart: the faster alone.
        {"small", {{a, 0.005}, {aten, 0.0052}, {b, 0.006}}, shape_with(256, 4096), {"a"}},
        // From 10 us: paired, and b within 5 % of the pick joins it.
        {"paired", {{a, 0.020}, {b, 0.0205}, {aten, 0.021}}, shape_with(1024, 4096), {"a", "b", "aten_mm"}},
        // ATen predicted faster at 100 us or more: alone.
        {"large", {{aten, 0.2}, {a, 0.25}}, shape_with(4096, 4096), {"aten_mm"}},
        // ATen faster, from 10 us but under 100 us: paired, ATen first.
        {"aten first", {{aten, 0.05}, {a, 0.08}}, shape_with(2048, 4096), {"aten_mm", "a"}},
        // A GEMV ATen ranks first: alone.
        {"gemv", {{aten, 0.02}, {a, 0.03}}, shape_with(1, 4096), {"aten_mm"}},
        // A heavy pick more than 5 % faster than ATen where K compiles slowly: alone.
        {"heavy", {{heavy, 0.05}, {light, 0.055}, {aten, 0.06}}, shape_with(2048, 768), {"heavy"}},
        // A lighter kernel within 5 % goes first where K compiles slowly and pairs with ATen; the
        // heavy one, within 5 % of it, joins as the runner-up.
        {"lighter", {{heavy, 0.050}, {light, 0.052}, {aten, 0.053}}, shape_with(2048, 768),
         {"light", "heavy", "aten_mm"}},
    };
    for (const auto& c : cases) {
        EXPECT_EQ(decided(isolated, c.ranked, c.shape), c.expected) << c.what;
        EXPECT_EQ(decided(eight_flags(), c.ranked, c.shape), c.expected) << c.what;
    }
}

TEST_F(IsolatedPreset, ReportsWhatEachRuleDid) {
    std::vector<RankedConfig> heavy_pair{{heavy, 0.05}, {light, 0.055}, {aten, 0.06}};
    EXPECT_TRUE(isolated.decide(heavy_pair, shape_with(2048, 768)).heavy_alone);
    std::vector<RankedConfig> gemv{{aten, 0.02}, {a, 0.03}};
    EXPECT_TRUE(isolated.decide(gemv, shape_with(1, 4096)).gemv_alone);
    std::vector<RankedConfig> moved{{heavy, 0.050}, {light, 0.052}, {aten, 0.053}};
    const auto decision = isolated.decide(moved, shape_with(2048, 768));
    EXPECT_TRUE(decision.compile_move);
    EXPECT_TRUE(decision.runner_up);
    EXPECT_FALSE(decision.heavy_alone);
}

TEST(DecisionPolicyRules, TopKAloneKeepsTheBestKAndWithAtenAddsAtenWhereRanked) {
    const auto aten = tile("aten_mm"), a = tile("a"), b = tile("b"), c = tile("c");
    DecisionPolicy top2;
    top2.top_k = 2;
    EXPECT_EQ(decided(top2, {{aten, 0.9}, {a, 1.0}, {b, 1.1}, {c, 1.2}}, shape_with(64, 4096)),
              (Names{"aten_mm", "a"}));
    top2.with_aten = true;
    EXPECT_EQ(decided(top2, {{aten, 0.9}, {a, 1.0}, {b, 1.1}, {c, 1.2}}, shape_with(64, 4096)),
              (Names{"aten_mm", "a", "b"}));
}

TEST(DecisionPolicyRules, RankedPerProblem) {
    DecisionPolicy top3;
    top3.top_k = 3;
    EXPECT_EQ(top3.ranked_per_problem(), 3u);
    top3.with_aten = true;
    EXPECT_EQ(top3.ranked_per_problem(), 4u);  // three kernels remain where ATen ranks among them
    constexpr auto every = std::numeric_limits<std::size_t>::max();
    DecisionPolicy margin;
    margin.compile_margin = 0.05;
    EXPECT_EQ(margin.ranked_per_problem(), every);
    EXPECT_EQ(graph_policy().ranked_per_problem(), every);
    EXPECT_EQ(isolated_policy().ranked_per_problem(), every);
    EXPECT_EQ(graph_policy().top_k_only().ranked_per_problem(), 1u);
}

TEST(DecisionPolicyRules, ValidateNamesTheOption) {
    const auto error_of = [](const DecisionPolicy& p) {
        try {
            p.validate();
        } catch (const core::InputError& e) {
            return e.subject() + ": " + e.detail();
        }
        return std::string("no error");
    };
    DecisionPolicy p;
    p.top_k = 0;
    EXPECT_EQ(error_of(p), "--top-k: must be at least 1");
    p = {};
    p.aten_within = 0.1;
    EXPECT_EQ(error_of(p), "--aten-within: needs --with-aten");
    p.with_aten = true;
    p.top_k = 2;
    EXPECT_EQ(error_of(p), "--aten-within: needs --top-k 1");
    p.top_k = 1;
    p.aten_within = -0.01;
    EXPECT_EQ(error_of(p), "--aten-within: must be a percentage of 0 or more");
    p = {};
    p.with_aten = true;
    p.aten_from_ms = std::numeric_limits<double>::infinity();
    EXPECT_EQ(error_of(p), "--aten-from: must be a time of 0 microseconds or more");
    p = {};
    p.compile_margin = -0.05;
    EXPECT_EQ(error_of(p), "--compile-margin: must be a percentage of 0 or more");
    p = {};
    p.heavy_pick_alone_margin = 0.05;
    EXPECT_EQ(error_of(p), "--heavy-pick-alone: needs a pairing rule (--aten-from, --aten-within, ...)");
    p = {};
    p.runner_up_margin = 0.05;
    EXPECT_EQ(error_of(p), "--runner-up-within: needs --with-aten");
    // The graph rule never pairs: no pairing option joins it.
    auto graph = graph_policy();
    graph.with_aten = true;
    EXPECT_EQ(error_of(graph).rfind("--with-aten: cannot be combined with the kernel margin", 0), 0u)
        << error_of(graph);
    graph = graph_policy();
    graph.top_k = 2;
    EXPECT_EQ(error_of(graph).rfind("--top-k: ", 0), 0u) << error_of(graph);
    graph = graph_policy();
    graph.kernel_margin = -0.1;
    EXPECT_EQ(error_of(graph).rfind("--policy: ", 0), 0u) << error_of(graph);
}

TEST(DecisionPolicyCounts, CountTablesByKindAndEachRule) {
    const auto aten = tile("aten_mm"), a = tile("a");
    DecisionCounts counts;
    Decision moved;
    moved.compile_move = true;
    counts.add(moved, {{a, 1.0}});
    counts.add({}, {{aten, 1.0}});
    Decision runner_up;
    runner_up.runner_up = true;
    counts.add(runner_up, {{a, 1.0}, {aten, 1.1}});
    EXPECT_EQ(counts.problems, 3u);
    EXPECT_EQ(counts.kernel_alone, 1u);
    EXPECT_EQ(counts.aten_alone, 1u);
    EXPECT_EQ(counts.aten_paired, 1u);
    EXPECT_EQ(counts.compile_moves, 1u);
    EXPECT_EQ(counts.runner_ups, 1u);
    EXPECT_EQ(counts.gemv_alone + counts.heavy_alone + counts.paired_moves, 0u);
}

TEST(DecisionPolicyRules, TopKOnlyKeepsTheNameAndTopK) {
    const auto diode = graph_policy().top_k_only();
    EXPECT_EQ(diode.name, "graph");
    EXPECT_EQ(diode.top_k, 1u);
    EXPECT_FALSE(diode.kernel_margin || diode.compile_margin || diode.bias_addmm_only || diode.with_aten);
}

// One problem decided on its own: the table, its entries with their times, the verdict.
TEST(DecideProblem, GivesTheTableItsEntriesTimesAndVerdict) {
    const core::GemmConfig aten = tile("aten_mm"), kernel = tile("kernel"), other = tile("other");
    const auto shape = shape_with(2048, 4096);
    // The kernel 1.0 ms against ATen's 1.2: the kernel alone (graph).
    auto alone = decide_problem(graph_policy(), "mm", shape, {{kernel, 1.0}, {other, 1.05}, {aten, 1.2}});
    EXPECT_EQ(names(alone.table), (Names{"kernel"}));
    EXPECT_EQ(alone.verdict, "kernel");
    EXPECT_EQ(alone.kernel_ms, 1.0);
    EXPECT_EQ(alone.vendor_ms, 1.2);
    ASSERT_EQ(alone.written.entries.size(), 1u);
    EXPECT_EQ(alone.written.entries[0]["template_id"], "triton::mm");
    EXPECT_EQ(alone.written.predicted_ms, (std::vector<std::optional<double>>{1.0}));

    // ATen at 1.05 is within the margin: ATen alone.
    auto vendor = decide_problem(graph_policy(), "mm", shape, {{kernel, 1.0}, {aten, 1.05}});
    EXPECT_EQ(vendor.verdict, "aten");
    EXPECT_EQ(vendor.written.predicted_ms, (std::vector<std::optional<double>>{1.05}));

    // isolated pairs the two where the faster takes 10 us or more; an addmm's ATen is two entries.
    auto addmm_aten = tile("aten_addmm");
    addmm_aten.block_m = addmm_aten.block_n = addmm_aten.block_k = addmm_aten.group_m = addmm_aten.num_stages =
        addmm_aten.num_warps = 1;
    auto pair = decide_problem(isolated_policy(), "addmm", shape, {{kernel, 0.05}, {addmm_aten, 0.06}});
    EXPECT_EQ(pair.verdict, "pair");
    ASSERT_EQ(pair.written.entries.size(), 3u);
    EXPECT_EQ(pair.written.entries[1]["template_id"], "aten::bias_addmm");
    EXPECT_EQ(pair.written.entries[2]["template_id"], "aten::addmm");
    EXPECT_EQ(pair.written.predicted_ms, (std::vector<std::optional<double>>{0.05, 0.06, 0.06}));

    const auto doc = decision_document(isolated_policy(), pair);
    EXPECT_EQ(doc["policy"], "isolated");
    EXPECT_EQ(doc["decision"], "pair");
    EXPECT_EQ(doc["kernel_ms"], 0.05);
    EXPECT_EQ(doc["vendor_ms"], 0.06);
    EXPECT_EQ(doc["entries"], pair.written.entries);
}

TEST(DecideProblem, AModelWithoutVendorRowsHasNoAtenTimes) {
    DecisionPolicy top1;
    top1.top_k = 1;
    top1.with_aten = true;  // the writer adds ATen, whose time the model does not know
    const auto decided = decide_problem(top1, "mm", shape_with(64, 64), {{tile("kernel"), 0.01}, {tile("other"), 0.02}});
    EXPECT_FALSE(decided.vendor_ms.has_value());
    ASSERT_EQ(decided.written.entries.size(), 2u);
    EXPECT_EQ(decided.written.predicted_ms[1], std::nullopt);
    EXPECT_EQ(decided.verdict, "pair");
    EXPECT_TRUE(decision_document(top1, decided)["vendor_ms"].is_null());
    EXPECT_TRUE(decision_document(top1, decided)["predicted_ms"][1].is_null());
    EXPECT_NO_THROW(check_vendor_predictions(top1, false, "m.pt"));
    try {
        check_vendor_predictions(graph_policy(), false, "m.pt");
        FAIL();
    } catch (const core::InputError& e) {
        EXPECT_EQ(e.subject(), "--policy");
        EXPECT_NE(std::string(e.what()).find("m.pt predicts no ATen times"), std::string::npos);
    }
}

// The margins decide() compares configs within, compounded.
TEST(DecideProblem, TheRankingMarginCompoundsThePolicysMargins) {
    EXPECT_DOUBLE_EQ(graph_policy().ranking_margin(), 1.05);
    EXPECT_DOUBLE_EQ(isolated_policy().ranking_margin(), 1.05 * 1.05);
    EXPECT_EQ(graph_policy().ranked_at_least(), 1u);
    EXPECT_EQ(isolated_policy().ranked_at_least(), 2u);
    DecisionPolicy plain;
    plain.top_k = 3;
    EXPECT_DOUBLE_EQ(plain.ranking_margin(), 1.0);
    EXPECT_EQ(plain.ranked_at_least(), 3u);
}

}  // namespace
}  // namespace mmt::model
