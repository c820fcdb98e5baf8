#pragma once
/// Core value types shared by every area: kernel configs, GEMM problems and timings.
/// Field names follow torch-diode's types so files move between the two tools.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mmt::core {

/// A Triton-style GEMM kernel configuration (torch-diode's TritonGEMMConfig).
struct GemmConfig {
    std::string name = "mm";
    std::int64_t grid = 1;
    int block_m = 64;
    int block_n = 64;
    int block_k = 32;
    int group_m = 8;
    int num_stages = 2;
    int num_warps = 4;
    bool even_k = false;          ///< EVEN_K: K is a multiple of block_k, no K mask needed.
    bool allow_tf32 = false;      ///< ALLOW_TF32
    bool use_fast_accum = false;  ///< USE_FAST_ACCUM
    std::string acc_type = "tl.float32";  ///< ACC_TYPE, as Triton spells it.
    int version = 1;

    bool operator==(const GemmConfig& other) const;
    bool operator!=(const GemmConfig& other) const { return !(*this == other); }
};

/// True for a vendor-library entry ("aten_mm", "aten_addmm", "aten_bmm": Inductor's extern
/// choices), whose tile fields are placeholders.
bool is_vendor_entry(const GemmConfig& config);

/// Hash over every field that takes part in equality.
struct GemmConfigHash {
    std::size_t operator()(const GemmConfig& config) const;
};

/// One GEMM problem as torch-diode keys it (its MMShape). Dtypes are torch dtype names.
struct MMShape {
    std::int64_t B = 1;
    std::int64_t M = 0;
    std::int64_t N = 0;
    std::int64_t K = 0;
    std::string M_dtype = "float16";
    std::string K_dtype = "float16";
    std::string out_dtype = "float16";
    std::array<std::int64_t, 3> out_size{1, 0, 0};
    std::array<std::int64_t, 3> out_stride{0, 0, 1};
    int version = 1;

    bool operator==(const MMShape& other) const;
    bool operator!=(const MMShape& other) const { return !(*this == other); }
};

struct MMShapeHash {
    std::size_t operator()(const MMShape& shape) const;
};

/// Builds a shape with a contiguous row-major [B, M, N] output, as torch returns it.
MMShape make_shape(std::int64_t B, std::int64_t M, std::int64_t N, std::int64_t K,
                   const std::string& dtype);

/// A config and its measured runtime in milliseconds.
struct TimedConfig {
    GemmConfig config;
    double time_ms = 0.0;
    int version = 1;
};

/// Size in bytes of one element of a torch dtype name; throws on an unknown name.
int dtype_size(const std::string& dtype);

/// True for the torch dtype names this toolkit understands.
bool is_known_dtype(const std::string& dtype);

/// The dtype names is_known_dtype accepts, for error messages and --help.
const std::vector<std::string>& known_dtypes();

/// The GEMM operations: "mm", "addmm", "bmm".
const std::vector<std::string>& known_ops();
bool is_known_op(const std::string& op);

/// Operand layouts: first letter A, second letter B; 'n' row-major, 't' column-major
/// (the operand is a transposed view), as in BLAS.
const std::vector<std::string>& known_layouts();
bool is_known_layout(const std::string& layout);

/// The dataset's operation key. torch-diode's MMShape has no input strides, so a
/// non-default layout is carried in the key: "mm" for nn, "mm_nt" for nt, and so on.
std::string op_key(const std::string& op, const std::string& layout);

/// Splits an operation key into {op, layout}; a bare op name has layout "nn".
/// Throws on a key whose op or layout is unknown.
std::pair<std::string, std::string> parse_op_key(const std::string& key);

/// Triton's accumulator type for a dtype ("tl.float32", or "tl.int32" for int8).
std::string acc_type_for(const std::string& dtype);

}  // namespace mmt::core
