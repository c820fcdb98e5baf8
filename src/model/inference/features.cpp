#include "matmul_toolkit/model/features.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::model {
namespace {

struct SmEntry {
    const char* pattern;  ///< lower-case substring of the device name
    const char* also;     ///< a second substring that must be present too, or nullptr
    int sm_count;
    int shared_memory_kib;  ///< opt-in shared memory per block
    const char* label;
};

// Order matters: more specific names come before the names they contain
// ("h100" + "pcie" before "h100", "a100" before "a10", "l40s" before "l40" before "l4").
constexpr SmEntry kSmTable[] = {
    {"gh200", nullptr, 132, 227, "GH200"},
    {"h200", nullptr, 132, 227, "H200"},
    {"h100", "pcie", 114, 227, "H100 PCIe"},
    {"h100", nullptr, 132, 227, "H100 SXM"},
    {"h800", "pcie", 114, 227, "H800 PCIe"},
    {"h800", nullptr, 132, 227, "H800 SXM"},
    {"b200", nullptr, 148, 227, "B200"},
    {"a100", nullptr, 108, 163, "A100"},
    {"a800", nullptr, 108, 163, "A800"},
    {"l40s", nullptr, 142, 99, "L40S"},
    {"l40", nullptr, 142, 99, "L40"},
    {"rtx 6000 ada", nullptr, 142, 99, "RTX 6000 Ada"},
    {"a6000", nullptr, 84, 99, "RTX A6000"},
    {"rtx 4090", nullptr, 128, 99, "RTX 4090"},
    {"rtx 4080", nullptr, 76, 99, "RTX 4080"},
    {"rtx 3090", nullptr, 82, 99, "RTX 3090"},
    {"rtx 3080", nullptr, 68, 99, "RTX 3080"},
    {"a10g", nullptr, 80, 99, "A10G"},
    {"a10", nullptr, 72, 99, "A10"},
    {"a4000", nullptr, 48, 99, "RTX A4000"},
    {"a4500", nullptr, 56, 99, "RTX A4500"},
    {"a5000", nullptr, 64, 99, "RTX A5000"},
    {"a40", nullptr, 84, 99, "A40"},
    {"a30", nullptr, 56, 163, "A30"},
    {"l4", nullptr, 58, 99, "L4"},
    {"v100", nullptr, 80, 96, "V100"},
    {"tesla t4", nullptr, 40, 64, "T4"},
    {"mi300x", nullptr, 304, 64, "MI300X"},
    {"mi250", nullptr, 208, 64, "MI250X (one die)"},
};

// Words that mark a GPU the table does not know yet.
constexpr const char* kGpuWords[] = {"nvidia", "geforce", "tesla", "quadro", "radeon", "instinct"};
constexpr int kUnknownGpuSmCount = 100;

std::string lower(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

bool contains(const std::string& haystack, const char* needle) {
    return haystack.find(needle) != std::string::npos;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

double log2d(double value) { return std::log2(value); }

enum ProblemFeature : std::size_t {
    kOpMm, kOpAddmm, kOpBmm, kATransposed, kBTransposed, kDtypeSize, kDtypeFloat16,
    kDtypeBfloat16, kDtypeFloat32, kLog2B, kLog2M, kLog2N, kLog2K, kLog2Flops, kLog2Bytes,
    kLog2ArithmeticIntensity, kLog2ARowAlignment, kLog2BRowAlignment, kNumProblemFeatures
};

const std::vector<std::string> kProblemFeatureNames = {
    "op_mm", "op_addmm", "op_bmm", "a_transposed", "b_transposed", "dtype_size",
    "dtype_float16", "dtype_bfloat16", "dtype_float32", "log2_B", "log2_M", "log2_N",
    "log2_K", "log2_flops", "log2_bytes", "log2_arithmetic_intensity", "log2_a_row_alignment",
    "log2_b_row_alignment",
};

enum ConfigFeature : std::size_t {
    kLog2BlockM, kLog2BlockN, kLog2BlockK, kLog2GroupM, kNumStages, kLog2NumWarps,
    kLog2AccumulatorsPerThread, kLog2TileIntensity, kLog2LoadsPerThread, kEvenK, kAllowTf32, kLog2Tiles,
    kLog2Waves, kLastWaveUtilisation, kMnPaddingWaste, kKPaddingWaste, kLog2KIterations,
    kLog2SmemBytesPerCta, kLog2PaddedFlops, kSmemFraction, kLog2CtasPerSm, kLog2ResidentWaves,
    kLog2SerialIterations, kLog2LoadInstructionsPerThread, kLog2StagedLoadRegisters,
    // The vendor-library row's own: zero on kernel configs' rows.
    kVendor, kVendorProblem,
    kVendorUnalignedRows = kVendorProblem + kNumProblemFeatures,  ///< A then B, × float16, bfloat16, float32
    kNumConfigFeatures = kVendorUnalignedRows + 6
};
/// kLog2BlockM .. kLog2LoadsPerThread: what is_config_only_feature() reports.
constexpr std::size_t kNumConfigOnlyFeatures = kEvenK;

const std::vector<std::string> kConfigFeatureNames = {
    "log2_block_m", "log2_block_n", "log2_block_k", "log2_group_m", "num_stages",
    "log2_num_warps", "log2_accumulators_per_thread", "log2_tile_intensity", "log2_loads_per_thread",
    "even_k", "allow_tf32", "log2_tiles", "log2_waves", "last_wave_utilisation", "mn_padding_waste",
    "k_padding_waste", "log2_k_iterations", "log2_smem_bytes_per_cta", "log2_padded_flops", "smem_fraction",
    "log2_ctas_per_sm", "log2_resident_waves", "log2_serial_iterations", "log2_load_instructions_per_thread",
    "log2_staged_load_registers", "vendor",
    "vendor_op_mm", "vendor_op_addmm", "vendor_op_bmm", "vendor_a_transposed", "vendor_b_transposed",
    "vendor_dtype_size", "vendor_dtype_float16", "vendor_dtype_bfloat16", "vendor_dtype_float32", "vendor_log2_B",
    "vendor_log2_M", "vendor_log2_N", "vendor_log2_K", "vendor_log2_flops", "vendor_log2_bytes",
    "vendor_log2_arithmetic_intensity", "vendor_log2_a_row_alignment", "vendor_log2_b_row_alignment",
    "vendor_a_rows_unaligned_float16", "vendor_a_rows_unaligned_bfloat16", "vendor_a_rows_unaligned_float32",
    "vendor_b_rows_unaligned_float16", "vendor_b_rows_unaligned_bfloat16", "vendor_b_rows_unaligned_float32",
};

// Occupancy is estimated against Hopper's limits (the GPUs the shipped data comes from):
// per SM 228 KiB of shared memory (227 KiB for one block), 64 warps, 64 Ki registers.
constexpr double kSmemPerBlock = 227.0 * 1024;
constexpr double kSmemPerSm = 228.0 * 1024;
constexpr int kWarpsPerSm = 64;
constexpr double kRegistersPerSm = 65536;
// Registers a thread needs besides its fp32 accumulators (addresses, loop state, loaded
// fragments): a rough constant; the cap is the hardware's 255 per thread.
constexpr double kOtherRegisters = 40;

/// log2 of every count ctas_per_sm can return (1 .. kWarpsPerSm).
const std::array<double, kWarpsPerSm + 1> kLog2Ctas = [] {
    std::array<double, kWarpsPerSm + 1> table{};
    for (std::size_t i = 1; i < table.size(); ++i) table[i] = std::log2(static_cast<double>(i));
    return table;
}();

/// fp32 accumulator elements each thread holds: block_m · block_n / (32 · num_warps).
double accumulators_per_thread(std::int64_t block_m, std::int64_t block_n, int num_warps) {
    return static_cast<double>(block_m) * static_cast<double>(block_n) / (32.0 * num_warps);
}

/// Operand elements each thread loads per K step: (bm + bn) · bk / (32 · num_warps). Rows
/// that are not 16-byte aligned are loaded element by element, so this count, not the bytes,
/// sets the pace of misaligned problems.
double loads_per_thread(std::int64_t block_m, std::int64_t block_n, std::int64_t block_k, int num_warps) {
    return static_cast<double>(block_m + block_n) * static_cast<double>(block_k) / (32.0 * num_warps);
}

/// Alignment in bytes (1 .. 16) of the rows of an operand whose leading stride is
/// `stride` elements: what decides whether Triton loads 16-byte vectors.
double row_alignment(std::int64_t stride, int dtype_size) {
    const std::int64_t bytes = stride * dtype_size;
    std::int64_t alignment = 1;
    while (alignment < 16 && bytes % (alignment * 2) == 0) alignment *= 2;
    return static_cast<double>(alignment);
}

/// Load instructions each thread issues per K step: the tiles' elements over the elements one
/// instruction moves (the rows' alignment allows wider loads).
double load_instructions_per_thread(double a_elements, double b_elements, double a_vector, double b_vector,
                                    double threads) {
    return (a_elements / a_vector + b_elements / b_vector) / threads;
}

/// 32-bit registers per thread that hold loads in flight: operands whose rows are too
/// misaligned for cp.async go through registers, num_stages - 1 K steps ahead. Plus one, so
/// that the aligned case (none) has a logarithm.
double staged_load_registers(double a_elements, double b_elements, bool a_async, bool b_async, int num_stages,
                             int dtype_size, double threads) {
    const double staged = (a_async ? 0.0 : a_elements) + (b_async ? 0.0 : b_elements);
    return 1.0 + staged * (num_stages - 1) * dtype_size / 4.0 / threads;
}

/// FLOPs per element loaded into shared memory per K step: 2 · bm · bn / (bm + bn).
double tile_intensity(std::int64_t block_m, std::int64_t block_n) {
    return 2.0 * static_cast<double>(block_m) * static_cast<double>(block_n) / static_cast<double>(block_m + block_n);
}

/// CTAs one SM holds at once, limited by shared memory, warps and registers (at least 1).
double ctas_per_sm(double smem_bytes, int num_warps, double accumulators) {
    const double registers = std::min(255.0, accumulators + kOtherRegisters) * 32.0 * num_warps;
    const double by_smem = std::floor(kSmemPerSm / smem_bytes);
    const double by_warps = std::floor(static_cast<double>(kWarpsPerSm) / num_warps);
    const double by_registers = std::floor(kRegistersPerSm / registers);
    return std::max(1.0, std::min({by_smem, by_warps, by_registers}));
}

void require_positive(std::int64_t value, const char* field, const std::string& subject) {
    if (value <= 0) {
        throw core::InputError(subject, std::string(field) + " must be positive, got " +
                                            std::to_string(value));
    }
}

void require_positive_fields(const core::GemmConfig& config) {
    if (config.block_m <= 0 || config.block_n <= 0 || config.block_k <= 0 ||
        config.group_m <= 0 || config.num_stages <= 0 || config.num_warps <= 0) {
        throw core::InputError("config " + config.name,
                               "block sizes, group_m, num_stages and num_warps must be positive");
    }
}

}  // namespace

HardwareInfo lookup_hardware(const std::string& hardware_name) {
    HardwareInfo info;
    info.name = hardware_name;
    const std::string name = lower(hardware_name);
    for (const auto& entry : kSmTable) {
        if (contains(name, entry.pattern) && (entry.also == nullptr || contains(name, entry.also))) {
            info.parallel_units = entry.sm_count;
            info.shared_memory_per_block = std::int64_t{entry.shared_memory_kib} * 1024;
            info.is_gpu = true;
            info.source = std::string("SM table: ") + entry.label;
            return info;
        }
    }
    for (const char* word : kGpuWords) {
        if (contains(name, word)) {
            info.parallel_units = kUnknownGpuSmCount;
            info.is_gpu = true;
            info.source = "GPU not in the SM table: assumed " + std::to_string(kUnknownGpuSmCount) + " SMs";
            return info;
        }
    }
    info.parallel_units = kCpuParallelUnits;
    info.is_gpu = false;
    info.source = "CPU: one core per timed kernel";
    return info;
}

const std::vector<std::string>& feature_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> all = kProblemFeatureNames;
        all.insert(all.end(), kConfigFeatureNames.begin(), kConfigFeatureNames.end());
        return all;
    }();
    return names;
}

std::size_t num_features() { return feature_names().size(); }
std::size_t num_problem_features() { return kProblemFeatureNames.size(); }
std::size_t num_config_features() { return kConfigFeatureNames.size(); }

ProblemFeatures::ProblemFeatures(const std::string& op_key, const core::MMShape& shape,
                                 int parallel_units)
    : m_problem(kNumProblemFeatures, 0.0f), m_b(shape.B), m_m(shape.M), m_n(shape.N),
      m_k(shape.K), m_parallel_units(parallel_units) {
    static_assert(kNumProblemFeatures == 18, "keep the enum and the name list in step");
    const auto [op, layout] = core::parse_op_key(op_key);
    const std::string subject = "problem " + op_key;
    require_positive(shape.B, "B", subject);
    require_positive(shape.M, "M", subject);
    require_positive(shape.N, "N", subject);
    require_positive(shape.K, "K", subject);
    if (parallel_units <= 0) {
        throw core::InputError(subject, "parallel units must be positive");
    }
    m_dtype_size = core::dtype_size(shape.M_dtype);
    const int b_size = core::dtype_size(shape.K_dtype);
    const int out_size = core::dtype_size(shape.out_dtype);

    const double B = static_cast<double>(shape.B), M = static_cast<double>(shape.M);
    const double N = static_cast<double>(shape.N), K = static_cast<double>(shape.K);
    const double flops = 2.0 * B * M * N * K;
    double bytes = m_dtype_size * B * M * K + b_size * B * K * N + out_size * B * M * N;
    if (op == "addmm") bytes += out_size * N;  // the bias row, broadcast over M

    auto& f = m_problem;
    f[kOpMm] = op == "mm";
    f[kOpAddmm] = op == "addmm";
    f[kOpBmm] = op == "bmm";
    f[kATransposed] = layout[0] == 't';
    f[kBTransposed] = layout[1] == 't';
    f[kDtypeSize] = static_cast<float>(m_dtype_size);
    f[kDtypeFloat16] = shape.M_dtype == "float16";
    f[kDtypeBfloat16] = shape.M_dtype == "bfloat16";
    f[kDtypeFloat32] = shape.M_dtype == "float32";
    f[kLog2B] = static_cast<float>(log2d(B));
    f[kLog2M] = static_cast<float>(log2d(M));
    f[kLog2N] = static_cast<float>(log2d(N));
    f[kLog2K] = static_cast<float>(log2d(K));
    f[kLog2Flops] = static_cast<float>(log2d(flops));
    f[kLog2Bytes] = static_cast<float>(log2d(bytes));
    f[kLog2ArithmeticIntensity] = static_cast<float>(log2d(flops / bytes));
    // Row-major A (M x K) has rows K apart, transposed M; row-major B (K x N) N, transposed K.
    const double a_alignment = row_alignment(layout[0] == 't' ? shape.M : shape.K, m_dtype_size);
    const double b_alignment = row_alignment(layout[1] == 't' ? shape.K : shape.N, b_size);
    f[kLog2ARowAlignment] = static_cast<float>(log2d(a_alignment));
    f[kLog2BRowAlignment] = static_cast<float>(log2d(b_alignment));
    m_a_vector = std::max(1.0, a_alignment / m_dtype_size);
    m_b_vector = std::max(1.0, b_alignment / b_size);
    m_a_async = a_alignment >= 4;
    m_b_async = b_alignment >= 4;

    // cuBLAS picks its kernels by heuristics of its own (a misaligned bfloat16 batch is much
    // slower there than the same float16 one): the vendor row gets the problem as inputs of
    // its own, so what the network learns about it leaves the kernel rows alone.
    m_vendor.assign(kNumConfigFeatures - kVendor, 0.0f);
    m_vendor[0] = 1.0f;
    std::copy(m_problem.begin(), m_problem.end(), m_vendor.begin() + (kVendorProblem - kVendor));
    const auto& dtype = shape.M_dtype;
    const int slot = dtype == "float16" ? 0 : dtype == "bfloat16" ? 1 : dtype == "float32" ? 2 : -1;
    if (slot >= 0) {  // other dtypes (int8) have no slot, as they have no dtype flag
        float* unaligned = m_vendor.data() + (kVendorUnalignedRows - kVendor);
        unaligned[slot] = a_alignment < 16 ? 1.0f : 0.0f;
        unaligned[3 + slot] = b_alignment < 16 ? 1.0f : 0.0f;
    }
}

void ProblemFeatures::write(const core::GemmConfig& config, float* out) const {
    std::copy(m_problem.begin(), m_problem.end(), out);
    float* f = out + m_problem.size();

    require_positive_fields(config);
    const std::int64_t bm = config.block_m, bn = config.block_n, bk = config.block_k;
    const std::int64_t tiles_m = ceil_div(m_m, bm), tiles_n = ceil_div(m_n, bn);
    const std::int64_t k_iterations = ceil_div(m_k, bk);
    const double tiles = static_cast<double>(tiles_m) * static_cast<double>(tiles_n) *
                         static_cast<double>(m_b);
    const double units = m_parallel_units;
    const double full_waves = std::ceil(tiles / units);
    const double padded_m = static_cast<double>(tiles_m * bm);
    const double padded_n = static_cast<double>(tiles_n * bn);
    const double padded_k = static_cast<double>(k_iterations * bk);
    const double smem = static_cast<double>((bm + bn) * bk) * config.num_stages * m_dtype_size;

    f[kLog2BlockM] = static_cast<float>(log2d(static_cast<double>(bm)));
    f[kLog2BlockN] = static_cast<float>(log2d(static_cast<double>(bn)));
    f[kLog2BlockK] = static_cast<float>(log2d(static_cast<double>(bk)));
    f[kLog2GroupM] = static_cast<float>(log2d(config.group_m));
    f[kNumStages] = static_cast<float>(config.num_stages);
    f[kLog2NumWarps] = static_cast<float>(log2d(config.num_warps));
    const double accumulators = accumulators_per_thread(bm, bn, config.num_warps);
    f[kLog2AccumulatorsPerThread] = static_cast<float>(log2d(accumulators));
    f[kLog2TileIntensity] = static_cast<float>(log2d(tile_intensity(bm, bn)));
    f[kLog2LoadsPerThread] = static_cast<float>(log2d(loads_per_thread(bm, bn, bk, config.num_warps)));
    f[kEvenK] = config.even_k ? 1.0f : 0.0f;
    f[kAllowTf32] = config.allow_tf32 ? 1.0f : 0.0f;
    f[kLog2Tiles] = static_cast<float>(log2d(tiles));
    f[kLog2Waves] = static_cast<float>(log2d(tiles / units));
    f[kLastWaveUtilisation] = static_cast<float>(tiles / (full_waves * units));
    f[kMnPaddingWaste] = static_cast<float>(1.0 - static_cast<double>(m_m) * static_cast<double>(m_n) /
                                                      (padded_m * padded_n));
    f[kKPaddingWaste] = static_cast<float>(1.0 - static_cast<double>(m_k) / padded_k);
    f[kLog2KIterations] = static_cast<float>(log2d(static_cast<double>(k_iterations)));
    f[kLog2SmemBytesPerCta] = static_cast<float>(log2d(smem));
    f[kLog2PaddedFlops] =
        static_cast<float>(log2d(2.0 * static_cast<double>(m_b) * padded_m * padded_n * padded_k));
    const double ctas = ctas_per_sm(smem, config.num_warps, accumulators);
    f[kSmemFraction] = static_cast<float>(smem / kSmemPerBlock);
    f[kLog2CtasPerSm] = static_cast<float>(log2d(ctas));
    f[kLog2ResidentWaves] = static_cast<float>(log2d(tiles / (units * ctas)));
    f[kLog2SerialIterations] =
        static_cast<float>(log2d(std::ceil(tiles / (units * ctas)) * static_cast<double>(k_iterations)));
    const double a_elements = static_cast<double>(bm * bk), b_elements = static_cast<double>(bk * bn);
    const double threads = 32.0 * config.num_warps;
    f[kLog2LoadInstructionsPerThread] = static_cast<float>(
        log2d(load_instructions_per_thread(a_elements, b_elements, m_a_vector, m_b_vector, threads)));
    f[kLog2StagedLoadRegisters] = static_cast<float>(log2d(staged_load_registers(
        a_elements, b_elements, m_a_async, m_b_async, config.num_stages, m_dtype_size, threads)));
    if (core::is_vendor_entry(config)) {
        std::copy(m_vendor.begin(), m_vendor.end(), f + kVendor);
    } else {
        std::fill(f + kVendor, f + kNumConfigFeatures, 0.0f);
    }
}

bool is_config_only_feature(std::size_t index) {
    return index >= kNumProblemFeatures && index < kNumProblemFeatures + kNumConfigOnlyFeatures;
}

bool is_vendor_feature(std::size_t index) {
    return index >= kNumProblemFeatures + kVendor && index < kNumProblemFeatures + kNumConfigFeatures;
}

namespace {

std::uint32_t index_of(std::vector<std::int64_t>& distinct, std::int64_t value) {
    const auto it = std::find(distinct.begin(), distinct.end(), value);
    if (it != distinct.end()) return static_cast<std::uint32_t>(it - distinct.begin());
    distinct.push_back(value);
    return static_cast<std::uint32_t>(distinct.size() - 1);
}

/// Tile count, padded size and their logarithms along one dimension, per distinct block size.
struct Axis {
    std::vector<double> tiles, log2_tiles, padded, log2_padded;

    Axis(const std::vector<std::int64_t>& blocks, std::int64_t size) {
        for (const std::int64_t block : blocks) {
            const std::int64_t count = ceil_div(size, block);
            tiles.push_back(static_cast<double>(count));
            log2_tiles.push_back(log2d(static_cast<double>(count)));
            padded.push_back(static_cast<double>(count * block));
            log2_padded.push_back(log2d(static_cast<double>(count * block)));
        }
    }
};

}  // namespace

SpaceFeatures::SpaceFeatures(const std::vector<core::GemmConfig>& configs) {
    static_assert(kNumConfigFeatures == 50, "keep the enum and the name list in step");
    m_configs.reserve(configs.size());
    for (const auto& c : configs) {
        require_positive_fields(c);
        PerConfig p{};
        p.m = index_of(m_block_m, c.block_m);
        p.n = index_of(m_block_n, c.block_n);
        p.k = index_of(m_block_k, c.block_k);
        p.fixed[kLog2BlockM] = static_cast<float>(log2d(c.block_m));
        p.fixed[kLog2BlockN] = static_cast<float>(log2d(c.block_n));
        p.fixed[kLog2BlockK] = static_cast<float>(log2d(c.block_k));
        p.fixed[kLog2GroupM] = static_cast<float>(log2d(c.group_m));
        p.fixed[kNumStages] = static_cast<float>(c.num_stages);
        p.fixed[kLog2NumWarps] = static_cast<float>(log2d(c.num_warps));
        p.accumulators = accumulators_per_thread(c.block_m, c.block_n, c.num_warps);
        p.fixed[kLog2AccumulatorsPerThread] = static_cast<float>(log2d(p.accumulators));
        p.fixed[kLog2TileIntensity] = static_cast<float>(log2d(tile_intensity(c.block_m, c.block_n)));
        p.fixed[kLog2LoadsPerThread] =
            static_cast<float>(log2d(loads_per_thread(c.block_m, c.block_n, c.block_k, c.num_warps)));
        p.num_warps = c.num_warps;
        p.smem_elements = static_cast<double>((static_cast<std::int64_t>(c.block_m) + c.block_n) * c.block_k *
                                              c.num_stages);
        p.log2_smem_elements = log2d(static_cast<double>((static_cast<std::int64_t>(c.block_m) + c.block_n) *
                                                         c.block_k * c.num_stages));
        p.a_elements = static_cast<double>(c.block_m) * c.block_k;
        p.b_elements = static_cast<double>(c.block_k) * c.block_n;
        p.threads = 32.0 * c.num_warps;
        p.num_stages = c.num_stages;
        m_configs.push_back(p);
    }
}

void SpaceFeatures::write_config_part(const ProblemFeatures& problem, bool allow_tf32, float* out) const {
    // The same quantities as ProblemFeatures::write, with log(a·b) taken as log a + log b.
    const Axis m(m_block_m, problem.m_m), n(m_block_n, problem.m_n), k(m_block_k, problem.m_k);
    std::vector<float> even_k, k_waste;
    for (std::size_t i = 0; i < m_block_k.size(); ++i) {
        even_k.push_back(problem.m_k % m_block_k[i] == 0 ? 1.0f : 0.0f);
        k_waste.push_back(static_cast<float>(1.0 - static_cast<double>(problem.m_k) / k.padded[i]));
    }
    const double batch = static_cast<double>(problem.m_b);
    const double log2_batch = log2d(batch);
    const double log2_twice_batch = log2d(2.0 * batch);
    const double units = problem.m_parallel_units;
    const double log2_units = log2d(units);
    const double log2_dtype_size = log2d(problem.m_dtype_size);
    const double mn = static_cast<double>(problem.m_m) * static_cast<double>(problem.m_n);
    const float tf32 = allow_tf32 ? 1.0f : 0.0f;

    for (const auto& c : m_configs) {
        float* f = out;
        out += kNumConfigFeatures;
        std::copy(std::begin(c.fixed), std::end(c.fixed), f);
        const double tiles = m.tiles[c.m] * n.tiles[c.n] * batch;
        const double log2_tiles = m.log2_tiles[c.m] + n.log2_tiles[c.n] + log2_batch;
        f[kEvenK] = even_k[c.k];
        f[kAllowTf32] = tf32;
        f[kLog2Tiles] = static_cast<float>(log2_tiles);
        f[kLog2Waves] = static_cast<float>(log2_tiles - log2_units);
        f[kLastWaveUtilisation] = static_cast<float>(tiles / (std::ceil(tiles / units) * units));
        f[kMnPaddingWaste] = static_cast<float>(1.0 - mn / (m.padded[c.m] * n.padded[c.n]));
        f[kKPaddingWaste] = k_waste[c.k];
        f[kLog2KIterations] = static_cast<float>(k.log2_tiles[c.k]);
        f[kLog2SmemBytesPerCta] = static_cast<float>(c.log2_smem_elements + log2_dtype_size);
        f[kLog2PaddedFlops] = static_cast<float>(log2_twice_batch + m.log2_padded[c.m] +
                                                 n.log2_padded[c.n] + k.log2_padded[c.k]);
        const double smem = c.smem_elements * problem.m_dtype_size;
        // CTAs per SM is a small whole number (at most 64 / num_warps): its logarithm comes
        // from a table, keeping a problem free of logarithms per config.
        const double ctas = ctas_per_sm(smem, c.num_warps, c.accumulators);
        const double log2_ctas = kLog2Ctas[static_cast<std::size_t>(ctas)];
        f[kSmemFraction] = static_cast<float>(smem / kSmemPerBlock);
        f[kLog2CtasPerSm] = static_cast<float>(log2_ctas);
        f[kLog2ResidentWaves] = static_cast<float>(log2_tiles - log2_units - log2_ctas);
        f[kLog2SerialIterations] =
            static_cast<float>(log2d(std::ceil(tiles / (units * ctas))) + k.log2_tiles[c.k]);
        f[kLog2LoadInstructionsPerThread] = static_cast<float>(log2d(load_instructions_per_thread(
            c.a_elements, c.b_elements, problem.m_a_vector, problem.m_b_vector, c.threads)));
        f[kLog2StagedLoadRegisters] = static_cast<float>(log2d(staged_load_registers(
            c.a_elements, c.b_elements, problem.m_a_async, problem.m_b_async, c.num_stages, problem.m_dtype_size,
            c.threads)));
        std::fill(f + kVendor, f + kNumConfigFeatures, 0.0f);
    }
}

std::vector<float> compute_features(const std::string& op_key, const core::MMShape& shape,
                                    const core::GemmConfig& config, int parallel_units) {
    std::vector<float> out(num_features());
    ProblemFeatures(op_key, shape, parallel_units).write(config, out.data());
    return out;
}

}  // namespace mmt::model
