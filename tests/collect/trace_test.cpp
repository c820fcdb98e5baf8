// Chrome traces: one complete event per timed call and per timed run, named by config.

#include "matmul_toolkit/collect/trace.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "matmul_toolkit/collect/problem_generator.hpp"

namespace mmt::collect {
namespace {

TEST(ProblemTrace, HasACallEventAndOneEventPerRunEndingWithTheCall) {
    ProblemTrace trace("mm B=1 M=8 N=8 K=8 float32");
    Timing t;
    t.samples_ms = {1.0, 2.0};
    t.sample_starts_ms = {0.0, 1.5};  // a 0.5 ms gap between the runs
    t.median_ms = 1.5;
    trace.add_timing("64x64x32 g8 s1 w4", 1000.0, 5000.0, t);
    trace.add_failure("16x16x16 g8 s1 w4", 5000.0, 5100.0, "wrong result");

    const auto doc = nlohmann::json::parse(trace.to_json());
    const auto& events = doc["traceEvents"];
    ASSERT_EQ(events.size(), 4u);
    EXPECT_EQ(events[0]["name"], "64x64x32 g8 s1 w4");
    EXPECT_EQ(events[0]["cat"], "config");
    EXPECT_EQ(events[0]["ph"], "X");
    EXPECT_DOUBLE_EQ(events[0]["ts"].get<double>(), 1000.0);
    EXPECT_DOUBLE_EQ(events[0]["dur"].get<double>(), 4000.0);
    // The timed phase lasts 3.5 ms and ends at 5000 µs: runs start at 1500 and 3000 µs.
    EXPECT_EQ(events[1]["cat"], "run");
    EXPECT_DOUBLE_EQ(events[1]["ts"].get<double>(), 1500.0);
    EXPECT_DOUBLE_EQ(events[1]["dur"].get<double>(), 1000.0);
    EXPECT_DOUBLE_EQ(events[2]["ts"].get<double>(), 3000.0);
    EXPECT_DOUBLE_EQ(events[2]["dur"].get<double>(), 2000.0);
    EXPECT_EQ(events[3]["cat"], "failure");
    EXPECT_EQ(events[3]["args"]["detail"], "wrong result");
    EXPECT_EQ(doc["otherData"]["problem"], "mm B=1 M=8 N=8 K=8 float32");
    EXPECT_EQ(doc["displayTimeUnit"], "ms");
}

TEST(ProblemTrace, RunsWithoutStartsAreDrawnBackToBack) {
    ProblemTrace trace("p");
    Timing t;
    t.samples_ms = {1.0, 1.0};
    trace.add_timing("c", 0.0, 10000.0, t);
    const auto events = nlohmann::json::parse(trace.to_json())["traceEvents"];
    EXPECT_DOUBLE_EQ(events[1]["ts"].get<double>(), 8000.0);
    EXPECT_DOUBLE_EQ(events[2]["ts"].get<double>(), 9000.0);
}

TEST(TracePath, NamesIndexOpSizesAndDtype) {
    EXPECT_EQ(trace_path("t", 7, make_problem("mm", "nt", 1, 128, 256, 64, "float32")),
              std::filesystem::path("t/0007_mm_nt_B1_M128_N256_K64_float32.json"));
}

}  // namespace
}  // namespace mmt::collect
