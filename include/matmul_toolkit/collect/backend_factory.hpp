#pragma once
/// Picks a backend by device name. The CUDA backend exists only when the project was
/// built with MMT_WITH_CUDA; at run time it needs a driver and a GPU.

#include <memory>
#include <string>

#include "matmul_toolkit/collect/backend.hpp"

namespace mmt::collect {

/// True when the CUDA backend was built and a CUDA device can be opened.
bool cuda_device_available();

/// How many workers --devices all starts: the CUDA devices the driver reports (0 without
/// a driver), or the CPU's hardware threads.
int device_count(const std::string& device);

/// "cpu" or "cuda"; throws core::InputError("--device", ...) when the device can't be used.
std::unique_ptr<Backend> make_backend(const std::string& device, int device_index = 0);

}  // namespace mmt::collect
