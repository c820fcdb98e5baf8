// Seeded random numbers: the engine's standard-fixed sequence and our own transforms.

#include "matmul_toolkit/collect/random.hpp"

#include <cmath>
#include <set>

#include <gtest/gtest.h>

namespace mmt::collect {
namespace {

TEST(Rng, FollowsTheStandardsMt19937_64Sequence) {
    // The C++ standard fixes mt19937_64's output: with the default seed 5489 the first
    // value is 14514284786278117030 and the 10000th is 9981545732273789042.
    Rng rng(5489);
    EXPECT_EQ(rng.next(), 14514284786278117030ULL);
    for (int i = 2; i < 10000; ++i) rng.next();
    EXPECT_EQ(rng.next(), 9981545732273789042ULL);
}

TEST(Rng, TransformsAreOurOwnArithmetic) {
    // 14514284786278117030 % 10 == 0; (x >> 11) / 2^53 == 0.7868209548678019.
    Rng a(5489);
    EXPECT_EQ(a.uniform_int(0, 9), 0);
    Rng b(5489);
    EXPECT_DOUBLE_EQ(b.uniform01(), 0.7868209548678019);
    Rng c(5489);
    EXPECT_DOUBLE_EQ(c.uniform(10.0, 20.0), 17.868209548678019);
}

TEST(Rng, UniformIntStaysInRangeAndReachesBothEnds) {
    Rng rng(7);
    std::set<std::int64_t> seen;
    for (int i = 0; i < 2000; ++i) {
        const auto v = rng.uniform_int(-3, 3);
        ASSERT_GE(v, -3);
        ASSERT_LE(v, 3);
        seen.insert(v);
    }
    EXPECT_EQ(seen.size(), 7u);
    EXPECT_EQ(rng.uniform_int(5, 5), 5);
}

TEST(Rng, NormalHasMeanZeroAndUnitVariance) {
    Rng rng(11);
    const int n = 20000;
    double sum = 0.0, sum_sq = 0.0;
    for (int i = 0; i < n; ++i) {
        const double x = rng.normal();
        sum += x;
        sum_sq += x * x;
    }
    const double mean = sum / n;
    EXPECT_NEAR(mean, 0.0, 0.05);
    EXPECT_NEAR(sum_sq / n - mean * mean, 1.0, 0.05);
}

TEST(Rng, LogNormalIsExpOfANormal) {
    Rng rng(3);
    Rng same(3);
    EXPECT_DOUBLE_EQ(rng.log_normal(2.0, 0.5), std::exp(2.0 + 0.5 * same.normal()));
    EXPECT_DOUBLE_EQ(rng.log_normal(std::log(100.0), 0.0), std::exp(std::log(100.0)));
}

TEST(DeriveSeed, IsDeterministicAndSeparatesLabelsAndSeeds) {
    EXPECT_EQ(derive_seed(42, "sizes"), derive_seed(42, "sizes"));
    EXPECT_NE(derive_seed(42, "sizes"), derive_seed(42, "operands"));
    EXPECT_NE(derive_seed(42, "sizes"), derive_seed(43, "sizes"));
}

}  // namespace
}  // namespace mmt::collect
