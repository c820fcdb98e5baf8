#include "matmul_toolkit/model/problems.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <gtest/gtest.h>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::model {
namespace {

core::TimedConfig timed(const std::string& name, double ms, int block_m = 64) {
    core::TimedConfig t;
    t.config.name = name;
    t.config.block_m = block_m;
    t.time_ms = ms;
    return t;
}

TEST(GroupProblems, ReferenceEntriesAreKeptApartFromTrainingRows) {
    core::Dataset d;
    const auto shape = core::make_shape(1, 64, 64, 64, "float16");
    d.add_timing("gpu", "mm", shape, timed("triton_mm", 2.0));
    d.add_timing("gpu", "mm", shape, timed("aten_mm", 1.5));
    d.add_timing("gpu", "mm", shape, timed("triton_mm", 3.0, 32));
    d.add_timing("gpu", "mm", shape, timed("aten_mm", 1.2));
    const auto problems = group_problems(d, "data.json");
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0].timings.size(), 2u);
    for (const auto& t : problems[0].timings) EXPECT_FALSE(is_reference_config(t.config));
    ASSERT_TRUE(problems[0].reference_ms.has_value());
    EXPECT_DOUBLE_EQ(*problems[0].reference_ms, 1.2);
    EXPECT_EQ(count_rows(problems), 2u);
}

TEST(GroupProblems, WithReferenceRowsAppendsTheFastestVendorEntry) {
    core::Dataset d;
    const auto shape = core::make_shape(1, 64, 64, 64, "float16");
    d.add_timing("gpu", "mm", shape, timed("triton_mm", 2.0));
    d.add_timing("gpu", "mm", shape, timed("aten_mm", 1.5, 1));
    d.add_timing("gpu", "mm", shape, timed("aten_mm", 1.2, 1));
    d.add_timing("gpu", "bmm", shape, timed("triton_bmm", 4.0));  // no vendor entry: unchanged
    const auto problems = with_reference_rows(group_problems(d, "data.json"));
    ASSERT_EQ(problems.size(), 2u);
    const auto& mm = problems[0].op_key == "mm" ? problems[0] : problems[1];
    const auto& bmm = problems[0].op_key == "mm" ? problems[1] : problems[0];
    ASSERT_EQ(mm.timings.size(), 2u);
    EXPECT_TRUE(is_reference_config(mm.timings.back().config));
    EXPECT_DOUBLE_EQ(mm.timings.back().time_ms, 1.2);
    EXPECT_EQ(bmm.timings.size(), 1u);
    EXPECT_EQ(count_rows(problems), 3u);
}

TEST(GroupProblems, ProblemWithOnlyReferenceEntriesIsDropped) {
    core::Dataset d;
    d.add_timing("gpu", "mm", core::make_shape(1, 64, 64, 64, "float16"), timed("aten_mm", 1.0));
    EXPECT_TRUE(group_problems(d, "x").empty());
}

TEST(GroupProblems, SameShapeOnOtherHardwareOrOpIsAnotherProblem) {
    core::Dataset d;
    const auto shape = core::make_shape(1, 64, 64, 64, "float16");
    d.add_timing("gpu-a", "mm", shape, timed("triton_mm", 1.0));
    d.add_timing("gpu-b", "mm", shape, timed("triton_mm", 1.0));
    d.add_timing("gpu-a", "mm_nt", shape, timed("triton_mm", 1.0));
    EXPECT_EQ(group_problems(d, "x").size(), 3u);
}

TEST(GroupProblems, RejectsNonPositiveAndNonFiniteTimes) {
    for (double bad : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(),
                       std::numeric_limits<double>::infinity()}) {
        core::Dataset d;
        d.add_timing("gpu", "mm", core::make_shape(1, 64, 64, 64, "float16"), timed("triton_mm", bad));
        try {
            group_problems(d, "bad.json");
            FAIL() << "accepted time " << bad;
        } catch (const core::InputError& e) {
            EXPECT_EQ(e.subject(), "bad.json");
            EXPECT_NE(std::string(e.what()).find("positive finite"), std::string::npos) << e.what();
        }
    }
}

TEST(GroupProblems, RejectsUnknownOpKey) {
    core::Dataset d;
    d.add_timing("gpu", "conv", core::make_shape(1, 64, 64, 64, "float16"), timed("triton_mm", 1.0));
    EXPECT_THROW(group_problems(d, "x"), core::InputError);
}

TEST(SelectDatasetProblems, FiltersAndExplainsAnEmptyResult) {
    core::Dataset d;
    const auto shape = core::make_shape(1, 64, 64, 64, "float16");
    d.add_timing("gpu-a", "mm", shape, timed("triton_mm", 1.0));
    d.add_timing("gpu-a", "bmm", shape, timed("triton_bmm", 1.0));
    d.add_timing("gpu-b", "mm_nt", shape, timed("triton_mm", 1.0));
    EXPECT_EQ(select_dataset_problems(d, "d.json", std::nullopt, std::nullopt).size(), 3u);
    EXPECT_EQ(select_dataset_problems(d, "d.json", std::string("gpu-a"), std::nullopt).size(), 2u);
    EXPECT_EQ(select_dataset_problems(d, "d.json", std::nullopt, std::string("mm")).size(), 2u);
    try {
        select_dataset_problems(d, "d.json", std::string("gpu-c"), std::nullopt);
        FAIL();
    } catch (const core::InputError& e) {
        const std::string what = e.what();
        EXPECT_EQ(e.subject(), "d.json");
        EXPECT_NE(what.find("--hardware-name 'gpu-c'"), std::string::npos) << what;
        EXPECT_NE(what.find("'gpu-b'"), std::string::npos) << what;
        EXPECT_NE(what.find("mm_nt"), std::string::npos) << what;
    }
    EXPECT_THROW(select_dataset_problems(core::Dataset{}, "empty.json", std::nullopt, std::nullopt),
                 core::InputError);
}

TEST(Split, EveryProblemLandsInExactlyOneSplit) {
    const auto split = split_by_problem(100, 0.15, 0.15, 7);
    EXPECT_EQ(split.validation.size(), 15u);
    EXPECT_EQ(split.test.size(), 15u);
    EXPECT_EQ(split.train.size(), 70u);
    std::set<std::size_t> seen;
    for (const auto* part : {&split.train, &split.validation, &split.test}) {
        for (auto i : *part) EXPECT_TRUE(seen.insert(i).second) << "problem " << i << " in two splits";
    }
    EXPECT_EQ(seen.size(), 100u);
    EXPECT_EQ(*seen.rbegin(), 99u);
}

TEST(Split, SameSeedSameSplitOtherSeedOtherSplit) {
    const auto a = split_by_problem(50, 0.2, 0.2, 42);
    const auto b = split_by_problem(50, 0.2, 0.2, 42);
    const auto c = split_by_problem(50, 0.2, 0.2, 43);
    EXPECT_EQ(a.train, b.train);
    EXPECT_EQ(a.test, b.test);
    EXPECT_NE(a.test, c.test);
}

TEST(Split, SmallCountsGiveEachSplitAtLeastOneProblem) {
    const auto split = split_by_problem(3, 0.15, 0.15, 1);
    EXPECT_EQ(split.train.size(), 1u);
    EXPECT_EQ(split.validation.size(), 1u);
    EXPECT_EQ(split.test.size(), 1u);
}

TEST(Split, TooFewProblemsIsAClearError) {
    try {
        split_by_problem(2, 0.15, 0.15, 1);
        FAIL();
    } catch (const core::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("at least 3"), std::string::npos) << e.what();
    }
    EXPECT_THROW(split_by_problem(10, 0.5, 0.5, 1), core::InputError);
    EXPECT_THROW(split_by_problem(10, 0.0, 0.2, 1), core::InputError);
    EXPECT_THROW(split_by_problem(10, 0.2, -0.1, 1), core::InputError);
}

TEST(Split, ZeroTestFractionTrainsOnTheTestProblemsAndKeepsTheValidationOnes) {
    const auto with_test = split_by_problem(100, 0.15, 0.15, 42);
    const auto without = split_by_problem(100, 0.15, 0.0, 42);
    EXPECT_TRUE(without.test.empty());
    EXPECT_EQ(without.validation, with_test.validation);
    EXPECT_EQ(without.train.size(), 85u);
    std::vector<std::size_t> expected = with_test.train;
    expected.insert(expected.end(), with_test.test.begin(), with_test.test.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(without.train, expected);
    // Two problems suffice then: one to train on, one to stop early on.
    const auto two = split_by_problem(2, 0.15, 0.0, 1);
    EXPECT_EQ(two.train.size(), 1u);
    EXPECT_EQ(two.validation.size(), 1u);
    EXPECT_THROW(split_by_problem(1, 0.15, 0.0, 1), core::InputError);
}

TEST(KFold, EveryProblemIsTestedOnceAndNeverTrainedOnInItsFold) {
    const std::size_t n = 23;
    const auto folds = k_fold_splits(n, 5, 0.2, 42);
    ASSERT_EQ(folds.size(), 5u);
    std::vector<int> tested(n, 0);
    for (const auto& fold : folds) {
        EXPECT_GE(fold.test.size(), 4u);
        EXPECT_LE(fold.test.size(), 5u);
        EXPECT_FALSE(fold.validation.empty());
        EXPECT_EQ(fold.train.size() + fold.validation.size() + fold.test.size(), n);
        std::set<std::size_t> seen(fold.train.begin(), fold.train.end());
        for (auto i : fold.validation) EXPECT_TRUE(seen.insert(i).second);
        for (auto i : fold.test) {
            EXPECT_TRUE(seen.insert(i).second);
            ++tested[i];
        }
    }
    for (int count : tested) EXPECT_EQ(count, 1);
    const auto again = k_fold_splits(n, 5, 0.2, 42);
    for (std::size_t f = 0; f < folds.size(); ++f) EXPECT_EQ(folds[f].test, again[f].test);
    EXPECT_NE(k_fold_splits(n, 5, 0.2, 7)[0].test, folds[0].test);
}

TEST(KFold, RejectsTooFewFoldsOrProblems) {
    EXPECT_THROW(k_fold_splits(10, 1, 0.2, 1), core::InputError);
    EXPECT_THROW(k_fold_splits(4, 5, 0.2, 1), core::InputError);
    EXPECT_THROW(k_fold_splits(10, 5, 0.0, 1), core::InputError);
    EXPECT_NO_THROW(k_fold_splits(5, 5, 0.2, 1));
}

}  // namespace
}  // namespace mmt::model
