// Progress output: durations for the ETA, and sinks that take every event.

#include "matmul_toolkit/collect/progress.hpp"

#include <gtest/gtest.h>

namespace mmt::collect {
namespace {

TEST(FormatDuration, UsesTheTwoLargestUnits) {
    EXPECT_EQ(format_duration(0.4), "0s");
    EXPECT_EQ(format_duration(12.0), "12s");
    EXPECT_EQ(format_duration(185.0), "3m05s");
    EXPECT_EQ(format_duration(3725.0), "1h02m");
    EXPECT_EQ(format_duration(-5.0), "0s");
}

ProgressState halfway() {
    ProgressState state;
    state.problems_total = 4;
    state.problems_done = 2;
    state.configs_per_second = 12.5;
    state.eta_seconds = 65.0;
    state.current = "mm B=1 M=10 N=20 K=30 float32";
    return state;
}

TEST(UpdateRates, RateFromTimedConfigsAndEtaFromFinishedProblems) {
    ProgressState state;
    state.problems_total = 10;
    state.problems_done = 4;  // 2 resumed from files + 2 finished this run
    update_rates(state, 8.0, 200, 0);
    EXPECT_DOUBLE_EQ(state.configs_per_second, 25.0);
    EXPECT_LT(state.eta_seconds, 0.0);  // unknown before a problem finishes
    update_rates(state, 8.0, 200, 2);
    EXPECT_DOUBLE_EQ(state.elapsed_seconds, 8.0);
    EXPECT_EQ(state.configs_timed, 200u);
    EXPECT_DOUBLE_EQ(state.eta_seconds, 24.0);  // 4 s per problem x 6 left
    update_rates(state, 0.0, 0, 0);
    EXPECT_DOUBLE_EQ(state.configs_per_second, 0.0);
}

TEST(BarProgress, DrawsDoneOverTotalRateEtaAndTheProblemOnStderr) {
    auto bar = make_bar_progress();
    ::testing::internal::CaptureStderr();
    bar->on_problem_done(halfway(), "ignored");
    const std::string text = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(text.front(), '\r');  // redrawn in place
    EXPECT_NE(text.find("[==============>             ] 2/4 problems"), std::string::npos) << text;
    EXPECT_NE(text.find("12.5 configs/s, ETA 1m05s"), std::string::npos) << text;
    EXPECT_NE(text.find("mm B=1 M=10 N=20 K=30 float32"), std::string::npos) << text;
}

TEST(SilentProgress, PrintsNothing) {
    auto silent = make_silent_progress();
    ::testing::internal::CaptureStderr();
    ::testing::internal::CaptureStdout();
    silent->on_start(halfway());
    silent->on_problem_done(halfway(), "line");
    silent->on_finish(halfway());
    EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace mmt::collect
