#pragma once
/// cuBLASLt, loaded at run time with dlopen on first use: linked, its 200 MB of pages are
/// touched at every start of the binary (0.1-0.2 s), also by the commands that never time
/// a GEMM on a GPU.

#include <cublasLt.h>

#include <string>

namespace mmt::collect::cuda {

#define MMT_CUBLASLT_FUNCTIONS(X)                                                                  \
    X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetStatusName) X(cublasLtGetStatusString)       \
    X(cublasLtMatmul) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy)                     \
    X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) \
    X(cublasLtMatrixLayoutSetAttribute) X(cublasLtMatmulPreferenceCreate)                          \
    X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)                     \
    X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmulAlgoConfigGetAttribute)

/// Function pointers into libcublasLt, named as the calls, so `lt.cublasLtMatmul(...)` reads
/// like the plain call.
struct CublasLtApi {
#define MMT_DECLARE_CUBLASLT_FUNCTION(name) decltype(&::name) name = nullptr;
    MMT_CUBLASLT_FUNCTIONS(MMT_DECLARE_CUBLASLT_FUNCTION)
#undef MMT_DECLARE_CUBLASLT_FUNCTION
};

/// libcublasLt.so.<the major version of the headers built against>, loaded once; nullptr
/// when it is missing or lacks a function.
const CublasLtApi* try_load_cublaslt();

/// cuBLASLt; throws core::Error("cuBLAS", why) when it cannot be loaded.
const CublasLtApi& cublaslt();

}  // namespace mmt::collect::cuda
