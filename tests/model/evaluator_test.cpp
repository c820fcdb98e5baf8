#include "matmul_toolkit/model/evaluator.hpp"

#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mmt::model {
namespace {

// Problem A (mm): measured 1, 2, 4 ms; the model predicts 2, 1, 4 ms.
// Problem B (bmm): measured 3, 6 ms; predicted exactly.
class TinyEvaluation : public ::testing::Test {
protected:
    void SetUp() override {
        problems.push_back(make("mm", {1.0, 2.0, 4.0}));
        problems.push_back(make("bmm", {3.0, 6.0}));
        predicted = {{std::log(2.0), std::log(1.0), std::log(4.0)}, {std::log(3.0), std::log(6.0)}};
    }

    static ProblemGroup make(const std::string& op, const std::vector<double>& times) {
        ProblemGroup p;
        p.hardware = "gpu";
        p.op_key = op;
        p.shape = core::make_shape(op == "bmm" ? 2 : 1, 64, 64, 64, "float16");
        for (std::size_t i = 0; i < times.size(); ++i) {
            core::TimedConfig t;
            t.config.block_m = 16 << i;
            t.time_ms = times[i];
            p.timings.push_back(t);
        }
        return p;
    }

    std::vector<ProblemGroup> problems;
    std::vector<std::vector<double>> predicted;
};

TEST_F(TinyEvaluation, OverallMetricsMatchHandComputedValues) {
    const auto report = evaluate_predictions(problems, predicted, 10);
    const auto& m = report.overall;
    const double ln2 = std::log(2.0);
    EXPECT_EQ(m.problems, 2u);
    EXPECT_EQ(m.rows, 5u);
    // Two rows off by ln 2, three exact.
    EXPECT_NEAR(m.mse_log, 2 * ln2 * ln2 / 5, 1e-12);
    EXPECT_NEAR(m.rmse_log, std::sqrt(2 * ln2 * ln2 / 5), 1e-12);
    EXPECT_NEAR(m.exp_rmse, std::exp(std::sqrt(2 * ln2 * ln2 / 5)), 1e-12);
    // Actual logs: 0, ln2, 2ln2, ln3, ln6; R² = 1 − SS_res / SS_tot.
    const double logs[] = {0.0, ln2, 2 * ln2, std::log(3.0), std::log(6.0)};
    double mean = 0;
    for (double l : logs) mean += l / 5;
    double ss_tot = 0;
    for (double l : logs) ss_tot += (l - mean) * (l - mean);
    EXPECT_NEAR(m.r2, 1.0 - 2 * ln2 * ln2 / ss_tot, 1e-12);
    // |2−1|/1 = 1, |1−2|/2 = 0.5, three zeros: mean 0.3.
    EXPECT_NEAR(m.mape_percent, 30.0, 1e-9);
    // Spearman: A has ranks (2,1,3) vs (1,2,3): 1 − 6·2/(3·8) = 0.5; B: 1. Mean 0.75.
    EXPECT_NEAR(m.spearman, 0.75, 1e-12);
    EXPECT_EQ(m.spearman_problems, 2u);
    // Top-1: A's model pick measures 2 ms against the best 1 ms: 0.5; B: 1. Geomean √0.5.
    EXPECT_NEAR(m.top_k_achieved[0], std::sqrt(0.5), 1e-12);
    // Top-5 and top-10 hold every config: 1.
    EXPECT_NEAR(m.top_k_achieved[1], 1.0, 1e-12);
    EXPECT_NEAR(m.top_k_achieved[2], 1.0, 1e-12);
}

TEST_F(TinyEvaluation, PerOpMetricsMatchHandComputedValues) {
    const auto report = evaluate_predictions(problems, predicted, 10);
    ASSERT_EQ(report.per_op.size(), 2u);
    const auto& mm = report.per_op[0];
    const auto& bmm = report.per_op[1];
    const double ln2 = std::log(2.0);
    EXPECT_EQ(mm.op, "mm");
    EXPECT_EQ(mm.rows, 3u);
    EXPECT_NEAR(mm.mse_log, 2 * ln2 * ln2 / 3, 1e-12);
    // Actual logs 0, ln2, 2ln2 around their mean ln2: SS_tot = 2ln2² = SS_res, so R² = 0.
    EXPECT_NEAR(mm.r2, 0.0, 1e-12);
    EXPECT_NEAR(mm.mape_percent, 50.0, 1e-9);
    EXPECT_NEAR(mm.spearman, 0.5, 1e-12);
    EXPECT_NEAR(mm.top_k_achieved[0], 0.5, 1e-12);
    EXPECT_EQ(bmm.op, "bmm");
    EXPECT_NEAR(bmm.mse_log, 0.0, 1e-12);
    EXPECT_NEAR(bmm.r2, 1.0, 1e-12);
    EXPECT_NEAR(bmm.mape_percent, 0.0, 1e-9);
    EXPECT_NEAR(bmm.spearman, 1.0, 1e-12);
    EXPECT_NEAR(bmm.top_k_achieved[0], 1.0, 1e-12);
}

TEST_F(TinyEvaluation, PerDtypeMetricsSplitTheProblemsByDtype) {
    // A third problem, float32 mm, measured 5, 10 ms and predicted the wrong way round.
    problems.push_back(make("mm", {5.0, 10.0}));
    problems.back().shape = core::make_shape(1, 64, 64, 64, "float32");
    predicted.push_back({std::log(10.0), std::log(5.0)});
    const auto report = evaluate_predictions(problems, predicted, 10);
    ASSERT_EQ(report.per_op.size(), 2u);
    ASSERT_EQ(report.per_dtype.size(), 2u);
    const auto& half = report.per_dtype[0];
    const auto& single = report.per_dtype[1];
    EXPECT_EQ(half.op, "float16");
    EXPECT_EQ(half.problems, 2u);
    EXPECT_NEAR(half.top_k_achieved[0], std::sqrt(0.5), 1e-12);  // as overall before
    EXPECT_EQ(single.op, "float32");
    EXPECT_EQ(single.problems, 1u);
    EXPECT_NEAR(single.top_k_achieved[0], 0.5, 1e-12);
    EXPECT_NEAR(single.regret_p95, 1.0, 1e-12);
    const auto j = nlohmann::json::parse(report_to_json(report));
    ASSERT_EQ(j["per_dtype"].size(), 2u);
    EXPECT_EQ(j["per_dtype"][1]["dtype"], "float32");
    EXPECT_NE(format_report(report).find("\nfloat32 "), std::string::npos);
}

TEST_F(TinyEvaluation, OneDtypePrintsNoDtypeRows) {
    const auto report = evaluate_predictions(problems, predicted, 10);
    ASSERT_EQ(report.per_dtype.size(), 1u);
    EXPECT_EQ(format_report(report).find("\nfloat16 "), std::string::npos);  // rows start with their subset
}

TEST_F(TinyEvaluation, WorstPredictionsAreTheLargestLogErrors) {
    const auto report = evaluate_predictions(problems, predicted, 2);
    ASSERT_EQ(report.worst.size(), 2u);
    double ratios[2] = {report.worst[0].ratio, report.worst[1].ratio};
    std::sort(ratios, ratios + 2);
    EXPECT_NEAR(ratios[0], 0.5, 1e-12);  // predicted 1 ms, measured 2 ms
    EXPECT_NEAR(ratios[1], 2.0, 1e-12);  // predicted 2 ms, measured 1 ms
    for (const auto& w : report.worst) {
        EXPECT_EQ(w.op, "mm");
        EXPECT_EQ(w.shape.M, 64);
        EXPECT_NEAR(w.predicted_ms / w.actual_ms, w.ratio, 1e-12);
    }
}

TEST_F(TinyEvaluation, JsonHoldsTheSameNumbers) {
    const auto report = evaluate_predictions(problems, predicted, 1);
    const auto j = nlohmann::json::parse(report_to_json(report));
    EXPECT_NEAR(j["overall"]["mape_percent"].get<double>(), 30.0, 1e-9);
    EXPECT_NEAR(j["overall"]["top_k_achieved_fraction"]["1"].get<double>(), std::sqrt(0.5), 1e-12);
    EXPECT_EQ(j["per_op"].size(), 2u);
    EXPECT_EQ(j["per_op"][1]["op"], "bmm");
    EXPECT_EQ(j["worst_predictions"].size(), 1u);
    const auto table = format_report(report);
    EXPECT_NE(table.find("overall"), std::string::npos);
    EXPECT_NE(table.find("bmm"), std::string::npos);
}

TEST(Evaluation, TiesShareAverageRanksAndUndefinedMetricsAreNaN) {
    ProblemGroup p;
    p.hardware = "gpu";
    p.op_key = "mm";
    p.shape = core::make_shape(1, 8, 8, 8, "float32");
    for (double t : {1.0, 1.0, 2.0}) {
        core::TimedConfig timed;
        timed.time_ms = t;
        p.timings.push_back(timed);
    }
    // Predicted ranks 1,2,3 against tied actual ranks 1.5,1.5,3: ρ = 0.866 (√3/2).
    const auto report = evaluate_predictions({p}, {{0.0, 0.1, 0.2}}, 0);
    EXPECT_NEAR(report.overall.spearman, std::sqrt(3.0) / 2.0, 1e-12);

    ProblemGroup single = p;
    single.timings.resize(1);
    const auto lone = evaluate_predictions({single}, {{0.0}}, 0);
    EXPECT_TRUE(std::isnan(lone.overall.spearman));
    EXPECT_TRUE(std::isnan(lone.overall.r2));
    EXPECT_NE(report_to_json(lone).find("\"r2\": null"), std::string::npos);
}

TEST(Evaluation, TopKLargerThanConfigCountUsesAllConfigs) {
    ProblemGroup p;
    p.op_key = "mm";
    p.shape = core::make_shape(1, 8, 8, 8, "float32");
    for (double t : {4.0, 1.0}) {
        core::TimedConfig timed;
        timed.time_ms = t;
        p.timings.push_back(timed);
    }
    const auto report = evaluate_predictions({p}, {{0.0, 1.0}}, 0);
    EXPECT_NEAR(report.overall.top_k_achieved[0], 0.25, 1e-12);
    EXPECT_NEAR(report.overall.top_k_achieved[1], 1.0, 1e-12);
}

// A picks the 2 ms config of a 1 ms best (regret 100 %), B picks its best (0 %).
TEST_F(TinyEvaluation, RegretIsTheLossOfTheFirstPick) {
    const auto report = evaluate_predictions(problems, predicted, 10);
    EXPECT_DOUBLE_EQ(report.overall.regret_mean, 0.5);
    EXPECT_DOUBLE_EQ(report.overall.regret_p95, 1.0);
    ASSERT_EQ(report.worst_picks.size(), 1u);  // B's pick loses nothing and is not listed
    EXPECT_EQ(report.worst_picks[0].op, "mm");
    EXPECT_DOUBLE_EQ(report.worst_picks[0].picked_ms, 2.0);
    EXPECT_DOUBLE_EQ(report.worst_picks[0].best_ms, 1.0);
    EXPECT_DOUBLE_EQ(report.worst_picks[0].regret, 1.0);
    const auto j = nlohmann::json::parse(report_to_json(report));
    EXPECT_DOUBLE_EQ(j["overall"]["regret"]["mean"].get<double>(), 0.5);
    EXPECT_EQ(j["worst_picks"].size(), 1u);
    EXPECT_NE(format_report(report).find("worst picks"), std::string::npos);
}

// With ATen, as export-lut --with-aten: the best-ranked kernel config and ATen, the faster
// kept. Problem A's kernels 4 and 2 ms and ATen 1 ms, ATen ranked first: the 2 ms kernel
// joins it, 1 ms (fraction 1). Problem B's kernels 1 and 3 ms, ATen 2 ms, the 3 ms kernel
// ranked first: 2 ms of a 1 ms best (0.5). Problem D's ATen 4 ms is ranked first, its
// kernels 1 and 2 ms: the 1 ms kernel joins it (1). Problem C has no vendor row and is left
// out of that metric. Problem E's kernel 1 ms and ATen 1.5 ms are predicted e^0.2 = 1.22
// apart, ATen faster; A, B and D's two are e apart.
TEST(Evaluation, TopOneBesideTheVendorChoiceKeepsTheFasterOfTheTwo) {
    auto problem = [](const std::vector<double>& times, bool last_is_vendor) {
        ProblemGroup p;
        p.op_key = "mm";
        p.shape = core::make_shape(1, 64, 64, 64, "float16");
        for (std::size_t i = 0; i < times.size(); ++i) {
            core::TimedConfig t;
            t.config.block_m = 16 << i;
            if (last_is_vendor && i + 1 == times.size()) t.config.name = "aten_mm";
            t.time_ms = times[i];
            p.timings.push_back(t);
        }
        return p;
    };
    const std::vector<ProblemGroup> problems = {problem({4.0, 2.0, 1.0}, true), problem({1.0, 3.0, 2.0}, true),
                                                problem({1.0, 2.0}, false), problem({1.0, 2.0, 4.0}, true),
                                                problem({1.0, 2.0, 1.5}, true)};
    const std::vector<std::vector<double>> predicted = {
        {3.0, 2.0, 1.0}, {3.0, 1.0, 2.0}, {2.0, 1.0}, {2.0, 3.0, 1.0}, {0.2, 1.0, 0.0}};
    const auto report = evaluate_predictions(problems, predicted, 0);
    EXPECT_EQ(report.overall.vendor_problems, 4u);
    const double expected = std::pow(1.0 * 0.5 * 1.0 * 1.0, 0.25);
    EXPECT_NEAR(report.overall.top1_with_vendor, expected, 1e-12);
    // Top-1 alone: A 1, B 1/3, C 1/2, D 1/4, E 2/3.
    EXPECT_NEAR(report.overall.top_k_achieved[0], std::pow(1.0 / 36.0, 0.2), 1e-12);
    // Paired within 10 %: none, each problem gets the one predicted faster (A 1, B 1/3, D 1/4,
    // E 2/3); within 25 % or more E is paired (1).
    static_assert(kAtenMargins[0] == 0.1 && kAtenMargins[1] == 0.25);
    EXPECT_NEAR(report.overall.top1_aten_within[0], std::pow(1.0 / 18.0, 0.25), 1e-12);
    EXPECT_EQ(report.overall.paired_within[0], 0u);
    EXPECT_NEAR(report.overall.top1_aten_within[1], std::pow(1.0 / 12.0, 0.25), 1e-12);
    EXPECT_EQ(report.overall.paired_within[1], 1u);
    const auto j = nlohmann::json::parse(report_to_json(report));
    EXPECT_NEAR(j["overall"]["top1_with_vendor"]["achieved_fraction"].get<double>(), expected, 1e-12);
    EXPECT_EQ(j["overall"]["top1_with_vendor"]["problems"], 4);
    EXPECT_EQ(j["overall"]["top1_with_vendor"]["aten_within"][1]["margin_percent"], 25.0);
    EXPECT_EQ(j["overall"]["top1_with_vendor"]["aten_within"][1]["paired"], 1);
    EXPECT_NE(format_report(report).find("top-1 beside the vendor choice"), std::string::npos);
    EXPECT_NE(format_report(report).find("25 %: 0.537 (1 paired)"), std::string::npos) << format_report(report);

    const auto without = evaluate_predictions({problems[2]}, {predicted[2]}, 0);
    EXPECT_TRUE(std::isnan(without.overall.top1_with_vendor));
    EXPECT_EQ(format_report(without).find("beside the vendor"), std::string::npos);
}

}  // namespace
}  // namespace mmt::model
