#include "matmul_toolkit/core/types.hpp"

#include <algorithm>
#include <functional>
#include <tuple>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::core {
namespace {

// boost::hash_combine's mixing step: cheap and good enough for unordered_map keys.
void hash_combine(std::size_t& seed, std::size_t value) {
    seed ^= value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2);
}

template <typename T>
void hash_field(std::size_t& seed, const T& value) {
    hash_combine(seed, std::hash<T>{}(value));
}

struct DtypeInfo {
    const char* name;
    int size;
};

constexpr DtypeInfo kDtypes[] = {
    {"float16", 2}, {"bfloat16", 2}, {"float32", 4}, {"float64", 8},
    {"int8", 1},    {"uint8", 1},    {"int16", 2},   {"int32", 4},
    {"int64", 8},   {"float8_e4m3fn", 1}, {"float8_e5m2", 1},
};

}  // namespace

bool GemmConfig::operator==(const GemmConfig& o) const {
    return std::tie(name, grid, block_m, block_n, block_k, group_m, num_stages, num_warps,
                    even_k, allow_tf32, use_fast_accum, acc_type, version) ==
           std::tie(o.name, o.grid, o.block_m, o.block_n, o.block_k, o.group_m, o.num_stages,
                    o.num_warps, o.even_k, o.allow_tf32, o.use_fast_accum, o.acc_type, o.version);
}

bool is_vendor_entry(const GemmConfig& config) { return config.name.rfind("aten_", 0) == 0; }

std::size_t GemmConfigHash::operator()(const GemmConfig& c) const {
    std::size_t seed = 0;
    hash_field(seed, c.name);
    hash_field(seed, c.grid);
    hash_field(seed, c.block_m);
    hash_field(seed, c.block_n);
    hash_field(seed, c.block_k);
    hash_field(seed, c.group_m);
    hash_field(seed, c.num_stages);
    hash_field(seed, c.num_warps);
    hash_field(seed, c.even_k);
    hash_field(seed, c.allow_tf32);
    hash_field(seed, c.use_fast_accum);
    hash_field(seed, c.acc_type);
    hash_field(seed, c.version);
    return seed;
}

bool MMShape::operator==(const MMShape& o) const {
    return std::tie(B, M, N, K, M_dtype, K_dtype, out_dtype, out_size, out_stride, version) ==
           std::tie(o.B, o.M, o.N, o.K, o.M_dtype, o.K_dtype, o.out_dtype, o.out_size,
                    o.out_stride, o.version);
}

std::size_t MMShapeHash::operator()(const MMShape& s) const {
    std::size_t seed = 0;
    hash_field(seed, s.B);
    hash_field(seed, s.M);
    hash_field(seed, s.N);
    hash_field(seed, s.K);
    hash_field(seed, s.M_dtype);
    hash_field(seed, s.K_dtype);
    hash_field(seed, s.out_dtype);
    for (auto v : s.out_size) hash_field(seed, v);
    for (auto v : s.out_stride) hash_field(seed, v);
    hash_field(seed, s.version);
    return seed;
}

MMShape make_shape(std::int64_t B, std::int64_t M, std::int64_t N, std::int64_t K,
                   const std::string& dtype) {
    MMShape shape;
    shape.B = B;
    shape.M = M;
    shape.N = N;
    shape.K = K;
    shape.M_dtype = dtype;
    shape.K_dtype = dtype;
    // int8 x int8 accumulates and returns int32, as torch._int_mm does.
    shape.out_dtype = dtype == "int8" ? "int32" : dtype;
    shape.out_size = {B, M, N};
    shape.out_stride = {M * N, N, 1};
    return shape;
}

int dtype_size(const std::string& dtype) {
    for (const auto& info : kDtypes) {
        if (dtype == info.name) return info.size;
    }
    throw InputError("dtype", "unknown dtype '" + dtype + "'");
}

bool is_known_dtype(const std::string& dtype) {
    return std::any_of(std::begin(kDtypes), std::end(kDtypes),
                       [&](const DtypeInfo& info) { return dtype == info.name; });
}

const std::vector<std::string>& known_dtypes() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (const auto& info : kDtypes) out.emplace_back(info.name);
        return out;
    }();
    return names;
}

const std::vector<std::string>& known_ops() {
    static const std::vector<std::string> ops{"mm", "addmm", "bmm"};
    return ops;
}

bool is_known_op(const std::string& op) {
    const auto& ops = known_ops();
    return std::find(ops.begin(), ops.end(), op) != ops.end();
}

const std::vector<std::string>& known_layouts() {
    static const std::vector<std::string> layouts{"nn", "nt", "tn", "tt"};
    return layouts;
}

bool is_known_layout(const std::string& layout) {
    const auto& layouts = known_layouts();
    return std::find(layouts.begin(), layouts.end(), layout) != layouts.end();
}

std::string op_key(const std::string& op, const std::string& layout) {
    return layout == "nn" ? op : op + "_" + layout;
}

std::pair<std::string, std::string> parse_op_key(const std::string& key) {
    std::string op = key;
    std::string layout = "nn";
    const auto underscore = key.rfind('_');
    if (underscore != std::string::npos) {
        op = key.substr(0, underscore);
        layout = key.substr(underscore + 1);
    }
    if (!is_known_op(op) || !is_known_layout(layout)) {
        throw InputError("operation '" + key + "'",
                         "unknown operation (expected mm, addmm or bmm, optionally "
                         "followed by _nt, _tn or _tt)");
    }
    return {op, layout};
}

std::string acc_type_for(const std::string& dtype) {
    if (dtype == "int8" || dtype == "uint8") return "tl.int32";
    return "tl.float32";
}

}  // namespace mmt::core
