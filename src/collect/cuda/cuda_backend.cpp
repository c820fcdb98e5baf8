#include "cuda_backend_impl.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>

#include <spdlog/spdlog.h>

#include "cuda_check.hpp"
#include "driver_api.hpp"
#include "kernel_plan.hpp"
#include "kernel_source.hpp"
#include "nvrtc_compiler.hpp"
#include "matmul_toolkit/collect/cuda_backend.hpp"
#include "matmul_toolkit/collect/device_fault.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect {

std::unique_ptr<Backend> make_cuda_backend(int device_index, int compile_threads) {
    cuda::CudaBackendOptions options;
    options.device_index = device_index;
    options.compile_threads = compile_threads;
    return std::make_unique<cuda::CudaBackend>(options);
}

std::unique_ptr<Backend> make_cuda_planning_backend(int device_index) {
    return std::make_unique<cuda::CudaPlanningBackend>(device_index);
}

bool cuda_backend_device_available() {
    const cuda::DriverApi* api = cuda::try_load_driver();
    if (api == nullptr) return false;
    int count = 0;
    if (api->cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) return false;
    try {
        const cuda::DeviceInfo info = cuda::read_device_info(0);
        return info.cc_major >= 8;  // cp.async, bf16 mma and ldmatrix.trans need sm_80
    } catch (const std::exception&) {
        return false;
    }
}

namespace cuda {
namespace {

constexpr const char* kUtilityPrelude = "#define MMT_UTILITY 1\n";
constexpr int kDefaultWarmup = 3;
constexpr int kDefaultRepeat = 10;
constexpr std::uint64_t kVerifySeed = 0x5eed0fc0ffeeull;

float half_to_float(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    std::uint32_t exponent = (h >> 10) & 0x1f;
    std::uint32_t mantissa = h & 0x3ffu;
    std::uint32_t bits;
    if (exponent == 0x1f) {
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent == 0) {
        if (mantissa == 0) {
            bits = sign;
        } else {  // subnormal: renormalise
            int e = -1;
            do {
                ++e;
                mantissa <<= 1;
            } while ((mantissa & 0x400u) == 0);
            bits = sign | static_cast<std::uint32_t>(127 - 15 - e) << 23 | (mantissa & 0x3ffu) << 13;
        }
    } else {
        bits = sign | (exponent + 112) << 23 | mantissa << 13;
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

float bf16_to_float(std::uint16_t h) {
    const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// A small problem of the spec's dtype / op / layout whose sizes satisfy the spec's
// alignment (so the very same kernel runs on it) and are otherwise ragged: M, N and
// (unless EVEN_K) K are not multiples of the block, M spans more than one GROUP_M band,
// and K spans more k-tiles than the pipeline has stages.
Problem verification_problem(const KernelSpec& s) {
    const bool a_row = s.layout[0] == 'n', b_row = s.layout[1] == 'n';
    const int need_m = a_row ? 1 : s.align.vec_a;
    const int need_n = std::max(b_row ? s.align.vec_b : 1, s.align.vec_c);
    const int need_k = std::max(a_row ? s.align.vec_a : 1, b_row ? 1 : s.align.vec_b);
    const std::int64_t M = static_cast<std::int64_t>(std::min(s.group_m, 8) + 1) * s.block_m + need_m;
    const std::int64_t N = 2 * static_cast<std::int64_t>(s.block_n) + need_n;
    const std::int64_t K = s.even_k ? static_cast<std::int64_t>(s.num_stages + 1) * s.block_k
                                    : static_cast<std::int64_t>(s.num_stages) * s.block_k + need_k;
    Problem p;
    p.op = s.op;
    p.layout = s.layout;
    p.shape = core::make_shape(s.op == "bmm" ? 2 : 1, M, N, K, s.dtype);
    return p;
}

std::string describe(const Problem& p) {
    std::ostringstream o;
    o << p.op_key() << ' ' << p.shape.B << 'x' << p.shape.M << 'x' << p.shape.N << 'x' << p.shape.K << ' '
      << p.dtype();
    return o.str();
}

// Elementwise tolerance |out - ref| <= atol + rtol·|ref|, atol relative to the output's
// RMS: rtol covers the output's rounding (2 ulps of its dtype), atol differences in
// float32 accumulation order (and TF32 input rounding, against a strict FP32 reference).
void tolerance(const KernelSpec& s, double& rtol, double& atol_scale) {
    switch (s.math) {
        case MathPath::mma16:
        case MathPath::wgmma:
            rtol = s.dtype == "bfloat16" ? 1.6e-2 : 2e-3;
            atol_scale = s.dtype == "bfloat16" ? 8e-3 : 1e-3;
            break;
        case MathPath::tf32:
            rtol = 5e-3;
            atol_scale = 5e-3;
            break;
        case MathPath::fma:
            rtol = 1e-4;
            atol_scale = 1e-4;
            break;
        case MathPath::imma:  // integers: verify() compares them exactly
            rtol = 0;
            atol_scale = 0;
            break;
    }
}

std::size_t element_count(const Problem& p, char which) {
    const auto& s = p.shape;
    switch (which) {
        case 'a': return static_cast<std::size_t>(s.B * s.M * s.K);
        case 'b': return static_cast<std::size_t>(s.B * s.K * s.N);
        case 'c': return static_cast<std::size_t>((s.B - 1) * s.out_stride[0] + (s.M - 1) * s.out_stride[1] + s.N);
        default: return static_cast<std::size_t>(s.N);
    }
}

}  // namespace

CudaBackend::CudaBackend(const CudaBackendOptions& options)
    : m_context(options.device_index),
      m_frag_pipeline(options.frag_pipeline),
      m_wgmma(options.wgmma && m_context.info().cc_major == 9 && m_context.info().cc_minor == 0),
      m_wgmma_cluster(options.wgmma_cluster),
      m_wgmma_persistent(options.wgmma_persistent),
      m_wgmma_dynamic_tiles(options.wgmma_dynamic_tiles),
      m_split_tail(options.split_tail),
      m_max_tail_splits(options.max_tail_splits),
      m_wgmma_max_ctas(options.wgmma_max_ctas) {
    const DriverApi& api = driver();
    const DeviceInfo& info = m_context.info();
    if (info.cc_major < 8)
        throw core::Error("CUDA", info.name + " has compute capability " + std::to_string(info.cc_major) + "." +
                                      std::to_string(info.cc_minor) + "; the kernels need 8.0 or newer");
    CUDA_CHECK(api.cuStreamCreate(&m_stream, CU_STREAM_NON_BLOCKING));
    m_tile_counter.reserve(sizeof(unsigned));
    CUDA_CHECK(api.cuMemsetD32Async(m_tile_counter.get(), 0, 1, m_stream));
    std::filesystem::path dir;
    if (options.disk_cache) dir = options.cache_dir.empty() ? KernelCache::default_disk_dir() : options.cache_dir;
    m_cache = std::make_unique<KernelCache>(gemm_kernel_source(), info.arch(), dir, options.compile_threads);
    m_timer = std::make_unique<EventTimer>(m_stream, info.l2_bytes);
    m_cublas = std::make_unique<CublasReference>(m_stream);
    spdlog::info("cuda: {} (sm_{}{}, {} SMs, L2 {} MiB, {} KiB shared/block), NVRTC {}, kernel cache {}", info.name,
                 info.cc_major, info.cc_minor, info.multiprocessors, info.l2_bytes >> 20, info.max_shared_optin >> 10,
                 nvrtc_version(), dir.empty() ? std::string("in memory") : dir.string());
}

CudaBackend::~CudaBackend() {
    try {
        m_context.make_current();
        const DriverApi& api = driver();
        api.cuStreamSynchronize(m_stream);
        m_cublas.reset();
        m_timer.reset();
        for (auto& [key, kernel] : m_kernels)
            if (kernel.module) api.cuModuleUnload(kernel.module);
        if (m_utility) api.cuModuleUnload(m_utility);
        api.cuStreamDestroy(m_stream);
    } catch (...) {
        // Destructors never throw; the process is ending or the context is already gone.
    }
}

std::vector<std::string> cuda_supported_dtypes() { return {"float16", "bfloat16", "float32", "int8"}; }

std::vector<std::string> cuda_supported_ops() { return {"mm", "addmm", "bmm"}; }

std::vector<std::string> CudaBackend::supported_dtypes() const { return cuda_supported_dtypes(); }

std::vector<std::string> CudaBackend::supported_ops() const { return cuda_supported_ops(); }

CollectionDefaults CudaBackend::collection_defaults() const { return cuda_collection_defaults(); }

CudaPlanningBackend::CudaPlanningBackend(int device_index) : m_info(read_device_info(device_index)) {}

std::vector<std::string> CudaPlanningBackend::supported_dtypes() const { return cuda_supported_dtypes(); }

std::vector<std::string> CudaPlanningBackend::supported_ops() const { return cuda_supported_ops(); }

CollectionDefaults CudaPlanningBackend::collection_defaults() const { return cuda_collection_defaults(); }

PruneResult CudaPlanningBackend::prune(const std::vector<core::GemmConfig>&, const Problem&) const {
    throw core::Error("cuda backend", "the planning backend measures nothing (prune)");
}

void CudaPlanningBackend::prepare(const Problem&, std::uint64_t) {
    throw core::Error("cuda backend", "the planning backend measures nothing (prepare)");
}

Timing CudaPlanningBackend::time(const Problem&, const core::GemmConfig&, const TimingOptions&) {
    throw core::Error("cuda backend", "the planning backend measures nothing (time)");
}

Timing CudaPlanningBackend::time_reference(const Problem&, const TimingOptions&) {
    throw core::Error("cuda backend", "the planning backend measures nothing (time_reference)");
}

CollectionDefaults cuda_collection_defaults() {
    CollectionDefaults d;
    // Every timed run starts from a flushed L2, so runs are independent and a short warmup
    // (module load, clocks up) suffices; docs/experiments/2026-11-22-cuda-kernels.md has the repeatability measurements.
    d.timing.warmup = kDefaultWarmup;
    d.timing.repeat = kDefaultRepeat;
    d.max_size = 4096;
    d.dtypes = {"float16", "bfloat16"};
    return d;
}

DeviceLimits CudaBackend::limits() const {
    DeviceLimits l;
    l.max_shared_bytes = m_context.info().max_shared_optin;
    return l;
}

PruneResult CudaBackend::prune(const std::vector<core::GemmConfig>& configs, const Problem& problem) const {
    PruneResult result;
    const DeviceLimits device_limits = limits();
    bool tf32 = false;
    for (const auto& config : configs) {
        const KernelSpec spec = spec_for(config, problem);
        if (auto reason = unsupported_reason(spec, device_limits)) {
            result.pruned.push_back({config, *reason});
            continue;
        }
        tf32 = tf32 || spec.allow_tf32;
        result.kept.push_back(config);
        // Compile ahead, in the order the engine will time them.
        m_cache->prefetch(kernel_prelude(spec));
    }
    if (tf32) m_tf32_problems.insert(describe(problem));
    return result;
}

void CudaBackend::plan(const std::vector<Problem>& problems, const ConfigsForProblem& configs_for) {
    const auto start = std::chrono::steady_clock::now();
    const DeviceLimits device_limits = limits();
    // The same spec and rule as prune(), so the plan holds exactly the kernels time() loads.
    const auto runnable = [&](const core::GemmConfig& config, const Problem& problem) -> std::optional<KernelSpec> {
        KernelSpec spec = spec_for(config, problem);
        if (unsupported_reason(spec, device_limits)) return std::nullopt;
        return spec;
    };
    const std::vector<KernelSpec> specs = plan_kernel_specs(problems, configs_for, runnable, kMaxPlannedKernels);
    precompile(specs);
    spdlog::info("cuda: {} kernels planned for {} problems{} ({:.2f} s); the compile workers build them in order",
                 specs.size(), problems.size(), specs.size() >= kMaxPlannedKernels ? " (the cap: later ones on demand)" : "",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void CudaBackend::precompile(const std::vector<KernelSpec>& specs) {
    std::vector<std::string> preludes;
    preludes.reserve(specs.size());
    for (const KernelSpec& spec : specs) preludes.push_back(kernel_prelude(spec));
    m_cache->plan(std::move(preludes));
}

KernelSpec CudaBackend::spec_for(const core::GemmConfig& config, const Problem& problem) const {
    KernelSpec spec = make_spec(config, problem);
    spec.test_fault = test_fault_requested(config);
    if (m_frag_pipeline >= 0 && spec.math != MathPath::fma && spec.num_stages >= 2)
        spec.frag_pipeline = m_frag_pipeline == 1;
    // The injected fault exists in the classic template only: a faulting config stays on it.
    if (m_wgmma && !spec.test_fault) {
        const int cluster = m_wgmma_cluster > 0 ? m_wgmma_cluster : preferred_cluster_m(problem);
        select_wgmma(spec, limits(), cluster, m_wgmma_persistent, m_wgmma_dynamic_tiles);
        if (spec.persistent && !persistent_pays_off(spec, problem, m_context.info().multiprocessors, limits(),
                                                    m_split_tail))
            spec.persistent = spec.dynamic_tiles = false;
    }
    // int8 never splits: the parts add up through float32 partial sums.
    if (spec.math != MathPath::wgmma && spec.math != MathPath::imma && m_split_tail) {
        const auto& s = problem.shape;
        spec.split_k = split_k_plan(grid_ctas(spec, s.M, s.N) * s.B, (s.K + spec.block_k - 1) / spec.block_k,
                                    m_context.info().multiprocessors, kMinKTilesPerSplit, max_splits(spec))
                           .splits > 1;
    }
    return spec;
}

int CudaBackend::max_splits(const KernelSpec& spec) const {
    return m_max_tail_splits > 0 ? std::min(m_max_tail_splits, max_tail_splits(spec)) : max_tail_splits(spec);
}

bool CudaBackend::reference_tf32(const Problem& problem) const {
    return problem.dtype() == "float32" && m_tf32_problems.count(describe(problem)) != 0;
}

CUfunction CudaBackend::utility_function(const char* name) {
    if (m_utility == nullptr) {
        auto compiled = m_cache->get(kUtilityPrelude);
        if (!compiled->ok) throw core::Error("NVRTC", "utility kernels failed to compile:\n" + compiled->log);
        CUDA_CHECK(driver().cuModuleLoadData(&m_utility, compiled->image.data()));
    }
    CUfunction f = nullptr;
    CUDA_CHECK(driver().cuModuleGetFunction(&f, m_utility, name));
    return f;
}

void CudaBackend::fill(CUdeviceptr ptr, const std::string& dtype, std::size_t count, std::uint64_t seed, float lo,
                       float hi) {
    if (count == 0) return;
    // int8 ignores lo / hi: non-zero integers in [-4, 4] (mmt_fill_i8).
    const char* name = dtype == "float16"    ? "mmt_fill_f16"
                       : dtype == "bfloat16" ? "mmt_fill_bf16"
                       : dtype == "int8"     ? "mmt_fill_i8"
                                             : "mmt_fill_f32";
    CUfunction f = utility_function(name);
    unsigned long long n = count;
    unsigned long long s = seed;
    void* args[] = {&ptr, &n, &s, &lo, &hi};
    const std::size_t blocks = std::min<std::size_t>((count + 255) / 256, 65535);
    CUDA_CHECK(driver().cuLaunchKernel(f, static_cast<unsigned>(blocks), 1, 1, 256, 1, 1, 0, m_stream, args, nullptr));
}

std::vector<float> CudaBackend::download(CUdeviceptr ptr, const std::string& dtype, std::size_t count) {
    const DriverApi& api = driver();
    CUDA_CHECK(api.cuStreamSynchronize(m_stream));
    std::vector<float> out(count);
    if (dtype == "float32") {
        CUDA_CHECK(api.cuMemcpyDtoH(out.data(), ptr, count * 4));
        return out;
    }
    if (dtype == "int32") {  // int8 problems' C; exact in float up to 2^24, far beyond their sums
        std::vector<std::int32_t> raw(count);
        CUDA_CHECK(api.cuMemcpyDtoH(raw.data(), ptr, count * 4));
        for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<float>(raw[i]);
        return out;
    }
    std::vector<std::uint16_t> raw(count);
    CUDA_CHECK(api.cuMemcpyDtoH(raw.data(), ptr, count * 2));
    const bool bf16 = dtype == "bfloat16";
    for (std::size_t i = 0; i < count; ++i) out[i] = bf16 ? bf16_to_float(raw[i]) : half_to_float(raw[i]);
    return out;
}

void CudaBackend::prepare(const Problem& problem, std::uint64_t seed) {
    m_context.make_current();
    const int es = core::dtype_size(problem.dtype());
    m_a.reserve(element_count(problem, 'a') * es);
    m_b.reserve(element_count(problem, 'b') * es);
    m_c.reserve(element_count(problem, 'c') * core::dtype_size(problem.shape.out_dtype));
    // Seeded, uniform in [0.1, 1.1]: no zeros or sparsity for the hardware to exploit.
    fill(m_a.get(), problem.dtype(), element_count(problem, 'a'), seed * 4 + 1, 0.1f, 1.1f);
    fill(m_b.get(), problem.dtype(), element_count(problem, 'b'), seed * 4 + 2, 0.1f, 1.1f);
    if (problem.op == "addmm") {
        m_bias.reserve(element_count(problem, 'z') * es);
        fill(m_bias.get(), problem.dtype(), element_count(problem, 'z'), seed * 4 + 3, 0.1f, 1.1f);
    }
    CUDA_CHECK(driver().cuStreamSynchronize(m_stream));
    m_problem = problem;
}

CudaBackend::LoadedKernel& CudaBackend::load(const KernelSpec& spec) {
    const std::string key = spec_key(spec);
    auto it = m_kernels.find(key);
    if (it != m_kernels.end()) return it->second;
    auto compiled = m_cache->get(kernel_prelude(spec));
    if (!compiled->ok)
        throw core::Error("kernel " + spec_name(spec), "NVRTC compilation failed:\n" + compiled->log.substr(0, 4000));
    const DriverApi& api = driver();
    LoadedKernel k;
    CUDA_CHECK(api.cuModuleLoadData(&k.module, compiled->image.data()));
    try {
        CUDA_CHECK(api.cuModuleGetFunction(&k.function, k.module, "mmt_gemm"));
        k.shared_bytes = static_cast<unsigned>(shared_bytes(spec));
        CUDA_CHECK(api.cuFuncSetAttribute(k.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                          static_cast<int>(k.shared_bytes)));
        if (spec.math == MathPath::wgmma && spec.persistent) {
            CUDA_CHECK(api.cuOccupancyMaxActiveBlocksPerMultiprocessor(&k.ctas_per_sm, k.function,
                                                                       threads_per_block(spec), k.shared_bytes));
            k.ctas_per_sm = std::max(k.ctas_per_sm, 1);
        }
    } catch (...) {
        api.cuModuleUnload(k.module);
        throw;
    }
    ++m_stats.modules_loaded;
    return m_kernels.emplace(key, k).first->second;
}

void CudaBackend::launch(const KernelSpec& spec, LoadedKernel& k, const Problem& problem, const GemmOperands& ops,
                         bool verifying) {
    const auto& s = problem.shape;
    const ProblemStrides st = problem_strides(problem);
    const std::int64_t grid_m = (s.M + spec.block_m - 1) / spec.block_m;
    const std::int64_t grid_n = (s.N + spec.block_n - 1) / spec.block_n;
    if (grid_m * grid_n == 0 || s.B == 0) return;
    int M = static_cast<int>(s.M), N = static_cast<int>(s.N), K = static_cast<int>(s.K);
    long long lda = st.lda, ldb = st.ldb, ldc = st.ldc;
    long long sa = st.batch_a, sb = st.batch_b, sc = st.batch_c;
    float alpha = problem.alpha, beta = problem.beta;
    CUdeviceptr a = ops.a, b = ops.b, c = ops.c, bias = ops.bias;
    const bool wgmma = spec.math == MathPath::wgmma;
    // Tiles of every batch: persistent CTAs walk them all, and the SPLIT_K variant numbers
    // them along a 1-D grid, so a split spans batches too.
    const long long tiles = grid_ctas(spec, s.M, s.N) * s.B;
    const long long k_tiles = (s.K + spec.block_k - 1) / spec.block_k;
    const long long sms = m_context.info().multiprocessors;
    const int max_splits = this->max_splits(spec);
    TilePlan plan;  // one tile per CTA, no split: wgmma clusters, no SPLIT_K
    plan.grid = plan.units = plan.split_from = tiles;
    if (wgmma && spec.persistent) {
        long long capacity = sms * k.ctas_per_sm;
        if (m_wgmma_max_ctas > 0) capacity = std::min<long long>(capacity, m_wgmma_max_ctas);
        if (verifying) capacity = std::min(capacity, std::max(1LL, 2 * tiles / 3));
        plan = plan_tiles(tiles, k_tiles, capacity, m_split_tail, verifying ? 1 : kMinKTilesPerSplit, max_splits);
    } else if (!wgmma && spec.split_k) {
        // Verifying, a capacity of 2/3 of the tiles leaves whole tiles and split ones.
        plan = verifying ? plan_tiles(tiles, k_tiles, std::min(sms, std::max(1LL, 2 * tiles / 3)), true, 1, max_splits)
                         : split_k_plan(tiles, k_tiles, sms, kMinKTilesPerSplit, max_splits);
    }
    CUdeviceptr workspace = 0, flags = 0;
    if (plan.split_tiles() > 0) {
        const auto split_tiles = static_cast<std::size_t>(plan.split_tiles());
        m_split_workspace.reserve(split_tiles * plan.splits * spec.block_m * spec.block_n * sizeof(float));
        // A flag per split tile and warpgroup (wgmma) or per split tile.
        const std::size_t flags_per_tile = wgmma ? static_cast<std::size_t>(spec.num_warps / 4) : 1;
        const std::size_t flag_bytes = split_tiles * flags_per_tile * sizeof(unsigned);
        if (flag_bytes > m_split_flags.size()) {
            m_split_flags.reserve(flag_bytes);
            CUDA_CHECK(driver().cuMemsetD32Async(m_split_flags.get(), 0, m_split_flags.size() / 4, m_stream));
        }
        workspace = m_split_workspace.get();
        flags = m_split_flags.get();
        ++m_stats.split_tail_launches;
    }
    int split_from = static_cast<int>(plan.split_from), splits = plan.splits;
    if (wgmma) {
        // Operands reach the Hopper kernel as TMA tensor maps (__grid_constant__ parameters).
        CUtensorMap map_a{}, map_b{};
        encode_wgmma_operands(spec, problem, a, b, map_a, map_b);
        int batches = static_cast<int>(s.B);
        CUdeviceptr counter = m_tile_counter.get();
        // Persistent CTAs walk the tiles of every batch themselves: a 1-D grid.
        const unsigned grid_x = static_cast<unsigned>(spec.persistent ? plan.grid : tiles / s.B);
        const unsigned grid_z = spec.persistent ? 1u : static_cast<unsigned>(s.B);
        void* wargs[] = {&map_a, &map_b, &c,       &bias,    &M,         &N,     &K,          &ldc,   &sc,
                         &alpha, &beta,  &batches, &counter, &workspace, &flags, &split_from, &splits};
        CUDA_CHECK(driver().cuLaunchKernel(k.function, grid_x, 1, grid_z, threads_per_block(spec), 1, 1,
                                           k.shared_bytes, m_stream, wargs, nullptr));
        return;
    }
    void* args[] = {&a,  &b,  &c,  &bias,  &M,    &N,         &K,     &lda,       &ldb,   &ldc,
                    &sa, &sb, &sc, &alpha, &beta, &workspace, &flags, &split_from, &splits};
    // SPLIT_K: a 1-D grid of work units over every batch's tiles; else tiles x batches.
    const unsigned grid_x = static_cast<unsigned>(spec.split_k ? plan.units : tiles / s.B);
    const unsigned grid_z = spec.split_k ? 1u : static_cast<unsigned>(s.B);
    CUDA_CHECK(driver().cuLaunchKernel(k.function, grid_x, 1, grid_z, threads_per_block(spec), 1, 1, k.shared_bytes,
                                       m_stream, args, nullptr));
}

Verification CudaBackend::verify(const KernelSpec& spec) {
    m_context.make_current();
    const auto start = std::chrono::steady_clock::now();
    LoadedKernel& k = load(spec);
    const Problem p = verification_problem(spec);
    const std::string& dtype = spec.dtype;
    const bool exact = spec.math == MathPath::imma;  // integers: every element equal
    const int es = core::dtype_size(dtype);
    const int out_es = core::dtype_size(p.shape.out_dtype);
    const std::size_t na = element_count(p, 'a'), nb = element_count(p, 'b'), nc = element_count(p, 'c');
    const std::size_t nbias = element_count(p, 'z');
    m_va.reserve(na * es);
    m_vb.reserve(nb * es);
    m_vc.reserve(nc * out_es);
    m_vref.reserve(nc * out_es);
    m_vbias.reserve(nbias * es);
    // Signed inputs, fresh per kernel: a wrong index shows as an error of the output's size.
    const std::uint64_t seed = kVerifySeed + m_stats.kernels_verified * 7919;
    fill(m_va.get(), dtype, na, seed + 1, -1.f, 1.f);
    fill(m_vb.get(), dtype, nb, seed + 2, -1.f, 1.f);
    fill(m_vbias.get(), dtype, nbias, seed + 3, -1.f, 1.f);
    const DriverApi& api = driver();
    // All-ones bytes are NaN in every float dtype, 0x7f7f7f7f far beyond any int8 sum: an
    // element the kernel never writes fails.
    const unsigned char unwritten = exact ? 0x7f : 0xff;
    CUDA_CHECK(api.cuMemsetD8Async(m_vc.get(), unwritten, nc * out_es, m_stream));
    CUDA_CHECK(api.cuMemsetD8Async(m_vref.get(), unwritten, nc * out_es, m_stream));
    launch(spec, k, p, {m_va.get(), m_vb.get(), m_vc.get(), m_vbias.get()}, /*verifying=*/true);
    if (exact)
        run_int8_reference(p, {m_va.get(), m_vb.get(), m_vref.get(), 0});
    else
        m_cublas->run(p, {m_va.get(), m_vb.get(), m_vref.get(), m_vbias.get()}, false, /*fp32_reduction=*/true);
    const std::vector<float> out = download(m_vc.get(), p.shape.out_dtype, nc);
    const std::vector<float> ref = download(m_vref.get(), p.shape.out_dtype, nc);

    Verification v;
    v.problem = describe(p);
    double rtol = 0, atol_scale = 0;
    tolerance(spec, rtol, atol_scale);
    double sum_sq = 0;
    std::size_t count = 0;
    const auto& s = p.shape;
    const auto for_each_element = [&](auto&& fn) {
        for (std::int64_t b = 0; b < s.B; ++b)
            for (std::int64_t m = 0; m < s.M; ++m)
                for (std::int64_t n = 0; n < s.N; ++n)
                    fn(static_cast<std::size_t>(b * s.out_stride[0] + m * s.out_stride[1] + n));
    };
    for_each_element([&](std::size_t i) {
        sum_sq += static_cast<double>(ref[i]) * ref[i];
        ++count;
    });
    const double atol = atol_scale * std::sqrt(sum_sq / std::max<std::size_t>(count, 1));
    std::size_t bad = 0, first_bad = 0;
    for_each_element([&](std::size_t i) {
        const double d = std::fabs(static_cast<double>(out[i]) - ref[i]);
        // Exact: any difference fails (scaled > 1).
        const double scaled = exact ? (d == 0 ? 0.0 : 1.0 + d) : d / (atol + rtol * std::fabs(ref[i]));
        if (!std::isfinite(out[i]) || !(scaled <= 1.0)) {
            if (bad++ == 0) first_bad = i;
        }
        if (std::isfinite(d)) {
            v.max_abs_error = std::max(v.max_abs_error, d);
            v.max_scaled_error = std::max(v.max_scaled_error, scaled);
        }
    });
    v.passed = bad == 0 && std::isfinite(sum_sq) && sum_sq > 0;
    if (!v.passed) {
        std::ostringstream o;
        o << bad << " of " << count << " elements wrong on " << v.problem;
        if (bad > 0) {
            const std::int64_t b = first_bad / s.out_stride[0];
            const std::int64_t m = (first_bad % s.out_stride[0]) / s.out_stride[1];
            const std::int64_t n = first_bad % s.out_stride[1];
            o << "; first at [" << b << "," << m << "," << n << "]: " << out[first_bad]
              << (exact ? " vs the exact reference " : " vs cuBLAS ") << ref[first_bad];
        }
        v.message = o.str();
    }
    ++m_stats.kernels_verified;
    if (!v.passed) ++m_stats.verification_failures;
    m_stats.verify_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    k.verification = v;
    return v;
}

void CudaBackend::run_int8_reference(const Problem& p, const GemmOperands& ops) {
    const auto& s = p.shape;
    const ProblemStrides st = problem_strides(p);
    CUfunction f = utility_function("mmt_reference_int8");
    int M = static_cast<int>(s.M), N = static_cast<int>(s.N), K = static_cast<int>(s.K);
    long long lda = st.lda, ldb = st.ldb, ldc = st.ldc;
    int a_kmajor = p.layout[0] == 'n' ? 1 : 0, b_kmajor = p.layout[1] == 't' ? 1 : 0;
    CUdeviceptr a = ops.a, b = ops.b, c = ops.c;
    void* args[] = {&a, &b, &c, &M, &N, &K, &lda, &ldb, &ldc, &a_kmajor, &b_kmajor};
    CUDA_CHECK(driver().cuLaunchKernel(f, static_cast<unsigned>((N + 127) / 128), static_cast<unsigned>(M), 1, 128, 1,
                                       1, 0, m_stream, args, nullptr));
}

CudaBackend::LoadedKernel& CudaBackend::load_verified(const KernelSpec& spec) {
    LoadedKernel& k = load(spec);
    if (!k.verification) verify(spec);
    if (!k.verification->passed) {
        throw core::Error("kernel " + spec_name(spec), std::string("wrong result against ") +
                                                          (spec.math == MathPath::imma ? "the exact reference: " : "cuBLAS: ") +
                                                          k.verification->message);
    }
    return k;
}

Timing CudaBackend::time(const Problem& problem, const core::GemmConfig& config, const TimingOptions& options) {
    m_context.make_current();
    if (!m_problem || !(m_problem->shape == problem.shape) || m_problem->op != problem.op ||
        m_problem->layout != problem.layout)
        throw core::Error("cuda backend", "time() called for a problem that was not prepared");
    const KernelSpec spec = spec_for(config, problem);
    if (auto reason = unsupported_reason(spec, limits())) throw core::Error("kernel " + spec_name(spec), *reason);
    Timing t;
    try {
        LoadedKernel& k = load_verified(spec);
        const GemmOperands ops{m_a.get(), m_b.get(), m_c.get(), m_bias.get()};
        t = m_timer->time([&] { launch(spec, k, problem, ops); }, options);
    } catch (const DeviceFault& e) {
        // Every launch of time() is synchronised before it returns, so the fault is this kernel's.
        throw DeviceFault("kernel " + spec_name(spec), e.what());
    } catch (const core::Error&) {
        // A fault may surface first as another library's error (cuBLAS during verification):
        // a sticky error on the stream makes it the DeviceFault it is.
        try {
            CUDA_CHECK(driver().cuStreamSynchronize(m_stream));
        } catch (const DeviceFault& e) {
            throw DeviceFault("kernel " + spec_name(spec), e.what());
        }
        throw;
    }
    spdlog::debug("cuda: {} {:.4f} ms (min {:.4f}, max {:.4f}, spread {:.1f}%)", spec_name(spec), t.median_ms,
                  t.min_ms, t.max_ms, t.median_ms > 0 ? 100.0 * (t.max_ms - t.min_ms) / t.median_ms : 0.0);
    return t;
}

Timing CudaBackend::time_reference(const Problem& problem, const TimingOptions& options) {
    m_context.make_current();
    if (!m_problem || !(m_problem->shape == problem.shape))
        throw core::Error("cuda backend", "time_reference() called for a problem that was not prepared");
    const bool tf32 = reference_tf32(problem);
    const GemmOperands ops{m_a.get(), m_b.get(), m_c.get(), m_bias.get()};
    Timing t = m_timer->time([&] { m_cublas->run(problem, ops, tf32); }, options);
    spdlog::debug("cuda: {} on {}: {:.4f} ms (min {:.4f}, max {:.4f})", m_cublas->algorithm_text(problem, tf32),
                  describe(problem), t.median_ms, t.min_ms, t.max_ms);
    return t;
}

std::vector<float> CudaBackend::read_output(const Problem& problem) {
    m_context.make_current();
    return download(m_c.get(), problem.shape.out_dtype, element_count(problem, 'c'));
}

void CudaBackend::run_once(const Problem& problem, const core::GemmConfig& config) {
    m_context.make_current();
    const KernelSpec spec = spec_for(config, problem);
    LoadedKernel& k = load(spec);
    launch(spec, k, problem, {m_a.get(), m_b.get(), m_c.get(), m_bias.get()});
    CUDA_CHECK(driver().cuStreamSynchronize(m_stream));
}

void CudaBackend::run_reference_once(const Problem& problem) {
    m_context.make_current();
    m_cublas->run(problem, {m_a.get(), m_b.get(), m_c.get(), m_bias.get()}, reference_tf32(problem));
    CUDA_CHECK(driver().cuStreamSynchronize(m_stream));
}

CudaBackendStats CudaBackend::stats() const {
    CudaBackendStats s = m_stats;
    s.cache = m_cache->stats();
    s.timed_seconds = m_timer->timed_seconds();
    return s;
}

}  // namespace cuda
}  // namespace mmt::collect
