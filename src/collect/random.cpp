#include "matmul_toolkit/collect/random.hpp"

#include <cmath>
#include <limits>

namespace mmt::collect {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

}  // namespace

std::int64_t Rng::uniform_int(std::int64_t lo, std::int64_t hi) {
    const auto span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
    if (span == std::numeric_limits<std::uint64_t>::max()) return static_cast<std::int64_t>(next());
    const std::uint64_t range = span + 1;
    // Reject the top partial block of the 64-bit range so every value is equally likely.
    const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() -
                                std::numeric_limits<std::uint64_t>::max() % range;
    std::uint64_t x = next();
    while (x >= limit) x = next();
    return lo + static_cast<std::int64_t>(x % range);
}

double Rng::uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double Rng::normal() {
    // 1 - u keeps log's argument in (0, 1].
    const double u1 = 1.0 - uniform01();
    const double u2 = uniform01();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
}

double Rng::log_normal(double mean, double std) { return std::exp(mean + std * normal()); }

std::uint64_t derive_seed(std::uint64_t seed, std::string_view label) {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (unsigned char c : label) {
        h ^= c;
        h *= 0x100000001b3ULL;
    }
    return splitmix64(seed ^ splitmix64(h));
}

}  // namespace mmt::collect
