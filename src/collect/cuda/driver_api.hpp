#pragma once
/// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1"), so the binary
/// starts on machines without a driver and says the CUDA device is unavailable.

#include <cuda.h>

#include <string>

namespace mmt::collect::cuda {

// Each member is named as cuda.h's macros spell the call (cuMemAlloc -> cuMemAlloc_v2), so
// `api.cuMemAlloc(...)` reads like the plain driver call.
#define MMT_CUDA_DRIVER_FUNCTIONS(X)                                                     \
    X(cuGetErrorName) X(cuGetErrorString) X(cuInit) X(cuDriverGetVersion)                \
    X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute)        \
    X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)         \
    X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxSynchronize) X(cuMemAlloc) X(cuMemFree) \
    X(cuMemGetInfo) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemsetD8Async)                   \
    X(cuMemsetD32Async) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)     \
    X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuStreamCreate) X(cuStreamDestroy)         \
    X(cuStreamSynchronize) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)           \
    X(cuEventSynchronize) X(cuEventElapsedTime) X(cuTensorMapEncodeTiled)                \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuLaunchHostFunc)

/// Function pointers into the driver.
struct DriverApi {
#define MMT_DECLARE_DRIVER_FUNCTION(name) decltype(&::name) name = nullptr;
    MMT_CUDA_DRIVER_FUNCTIONS(MMT_DECLARE_DRIVER_FUNCTION)
#undef MMT_DECLARE_DRIVER_FUNCTION
};

/// The driver, loaded and initialised (cuInit) once; nullptr when that failed.
const DriverApi* try_load_driver();

/// Why try_load_driver() returned nullptr ("" when it succeeded).
std::string driver_unavailable_reason();

/// The driver; throws core::Error with driver_unavailable_reason() when there is none.
const DriverApi& driver();

}  // namespace mmt::collect::cuda
