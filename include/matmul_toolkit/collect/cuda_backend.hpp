#pragma once
/// Entry points of the CUDA backend (src/collect/cuda/), built only with MMT_WITH_CUDA.
/// This header has no CUDA includes, so the factory can call it from plain C++.

#include <memory>

#include "matmul_toolkit/collect/backend.hpp"

namespace mmt::collect {

/// A backend on CUDA device `device_index` with `compile_threads` NVRTC processes (0: the
/// hardware threads - 1); throws core::Error naming the failing call when the driver or
/// the device can't be opened.
std::unique_ptr<Backend> make_cuda_backend(int device_index, int compile_threads = 0);

/// A backend that only plans (name, hardware, dtypes, ops, defaults) from the device's
/// properties, holding no CUDA context; its measuring calls throw.
std::unique_ptr<Backend> make_cuda_planning_backend(int device_index);

/// True when a driver is loaded and at least one CUDA device can be opened.
bool cuda_backend_device_available();

}  // namespace mmt::collect
