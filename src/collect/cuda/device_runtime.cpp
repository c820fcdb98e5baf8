#include "device_runtime.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "cuda_check.hpp"
#include "driver_api.hpp"
#include "matmul_toolkit/collect/timing_stats.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect::cuda {

DeviceInfo read_device_info(int device_index) {
    const DriverApi& api = driver();
    int count = 0;
    CUDA_CHECK(api.cuDeviceGetCount(&count));
    if (device_index < 0 || device_index >= count)
        throw core::Error("CUDA", "device " + std::to_string(device_index) + " does not exist (" +
                                      std::to_string(count) + " devices)");
    CUdevice device = 0;
    CUDA_CHECK(api.cuDeviceGet(&device, device_index));
    DeviceInfo info;
    info.index = device_index;
    char name[256] = {};
    CUDA_CHECK(api.cuDeviceGetName(name, sizeof(name), device));
    info.name = name;
    const auto attribute = [&](CUdevice_attribute a) {
        int v = 0;
        CUDA_CHECK(api.cuDeviceGetAttribute(&v, a, device));
        return v;
    };
    info.cc_major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    info.cc_minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    info.multiprocessors = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    info.l2_bytes = static_cast<std::size_t>(attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE));
    info.max_shared_optin = static_cast<std::size_t>(attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
    std::size_t total = 0;
    CUDA_CHECK(api.cuDeviceTotalMem(&total, device));
    info.total_memory = total;
    return info;
}

namespace {

// One operand as the kernel tiles it: `inner` is its contiguous extent (K when K-major),
// `outer` the other; K-major boxes are [rows][k_step] with a 32/64/128-byte swizzle,
// M/N-major boxes [k_step][64] with a 128-byte swizzle (k_step: wgmma_k_step, <= 64).
void encode_operand(CUtensorMap& map, const std::string& dtype, CUdeviceptr ptr, std::int64_t inner,
                    std::int64_t outer, std::int64_t ld, std::int64_t batch, std::int64_t batch_stride, bool k_major,
                    int tile_rows, int k_step, int split) {
    const std::uint64_t es = static_cast<std::uint64_t>(core::dtype_size(dtype));
    const cuuint64_t dims[3] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(outer),
                                static_cast<cuuint64_t>(batch)};
    // A single batch still needs a valid stride: the one a contiguous tensor would have.
    const std::uint64_t bstride = batch > 1 ? static_cast<std::uint64_t>(batch_stride) * es
                                            : static_cast<std::uint64_t>(ld) * es * static_cast<std::uint64_t>(outer);
    const cuuint64_t strides[2] = {static_cast<cuuint64_t>(ld) * es, bstride};
    // `split` CTAs of a cluster load a box each: the outer extent is divided among them.
    const cuuint32_t box[3] = {static_cast<cuuint32_t>(k_major ? k_step : 64),
                               static_cast<cuuint32_t>((k_major ? tile_rows : k_step) / split), 1};
    const cuuint32_t element_strides[3] = {1, 1, 1};
    const std::uint64_t span = box[0] * es;
    const CUtensorMapSwizzle swizzle = span == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                       : span == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                    : CU_TENSOR_MAP_SWIZZLE_32B;
    const CUtensorMapDataType type =
        dtype == "bfloat16" ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    CUDA_CHECK(driver().cuTensorMapEncodeTiled(&map, type, 3, reinterpret_cast<void*>(ptr), dims, strides, box,
                                               element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}

}  // namespace

void encode_wgmma_operands(const KernelSpec& spec, const Problem& problem, CUdeviceptr a, CUdeviceptr b,
                           CUtensorMap& map_a, CUtensorMap& map_b) {
    const auto& s = problem.shape;
    const ProblemStrides st = problem_strides(problem);
    const bool a_kmajor = problem.layout[0] == 'n', b_kmajor = problem.layout[1] == 't';
    encode_operand(map_a, spec.dtype, a, a_kmajor ? s.K : s.M, a_kmajor ? s.M : s.K, st.lda, s.B, st.batch_a,
                   a_kmajor, spec.block_m, wgmma_k_step(spec), 1);
    encode_operand(map_b, spec.dtype, b, b_kmajor ? s.K : s.N, b_kmajor ? s.N : s.K, st.ldb, s.B, st.batch_b,
                   b_kmajor, spec.block_n, wgmma_k_step(spec), spec.cluster_m);
}

PrimaryContext::PrimaryContext(int device_index) {
    const DriverApi& api = driver();
    m_info = read_device_info(device_index);
    CUDA_CHECK(api.cuDeviceGet(&m_device, device_index));
    CUDA_CHECK(api.cuDevicePrimaryCtxRetain(&m_context, m_device));
    make_current();
}

PrimaryContext::~PrimaryContext() {
    if (m_context) driver().cuDevicePrimaryCtxRelease(m_device);
}

void PrimaryContext::make_current() const { CUDA_CHECK(driver().cuCtxSetCurrent(m_context)); }

DeviceBuffer::~DeviceBuffer() {
    if (m_ptr) driver().cuMemFree(m_ptr);
}

void DeviceBuffer::reserve(std::size_t bytes) {
    if (bytes <= m_bytes) return;
    const DriverApi& api = driver();
    if (m_ptr) {
        CUDA_CHECK(api.cuMemFree(m_ptr));
        m_ptr = 0;
        m_bytes = 0;
    }
    // Round up so that a sequence of slightly growing problems does not reallocate often.
    const std::size_t rounded = std::max<std::size_t>(bytes + bytes / 8, 1 << 20);
    CUDA_CHECK(api.cuMemAlloc(&m_ptr, rounded));
    m_bytes = rounded;
}

EventTimer::EventTimer(CUstream stream, std::size_t l2_bytes) : m_stream(stream) {
    const std::size_t flush_bytes = std::max<std::size_t>(2 * l2_bytes, 64u << 20);
    m_flush.reserve(flush_bytes);
    m_flush_words = flush_bytes / 4;
}

EventTimer::~EventTimer() {
    for (CUevent e : m_events) driver().cuEventDestroy(e);
}

void EventTimer::ensure_events(std::size_t count) {
    const DriverApi& api = driver();
    while (m_events.size() < count) {
        CUevent e = nullptr;
        CUDA_CHECK(api.cuEventCreate(&e, CU_EVENT_DEFAULT));
        m_events.push_back(e);
    }
}

void CUDA_CB EventTimer::settle(void* microseconds) {
    std::this_thread::sleep_for(std::chrono::microseconds(*static_cast<const int*>(microseconds)));
}

Timing EventTimer::time(const std::function<void()>& launch, const TimingOptions& options) {
    const DriverApi& api = driver();
    const int repeat = std::max(1, options.repeat);
    for (int i = 0; i < options.warmup; ++i) launch();
    ensure_events(2 * static_cast<std::size_t>(repeat));
    for (int r = 0; r < repeat; ++r) {
        // A different value each time, so no layer can skip the write as redundant.
        if (options.flush_l2) {
            CUDA_CHECK(api.cuMemsetD32Async(m_flush.get(), ++m_flush_value, m_flush_words, m_stream));
            // The stream waits for a host function that sleeps: the GPU idles, and the
            // start event and launch, already queued behind it, follow without host latency.
            if (options.settle_us > 0) {
                m_settle_us = options.settle_us;
                CUDA_CHECK(api.cuLaunchHostFunc(m_stream, &EventTimer::settle, &m_settle_us));
            }
        }
        CUDA_CHECK(api.cuEventRecord(m_events[2 * r], m_stream));
        launch();
        CUDA_CHECK(api.cuEventRecord(m_events[2 * r + 1], m_stream));
    }
    CUDA_CHECK(api.cuEventSynchronize(m_events[2 * repeat - 1]));
    Timing t;
    t.samples_ms.reserve(repeat);
    for (int r = 0; r < repeat; ++r) {
        float ms = 0.f;
        CUDA_CHECK(api.cuEventElapsedTime(&ms, m_events[2 * r], m_events[2 * r + 1]));
        t.samples_ms.push_back(ms);
        m_timed_seconds += ms * 1e-3;
    }
    summarize_samples(t);
    return t;
}

}  // namespace mmt::collect::cuda
