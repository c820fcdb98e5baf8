#pragma once
/// Small RAII pieces over the driver API: the device and its primary context, device
/// buffers, and the event timer that flushes L2 before every timed launch.

#include <cuda.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "kernel_spec.hpp"
#include "matmul_toolkit/collect/backend.hpp"

namespace mmt::collect::cuda {

/// What the backend reads off the device once.
struct DeviceInfo {
    int index = 0;
    std::string name;  ///< cuDeviceGetName, as torch.cuda.get_device_name reports it
    int cc_major = 0;
    int cc_minor = 0;
    int multiprocessors = 0;
    std::size_t l2_bytes = 0;
    std::size_t max_shared_optin = 0;
    std::size_t total_memory = 0;

    /// The NVRTC target for this device: "sm_90a" on Hopper (nvrtc_arch()), else "sm_86" etc.
    std::string arch() const { return nvrtc_arch(cc_major, cc_minor); }
};

/// The device's primary context (shared with cuBLAS), retained for the object's life.
class PrimaryContext {
public:
    explicit PrimaryContext(int device_index);
    ~PrimaryContext();
    PrimaryContext(const PrimaryContext&) = delete;
    PrimaryContext& operator=(const PrimaryContext&) = delete;

    /// Makes the context current on the calling thread.
    void make_current() const;
    const DeviceInfo& info() const { return m_info; }

private:
    CUdevice m_device = 0;
    CUcontext m_context = nullptr;
    DeviceInfo m_info;
};

/// Reads the device's properties (needs no context).
DeviceInfo read_device_info(int device_index);

/// The TMA tensor maps of A and B that the wgmma kernel of `spec` (gemm_kernel_sm90.cuh)
/// reads on `problem` with its operands at `a` and `b`: rank 3 (contiguous index, the
/// other index, batch), boxes as the kernel's load_stage() issues them, swizzled to match
/// its wgmma descriptors, out-of-bounds elements read as zero. Throws core::Error (through
/// CUDA_CHECK) when the driver refuses the layout.
void encode_wgmma_operands(const KernelSpec& spec, const Problem& problem, CUdeviceptr a, CUdeviceptr b,
                           CUtensorMap& map_a, CUtensorMap& map_b);

/// A device allocation that grows on demand and never shrinks.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    ~DeviceBuffer();
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    /// Ensures at least `bytes` (the contents are lost when it grows).
    void reserve(std::size_t bytes);
    CUdeviceptr get() const { return m_ptr; }
    std::size_t size() const { return m_bytes; }

private:
    CUdeviceptr m_ptr = 0;
    std::size_t m_bytes = 0;
};

/// Times launches with CUDA events on one stream: `warmup` untimed runs, then `repeat`
/// runs, each preceded by a write of a buffer twice the L2 size so every timed run starts
/// with a cold L2 (as Triton's do_bench does).
class EventTimer {
public:
    EventTimer(CUstream stream, std::size_t l2_bytes);
    ~EventTimer();
    EventTimer(const EventTimer&) = delete;
    EventTimer& operator=(const EventTimer&) = delete;

    /// `launch` enqueues one run on the stream. Returns the median, min, max and samples.
    Timing time(const std::function<void()>& launch, const TimingOptions& options);

    /// Seconds inside timed runs (event time) since construction.
    double timed_seconds() const { return m_timed_seconds; }

private:
    void ensure_events(std::size_t count);
    static void CUDA_CB settle(void* microseconds);

    CUstream m_stream;
    DeviceBuffer m_flush;
    std::size_t m_flush_words = 0;
    unsigned m_flush_value = 0;
    int m_settle_us = 0;  // read by settle() on the driver's thread while the stream runs
    std::vector<CUevent> m_events;
    double m_timed_seconds = 0.0;
};

}  // namespace mmt::collect::cuda
