#pragma once
/// Run-time compilation of the embedded kernel template with NVRTC.

#include <string>
#include <string_view>

namespace mmt::collect::cuda {

/// A compiled kernel image, or why there is none.
struct CompileResult {
    bool ok = false;
    std::string image;  ///< CUBIN for "sm_XX" targets, PTX text for "compute_XX"
    std::string log;    ///< NVRTC's log (errors, or warnings)
    double seconds = 0.0;
};

/// Compiles prelude + source for `arch`: "sm_90" gives a CUBIN the driver loads as is,
/// "compute_90" PTX only (no GPU or driver needed). Never throws on a compile error: the
/// result says what went wrong; throws core::Error only when NVRTC itself fails.
CompileResult compile_kernel(const std::string& prelude, std::string_view source, const std::string& arch);

/// "13.0": the NVRTC that compiles kernels (part of every cache key).
std::string nvrtc_version();

/// The NVRTC options used for `arch` (logged with failures; part of the cache key).
std::string nvrtc_options_text(const std::string& arch);

/// 64-bit FNV-1a hash, as 16 hex digits (cache keys and file names).
std::string hash_hex(std::string_view text);

}  // namespace mmt::collect::cuda
