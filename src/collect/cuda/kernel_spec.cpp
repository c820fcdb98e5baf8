#include "kernel_spec.hpp"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect::cuda {
namespace {

bool is_pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

// Largest power of two <= cap that divides every value given (0 values are ignored).
int widest_vector(int cap, std::initializer_list<std::int64_t> values) {
    std::int64_t g = 0;
    for (auto v : values) g = std::gcd(g, v);
    int vec = cap;
    while (vec > 1 && (g == 0 ? false : g % vec != 0)) vec /= 2;
    return g == 0 ? cap : vec;
}

const char* dtype_short(const std::string& dtype) {
    if (dtype == "float16") return "f16";
    if (dtype == "bfloat16") return "bf16";
    if (dtype == "int8") return "i8";
    return "f32";
}

int dtype_code(const std::string& dtype) {
    if (dtype == "float16") return 0;
    if (dtype == "bfloat16") return 1;
    if (dtype == "float32") return 2;
    if (dtype == "int8") return 3;
    throw core::InputError("dtype", "the CUDA backend has no kernel for " + dtype);
}

// Warp grid over the tile for the tensor-core paths: the factorisation that minimises the
// shared-memory fragment traffic per output (1/warp_tile_m + 1/warp_tile_n), preferring an
// even number of n8 tiles (ldmatrix.x4 serves two at once).
void choose_warp_grid(KernelSpec& s) {
    double best = 1e30;
    s.warps_m = s.warps_n = 0;
    for (int wm = 1; wm <= s.num_warps; wm *= 2) {
        const int wn = s.num_warps / wm;
        if (wm * wn != s.num_warps) continue;
        if (s.block_m % (16 * wm) != 0 || s.block_n % (8 * wn) != 0) continue;
        const int wtm = s.block_m / wm, wtn = s.block_n / wn;
        double cost = 1.0 / wtm + 1.0 / wtn;
        if ((wtn / 8) % 2 != 0) cost *= 1.05;
        if (cost < best - 1e-12) {
            best = cost;
            s.warps_m = wm;
            s.warps_n = wn;
        }
    }
}

// Thread grid for the FMA path: each thread owns thread_m x thread_n accumulators (rows
// strided by block_m / thread_m); the split with the fewest shared loads per FMA.
void choose_thread_grid(KernelSpec& s) {
    const int threads = 32 * s.num_warps;
    s.thread_m = s.thread_n = 0;
    const long elems = static_cast<long>(s.block_m) * s.block_n;
    if (elems % threads != 0) return;
    const int per_thread = static_cast<int>(elems / threads);
    int best = 1 << 30;
    for (int tm = 1; tm <= per_thread; tm *= 2) {
        const int tn = per_thread / tm;
        if (tm * tn != per_thread || tm > s.block_m || tn > s.block_n) continue;
        if (s.block_m % tm != 0 || s.block_n % tn != 0) continue;
        // Ties go to the larger thread_m, so consecutive threads walk along N (coalesced C).
        if (tm + tn <= best) {
            best = tm + tn;
            s.thread_m = tm;
            s.thread_n = tn;
        }
    }
}

}  // namespace

ProblemStrides problem_strides(const Problem& p) {
    const auto& s = p.shape;
    const auto a = p.a_stride();  // [batch, m, k]
    const auto b = p.b_stride();  // [batch, k, n]
    // The kernel needs one unit stride per operand (the layout's contiguous index).
    if ((a[1] != 1 && a[2] != 1) || (b[1] != 1 && b[2] != 1) || s.out_stride[2] != 1)
        throw core::InputError("problem", "the CUDA backend needs operands with a unit stride");
    ProblemStrides out;
    out.lda = p.layout[0] == 'n' ? a[1] : a[2];
    out.ldb = p.layout[1] == 'n' ? b[1] : b[2];
    out.batch_a = a[0];
    out.batch_b = b[0];
    out.ldc = s.out_stride[1];
    out.batch_c = s.out_stride[0];
    return out;
}

int preferred_cluster_m(const Problem& p) {
    const std::int64_t row_bytes = problem_strides(p).ldb * core::dtype_size(p.dtype());
    return row_bytes % 128 != 0 && p.shape.M >= 256 && p.shape.K >= 1024 ? 2 : 1;
}

OperandAlignment alignment_for(const Problem& p) {
    const auto& s = p.shape;
    const int cap = 16 / core::dtype_size(p.dtype());
    const ProblemStrides st = problem_strides(p);
    const bool batched = s.B > 1;
    OperandAlignment a;
    // Each vector must stay inside one row of the contiguous dimension and start aligned.
    a.vec_a = widest_vector(cap, {st.lda, p.layout[0] == 'n' ? s.K : s.M, batched ? st.batch_a : 0});
    a.vec_b = widest_vector(cap, {st.ldb, p.layout[1] == 'n' ? s.N : s.K, batched ? st.batch_b : 0});
    a.vec_c = widest_vector(2, {st.ldc, s.N, batched ? st.batch_c : 0});
    return a;
}

KernelSpec make_spec(const core::GemmConfig& c, const std::string& dtype, const std::string& op,
                     const std::string& layout, const OperandAlignment& align) {
    KernelSpec s;
    s.block_m = c.block_m;
    s.block_n = c.block_n;
    s.block_k = c.block_k;
    s.group_m = c.group_m;
    s.num_stages = c.num_stages;
    s.num_warps = c.num_warps;
    s.even_k = c.even_k;
    s.dtype = dtype;
    s.op = op;
    s.layout = layout;
    s.align = align;
    dtype_code(dtype);  // rejects dtypes without a kernel
    s.allow_tf32 = dtype == "float32" && c.allow_tf32;
    s.math = dtype == "int8"      ? MathPath::imma
             : dtype != "float32" ? MathPath::mma16
                                  : (s.allow_tf32 ? MathPath::tf32 : MathPath::fma);
    if (is_pow2(s.num_warps) && s.num_warps <= 8) {
        if (s.math == MathPath::fma)
            choose_thread_grid(s);
        else
            choose_warp_grid(s);
    }
    // 8 warps go on even past the estimate on the 16-bit path only: there the pipeline won
    // 1.08-1.5x with small spills; tf32's 8-warp tiles spill more and lost 0.6-0.8x (H100).
    s.frag_pipeline = s.math != MathPath::fma && s.num_stages >= 3 && s.warps_m != 0 &&
                      ((s.num_warps == 8 && s.math == MathPath::mma16) || frag_pipeline_registers(s) <= 255);
    return s;
}

KernelSpec make_spec(const core::GemmConfig& config, const Problem& problem) {
    return make_spec(config, problem.dtype(), problem.op, problem.layout, alignment_for(problem));
}

namespace {

constexpr int kWgmmaMaxAccumulators = 128;

std::size_t round_kib(std::size_t bytes) { return (bytes + 1023) / 1024 * 1024; }

// Two warpgroups split block_m when it holds two m64 rows, else block_n.
void wgmma_tile(const KernelSpec& s, int& wg_m, int& wg_n) {
    const int groups = s.num_warps / 4;
    const bool split_m = groups == 1 || s.block_m >= 128;
    wg_m = split_m ? s.block_m / groups : s.block_m;
    wg_n = split_m ? s.block_n : s.block_n / groups;
}

}  // namespace

std::optional<std::string> wgmma_unsupported_reason(const KernelSpec& s, const DeviceLimits& limits) {
    if (s.math != MathPath::mma16) return std::string("wgmma: float16 / bfloat16 only");
    if (s.num_warps != 4 && s.num_warps != 8) return std::string("wgmma: num_warps must be 4 or 8");
    if (s.num_stages < 2) return std::string("wgmma: num_stages must be >= 2");
    if (!is_pow2(s.block_m) || !is_pow2(s.block_n) || !is_pow2(s.block_k) || s.block_k < 16 || s.block_n < 16 ||
        s.block_k > 256)
        return std::string("wgmma: block sizes must be powers of two, block_n >= 16, block_k 16..256");
    if (s.block_m % 64 != 0 || s.block_m > 256) return std::string("wgmma: block_m must be 64, 128 or 256");
    int wg_m = 0, wg_n = 0;
    wgmma_tile(s, wg_m, wg_n);
    if (wg_n < 8 || wg_n > 256) return std::string("wgmma: a warpgroup's block_n share must be 8..256");
    if (s.layout[1] == 'n' && wg_n % 64 != 0)
        return std::string("wgmma: row-major B needs a warpgroup's block_n share to be a multiple of 64");
    if ((wg_m / 64) * (wg_n / 2) > kWgmmaMaxAccumulators)
        return std::string("wgmma: more than 128 accumulators per thread");
    if (s.align.vec_a != 8 || s.align.vec_b != 8)
        return std::string("wgmma: TMA needs 16-byte aligned strides of A and B");
    KernelSpec w = s;
    w.math = MathPath::wgmma;
    if (shared_bytes(w) > limits.max_shared_bytes) return std::string("wgmma: shared memory exceeds the device limit");
    return std::nullopt;
}

bool select_wgmma(KernelSpec& s, const DeviceLimits& limits, int cluster_m, bool persistent, bool dynamic_tiles) {
    if (cluster_m != 1 && cluster_m != 2) throw core::InputError("cluster_m", "must be 1 or 2");
    if (wgmma_unsupported_reason(s, limits)) return false;
    s.math = MathPath::wgmma;
    s.cluster_m = cluster_m;
    wgmma_tile(s, s.wg_m, s.wg_n);
    s.even_k = false;
    s.frag_pipeline = false;
    s.split_k = false;  // the wgmma kernel splits on its own terms (persistent CTAs)
    s.persistent = false;
    s.dynamic_tiles = false;
    if (persistent && cluster_m == 1) {
        s.persistent = true;
        s.dynamic_tiles = dynamic_tiles;
        if (shared_bytes(s) > limits.max_shared_bytes) s.persistent = s.dynamic_tiles = false;
    }
    return true;
}

TilePlan plan_tiles(long long tiles, long long k_tiles, long long capacity, bool split_tail,
                    int min_k_tiles_per_split, int max_splits) {
    TilePlan plan;
    capacity = std::max(capacity, 1LL);
    plan.split_from = tiles;
    plan.units = tiles;
    const long long tail = tiles % capacity;
    if (split_tail && tail > 0) {
        const long long splits = std::min({capacity / tail, k_tiles / std::max(min_k_tiles_per_split, 1),
                                           static_cast<long long>(max_splits)});
        if (splits >= 2) {
            plan.splits = static_cast<int>(splits);
            plan.split_from = tiles - tail;
            plan.units = plan.split_from + tail * splits;
        }
    }
    plan.grid = std::max(1LL, std::min(plan.units, capacity));
    return plan;
}

bool persistent_pays_off(const KernelSpec& s, const Problem& problem, long long sms, const DeviceLimits& limits,
                         bool split_tail) {
    const auto& shape = problem.shape;
    const long long tiles = grid_ctas(s, shape.M, shape.N) * shape.B;
    if (tiles > sms) return true;
    // Whether the launch's plan_tiles would split. The occupancy is known only once the
    // kernel is loaded, but one CTA per SM is certain when it takes over half the shared
    // memory; else assume room for every part.
    const bool one_cta_per_sm = 2 * shared_bytes(s) > limits.max_shared_bytes;
    const long long capacity = one_cta_per_sm ? sms : tiles * max_tail_splits(s);
    const long long k_tiles = (shape.K + s.block_k - 1) / s.block_k;
    return plan_tiles(tiles, k_tiles, capacity, split_tail, kMinKTilesPerSplit, max_tail_splits(s)).splits > 1;
}

int max_tail_splits(const KernelSpec& s) {
    return s.math == MathPath::wgmma ? kMaxTailSplits : kMaxTailSplitsOneTilePerCta;
}

TilePlan split_k_plan(long long tiles, long long k_tiles, long long sms, int min_k_tiles_per_split, int max_splits) {
    return plan_tiles(tiles, k_tiles, sms, tiles < sms, min_k_tiles_per_split, max_splits);
}

long long grid_ctas(const KernelSpec& s, long long M, long long N) {
    const long long cluster = s.math == MathPath::wgmma ? s.cluster_m : 1;
    const long long rows = (M + s.block_m - 1) / s.block_m;
    return (rows + cluster - 1) / cluster * cluster * ((N + s.block_n - 1) / s.block_n);
}

int threads_per_block(const KernelSpec& s) {
    // The wgmma kernel's TMA producer is one more warp.
    return 32 * s.num_warps + (s.math == MathPath::wgmma ? 32 : 0);
}

std::string nvrtc_arch(int cc_major, int cc_minor) {
    return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor) + (cc_major == 9 && cc_minor == 0 ? "a" : "");
}

int wgmma_k_step(const KernelSpec& spec) { return std::min(spec.block_k, 64); }

std::size_t shared_bytes(const KernelSpec& s) {
    if (s.math == MathPath::wgmma) {
        // 1 KiB-aligned stages of 1 KiB-rounded tiles (the epilogue's C tile, rows padded
        // by 8 elements, reuses them, and may need more), the slack to align the dynamic
        // shared base, and three mbarriers per k step of a stage (full, empty, cluster).
        const std::size_t es = core::dtype_size(s.dtype);
        const std::size_t stage = round_kib(static_cast<std::size_t>(s.block_m) * s.block_k * es) +
                                  round_kib(static_cast<std::size_t>(s.block_n) * s.block_k * es);
        const std::size_t c_tile = round_kib(static_cast<std::size_t>(s.block_m) * (s.block_n + 8) * es);
        // Persistent: C goes through 32 rows per warpgroup after the stages instead.
        const std::size_t data = s.persistent ? stage * s.num_stages + static_cast<std::size_t>(s.num_warps / 4) *
                                                                           32 * (s.wg_n + 8) * es
                                              : std::max(stage * s.num_stages, c_tile);
        // Dynamic tiles: two tile ids and their two mbarrier pairs (48 bytes, 8-aligned).
        const std::size_t k_steps = static_cast<std::size_t>(s.num_stages) * (s.block_k / wgmma_k_step(s));
        return 1024 + data + 24 * k_steps + (s.persistent && s.dynamic_tiles ? 48 : 0);
    }
    return static_cast<std::size_t>(s.block_m + s.block_n) * s.block_k * s.num_stages * core::dtype_size(s.dtype);
}

int estimated_registers(const KernelSpec& s) {
    constexpr int kOverhead = 40;  // addresses, indices, loop state: what ptxas showed beyond data
    if (s.math == MathPath::wgmma) return (s.wg_m / 64) * (s.wg_n / 2) + kOverhead;
    if (s.math == MathPath::fma) {
        if (s.thread_m == 0) return 1 << 20;
        return s.thread_m * s.thread_n + s.thread_m + s.thread_n + kOverhead;
    }
    if (s.warps_m == 0) return 1 << 20;
    const int wtm = s.block_m / s.warps_m, wtn = s.block_n / s.warps_n;
    const int accumulators = wtm * wtn / 32;
    const int fragments = 2 * ((wtm / 16) * 4 + (wtn / 8) * 2);  // two buffers of A and B fragments
    return accumulators + fragments + kOverhead;
}

int frag_pipeline_registers(const KernelSpec& s) {
    if (s.math == MathPath::fma || s.warps_m == 0) return 0;
    const int wtm = s.block_m / s.warps_m, wtn = s.block_n / s.warps_n;
    const int accumulators = wtm * wtn / 32;
    const int fragments_per_step = (wtm / 16) * 4 + (wtn / 8) * 2;  // A per m16, B per n8
    const int steps = s.block_k / (s.math == MathPath::tf32 ? 8 : s.math == MathPath::imma ? 32 : 16);
    const int copies = (s.block_m + s.block_n) * s.block_k * core::dtype_size(s.dtype) / (16 * 32 * s.num_warps);
    return accumulators + fragments_per_step * (steps + 1) + 4 * copies;
}

std::optional<std::string> unsupported_reason(const KernelSpec& s, const DeviceLimits& limits) {
    // Reasons are fixed categories (the engine counts configs per reason); numbers go to
    // the debug log.
    for (int v : {s.block_m, s.block_n, s.block_k})
        if (!is_pow2(v) || v < 16) return std::string("block sizes must be powers of two >= 16");
    if (!is_pow2(s.num_warps) || s.num_warps > 8) return std::string("num_warps must be 1, 2, 4 or 8");
    if (s.num_stages < 1) return std::string("num_stages must be >= 1");
    if (s.group_m < 1) return std::string("group_m must be >= 1");
    if (s.math == MathPath::imma && s.block_k < 32) return std::string("int8: block_k must be >= 32 (the MMA's k32)");
    if (s.math == MathPath::imma && s.op != "mm") return std::string("int8: mm only (torch._int_mm)");
    if (s.math == MathPath::fma) {
        if (s.thread_m == 0) return std::string("thread layout: fewer tile elements than threads");
    } else if (s.math == MathPath::wgmma) {
        if (s.wg_m == 0) return std::string("warpgroup layout: wg_m / wg_n unset");
    } else if (s.warps_m == 0) {
        return std::string("warp layout: no grid of num_warps warps divides the tile into 16x8 pieces");
    }
    if (shared_bytes(s) > limits.max_shared_bytes)
        return std::string("shared memory: (block_m+block_n)*block_k*stages*dtype size exceeds the device limit");
    if (estimated_registers(s) > limits.max_registers_per_thread)
        return std::string("registers: estimated accumulators+fragments exceed 255 per thread");
    return std::nullopt;
}

std::string kernel_prelude(const KernelSpec& s) {
    std::ostringstream o;
    const auto def = [&o](const char* name, long value) { o << "#define " << name << ' ' << value << '\n'; };
    def("MMT_BLOCK_M", s.block_m);
    def("MMT_BLOCK_N", s.block_n);
    def("MMT_BLOCK_K", s.block_k);
    def("MMT_GROUP_M", s.group_m);
    def("MMT_NUM_STAGES", s.num_stages);
    def("MMT_NUM_WARPS", s.num_warps);
    def("MMT_WARPS_M", s.warps_m);
    def("MMT_WARPS_N", s.warps_n);
    def("MMT_THREAD_M", s.thread_m);
    def("MMT_THREAD_N", s.thread_n);
    def("MMT_EVEN_K", s.even_k ? 1 : 0);
    def("MMT_DTYPE", dtype_code(s.dtype));
    def("MMT_MATH", static_cast<int>(s.math));
    def("MMT_A_KMAJOR", s.layout[0] == 'n' ? 1 : 0);
    def("MMT_B_KMAJOR", s.layout[1] == 't' ? 1 : 0);
    def("MMT_VEC_A", s.align.vec_a);
    def("MMT_VEC_B", s.align.vec_b);
    def("MMT_VEC_C", s.align.vec_c);
    def("MMT_ADDMM", s.op == "addmm" ? 1 : 0);
    def("MMT_FRAG_PIPELINE", s.frag_pipeline ? 1 : 0);
    if (s.math == MathPath::wgmma) {
        // Selects gemm_kernel_sm90.cuh in the combined source (kernel_source.cpp).
        def("MMT_WGMMA", 1);
        def("MMT_WG_M", s.wg_m);
        def("MMT_WG_N", s.wg_n);
        def("MMT_CLUSTER_M", s.cluster_m);
        def("MMT_K_STEP", wgmma_k_step(s));
        def("MMT_PERSISTENT", s.persistent ? 1 : 0);
        def("MMT_DYNAMIC_TILES", s.persistent && s.dynamic_tiles ? 1 : 0);
        // The kernel's bound on a split tile's parts (plan_tiles never plans more).
        if (s.persistent) def("MMT_MAX_SPLITS", kMaxTailSplits);
    }
    if (s.math != MathPath::wgmma) def("MMT_SPLIT_K", s.split_k ? 1 : 0);
    if (s.test_fault) def("MMT_TEST_FAULT", 1);
    return o.str();
}

std::string spec_name(const KernelSpec& s) {
    std::ostringstream o;
    o << dtype_short(s.dtype) << (s.allow_tf32 ? "_tf32" : "") << '_' << s.op << '_' << s.layout << '_' << s.block_m
      << 'x' << s.block_n << 'x' << s.block_k << "_g" << s.group_m << "_s" << s.num_stages << "_w" << s.num_warps
      << "_v" << s.align.vec_a << '.' << s.align.vec_b << '.' << s.align.vec_c << (s.even_k ? "_evenk" : "")
      << (s.frag_pipeline ? "_fp" : "") << (s.math == MathPath::wgmma ? "_wgmma" : "")
      << (s.math == MathPath::wgmma && s.cluster_m > 1 ? "_c" + std::to_string(s.cluster_m) : "")
      << (s.math == MathPath::wgmma && s.persistent ? (s.dynamic_tiles ? "_pd" : "_p") : "")
      << (s.math != MathPath::wgmma && s.split_k ? "_splitk" : "") << (s.test_fault ? "_TESTFAULT" : "");
    return o.str();
}

std::string spec_key(const KernelSpec& s) {
    // The prelude fixes everything the compiled kernel depends on (bmm differs from mm only
    // in its launch grid, so it shares mm's kernel).
    return kernel_prelude(s);
}

}  // namespace mmt::collect::cuda
