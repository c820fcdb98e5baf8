// validate-max-autotune's arithmetic on a tiny dataset whose answers are worked out by hand.

#include "matmul_toolkit/model/autotune_analysis.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::model {
namespace {

core::GemmConfig tile(int bm, int bn, int bk, int stages, int warps) {
    core::GemmConfig c;
    c.name = "mm_config";
    c.block_m = bm;
    c.block_n = bn;
    c.block_k = bk;
    c.group_m = 8;
    c.num_stages = stages;
    c.num_warps = warps;
    return c;
}

core::GemmConfig vendor(const std::string& op) {
    core::GemmConfig c;
    c.name = "aten_" + op;
    return c;
}

const core::GemmConfig c1 = tile(32, 32, 32, 2, 4);
const core::GemmConfig c2 = tile(64, 64, 32, 2, 4);
const core::GemmConfig c3 = tile(128, 128, 32, 3, 8);
const core::GemmConfig c4 = tile(64, 128, 64, 4, 4);

bool same(const core::GemmConfig& a, const core::GemmConfig& b) { return same_tuning(a, b); }

/// Predicted times keyed by problem M: the order the fake model ranks c1..c4 in.
std::vector<double> fake_predictions(const core::MMShape& shape,
                                     const std::vector<core::GemmConfig>& configs) {
    // P1 (M=128): c1 < c3 < c2 < c4.  P2 (M=256): c3 < c4 < c1 < c2.  P3 (M=64): c2 < c4 < c1 < c3.
    std::map<std::int64_t, std::vector<double>> by_m{
        {128, {0.5, 0.7, 0.6, 0.9}}, {256, {0.3, 0.4, 0.1, 0.2}}, {64, {0.3, 0.1, 0.4, 0.2}}};
    const std::vector<core::GemmConfig> order{c1, c2, c3, c4};
    std::vector<double> out;
    for (const auto& c : configs) {
        for (std::size_t i = 0; i < order.size(); ++i) {
            if (same(c, order[i])) out.push_back(by_m.at(shape.M)[i]);
        }
    }
    return out;
}

PredictFn fake_model() {
    return [](const std::string&, const std::string&, const core::MMShape& shape,
              const std::vector<core::GemmConfig>& configs) { return fake_predictions(shape, configs); };
}

void add(core::Dataset& d, const std::string& op, const core::MMShape& s, const core::GemmConfig& c,
         double ms) {
    d.add_timing("cpu-test", op, s, core::TimedConfig{c, ms});
}

/// Three mm problems:
///   P1 128³        c1=4 c2=2 c3=1 c4=3, aten 1.5   max-autotune {c1,c2}: 2, exhaustive 1
///   P2 256×128×64  c1=10 c2=8 c3=5 c4=6, no aten    max-autotune 8, exhaustive 5
///   P3 64³         c1=3 c2=3 c3=6 c4=4, aten 2      max-autotune 3, exhaustive 3
core::Dataset tiny_dataset() {
    core::Dataset d;
    const auto p1 = core::make_shape(1, 128, 128, 128, "float32");
    const auto p2 = core::make_shape(1, 256, 128, 64, "float32");
    const auto p3 = core::make_shape(1, 64, 64, 64, "float32");
    add(d, "mm", p1, c1, 4.0);
    add(d, "mm", p1, c2, 2.0);
    add(d, "mm", p1, c3, 1.0);
    add(d, "mm", p1, c4, 3.0);
    add(d, "mm", p1, vendor("mm"), 1.5);
    add(d, "mm", p2, c1, 10.0);
    add(d, "mm", p2, c2, 8.0);
    add(d, "mm", p2, c3, 5.0);
    add(d, "mm", p2, c4, 6.0);
    add(d, "mm", p3, vendor("mm"), 2.0);
    add(d, "mm", p3, c1, 3.0);
    add(d, "mm", p3, c2, 3.0);
    add(d, "mm", p3, c3, 6.0);
    add(d, "mm", p3, c4, 4.0);
    return d;
}

core::Solution flat_solution() {
    core::Solution s;
    auto listed_c1 = c1;
    listed_c1.even_k = true;  // per-problem flags must not stop the match
    s.configs = {listed_c1, c2};
    return s;
}

double pct(const RatioSummary& s, int p) {
    for (const auto& [q, v] : s.percentiles) {
        if (q == p) return v;
    }
    ADD_FAILURE() << "no p" << p;
    return std::nan("");
}

TEST(Percentile, MatchesNumpyLinearInterpolation) {
    // numpy.percentile([1, 2, 3, 4], q): h = 3q/100 between neighbours.
    EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 10), 1.3);
    EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 50), 2.5);
    EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 99), 3.97);
    EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 0), 1.0);
    EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 100), 4.0);
    // h = 0.4 · 4 = 1.6: 20 + 0.6 · (35 − 20) = 29.
    EXPECT_DOUBLE_EQ(percentile({15, 20, 35, 40, 50}, 40), 29.0);
    EXPECT_DOUBLE_EQ(percentile({7}, 90), 7.0);
    EXPECT_THROW(percentile({}, 50), core::Error);
}

TEST(Statistics, MeanAndPopulationStd) {
    EXPECT_DOUBLE_EQ(mean({2, 4, 4, 4, 5, 5, 7, 9}), 5.0);
    EXPECT_DOUBLE_EQ(population_std({2, 4, 4, 4, 5, 5, 7, 9}), 2.0);
}

TEST(SameTuning, IgnoresPerProblemFlagsButNotTiles) {
    auto flagged = c1;
    flagged.even_k = true;
    flagged.allow_tf32 = true;
    flagged.acc_type = "tl.int32";
    flagged.name = "addmm_config";
    EXPECT_TRUE(same_tuning(c1, flagged));
    auto other = c1;
    other.num_stages = 3;
    EXPECT_FALSE(same_tuning(c1, other));
}

class AnalysisTest : public ::testing::Test {
protected:
    core::Dataset dataset = tiny_dataset();
};

TEST_F(AnalysisTest, TopOneRatiosAgainstMaxAutotune) {
    const auto analysis = analyse_max_autotune(dataset, flat_solution(), fake_model());

    ASSERT_EQ(analysis.per_op.size(), 1u);
    ASSERT_EQ(analysis.per_op[0].op, "mm");
    const auto& top1 = analysis.per_op[0].by_top_n.at(0);
    ASSERT_EQ(top1.top_n, 1);
    const auto& s = top1.vs_max_autotune;
    // Model picks: P1 c1 (4 ms), P2 c3 (5 ms), P3 c2 (3 ms).
    // Ratios max-autotune / model: 2/4 = 0.5, 8/5 = 1.6, 3/3 = 1.
    EXPECT_EQ(s.shapes_analysed, 3u);
    EXPECT_EQ(s.model_better, 1u);
    EXPECT_EQ(s.model_worse, 1u);
    EXPECT_EQ(s.model_equal, 1u);
    EXPECT_NEAR(s.mean_ratio, 3.1 / 3.0, 1e-12);
    EXPECT_DOUBLE_EQ(s.median_ratio, 1.0);
    EXPECT_NEAR(s.std_ratio, 0.4496912521077347, 1e-12);
    // Sorted ratios 0.5, 1.0, 1.6; h = 2q/100.
    EXPECT_NEAR(pct(s, 10), 0.6, 1e-12);
    EXPECT_NEAR(pct(s, 25), 0.75, 1e-12);
    EXPECT_NEAR(pct(s, 50), 1.0, 1e-12);
    EXPECT_NEAR(pct(s, 75), 1.3, 1e-12);
    EXPECT_NEAR(pct(s, 90), 1.48, 1e-12);
    EXPECT_NEAR(pct(s, 95), 1.54, 1e-12);
    EXPECT_NEAR(pct(s, 99), 1.588, 1e-12);
    EXPECT_DOUBLE_EQ(s.total_model_ms, 12.0);
    EXPECT_DOUBLE_EQ(s.total_reference_ms, 13.0);
    EXPECT_NEAR(s.total_time_saved_pct, 100.0 / 13.0, 1e-12);
    EXPECT_DOUBLE_EQ(s.best_case, 1.6);
    EXPECT_DOUBLE_EQ(s.worst_case, 0.5);
    EXPECT_DOUBLE_EQ(s.avg_speedup, 1.6);
    EXPECT_DOUBLE_EQ(s.avg_slowdown, 0.5);
    EXPECT_DOUBLE_EQ(s.worst_slowdown, 0.5);
    ASSERT_EQ(s.shapes.size(), 3u);
    EXPECT_TRUE(same(s.shapes[0].model_config, c1));
    EXPECT_TRUE(same(s.shapes[1].model_config, c3));
    EXPECT_TRUE(same(s.shapes[2].model_config, c2));
}

TEST_F(AnalysisTest, TopOneAgainstExhaustiveAndVendor) {
    const auto analysis = analyse_max_autotune(dataset, flat_solution(), fake_model());
    const auto& top1 = analysis.per_op[0].by_top_n.at(0);

    // Exhaustive bests 1, 5, 3 against model 4, 5, 3.
    const auto& exh = top1.vs_exhaustive;
    EXPECT_EQ(exh.shapes_analysed, 3u);
    EXPECT_EQ(exh.model_worse, 1u);
    EXPECT_EQ(exh.model_equal, 2u);
    EXPECT_NEAR(exh.mean_ratio, (0.25 + 1.0 + 1.0) / 3.0, 1e-12);
    EXPECT_DOUBLE_EQ(exh.worst_case, 0.25);

    // Vendor only on P1 (1.5 vs 4) and P3 (2 vs 3).
    const auto& ven = top1.vs_vendor;
    EXPECT_EQ(ven.shapes_analysed, 2u);
    EXPECT_EQ(ven.model_worse, 2u);
    EXPECT_NEAR(ven.mean_ratio, (0.375 + 2.0 / 3.0) / 2.0, 1e-12);
    EXPECT_NEAR(ven.median_ratio, (0.375 + 2.0 / 3.0) / 2.0, 1e-12);
    EXPECT_DOUBLE_EQ(ven.total_reference_ms, 3.5);
    EXPECT_DOUBLE_EQ(ven.total_model_ms, 7.0);
}

TEST_F(AnalysisTest, NLargerThanConfigCountUsesEveryConfig) {
    const auto analysis = analyse_max_autotune(dataset, flat_solution(), fake_model());
    // Every problem has 4 configs: top-5 .. top-500 all see every config, so the model's
    // time is the exhaustive best (1, 5, 3) and the ratios are 2, 1.6, 1.
    for (std::size_t i = 1; i < analysis.top_n_values.size(); ++i) {
        const auto& r = analysis.per_op[0].by_top_n.at(i);
        SCOPED_TRACE(r.top_n);
        EXPECT_EQ(r.vs_max_autotune.model_better, 2u);
        EXPECT_EQ(r.vs_max_autotune.model_equal, 1u);
        EXPECT_NEAR(r.vs_max_autotune.mean_ratio, (2.0 + 1.6 + 1.0) / 3.0, 1e-12);
        EXPECT_EQ(r.vs_exhaustive.model_equal, 3u);
        EXPECT_DOUBLE_EQ(r.vs_exhaustive.mean_ratio, 1.0);
    }
    EXPECT_EQ(analysis.max_configs_per_problem, 4u);
    EXPECT_EQ(analysis.top_n_values, default_top_n_values());
}

TEST_F(AnalysisTest, OverallPoolsOps) {
    // The same problems again under addmm, with c3 as its only max-autotune config.
    const auto p = core::make_shape(1, 128, 128, 128, "float32");
    add(dataset, "addmm", p, c1, 4.0);
    add(dataset, "addmm", p, c3, 1.0);
    core::Solution per_op;
    per_op.per_op = {{"mm", {c1, c2}}, {"addmm", {c3}}};

    const auto analysis = analyse_max_autotune(dataset, per_op, fake_model(), AnalysisOptions{{1}});

    ASSERT_EQ(analysis.per_op.size(), 2u);
    EXPECT_EQ(analysis.per_op[1].op, "addmm");
    // addmm: model's top-1 is c1 (4 ms) against max-autotune's c3 (1 ms).
    const auto& addmm = analysis.per_op[1].by_top_n.at(0).vs_max_autotune;
    EXPECT_EQ(addmm.shapes_analysed, 1u);
    EXPECT_DOUBLE_EQ(addmm.mean_ratio, 0.25);
    const auto& overall = analysis.overall.at(0).vs_max_autotune;
    EXPECT_EQ(overall.shapes_analysed, 4u);
    EXPECT_NEAR(overall.mean_ratio, (0.5 + 1.6 + 1.0 + 0.25) / 4.0, 1e-12);
    EXPECT_DOUBLE_EQ(overall.total_model_ms, 16.0);
    EXPECT_DOUBLE_EQ(overall.total_reference_ms, 14.0);
}

TEST_F(AnalysisTest, PerOpSolutionWithoutAnOpSkipsIt) {
    add(dataset, "bmm", core::make_shape(2, 64, 64, 64, "float32"), c1, 1.0);
    core::Solution per_op;
    per_op.per_op = {{"mm", {c2}}};

    const auto analysis = analyse_max_autotune(dataset, per_op, fake_model(), AnalysisOptions{{1}});

    ASSERT_EQ(analysis.per_op.size(), 1u);
    EXPECT_EQ(analysis.per_op[0].op, "mm");
    EXPECT_EQ(analysis.problems_seen, 4u);
    EXPECT_EQ(analysis.problems_analysed, 3u);
    ASSERT_FALSE(analysis.warnings.empty());
    EXPECT_NE(analysis.warnings[0].find("'bmm'"), std::string::npos);
}

TEST_F(AnalysisTest, LayoutOpKeyFallsBackToBareOpInPerOpSolution) {
    core::Dataset d;
    const auto p = core::make_shape(1, 64, 64, 64, "float32");
    add(d, "mm_nt", p, c1, 2.0);
    add(d, "mm_nt", p, c2, 1.0);
    core::Solution per_op;
    per_op.per_op = {{"mm", {c2}}};

    const auto analysis = analyse_max_autotune(d, per_op, fake_model(), AnalysisOptions{{1}});

    ASSERT_EQ(analysis.per_op.size(), 1u);
    EXPECT_EQ(analysis.per_op[0].op, "mm_nt");
    EXPECT_DOUBLE_EQ(analysis.per_op[0].by_top_n[0].vs_max_autotune.total_reference_ms, 1.0);
}

TEST_F(AnalysisTest, SolutionWithNoMeasuredConfigIsAnInputError) {
    core::Solution s;
    s.configs = {tile(256, 256, 128, 5, 8)};
    try {
        analyse_max_autotune(dataset, s, fake_model());
        FAIL() << "expected InputError";
    } catch (const core::InputError& e) {
        EXPECT_EQ(e.subject(), "max-autotune solution");
        EXPECT_NE(std::string(e.what()).find("none of its 1 configs"), std::string::npos);
    }
}

TEST_F(AnalysisTest, ProblemsWithoutASolutionConfigAreCountedNotAnalysed) {
    add(dataset, "mm", core::make_shape(1, 32, 32, 32, "float32"), c4, 1.0);
    const auto analysis = analyse_max_autotune(dataset, flat_solution(), fake_model(), AnalysisOptions{{1}});
    EXPECT_EQ(analysis.problems_without_solution_config, 1u);
    EXPECT_EQ(analysis.per_op[0].by_top_n[0].vs_max_autotune.shapes_analysed, 3u);
}

TEST_F(AnalysisTest, NaNPredictionsRankLast) {
    const PredictFn nan_first = [](const std::string&, const std::string&, const core::MMShape&,
                                   const std::vector<core::GemmConfig>& configs) {
        std::vector<double> out(configs.size(), 1.0);
        out[0] = std::numeric_limits<double>::quiet_NaN();  // c1
        out[2] = 0.5;                                        // c3 best
        return out;
    };
    const auto analysis = analyse_max_autotune(dataset, flat_solution(), nan_first, AnalysisOptions{{1}});
    for (const auto& c : analysis.per_op[0].by_top_n[0].vs_max_autotune.shapes) {
        EXPECT_TRUE(same(c.model_config, c3));
    }
}

TEST(TilesOnly, CpuEntriesMatchSolutionConfigsWhateverTheirStagesAndWarps) {
    // The CPU backend times every tile with stages 1 / warps 4.
    core::Dataset d;
    const auto p = core::make_shape(1, 64, 64, 64, "float32");
    add(d, "mm", p, tile(32, 32, 32, 1, 4), 2.0);
    add(d, "mm", p, tile(64, 64, 32, 1, 4), 1.0);
    core::Solution s;
    s.configs = {tile(32, 32, 32, 5, 8)};
    EXPECT_THROW(analyse_max_autotune(d, s, fake_model(), AnalysisOptions{{1}}), core::InputError);

    AnalysisOptions cpu{{1}};
    cpu.tiles_only = [](const std::string& hardware) { return hardware == "cpu-test"; };
    const auto analysis = analyse_max_autotune(
        d, s,
        [](const std::string&, const std::string&, const core::MMShape&,
           const std::vector<core::GemmConfig>& configs) { return std::vector<double>(configs.size(), 1.0); },
        cpu);
    EXPECT_DOUBLE_EQ(analysis.per_op[0].by_top_n[0].vs_max_autotune.total_reference_ms, 2.0);
}

TEST_F(AnalysisTest, RejectsNBelowOne) {
    EXPECT_THROW(analyse_max_autotune(dataset, flat_solution(), fake_model(), AnalysisOptions{{0}}),
                 core::InputError);
}

class SolutionFileTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir = std::filesystem::temp_directory_path() /
              ("mmt_autotune_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
               "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::create_directories(dir);
    }
    void TearDown() override { std::filesystem::remove_all(dir); }

    std::filesystem::path write(const std::string& name, const std::string& text) {
        const auto path = dir / name;
        std::ofstream(path) << text;
        return path;
    }

    std::filesystem::path dir;
};

const char* kConfigC2 =
    R"({"name": "mm_config", "grid": 1, "block_m": 64, "block_n": 64, "block_k": 32,
        "group_m": 8, "num_stages": 2, "num_warps": 4})";
const char* kConfigC1 =
    R"({"name": "mm_config", "grid": 1, "block_m": 32, "block_n": 32, "block_k": 32,
        "group_m": 8, "num_stages": 2, "num_warps": 4, "EVEN_K": true})";

TEST_F(SolutionFileTest, BothFileFormsGiveTheSameAnswer) {
    const auto flat = write("flat.json", std::string(R"({"config": [)") + kConfigC1 + ", " +
                                             kConfigC2 + "]}");
    const auto per_op = write("per_op.json", std::string(R"({"mm": {"config": [)") + kConfigC1 +
                                                 ", " + kConfigC2 + "]}}");
    const auto dataset = tiny_dataset();
    const AnalysisOptions one{{1}};

    const auto a = analyse_max_autotune(dataset, core::load_solution(flat), fake_model(), one);
    const auto b = analyse_max_autotune(dataset, core::load_solution(per_op), fake_model(), one);

    const auto& sa = a.per_op[0].by_top_n[0].vs_max_autotune;
    const auto& sb = b.per_op[0].by_top_n[0].vs_max_autotune;
    EXPECT_DOUBLE_EQ(sa.total_reference_ms, 13.0);
    EXPECT_DOUBLE_EQ(sb.total_reference_ms, 13.0);
    EXPECT_DOUBLE_EQ(sa.mean_ratio, sb.mean_ratio);
}

TEST(AnalysisJson, HoldsTorchDiodeFieldsAndOurs) {
    const auto analysis = analyse_max_autotune(tiny_dataset(), flat_solution(), fake_model());
    AnalysisMetadata meta;
    meta.model_path = "m.pt";
    meta.dataset_path = "v.json";

    const auto doc = nlohmann::json::parse(analysis_to_json(analysis, meta));

    const auto& top1 = doc.at("per_op").at("mm").at("top_1");
    EXPECT_EQ(top1.at("op"), "mm");
    EXPECT_EQ(top1.at("top_n"), 1);
    EXPECT_EQ(top1.at("shapes_analyzed"), 3);
    EXPECT_EQ(top1.at("performance_breakdown").at("model_better").at("count"), 1);
    EXPECT_NEAR(top1.at("overall_metrics").at("total_time_saved_pct").get<double>(), 100.0 / 13.0, 1e-9);
    EXPECT_NEAR(top1.at("distribution").at("p90").get<double>(), 1.48, 1e-9);
    EXPECT_EQ(top1.at("raw_times").at("total_ma_time"), 13.0);
    EXPECT_EQ(top1.at("shape_details").size(), 3u);
    EXPECT_EQ(top1.at("shape_details")[0].at("performance"), "worse");
    EXPECT_EQ(top1.at("shape_details")[0].at("model_config").at("block_m"), 32);
    EXPECT_EQ(top1.at("vs_exhaustive").at("raw_times").at("total_exhaustive_time"), 9.0);
    EXPECT_EQ(top1.at("vs_vendor").at("shapes_analyzed"), 2);
    for (const char* key : {"top_1", "top_5", "top_10", "top_20", "top_50", "top_100", "top_500"}) {
        EXPECT_TRUE(doc.at("overall").contains(key)) << key;
    }
    EXPECT_EQ(doc.at("metadata").at("model_path"), "m.pt");
    EXPECT_EQ(doc.at("metadata").at("hardware_name"), "all");
    EXPECT_EQ(doc.at("metadata").at("ops_present"), nlohmann::json::array({"mm"}));
}

TEST(AnalysisTable, HasOneLinePerOpAndN) {
    const auto analysis = analyse_max_autotune(tiny_dataset(), flat_solution(), fake_model(),
                                               AnalysisOptions{{1, 5}});
    const auto table = format_analysis_table(analysis);
    EXPECT_NE(table.find("mm             1      3"), std::string::npos) << table;
    EXPECT_NE(table.find("overall        5      3"), std::string::npos) << table;
}

}  // namespace
}  // namespace mmt::model
