#pragma once
/// The kernel templates' text, embedded at build time (cmake/embed_file.cmake).

#include <string_view>

namespace mmt::collect::cuda {

/// The source NVRTC compiles: gemm_kernel_common.cuh (what both paths share), then
/// gemm_kernel.cuh (mma.sync / FMA paths and the utility kernels) and gemm_kernel_sm90.cuh
/// (wgmma path) as they were when the binary was built, joined so that a prelude defining
/// MMT_WGMMA selects the second.
std::string_view gemm_kernel_source();

/// src/collect/cuda/gemm_kernel_common.cuh alone.
std::string_view gemm_kernel_common_text();

/// src/collect/cuda/gemm_kernel.cuh alone.
std::string_view gemm_kernel_text();

/// src/collect/cuda/gemm_kernel_sm90.cuh alone.
std::string_view gemm_kernel_sm90_text();

}  // namespace mmt::collect::cuda
