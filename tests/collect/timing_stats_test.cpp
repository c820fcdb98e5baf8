// Median, min, max and spread of repeated timings.

#include "matmul_toolkit/collect/timing_stats.hpp"

#include <gtest/gtest.h>

namespace mmt::collect {
namespace {

TEST(Median, OfAnOddCountIsTheMiddleValue) { EXPECT_DOUBLE_EQ(median({5.0, 1.0, 3.0}), 3.0); }

TEST(Median, OfAnEvenCountIsTheMeanOfTheTwoMiddleValues) {
    EXPECT_DOUBLE_EQ(median({4.0, 1.0, 3.0, 10.0}), 3.5);
}

TEST(Median, OfNothingIsZero) { EXPECT_DOUBLE_EQ(median({}), 0.0); }

TEST(SummarizeSamples, SetsMedianMinMaxAndSpread) {
    Timing t;
    t.samples_ms = {2.0, 1.0, 4.0, 2.0, 3.0};
    summarize_samples(t);
    EXPECT_DOUBLE_EQ(t.median_ms, 2.0);
    EXPECT_DOUBLE_EQ(t.min_ms, 1.0);
    EXPECT_DOUBLE_EQ(t.max_ms, 4.0);
    EXPECT_DOUBLE_EQ(relative_spread(t), 1.5);  // (4 - 1) / 2
}

}  // namespace
}  // namespace mmt::collect
