#include "matmul_toolkit/collect/backend_factory.hpp"

#include "matmul_toolkit/build_config.hpp"
#include "matmul_toolkit/collect/cpu_backend.hpp"
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

std::unique_ptr<Backend> make_backend(const std::string& device, int device_index) {
    if (device == "cpu") return std::make_unique<CpuBackend>();
    if (device == "cuda") {
#if MMT_WITH_CUDA
        if (!cuda_backend_device_available()) {
            throw core::InputError("--device", "cuda: no usable CUDA device (driver missing or no GPU); use --device cpu");
        }
        return make_cuda_backend(device_index);
#else
        (void)device_index;
        throw core::InputError("--device", "cuda: this build has no CUDA backend (configure with the CUDA toolkit); use --device cpu");
#endif
    }
    throw core::InputError("--device", "unknown device '" + device + "' (expected cuda or cpu)");
}

}  // namespace mmt::collect
