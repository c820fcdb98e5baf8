#pragma once
/// Picks a backend by device name, or by --backend (cpu, native, inductor). The CUDA
/// (native) backend exists only when the project was built with MMT_WITH_CUDA; at run time
/// it needs a driver and a GPU. The inductor backend needs a GPU only in its Python worker.

#include <memory>
#include <string>
#include <vector>

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

/// This machine's backend for `device` ("cpu" | "cuda") when it measures one of
/// `hardware_names` (a model's training hardware), so its prune() turns a space into what
/// collection timed there; nullptr when they are another machine's.
std::unique_ptr<Backend> backend_for_hardware(const std::vector<std::string>& hardware_names,
                                              const std::string& device);

/// A backend for plan_collection() and the worker pool's parent: on CUDA it holds no
/// context and measures nothing (its measuring calls throw); on the CPU it is the CPU backend.
std::unique_ptr<Backend> make_planning_backend(const std::string& device, int device_index = 0);

/// What --backend resolves to: "cpu", "native" or "inductor", the device it measures on
/// ("cpu" or "cuda") and why it was chosen (for the log).
struct BackendSelection {
    std::string backend;
    std::string device;
    std::string reason;
};

/// Resolves --backend (`requested`, empty when unset) against --device (`device_flag`,
/// empty when unset). Unset: cpu on --device cpu (or without a GPU); on a GPU inductor when
/// inductor_python_usable(python), else native. Throws core::InputError("--backend", ...)
/// on an unknown backend or one that contradicts --device or the machine.
BackendSelection select_backend(const std::string& requested, const std::string& device_flag,
                                const std::string& python);

}  // namespace mmt::collect
