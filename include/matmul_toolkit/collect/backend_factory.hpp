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
/// `compile_threads`: NVRTC processes of a CUDA backend (0: hardware threads - 1).
std::unique_ptr<Backend> make_backend(const std::string& device, int device_index = 0, int compile_threads = 0);

/// A backend for plan_collection() and the worker pool's parent: on CUDA it holds no
/// context and measures nothing (its measuring calls throw); on the CPU it is the CPU backend.
std::unique_ptr<Backend> make_planning_backend(const std::string& device, int device_index = 0);

}  // namespace mmt::collect
