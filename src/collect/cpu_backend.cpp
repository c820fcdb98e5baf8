#include "matmul_toolkit/collect/cpu_backend.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/collect/device_fault.hpp"
#include "matmul_toolkit/collect/interrupt.hpp"
#include "matmul_toolkit/collect/problem_generator.hpp"
#include "matmul_toolkit/collect/random.hpp"
#include "matmul_toolkit/collect/timing_stats.hpp"
#include "matmul_toolkit/core/error.hpp"

#if MMT_HAVE_CBLAS
#include <cblas.h>
#if MMT_HAVE_OPENBLAS
extern "C" void openblas_set_num_threads(int num_threads);
#endif
#endif

namespace mmt::collect {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::int64_t kDefaultCacheBytes = 1 << 20;
// Kernel results are checked against the reference to within this fraction of the largest
// possible |alpha·Σ a·b| + |beta·bias|: far above float32 rounding for any K we time, far
// below what a dropped or doubled K block changes.
constexpr double kRelativeTolerance = 1e-4;

std::string trim(const std::string& s) {
    const auto first = s.find_first_not_of(" \t");
    if (first == std::string::npos) return "";
    const auto last = s.find_last_not_of(" \t\r\n");
    return s.substr(first, last - first + 1);
}

std::int64_t round_up(std::int64_t x, std::int64_t to) { return (x + to - 1) / to * to; }

// Bytes the kernel keeps hot per tile: the packed A and B panels (padded to the register
// tile, 8 × 16) and the float32 accumulator tile.
std::int64_t tile_bytes(const core::GemmConfig& c, int element_size) {
    const std::int64_t mp = round_up(c.block_m, 8);
    const std::int64_t np = round_up(c.block_n, 16);
    return (mp + np) * c.block_k * element_size + mp * np * 4;
}

CpuTile tile_for(const core::GemmConfig& c) {
    CpuTile t;
    t.block_m = c.block_m;
    t.block_n = c.block_n;
    t.block_k = c.block_k;
    t.group_m = c.group_m;
    t.even_k = c.even_k;
    return t;
}

void fill_uniform(std::vector<float>& v, Rng& rng) {
    // [0.1, 1.1): non-zero, so no zero-skipping shortcut can distort a timing.
    for (auto& x : v) x = static_cast<float>(rng.uniform(0.1, 1.1));
}

#if MMT_HAVE_CBLAS
void blas_gemm(const CpuGemmArgs& g) {
    const bool a_trans = g.a_stride[2] != 1;
    const bool b_trans = g.b_stride[2] != 1;
    const auto lda = static_cast<int>(a_trans ? g.a_stride[2] : g.a_stride[1]);
    const auto ldb = static_cast<int>(b_trans ? g.b_stride[2] : g.b_stride[1]);
    for (std::int64_t batch = 0; batch < g.batch; ++batch) {
        float* c = g.c + batch * g.m * g.n;
        float alpha = 1.0f, beta = 0.0f;
        if (g.bias != nullptr) {
            // torch.addmm on CPU does the same: broadcast the bias into the output, then
            // one gemm with beta.
            for (std::int64_t i = 0; i < g.m; ++i) std::copy(g.bias, g.bias + g.n, c + i * g.n);
            alpha = g.alpha;
            beta = g.beta;
        }
        cblas_sgemm(CblasRowMajor, a_trans ? CblasTrans : CblasNoTrans,
                    b_trans ? CblasTrans : CblasNoTrans, static_cast<int>(g.m),
                    static_cast<int>(g.n), static_cast<int>(g.k), alpha,
                    g.a + batch * g.a_stride[0], lda, g.b + batch * g.b_stride[0], ldb, beta, c,
                    static_cast<int>(g.n));
    }
}
#endif

bool same_problem(const Problem& a, const Problem& b) {
    return a.op == b.op && a.layout == b.layout && a.shape == b.shape && a.alpha == b.alpha &&
           a.beta == b.beta;
}

template <typename Run>
Timing time_runs(Run&& run, const TimingOptions& options, double& timed_seconds) {
    for (int i = 0; i < options.warmup; ++i) run();
    Timing timing;
    const auto call_start = Clock::now();
    for (int i = 0; i < options.repeat; ++i) {
        if (interrupt_requested()) throw core::Interrupted("interrupted while timing");
        const auto start = Clock::now();
        run();
        const auto end = Clock::now();
        timing.samples_ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
        timing.sample_starts_ms.push_back(
            std::chrono::duration<double, std::milli>(start - call_start).count());
    }
    summarize_samples(timing);
    for (double ms : timing.samples_ms) timed_seconds += ms / 1000.0;
    return timing;
}

}  // namespace

std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            const auto colon = line.find(':');
            if (colon != std::string::npos) {
                auto name = trim(line.substr(colon + 1));
                if (!name.empty()) return name;
            }
        }
    }
    return "cpu";
}

std::int64_t cpu_l2_cache_bytes() {
#ifdef _SC_LEVEL2_CACHE_SIZE
    const long size = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (size > 0) return size;
#endif
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index2/size");
    std::string text;
    if (in >> text && !text.empty()) {
        std::int64_t value = 0;
        std::size_t used = 0;
        try {
            value = std::stoll(text, &used);
        } catch (const std::exception&) {
            return 0;
        }
        const char unit = used < text.size() ? text[used] : ' ';
        if (unit == 'K') value <<= 10;
        if (unit == 'M') value <<= 20;
        return value;
    }
    return 0;
}

bool cpu_reference_available() { return MMT_HAVE_CBLAS != 0; }

CpuBackend::CpuBackend(CpuBackendOptions options) {
    m_cache_bytes = options.cache_bytes > 0 ? options.cache_bytes : cpu_l2_cache_bytes();
    if (m_cache_bytes <= 0) m_cache_bytes = kDefaultCacheBytes;
#if MMT_HAVE_CBLAS && MMT_HAVE_OPENBLAS
    // The kernels run on one thread; so does the reference, or the comparison means nothing
    // and timings shift with whatever else the machine runs.
    openblas_set_num_threads(1);
#endif
}

std::string CpuBackend::hardware_name() const {
    static const std::string name = cpu_model_name();
    return name;
}

CollectionDefaults CpuBackend::collection_defaults() const {
    CollectionDefaults defaults;
    defaults.timing.warmup = 1;
    defaults.timing.repeat = 5;
    defaults.max_size = 512;
    defaults.dtypes = {"float32"};
    return defaults;
}

PruneResult CpuBackend::prune(const std::vector<core::GemmConfig>& configs, const Problem& /*problem*/) const {
    // Panels hold 4-byte elements for every dtype (int8 is widened to int32 as it is packed).
    const int element_size = 4;
    const std::string too_big = "tile working set (packed A and B panels + accumulator) exceeds "
                                "the L2 cache (" + std::to_string(m_cache_bytes / 1024) + " KiB)";
    const std::string duplicate = "duplicate on cpu: num_stages and num_warps do not apply";
    PruneResult result;
    std::unordered_set<core::GemmConfig, core::GemmConfigHash> seen;
    for (const auto& config : configs) {
        if (config.block_m <= 0 || config.block_n <= 0 || config.block_k <= 0 || config.group_m <= 0) {
            result.pruned.push_back({config, "block sizes and group_m must be positive"});
            continue;
        }
        if (tile_bytes(config, element_size) > m_cache_bytes) {
            result.pruned.push_back({config, too_big});
            continue;
        }
        core::GemmConfig fixed = config;
        fixed.num_stages = kCpuNumStages;
        fixed.num_warps = kCpuNumWarps;
        if (!seen.insert(fixed).second) {
            result.pruned.push_back({config, duplicate});
            continue;
        }
        result.kept.push_back(fixed);
    }
    return result;
}

namespace {

/// The operands' sizes and strides, the same for every element type.
template <typename Args, typename In, typename Out>
Args operands_for(const Problem& p, const In* a, const In* b, Out* c) {
    Args g;
    g.batch = p.shape.B;
    g.m = p.shape.M;
    g.n = p.shape.N;
    g.k = p.shape.K;
    g.a = a;
    g.a_stride = p.a_stride();
    g.b = b;
    g.b_stride = p.b_stride();
    g.c = c;
    return g;
}

}  // namespace

CpuGemmArgs CpuBackend::args_for(const Problem& p, float* out) {
    auto g = operands_for<CpuGemmArgs>(p, m_a.data(), m_b.data(), out);
    g.bias = p.op == "addmm" ? m_bias.data() : nullptr;
    g.alpha = p.alpha;
    g.beta = p.beta;
    return g;
}

CpuGemmInt8Args CpuBackend::int8_args_for(const Problem& p, std::int32_t* out) {
    return operands_for<CpuGemmInt8Args>(p, m_a8.data(), m_b8.data(), out);
}

void CpuBackend::prepare(const Problem& p, std::uint64_t seed) {
    const auto dtypes = supported_dtypes();
    if (std::find(dtypes.begin(), dtypes.end(), p.dtype()) == dtypes.end()) {
        throw core::InputError("cpu backend", "dtype " + p.dtype() + " is not supported (float32 and int8)");
    }
    if (p.dtype() == "int8" && p.op != "mm") {
        throw core::InputError("cpu backend", "int8 is torch._int_mm: mm only, not " + p.op);
    }
    if (!core::is_known_op(p.op) || !core::is_known_layout(p.layout)) {
        throw core::InputError("cpu backend", "unknown op or layout in " + describe_problem(p));
    }
    if (p.shape.B < 1 || p.shape.M < 1 || p.shape.N < 1 || p.shape.K < 1) {
        throw core::InputError("cpu backend", "dimensions must be positive in " + describe_problem(p));
    }
    m_prepared = false;
    const auto b = p.shape.B, m = p.shape.M, n = p.shape.N, k = p.shape.K;
    Rng rng(seed);
    if (p.dtype() == "int8") {
        // Non-zero integers, small enough that no sum of K products leaves int32.
        auto fill = [&](std::vector<std::int8_t>& v, std::size_t count) {
            v.resize(count);
            for (auto& x : v) x = static_cast<std::int8_t>(rng.uniform_int(1, 4) * (rng.uniform_int(0, 1) ? 1 : -1));
        };
        fill(m_a8, static_cast<std::size_t>(b * m * k));
        fill(m_b8, static_cast<std::size_t>(b * k * n));
        m_out32.assign(static_cast<std::size_t>(b * m * n), 0);
        m_expected32.assign(m_out32.size(), 0);
        naive_gemm(int8_args_for(p, m_expected32.data()));
        m_problem = p;
        m_prepared = true;
        return;
    }
    m_a.assign(static_cast<std::size_t>(b * m * k), 0.0f);
    m_b.assign(static_cast<std::size_t>(b * k * n), 0.0f);
    m_bias.assign(p.op == "addmm" ? static_cast<std::size_t>(n) : 0, 0.0f);
    fill_uniform(m_a, rng);
    fill_uniform(m_b, rng);
    fill_uniform(m_bias, rng);
    m_out.assign(static_cast<std::size_t>(b * m * n), 0.0f);
    m_expected.assign(m_out.size(), 0.0f);
#if MMT_HAVE_CBLAS
    blas_gemm(args_for(p, m_expected.data()));
#else
    naive_gemm(args_for(p, m_expected.data()));
#endif
    m_problem = p;
    m_prepared = true;
}

void CpuBackend::check_prepared(const Problem& p) const {
    if (!m_prepared || !same_problem(p, m_problem)) {
        throw core::Error("cpu backend", "time() called for " + describe_problem(p) +
                                             " without prepare() for it");
    }
}

void CpuBackend::verify(const Problem& p, const core::GemmConfig& config) const {
    if (is_int8()) {  // integers: exact
        for (std::size_t i = 0; i < m_out32.size(); ++i) {
            if (m_out32[i] != m_expected32[i]) {
                throw core::Error("cpu kernel", "config " + describe_config(config) + " gives a wrong result for " +
                                                    describe_problem(p) + ": element " + std::to_string(i) + " is " +
                                                    std::to_string(m_out32[i]) + ", expected " +
                                                    std::to_string(m_expected32[i]));
            }
        }
        return;
    }
    const double bound = std::abs(p.alpha) * static_cast<double>(p.shape.K) * 1.1 * 1.1 +
                         (p.op == "addmm" ? std::abs(p.beta) * 1.1 : 0.0);
    const double tolerance = kRelativeTolerance * bound;
    for (std::size_t i = 0; i < m_out.size(); ++i) {
        const double error = std::abs(static_cast<double>(m_out[i]) - m_expected[i]);
        if (!(error <= tolerance)) {
            std::ostringstream what;
            what << "config " << describe_config(config) << " gives a wrong result for "
                 << describe_problem(p) << ": element " << i << " is " << m_out[i]
                 << ", expected " << m_expected[i];
            throw core::Error("cpu kernel", what.str());
        }
    }
}

Timing CpuBackend::time(const Problem& p, const core::GemmConfig& config,
                        const TimingOptions& options) {
    check_prepared(p);
    if (test_fault_requested(config)) {
        // Test only: what a CUDA sticky error means for the engine, without a GPU.
        throw DeviceFault("cpu kernel " + describe_config(config),
                          std::string("injected fault (") + kTestFaultVariable + " is set)");
    }
    const CpuTile tile = tile_for(config);
    m_workspace.reserve(tile);
    TimingOptions rest = options;
    rest.warmup = std::max(0, options.warmup - 1);
    if (is_int8()) {
        const CpuGemmInt8Args args = int8_args_for(p, m_out32.data());
        std::fill(m_out32.begin(), m_out32.end(), 0);
        cpu_gemm(args, tile, m_workspace);
        verify(p, config);
        return time_runs([&] { cpu_gemm(args, tile, m_workspace); }, rest, m_timed_seconds);
    }
    const CpuGemmArgs args = args_for(p, m_out.data());
    // The first run is checked before any timing counts; it doubles as a warmup run.
    std::fill(m_out.begin(), m_out.end(), 0.0f);
    cpu_gemm(args, tile, m_workspace);
    verify(p, config);
    return time_runs([&] { cpu_gemm(args, tile, m_workspace); }, rest, m_timed_seconds);
}

Timing CpuBackend::time_reference(const Problem& p, const TimingOptions& options) {
    check_prepared(p);
    if (is_int8()) {
        throw core::Error("cpu reference", "BLAS has no int8 GEMM; int8 kernels are checked against an exact integer loop");
    }
#if MMT_HAVE_CBLAS
    const CpuGemmArgs args = args_for(p, m_out.data());
    return time_runs([&] { blas_gemm(args); }, options, m_timed_seconds);
#else
    (void)options;
    throw core::Error("cpu reference", "this build has no BLAS (install libopenblas-dev and rebuild)");
#endif
}

}  // namespace mmt::collect
