#include "matmul_toolkit/collect/backend.hpp"

#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect {

std::string Problem::op_key() const { return core::op_key(op, layout); }

std::array<std::int64_t, 3> Problem::a_stride() const {
    const auto m = shape.M;
    const auto k = shape.K;
    // 'n': A is a row-major [M, K] matrix; 't': A is the transposed view of a row-major [K, M].
    if (layout[0] == 't') return {m * k, 1, m};
    return {m * k, k, 1};
}

std::array<std::int64_t, 3> Problem::b_stride() const {
    const auto k = shape.K;
    const auto n = shape.N;
    if (layout[1] == 't') return {k * n, 1, k};
    return {k * n, n, 1};
}

double Problem::flops() const {
    return 2.0 * static_cast<double>(shape.B) * static_cast<double>(shape.M) *
           static_cast<double>(shape.N) * static_cast<double>(shape.K);
}

std::vector<Backend::BatchEntry> Backend::measure_batch(const Problem&, const std::vector<core::GemmConfig>&,
                                                        const std::string&, bool, const TimingOptions&) {
    throw core::Error(name() + " backend", "does not measure in batches (time() per config)");
}

}  // namespace mmt::collect
