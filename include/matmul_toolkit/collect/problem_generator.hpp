#pragma once
/// The problems a collection measures: drawn at random (uniform or log-normal sizes, as
/// torch-diode draws them) or read from a shapeset. Every draw comes from --seed.

#include <cstdint>
#include <string>
#include <vector>

#include "matmul_toolkit/collect/backend.hpp"
#include "matmul_toolkit/collect/random.hpp"
#include "matmul_toolkit/core/dataset.hpp"

namespace mmt::collect {

/// numpy-style lognormal(mean, sigma) parameters of one dimension.
struct LogNormalParams {
    double mean = 0.0;
    double std = 1.0;
};

/// How M, N and K are drawn.
struct SizeOptions {
    std::int64_t min_size = 32;
    std::int64_t max_size = 4096;
    bool power_of_two = false;    ///< only powers of two (log-normal draws round to one)
    bool no_rectangular = false;  ///< M = N = K
    bool no_odd_sizes = false;    ///< odd draws are rounded up (down at max_size) to even
    bool log_normal = false;      ///< log-normal sizes clamped to [min_size, max_size]
    /// N and K (every size with no_rectangular) rounded to the nearest multiple of this
    /// within [min_size, max_size], as the weights of real models have them; M, the token
    /// count, stays as drawn. 1: no rounding.
    std::int64_t multiple_of = 1;
    // torch-diode's defaults, fitted to sizes seen in real models.
    LogNormalParams m{6.5725472164323095, 2.556199441605505};
    LogNormalParams n{5.913930073563466, 1.66968141897024};
    LogNormalParams k{6.204916071423808, 2.1646646856090177};
};

/// What `collect` draws: num_shapes distinct problems, each with one op, dtype and layout
/// (and for bmm a batch size) drawn from the lists, as torch-diode draws one op and dtype
/// per shape.
struct GeneratorOptions {
    int num_shapes = 100;
    SizeOptions sizes;
    std::vector<std::string> ops{"mm", "addmm", "bmm"};
    std::vector<std::string> dtypes{"float32"};
    std::vector<std::string> layouts{"nn"};
    std::vector<std::int64_t> batch_sizes{1, 2, 4, 8};
};

/// Throws InputError naming the option (--num-shapes, --min-size, --ops, ...) on bad values.
void validate_generator_options(const GeneratorOptions& options);

/// Draws the problems; the same options and seed give the same list on every platform.
/// Throws InputError when the ranges hold fewer distinct problems than asked for.
std::vector<Problem> generate_problems(const GeneratorOptions& options, std::uint64_t seed);

/// One size draw (exposed for tests): M, N, K honouring every SizeOptions flag.
struct Dims {
    std::int64_t m = 0;
    std::int64_t n = 0;
    std::int64_t k = 0;
};
Dims draw_dims(const SizeOptions& options, Rng& rng);

/// A problem with a contiguous row-major [B, M, N] output, as torch returns it.
Problem make_problem(const std::string& op, const std::string& layout, std::int64_t batch,
                     std::int64_t m, std::int64_t n, std::int64_t k, const std::string& dtype);

/// The problems of a shapeset whose op (without its layout suffix) is in `operations`, in
/// file order. A non-empty `dtypes` replaces each shape's dtype by each listed dtype.
std::vector<Problem> problems_from_shapeset(const core::OperationShapeSet& shapeset,
                                            const std::vector<std::string>& operations,
                                            const std::vector<std::string>& dtypes = {});

/// "mm_nt B=1 M=128 N=256 K=64 float32", for logs.
std::string describe_problem(const Problem& problem);

}  // namespace mmt::collect
