#include "matmul_toolkit/collect/backend_factory.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <thread>

#include "matmul_toolkit/build_config.hpp"
#include "matmul_toolkit/collect/cpu_backend.hpp"
#include "matmul_toolkit/collect/inductor_backend.hpp"
#include "matmul_toolkit/core/error.hpp"

#if MMT_WITH_CUDA
#include "matmul_toolkit/collect/cuda_backend.hpp"
#endif

namespace mmt::collect {

bool cuda_device_available() {
#if MMT_WITH_CUDA
    return cuda_backend_device_available();
#else
    return false;
#endif
}

int device_count(const std::string& device) {
    if (device == "cpu") return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    // The driver is asked directly (no CUDA headers here), so counting creates no context.
    void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (driver == nullptr) return 0;
    using InitFn = int (*)(unsigned int);
    using CountFn = int (*)(int*);
    auto* init = reinterpret_cast<InitFn>(::dlsym(driver, "cuInit"));
    auto* count_fn = reinterpret_cast<CountFn>(::dlsym(driver, "cuDeviceGetCount"));
    int count = 0;
    if (init == nullptr || count_fn == nullptr || init(0) != 0 || count_fn(&count) != 0) count = 0;
    ::dlclose(driver);
    return count;
}

namespace {

// Throws InputError("--device", ...) unless `device` names a backend this build and machine have.
void check_device(const std::string& device) {
    if (device == "cpu") return;
    if (device == "cuda") {
#if MMT_WITH_CUDA
        if (!cuda_backend_device_available()) {
            throw core::InputError("--device", "cuda: no usable CUDA device (driver missing or no GPU); use --device cpu");
        }
        return;
#else
        throw core::InputError("--device", "cuda: this build has no CUDA backend (configure with the CUDA toolkit); use --device cpu");
#endif
    }
    throw core::InputError("--device", "unknown device '" + device + "' (expected cuda or cpu)");
}

}  // namespace

std::unique_ptr<Backend> make_backend(const std::string& device, int device_index, int compile_threads) {
    check_device(device);
#if MMT_WITH_CUDA
    if (device == "cuda") return make_cuda_backend(device_index, compile_threads);
#endif
    (void)device_index;
    (void)compile_threads;
    return std::make_unique<CpuBackend>();
}

std::unique_ptr<Backend> make_planning_backend(const std::string& device, int device_index) {
    check_device(device);
#if MMT_WITH_CUDA
    if (device == "cuda") return make_cuda_planning_backend(device_index);
#endif
    (void)device_index;
    return std::make_unique<CpuBackend>();
}

std::unique_ptr<Backend> backend_for_hardware(const std::vector<std::string>& hardware_names,
                                              const std::string& device) {
    auto backend = make_backend(device);
    for (const auto& name : hardware_names) {
        if (name == backend->hardware_name()) return backend;
    }
    return nullptr;
}

BackendSelection select_backend(const std::string& requested, const std::string& device_flag,
                                const std::string& python) {
    if (requested.empty()) {
        if (device_flag == "cpu") return {"cpu", "cpu", "--device cpu"};
        if (device_flag.empty() && !cuda_device_available()) return {"cpu", "cpu", "no usable CUDA device"};
        std::string why;
        if (inductor_python_usable(python, &why)) return {"inductor", "cuda", python + ": " + why};
        check_device("cuda");
        return {"native", "cuda", python + ": " + why};
    }
    if (requested == "cpu") {
        if (device_flag == "cuda") throw core::InputError("--backend", "cpu: contradicts --device cuda");
        return {"cpu", "cpu", "--backend cpu"};
    }
    if (requested == "native") {
        if (device_flag == "cpu") {
            throw core::InputError("--backend", "native: the CUDA backend needs a GPU, not --device cpu (use --backend cpu)");
        }
        if (!cuda_device_available()) {
            throw core::InputError("--backend", "native: no usable CUDA device (driver missing, no GPU or a build "
                                                "without the CUDA backend); use --backend cpu");
        }
        return {"native", "cuda", "--backend native"};
    }
    if (requested == "inductor") {
        if (device_flag == "cpu") {
            throw core::InputError("--backend", "inductor: measures on a GPU, not --device cpu (use --backend cpu)");
        }
        // Whether torch sees a GPU is the worker's hello to say.
        return {"inductor", "cuda", "--backend inductor"};
    }
    throw core::InputError("--backend", "unknown backend '" + requested + "' (expected cpu, native or inductor)");
}

}  // namespace mmt::collect
