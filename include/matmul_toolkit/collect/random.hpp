#pragma once
/// Seeded random numbers that are identical on every standard library: std::mt19937_64's
/// output sequence is fixed by the standard, but std::*_distribution is not, so the
/// transforms to integers, reals and normals are our own.

#include <cstdint>
#include <random>
#include <string_view>

namespace mmt::collect {

class Rng {
public:
    explicit Rng(std::uint64_t seed) : m_engine(seed) {}

    std::uint64_t next() { return m_engine(); }
    /// Uniform integer in [lo, hi] (rejection sampling, no modulo bias); requires lo <= hi.
    std::int64_t uniform_int(std::int64_t lo, std::int64_t hi);
    /// Uniform double in [0, 1) with 53 random bits.
    double uniform01();
    /// Uniform double in [lo, hi).
    double uniform(double lo, double hi) { return lo + (hi - lo) * uniform01(); }
    /// Standard normal (Box-Muller).
    double normal();
    /// exp(mean + std · normal()): numpy's lognormal(mean, sigma).
    double log_normal(double mean, double std) ;
    /// An index in [0, n).
    std::size_t index(std::size_t n) { return static_cast<std::size_t>(uniform_int(0, static_cast<std::int64_t>(n) - 1)); }

private:
    std::mt19937_64 m_engine;
};

/// A seed derived from `seed` and a label (splitmix64 over FNV-1a), so independent streams
/// (problem sizes, operand data per problem) don't share draws.
std::uint64_t derive_seed(std::uint64_t seed, std::string_view label);

}  // namespace mmt::collect
