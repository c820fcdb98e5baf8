#pragma once
/// The kernel template's text, embedded at build time (cmake/embed_file.cmake).

#include <string_view>

namespace mmt::collect::cuda {

/// src/collect/cuda/gemm_kernel.cuh as it was when the binary was built.
std::string_view gemm_kernel_source();

}  // namespace mmt::collect::cuda
