#pragma once
/// Lookup tables of the model's best configs per problem, in the two formats compilers
/// read: PyTorch Inductor's template lookup table (torch._inductor.lookup_table: key
/// "[device+]input_key+[scalars+]op" → list of template configs) and torch-diode's Table
/// (hardware → operation → problem → ordered configs). Plain C++ over JSON text.

#include <cstddef>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "matmul_toolkit/core/json_codec.hpp"
#include "matmul_toolkit/core/types.hpp"

namespace mmt::model {

/// A config and the time the model predicts for it.
struct RankedConfig {
    core::GemmConfig config;
    double predicted_ms = 0.0;
};

/// A problem in the form Inductor autotunes it, where that differs from how it was timed.
struct InductorProblem {
    std::string op_key;
    core::MMShape shape;
};

/// Another form of a problem (inductor_alternate_problems) and the configs chosen for it.
struct RankedForm {
    InductorProblem form;
    std::vector<RankedConfig> configs;
};

/// One problem and the configs chosen for it, best first.
struct RankedProblem {
    std::string hardware;
    std::string op;  ///< dataset op key: "mm", "addmm", "bmm", "mm_nt", ...
    core::MMShape shape;
    std::vector<RankedConfig> configs;
    /// Forms ranked as the problems they are (a padded problem's rows are aligned, and the
    /// kernels rank differently there); a form not listed gets `configs`.
    std::vector<RankedForm> forms;
};

/// The first `count` kernel configs of a best-first ranking, and the vendor entry (aten_*)
/// where it ranks before the last of them: what a --with-aten table offers. Given a ranking
/// of count + 1 configs, `count` kernel configs remain even where ATen ranks first, so
/// Inductor times the best kernel config against ATen instead of trusting an ATen pick.
std::vector<RankedConfig> kernel_configs_and_vendor(const std::vector<RankedConfig>& ranked, std::size_t count);

/// Where a top-1 `--with-aten` table pairs ATen with the best kernel config: where the model
/// predicts the two within the factor 1 + `margin` of each other (`--aten-within`), or the
/// faster of them at `from_ms` or more (`--aten-from`: Inductor's timing of the two is
/// trustworthy there, and worth a compile); elsewhere the one predicted faster stands alone.
struct AtenPairing {
    double margin = 0.0;
    double from_ms = std::numeric_limits<double>::infinity();
    /// Where the vendor entry is predicted faster than the kernel pick and at this time or
    /// more, it stands alone (`--aten-alone-from`): on large GEMMs cuBLAS is within a few
    /// percent of max-autotune's pick, and pairing compiles the pick three times.
    double vendor_alone_from_ms = std::numeric_limits<double>::infinity();
};

/// Whether `rule` pairs a kernel config predicted at `kernel_ms` with the vendor entry
/// predicted at `vendor_ms` (what kernel_or_vendor writes and the evaluator scores).
bool pairs_with_vendor(double kernel_ms, double vendor_ms, const AtenPairing& rule);

/// From a best-first ranking of every candidate, the best kernel config and the vendor
/// entry where `rule` pairs them (Inductor times the two), else the one predicted faster
/// alone (Inductor compiles one kernel, or none, and times nothing). Throws core::Error
/// when the ranking lacks a kernel config or the vendor entry.
std::vector<RankedConfig> kernel_or_vendor(const std::vector<RankedConfig>& ranked, const AtenPairing& rule);

/// `--aten-alone-gemv`: whether a problem is a GEMV (M = 1: one row of A per batch) whose
/// best-first ranking puts the vendor entry first, so that a top-1 table should hold it
/// alone. Inductor zeroes an L2-sized buffer before each timed run, and on the H200 it timed
/// cuBLAS's GEMV for bf16 mm 1x4096x11008 at 54-67 us against 26 us at steady state, and kept
/// a Triton kernel of 43 us from the pair (docs/experiments/2026-11-27-lut-rules.md).
bool vendor_alone_for_gemv(const std::vector<RankedConfig>& ranked, const core::MMShape& shape);

/// fp32 accumulator registers per thread of a kernel config: BLOCK_M x BLOCK_N spread over
/// num_warps x 32 threads. Where the K loop is short enough to be unrolled in full (see
/// kLongestUnrolledK), Triton's compile time grows with K times this count (on the H200, a
/// 128x128 tile on 4 warps, 128 registers, took 2.6 s to compile for K = 768 and 4.3 s for
/// K = 1024, against 0.8-1.5 s for 64 registers), and Inductor compiles a pick it times
/// against ATen two to three times.
int accumulator_registers(const core::GemmConfig& config);

/// The longest K for which Triton 3.6 (LLVM) still unrolls the K loop of Inductor's GEMM
/// template in full, which is what makes a compile slow: on the H200, the 19 DEFAULT configs
/// of a 2048x2048 bf16 mm compiled in 0.3-0.7 s each for K = 4096, 8192 and 16384 and for
/// K <= 256, and in up to 5.6 s for K = 768-2048 (most configs stop unrolling between K = 1536
/// and 4096; docs/experiments/2026-11-26-lut-e2e.md, "What a kernel costs to compile, by K").
inline constexpr std::int64_t kLongestUnrolledK = 2048;

/// The longest K for which every config compiles fast although its K loop is unrolled: on the
/// H200 the 19 DEFAULT configs of a 2048x2048 bf16 mm compiled in 0.3-0.7 s each for K = 128
/// and 256 (up to 1.3 s for K = 512).
inline constexpr std::int64_t kLongestCheapK = 256;

/// Accumulator registers from which a kernel counts as heavy to compile where K lies above
/// kLongestCheapK and at most at kLongestUnrolledK: on the H200 a 128x128 tile on 4 warps
/// (128 registers) took 2.6-3.2 s to compile for K = 768, a 64x128 one (64) 0.7-1.4 s.
inline constexpr int kHeavyAccumulatorRegisters = 128;

/// `--compile-margin`: moves to the place of the first kernel config of a best-first ranking
/// the kernel config, among those predicted within the factor 1 + `margin` of it, with the
/// fewest accumulator registers per thread (the fastest predicted of those tied), so that a
/// near-tie is settled for the kernel that compiles faster. Only for problems whose K lies
/// above kLongestCheapK and at most at kLongestUnrolledK: elsewhere every config compiles
/// about as fast, and the move would only cost runtime. The other entries keep their order.
/// Returns whether a config was moved.
bool prefer_fast_compile(std::vector<RankedConfig>& ranked, double margin, std::int64_t k);

/// `--paired-compile-margin`: where `table` (kernel_or_vendor's answer for `ranked`, a best-first
/// ranking of every candidate before any --compile-margin move) pairs the kernel pick with the
/// vendor entry, the pick is chosen again by prefer_fast_compile with `paired_margin`, and
/// the table becomes that pick's, so long as `rule` still pairs it with the vendor entry or
/// leaves the vendor entry alone. A paired pick is compiled two or three times, and the
/// vendor entry is timed beside it, so a lighter pick costs least runtime there. Returns
/// whether the table changed.
bool lighten_paired_pick(std::vector<RankedConfig>& table, std::vector<RankedConfig> ranked,
                         const AtenPairing& rule, double paired_margin, std::int64_t k);

/// `--heavy-pick-alone`: where `table` (kernel_or_vendor's answer) pairs a heavy kernel pick
/// (kHeavyAccumulatorRegisters) with the vendor entry on a problem whose K compiles slowly
/// (above kLongestCheapK, at most kLongestUnrolledK), and the pick is predicted faster than
/// the vendor entry by more than the factor 1 + `margin`, the pick stands alone: Inductor
/// compiles a paired pick two to three times (a 128x128 tile on 4 warps at K = 1024: 6.7-7.7 s
/// per problem on the H200, against 40 s for max-autotune). Returns whether the table changed.
bool unpair_heavy_pick(std::vector<RankedConfig>& table, double margin, std::int64_t k);

/// `--runner-up-within`: where `table` holds one kernel pick that Inductor times against ATen
/// anyway (the table holds the vendor entry, or `vendor_added`: the writer adds it,
/// InductorLutOptions::with_aten), adds after the pick the best other kernel config of
/// `ranked` (a best-first ranking) predicted within the factor 1 + `margin` of the pick, so
/// that Inductor times it too: a near-tie is settled by measuring, not by the model. Where K
/// makes register-heavy kernels compile slowly (prefer_fast_compile), the one with the fewest
/// accumulator registers among those within the margin, and, where the pick is heavy
/// (kHeavyAccumulatorRegisters), only a lighter one. Returns whether a config was added.
bool add_runner_up(std::vector<RankedConfig>& table, const std::vector<RankedConfig>& ranked, double margin,
                   std::int64_t k, bool vendor_added = false);

/// A table on one problem's measured times (export-lut --score).
struct TableOutcome {
    double best_ms = 0.0;     ///< the problem's best measured time, vendor entry included
    double offered_ms = 0.0;  ///< the fastest measured time among the table's entries
    std::size_t entries = 0;  ///< entries the table offers
};

/// Whether an Inductor table written from `configs` offers ATen although they do not hold
/// the vendor entry: a table of several configs always does (Inductor needs an extern
/// kernel to fall back on), a single config with `with_aten` (InductorLutOptions::with_aten).
bool inductor_table_adds_vendor(const std::vector<RankedConfig>& configs, bool with_aten);

/// The outcome of `table` on `measured` (a problem's timed configs) and `vendor_ms` (its
/// fastest vendor entry's time, where measured): Inductor times every entry of a table of
/// two or more and keeps the fastest, so a table gets its fastest entry's time. With
/// `vendor_added` the writer adds the vendor entry (inductor_table_adds_vendor). Throws
/// core::Error when an entry has no measured time.
TableOutcome table_outcome(const std::vector<RankedConfig>& table, const std::vector<core::TimedConfig>& measured,
                           std::optional<double> vendor_ms, bool vendor_added = false);

/// Tables scored over problems by best_ms / offered_ms (1: the best config; the share of the
/// best's speed a user gets).
struct TableScore {
    std::size_t problems = 0;
    double geomean = 0.0;
    double median = 0.0;
    double p5 = 0.0;  ///< 5th percentile, nearest rank: all but a twentieth of problems do better
    double worst = 0.0;
    std::size_t below_85 = 0;  ///< problems under 0.85 of the best
    std::size_t timed = 0;     ///< tables of two or more entries, which Inductor autotunes
    double entries_per_table = 0.0;
};

/// Aggregates outcomes; NaN scores for none.
TableScore score_tables(const std::vector<TableOutcome>& outcomes);

enum class LutFormat { inductor, diode };

/// "inductor" | "diode"; throws core::InputError("--lut-format", ...) otherwise.
LutFormat parse_lut_format(const std::string& name);

struct InductorLutOptions {
    /// Prefix every key with a device name, as Inductor's device-specific keys. Inductor
    /// tries the device-specific key first, then the device-agnostic one.
    bool include_device = false;
    /// The device name for the keys; empty: each problem's hardware name.
    std::string device_name;
    /// Offer Inductor's ATen choice in every table, a one-config table too: Inductor then
    /// times the model's kernel pick against ATen (compiling the pick, as it would anyway)
    /// and keeps the faster (with kernel_configs_and_vendor, also where the model ranks ATen
    /// first). Without it ATen joins tables of two or more configs only.
    bool with_aten = false;
    /// An addmm's ATen entry as aten::bias_addmm alone instead of the pair aten::bias_addmm,
    /// aten::addmm: a table whose only choice is ATen then stays one choice (Inductor times
    /// nothing), and Inductor cannot pick aten::addmm, whose bias expanded to [M, N] with
    /// stride [0, 1] cuBLASLt does not fuse; bias_addmm passes the 1-D bias cuBLASLt fuses,
    /// which default torch.compile runs.
    bool bias_addmm_only = false;
};

/// Inductor's input key: Python's str() of ((dtype, shape, stride), ...) for the op's
/// inputs in argument order (addmm: bias expanded to [M, N] with stride [0, 1], mat1, mat2;
/// bmm: 3-D operands), strides following the op key's layout, then "+alpha=1&beta=1" for addmm.
std::string inductor_input_key(const std::string& op_key, const core::MMShape& shape);

/// The full key: [device+]input_key+op ("mm", "addmm" or "bmm").
std::string inductor_lookup_key(const std::string& op_key, const core::MMShape& shape,
                                const std::string& device_name);

/// The problem as Inductor autotunes it after its pad_mm pass pads a misaligned M, N or K
/// (not a multiple of 8 elements for 16-bit dtypes, 4 for float32; a dimension of 1 stays)
/// with zeros: operands become contiguous row-major, so the op key loses its layout.
/// Whether Inductor pads depends on a benchmark it runs while compiling, so a table
/// carries this key too. Empty when nothing would be padded.
std::optional<InductorProblem> inductor_padded_problem(const std::string& op_key, const core::MMShape& shape);

/// Every other form Inductor may autotune the problem in, each with its own key: the padded
/// problem, and for a bmm of batch 1 the mm Inductor lowers it to (torch 2.11 looks up
/// "+mm" with the 2-D operands: bmm 1x4096x78x389 missed its table entry) and that mm padded.
std::vector<InductorProblem> inductor_alternate_problems(const std::string& op_key, const core::MMShape& shape);

/// The Triton template a config belongs to: "triton::mm" (mm, addmm) or "triton::bmm".
std::string inductor_template_id(const std::string& op_key);

/// A problem's table entries as inductor_lut_json writes them under the problem's own key,
/// and the model's time for each.
struct InductorTable {
    core::OrderedJson entries = core::OrderedJson::array();
    /// Per entry: a kernel config's predicted time; an ATen entry's the vendor entry's (the
    /// table's, or `vendor_ms` for one the writer adds); nullopt where the model has none.
    std::vector<std::optional<double>> predicted_ms;
};

/// `configs` (a decided table, best first) as Inductor entries: each kernel config as a
/// template entry, the vendor entry as Inductor's ATen choices, and ATen added where the
/// writer adds it (inductor_table_adds_vendor).
InductorTable inductor_table(const std::string& op_key, const std::vector<RankedConfig>& configs,
                             const InductorLutOptions& options, std::optional<double> vendor_ms = std::nullopt);

/// The table as JSON text: {key: [{"template_id", "BLOCK_M", "BLOCK_N", "BLOCK_K",
/// "GROUP_M", "num_stages", "num_warps", "EVEN_K", "USE_FAST_ACCUM", "ACC_TYPE"}, ...]}.
/// A problem Inductor may autotune in another form also gets that form's key
/// (inductor_alternate_problems; EVEN_K for a padded K) unless another problem owns it, with
/// the form's own ranking where RankedProblem::forms has one.
/// Throws core::InputError when two problems give the same key.
std::string inductor_lut_json(const std::vector<RankedProblem>& problems,
                              const InductorLutOptions& options = {});

/// torch-diode's Table as JSON text ({"hardware": {HW: {"operation": {OP: {"solution":
/// {shape_key: {"config": [...]}}}}}}}, each level with "version": 1), as Table.deserialize
/// reads it. Throws core::InputError when a problem appears twice.
std::string diode_table_json(const std::vector<RankedProblem>& problems);

/// Writes either table atomically (temporary file + rename).
void write_lookup_table(const std::filesystem::path& path,
                        const std::vector<RankedProblem>& problems, LutFormat format,
                        const InductorLutOptions& options = {});

}  // namespace mmt::model
