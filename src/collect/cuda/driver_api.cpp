#include "driver_api.hpp"

#include <dlfcn.h>

#include <mutex>

#include "cublaslt_api.hpp"
#include "cuda_check.hpp"
#include "matmul_toolkit/collect/device_fault.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect::cuda {
namespace {

struct LoadedDriver {
    DriverApi api;
    bool ok = false;
    std::string reason;
};

LoadedDriver load() {
    LoadedDriver d;
    // Never dlclose'd: the driver lives as long as the process, as cuBLAS expects.
    void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* err = dlerror();
        d.reason = std::string("no CUDA driver (") + (err ? err : "libcuda.so.1 not found") + ")";
        return d;
    }
    using GetProcAddress = decltype(&::cuGetProcAddress);  // cuGetProcAddress_v2 (CUDA >= 12)
    auto get_proc = reinterpret_cast<GetProcAddress>(dlsym(handle, "cuGetProcAddress_v2"));
    if (get_proc == nullptr) {
        d.reason = "the CUDA driver is older than 12.0 (no cuGetProcAddress_v2)";
        return d;
    }
    // Ask for each entry point as this header (CUDA_VERSION) declares it, so every pointer
    // has the signature of its decltype.
#define MMT_RESOLVE(name)                                                                                 \
    {                                                                                                     \
        void* fn = nullptr;                                                                               \
        CUdriverProcAddressQueryResult status{};                                                          \
        if (get_proc(#name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS ||   \
            fn == nullptr) {                                                                              \
            d.reason = "the CUDA driver lacks " #name " (driver too old for CUDA " +                      \
                       std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10) + \
                       ")";                                                                               \
            return d;                                                                                     \
        }                                                                                                 \
        d.api.name = reinterpret_cast<decltype(d.api.name)>(fn);                                          \
    }
    MMT_CUDA_DRIVER_FUNCTIONS(MMT_RESOLVE)
#undef MMT_RESOLVE
    const CUresult init = d.api.cuInit(0);
    if (init != CUDA_SUCCESS) {
        const char* name = nullptr;
        d.api.cuGetErrorName(init, &name);
        d.reason = std::string("cuInit failed: ") + (name ? name : std::to_string(static_cast<int>(init)));
        return d;
    }
    d.ok = true;
    return d;
}

const LoadedDriver& loaded() {
    static const LoadedDriver instance = load();
    return instance;
}

}  // namespace

const DriverApi* try_load_driver() {
    const LoadedDriver& d = loaded();
    return d.ok ? &d.api : nullptr;
}

std::string driver_unavailable_reason() { return loaded().reason; }

const DriverApi& driver() {
    const DriverApi* api = try_load_driver();
    if (api == nullptr) throw core::Error("CUDA", driver_unavailable_reason());
    return *api;
}

std::string cuda_error_text(CUresult result) {
    const DriverApi* api = try_load_driver();
    const char* name = nullptr;
    const char* text = nullptr;
    if (api != nullptr) {
        api->cuGetErrorName(result, &name);
        api->cuGetErrorString(result, &text);
    }
    std::string out = name ? name : "CUresult " + std::to_string(static_cast<int>(result));
    if (text) out += std::string(" (") + text + ")";
    return out;
}

namespace {

// Errors that leave the context unusable ("sticky"): every later call fails too, and only
// a new process recovers.
bool is_sticky(CUresult result) {
    switch (result) {
        case CUDA_ERROR_ILLEGAL_ADDRESS:
        case CUDA_ERROR_LAUNCH_FAILED:
        case CUDA_ERROR_ILLEGAL_INSTRUCTION:
        case CUDA_ERROR_MISALIGNED_ADDRESS:
        case CUDA_ERROR_HARDWARE_STACK_ERROR:
        case CUDA_ERROR_INVALID_ADDRESS_SPACE:
        case CUDA_ERROR_INVALID_PC:
        case CUDA_ERROR_LAUNCH_TIMEOUT:
        case CUDA_ERROR_ASSERT:
        case CUDA_ERROR_ECC_UNCORRECTABLE:
        case CUDA_ERROR_CONTEXT_IS_DESTROYED:
            return true;
        default:
            return false;
    }
}

}  // namespace

void throw_cuda_error(CUresult result, const char* call, const char* file, int line) {
    const std::string what =
        std::string(call) + " failed: " + cuda_error_text(result) + " at " + file + ":" + std::to_string(line);
    if (is_sticky(result)) throw DeviceFault("CUDA", what);
    throw core::Error("CUDA", what);
}

void throw_nvrtc_error(nvrtcResult result, const char* call, const char* file, int line) {
    throw core::Error("NVRTC", std::string(call) + " failed: " + nvrtcGetErrorString(result) + " at " + file + ":" +
                                   std::to_string(line));
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
    // A status comes from a cuBLASLt call, so the library is loaded.
    const CublasLtApi& lt = cublaslt();
    throw core::Error("cuBLAS", std::string(call) + " failed: " + lt.cublasLtGetStatusName(status) + " (" +
                                    lt.cublasLtGetStatusString(status) + ") at " + file + ":" + std::to_string(line));
}

}  // namespace mmt::collect::cuda
