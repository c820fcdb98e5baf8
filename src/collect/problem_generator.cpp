#include "matmul_toolkit/collect/problem_generator.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "matmul_toolkit/collect/random.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect {
namespace {

std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
    return out;
}

int floor_log2(std::int64_t x) {
    int e = 0;
    while ((std::int64_t{1} << (e + 1)) <= x) ++e;
    return e;
}

int ceil_log2(std::int64_t x) {
    int e = floor_log2(x);
    return (std::int64_t{1} << e) < x ? e + 1 : e;
}

bool has_even_in(std::int64_t lo, std::int64_t hi) { return lo < hi || lo % 2 == 0; }

std::int64_t make_even(std::int64_t v, const SizeOptions& o) {
    if (v % 2 == 0) return v;
    return v + 1 <= o.max_size ? v + 1 : v - 1;
}

std::int64_t first_multiple(std::int64_t lo, std::int64_t step) { return (lo + step - 1) / step * step; }

/// The multiple of `o.multiple_of` nearest to v (halves round up) within the size range.
std::int64_t round_to_multiple(std::int64_t v, const SizeOptions& o) {
    const std::int64_t step = o.multiple_of;
    if (step <= 1) return v;
    const std::int64_t nearest = (v + step / 2) / step * step;
    return std::clamp(nearest, first_multiple(o.min_size, step), o.max_size / step * step);
}

std::int64_t draw_dim(const SizeOptions& o, const LogNormalParams& params, Rng& rng) {
    std::int64_t v = 0;
    if (o.log_normal) {
        const double x = rng.log_normal(params.mean, params.std);
        const double clamped = std::clamp(x, static_cast<double>(o.min_size),
                                          static_cast<double>(o.max_size));
        if (o.power_of_two) {
            const int e = static_cast<int>(std::lround(std::log2(clamped)));
            v = std::int64_t{1} << std::clamp(e, ceil_log2(o.min_size), floor_log2(o.max_size));
        } else {
            v = static_cast<std::int64_t>(std::floor(clamped));
        }
    } else if (o.power_of_two) {
        v = std::int64_t{1} << rng.uniform_int(ceil_log2(o.min_size), floor_log2(o.max_size));
    } else {
        v = rng.uniform_int(o.min_size, o.max_size);
    }
    if (o.no_odd_sizes) v = make_even(v, o);
    return v;
}

}  // namespace

void validate_generator_options(const GeneratorOptions& o) {
    if (o.num_shapes < 1) {
        throw core::InputError("--num-shapes", "must be at least 1, got " + std::to_string(o.num_shapes));
    }
    const auto& s = o.sizes;
    if (s.min_size < 1) {
        throw core::InputError("--min-size", "must be at least 1, got " + std::to_string(s.min_size));
    }
    if (s.max_size < s.min_size) {
        throw core::InputError("--max-size", "must be at least --min-size (" +
                                                 std::to_string(s.min_size) + "), got " +
                                                 std::to_string(s.max_size));
    }
    if (s.power_of_two && ceil_log2(s.min_size) > floor_log2(s.max_size)) {
        throw core::InputError("--power-of-two", "no power of two lies in [" +
                                                     std::to_string(s.min_size) + ", " +
                                                     std::to_string(s.max_size) + "]");
    }
    if (s.multiple_of < 1) {
        throw core::InputError("--multiple-of", "must be at least 1, got " + std::to_string(s.multiple_of));
    }
    if (first_multiple(s.min_size, s.multiple_of) > s.max_size) {
        throw core::InputError("--multiple-of", "no multiple of " + std::to_string(s.multiple_of) + " lies in [" +
                                                    std::to_string(s.min_size) + ", " +
                                                    std::to_string(s.max_size) + "]");
    }
    if (s.no_odd_sizes && !has_even_in(s.min_size, s.max_size)) {
        throw core::InputError("--no-odd-sizes", "no even size lies in [" +
                                                     std::to_string(s.min_size) + ", " +
                                                     std::to_string(s.max_size) + "]");
    }
    const std::pair<const char*, const LogNormalParams*> params[] = {
        {"--log-normal-m-std", &s.m}, {"--log-normal-n-std", &s.n}, {"--log-normal-k-std", &s.k}};
    for (const auto& [flag, p] : params) {
        if (!(p->std >= 0.0) || !std::isfinite(p->std) || !std::isfinite(p->mean)) {
            throw core::InputError(flag, "must be a finite, non-negative number");
        }
    }
    if (o.ops.empty()) throw core::InputError("--ops", "at least one operation is needed");
    for (const auto& op : o.ops) {
        if (!core::is_known_op(op)) {
            throw core::InputError("--ops", "unknown operation '" + op + "' (expected one of " +
                                                join(core::known_ops()) + ")");
        }
    }
    if (o.dtypes.empty()) throw core::InputError("--dtypes", "at least one dtype is needed");
    for (const auto& dtype : o.dtypes) {
        if (!core::is_known_dtype(dtype)) {
            throw core::InputError("--dtypes", "unknown dtype '" + dtype + "' (expected one of " +
                                                   join(core::known_dtypes()) + ")");
        }
    }
    // Ops and dtypes are drawn independently, so an int8 run must not draw another op.
    const bool int8 = std::find(o.dtypes.begin(), o.dtypes.end(), "int8") != o.dtypes.end();
    if (int8 && std::any_of(o.ops.begin(), o.ops.end(), [](const std::string& op) { return op != "mm"; })) {
        throw core::InputError("--dtypes", "int8 is torch._int_mm, which exists for mm only: give --ops mm "
                                           "(collect other ops in a run of their own)");
    }
    if (o.layouts.empty()) throw core::InputError("--layouts", "at least one layout is needed");
    for (const auto& layout : o.layouts) {
        if (!core::is_known_layout(layout)) {
            throw core::InputError("--layouts", "unknown layout '" + layout +
                                                    "' (expected one of " +
                                                    join(core::known_layouts()) + ")");
        }
    }
    const bool has_bmm = std::find(o.ops.begin(), o.ops.end(), "bmm") != o.ops.end();
    if (has_bmm && o.batch_sizes.empty()) {
        throw core::InputError("--batch-sizes", "bmm needs at least one batch size");
    }
    for (auto b : o.batch_sizes) {
        if (b < 1) throw core::InputError("--batch-sizes", "must be at least 1, got " + std::to_string(b));
    }
}

Dims draw_dims(const SizeOptions& options, Rng& rng) {
    Dims d;
    d.m = draw_dim(options, options.m, rng);
    if (options.no_rectangular) {
        d.m = d.n = d.k = round_to_multiple(d.m, options);
    } else {
        d.n = round_to_multiple(draw_dim(options, options.n, rng), options);
        d.k = round_to_multiple(draw_dim(options, options.k, rng), options);
    }
    return d;
}

Problem make_problem(const std::string& op, const std::string& layout, std::int64_t batch,
                     std::int64_t m, std::int64_t n, std::int64_t k, const std::string& dtype) {
    Problem p;
    p.op = op;
    p.layout = layout;
    p.shape = core::make_shape(batch, m, n, k, dtype);
    return p;
}

// torch._int_mm on CUDA (cuBLASLt) takes M > 16 and K, N multiples of 8 (K > 16): int8
// problems are moved to the nearest such sizes, so every backend times what torch can run.
Dims int_mm_dims(Dims d, std::int64_t max_size) {
    const auto multiple_of_8 = [max_size](std::int64_t v, std::int64_t at_least) {
        v = std::max((v + 7) / 8 * 8, at_least);
        return v > max_size && v - 8 >= at_least ? v - 8 : v;
    };
    d.m = std::max<std::int64_t>(d.m, 17);
    d.n = multiple_of_8(d.n, 8);
    d.k = multiple_of_8(d.k, 24);
    return d;
}

std::vector<Problem> generate_problems(const GeneratorOptions& o, std::uint64_t seed) {
    validate_generator_options(o);
    Rng rng(derive_seed(seed, "problem-sizes"));
    std::vector<Problem> problems;
    std::unordered_set<std::string> seen;
    const auto wanted = static_cast<std::size_t>(o.num_shapes);
    // Narrow ranges (e.g. --power-of-two 32..64) hold few distinct problems: give up after
    // enough draws instead of looping forever.
    const std::size_t max_draws = std::max<std::size_t>(10000, 200 * wanted);
    for (std::size_t draw = 0; draw < max_draws && problems.size() < wanted; ++draw) {
        Dims d = draw_dims(o.sizes, rng);
        const auto& op = o.ops[rng.index(o.ops.size())];
        const auto& dtype = o.dtypes[rng.index(o.dtypes.size())];
        if (dtype == "int8") d = int_mm_dims(d, o.sizes.max_size);
        const auto& layout = o.layouts[rng.index(o.layouts.size())];
        const std::int64_t batch = op == "bmm" ? o.batch_sizes[rng.index(o.batch_sizes.size())] : 1;
        Problem p = make_problem(op, layout, batch, d.m, d.n, d.k, dtype);
        if (seen.insert(p.op_key() + core::shape_key(p.shape)).second) problems.push_back(std::move(p));
    }
    if (problems.size() < wanted) {
        throw core::InputError("--num-shapes",
                               "asked for " + std::to_string(wanted) + " distinct problems but the "
                               "size range and lists give only " + std::to_string(problems.size()) +
                               " in " + std::to_string(max_draws) + " draws");
    }
    return problems;
}

std::vector<Problem> problems_from_shapeset(const core::OperationShapeSet& shapeset,
                                            const std::vector<std::string>& operations,
                                            const std::vector<std::string>& dtypes) {
    for (const auto& op : operations) {
        if (!core::is_known_op(op)) {
            throw core::InputError("--operations", "unknown operation '" + op +
                                                       "' (expected one of " +
                                                       join(core::known_ops()) + ")");
        }
    }
    for (const auto& dtype : dtypes) {
        if (!core::is_known_dtype(dtype)) {
            throw core::InputError("--dtypes", "unknown dtype '" + dtype + "' (expected one of " +
                                                   join(core::known_dtypes()) + ")");
        }
    }
    std::vector<Problem> problems;
    std::unordered_set<std::string> seen;
    auto add = [&](Problem p) {
        if (seen.insert(p.op_key() + core::shape_key(p.shape)).second) problems.push_back(std::move(p));
    };
    for (const auto& entry : shapeset.operations) {
        const auto [op, layout] = core::parse_op_key(entry.op);
        if (std::find(operations.begin(), operations.end(), op) == operations.end()) continue;
        for (const auto& shape : entry.shapes) {
            Problem p;
            p.op = op;
            p.layout = layout;
            p.shape = shape;
            if (dtypes.empty()) {
                add(p);
                continue;
            }
            for (const auto& dtype : dtypes) {
                Problem q = p;
                q.shape.M_dtype = q.shape.K_dtype = q.shape.out_dtype = dtype;
                add(q);
            }
        }
    }
    return problems;
}

std::string describe_problem(const Problem& p) {
    return p.op_key() + " B=" + std::to_string(p.shape.B) + " M=" + std::to_string(p.shape.M) +
           " N=" + std::to_string(p.shape.N) + " K=" + std::to_string(p.shape.K) + " " + p.dtype();
}

}  // namespace mmt::collect
