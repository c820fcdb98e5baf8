#pragma once
/// Checks for every CUDA driver, NVRTC and cuBLAS call: a failure throws core::Error naming
/// the call, the error and where it happened.

#include <cublasLt.h>
#include <cuda.h>
#include <nvrtc.h>

#include <string>

namespace mmt::collect::cuda {

[[noreturn]] void throw_cuda_error(CUresult result, const char* call, const char* file, int line);
[[noreturn]] void throw_nvrtc_error(nvrtcResult result, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);

/// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", or the number when no driver can name it.
std::string cuda_error_text(CUresult result);

}  // namespace mmt::collect::cuda

#define CUDA_CHECK(call)                                                                      \
    do {                                                                                      \
        const CUresult mmt_cu_result_ = (call);                                               \
        if (mmt_cu_result_ != CUDA_SUCCESS)                                                   \
            ::mmt::collect::cuda::throw_cuda_error(mmt_cu_result_, #call, __FILE__, __LINE__); \
    } while (0)

#define NVRTC_CHECK(call)                                                                        \
    do {                                                                                         \
        const nvrtcResult mmt_nvrtc_result_ = (call);                                            \
        if (mmt_nvrtc_result_ != NVRTC_SUCCESS)                                                  \
            ::mmt::collect::cuda::throw_nvrtc_error(mmt_nvrtc_result_, #call, __FILE__, __LINE__); \
    } while (0)

#define CUBLAS_CHECK(call)                                                                         \
    do {                                                                                           \
        const cublasStatus_t mmt_cublas_status_ = (call);                                          \
        if (mmt_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                           \
            ::mmt::collect::cuda::throw_cublas_error(mmt_cublas_status_, #call, __FILE__, __LINE__); \
    } while (0)
