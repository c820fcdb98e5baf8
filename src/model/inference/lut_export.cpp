#include "matmul_toolkit/model/lut_export.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <sstream>

#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/collect/timing_stats.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/evaluator.hpp"

namespace mmt::model {
namespace {

using ordered_json = core::OrderedJson;

/// One operand as Inductor's key shows it: dtype, sizes and strides.
struct Operand {
    std::string dtype;
    std::vector<std::int64_t> size;
    std::vector<std::int64_t> stride;
};

std::string python_list(const std::vector<std::int64_t>& values) {
    std::ostringstream out;
    out << '[';
    for (std::size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
    out << ']';
    return out.str();
}

/// A [rows, cols] matrix (batched when `batch` > 0) stored contiguously, or stored as
/// its transpose and viewed transposed ('t').
Operand matrix(const std::string& dtype, std::int64_t batch, std::int64_t rows,
               std::int64_t cols, char layout) {
    Operand m;
    m.dtype = dtype;
    const std::int64_t row_stride = layout == 't' ? 1 : cols;
    const std::int64_t col_stride = layout == 't' ? rows : 1;
    if (batch > 0) {
        m.size = {batch, rows, cols};
        m.stride = {rows * cols, row_stride, col_stride};
    } else {
        m.size = {rows, cols};
        m.stride = {row_stride, col_stride};
    }
    return m;
}

std::vector<Operand> inductor_operands(const std::string& op, const std::string& layout,
                                       const core::MMShape& s) {
    const std::int64_t batch = op == "bmm" ? s.B : 0;
    std::vector<Operand> operands;
    if (op == "addmm") {
        // Inductor expands addmm's 1-D bias (torch.nn.Linear's) to [M, N] before keying it.
        operands.push_back(Operand{s.out_dtype, {s.M, s.N}, {0, 1}});
    }
    operands.push_back(matrix(s.M_dtype, batch, s.M, s.K, layout[0]));
    operands.push_back(matrix(s.K_dtype, batch, s.K, s.N, layout[1]));
    return operands;
}

ordered_json inductor_entry(const std::string& template_id, const core::GemmConfig& c) {
    return {
        {"template_id", template_id},
        {"BLOCK_M", c.block_m},
        {"BLOCK_N", c.block_n},
        {"BLOCK_K", c.block_k},
        {"GROUP_M", c.group_m},
        {"num_stages", c.num_stages},
        {"num_warps", c.num_warps},
        {"EVEN_K", c.even_k},
        // No ALLOW_TF32: Inductor derives it from the inputs and passes it to the template
        // itself, so a table entry that carries it fails as a duplicate keyword (torch 2.11).
        {"USE_FAST_ACCUM", c.use_fast_accum},
        {"ACC_TYPE", c.acc_type},
    };
}

/// Inductor's ATen choices for an op ("aten::" + the extern kernel's name). addmm has two:
/// the bias fused by cuBLASLt (bias_addmm) and plain addmm; the dataset keeps the faster,
/// so the table offers both and Inductor times the two (no compile), unless
/// `bias_addmm_only` (InductorLutOptions) keeps the fused one alone.
std::vector<std::string> inductor_aten_ids(const std::string& op_key, bool bias_addmm_only) {
    const std::string op = core::parse_op_key(op_key).first;
    if (op == "addmm") {
        if (bias_addmm_only) return {"aten::bias_addmm"};
        return {"aten::bias_addmm", "aten::addmm"};
    }
    return {"aten::" + op};
}

/// A problem's table entries: each ranked config, the vendor entry as Inductor's ATen choice.
/// Tables of several configs (Inductor benchmarks them) always offer ATen too: where the
/// Triton templates' layout constraints fail, Inductor falls back to an extern kernel of
/// the list and stops with "No extern kernel detected" when there is none (H100, bmm
/// 8x4096x2902x4096 bf16 with a top-5 table without ATen). One config is used unbenchmarked,
/// unless `options.with_aten` offers ATen beside it. `padded_k`: the K of the padded form
/// the entries are for (EVEN_K follows it).
InductorTable inductor_entries(const std::string& op_key, const std::vector<RankedConfig>& configs,
                               const std::optional<std::int64_t>& padded_k, const InductorLutOptions& options,
                               std::optional<double> vendor_ms) {
    const std::string template_id = inductor_template_id(op_key);
    InductorTable table;
    bool aten = false;
    for (const auto& ranked : configs) {
        if (collect::is_reference_config(ranked.config)) {
            for (const auto& id : inductor_aten_ids(op_key, options.bias_addmm_only)) {
                table.entries.push_back({{"template_id", id}});
                table.predicted_ms.emplace_back(ranked.predicted_ms);
            }
            aten = true;
            continue;
        }
        core::GemmConfig config = ranked.config;
        if (padded_k) config.even_k = *padded_k % config.block_k == 0;
        table.entries.push_back(inductor_entry(template_id, config));
        table.predicted_ms.emplace_back(ranked.predicted_ms);
    }
    if (!aten && inductor_table_adds_vendor(configs, options.with_aten)) {
        for (const auto& id : inductor_aten_ids(op_key, options.bias_addmm_only)) {
            table.entries.push_back({{"template_id", id}});
            table.predicted_ms.push_back(vendor_ms);
        }
    }
    return table;
}

std::string problem_label(const RankedProblem& p) {
    return p.hardware + " / " + p.op + " / " + core::shape_key(p.shape);
}

}  // namespace

InductorTable inductor_table(const std::string& op_key, const std::vector<RankedConfig>& configs,
                             const InductorLutOptions& options, std::optional<double> vendor_ms) {
    return inductor_entries(op_key, configs, std::nullopt, options, vendor_ms);
}

LutFormat parse_lut_format(const std::string& name) {
    if (name == "inductor") return LutFormat::inductor;
    if (name == "diode") return LutFormat::diode;
    throw core::InputError("--lut-format", "unknown format '" + name + "' (expected inductor or diode)");
}

std::string inductor_input_key(const std::string& op_key, const core::MMShape& shape) {
    const auto [op, layout] = core::parse_op_key(op_key);
    std::ostringstream out;
    out << '(';
    const auto operands = inductor_operands(op, layout, shape);
    for (std::size_t i = 0; i < operands.size(); ++i) {
        const auto& o = operands[i];
        out << (i ? ", " : "") << "(torch." << o.dtype << ", " << python_list(o.size) << ", "
            << python_list(o.stride) << ')';
    }
    out << ')';
    if (op == "addmm") out << "+alpha=1&beta=1";
    return out.str();
}

std::string inductor_lookup_key(const std::string& op_key, const core::MMShape& shape,
                                const std::string& device_name) {
    const std::string op = core::parse_op_key(op_key).first;
    const std::string key = inductor_input_key(op_key, shape) + "+" + op;
    return device_name.empty() ? key : device_name + "+" + key;
}

std::optional<InductorProblem> inductor_padded_problem(const std::string& op_key, const core::MMShape& shape) {
    const std::string op = core::parse_op_key(op_key).first;
    const std::int64_t alignment = core::dtype_size(shape.M_dtype) == 2 ? 8 : core::dtype_size(shape.M_dtype) == 4 ? 4 : 0;
    if (alignment == 0) return std::nullopt;
    // pad_mm's get_padded_length: the next multiple of the alignment, except for 1.
    auto padded = [alignment](std::int64_t x) { return x == 1 || x % alignment == 0 ? x : (x / alignment + 1) * alignment; };
    const std::int64_t m = padded(shape.M), n = padded(shape.N), k = padded(shape.K);
    if (m == shape.M && n == shape.N && k == shape.K) return std::nullopt;
    InductorProblem out{op, core::make_shape(shape.B, m, n, k, shape.M_dtype)};
    out.shape.K_dtype = shape.K_dtype;
    out.shape.out_dtype = shape.out_dtype;
    return out;
}

std::vector<InductorProblem> inductor_alternate_problems(const std::string& op_key, const core::MMShape& shape) {
    std::vector<InductorProblem> forms;
    if (auto padded = inductor_padded_problem(op_key, shape)) forms.push_back(std::move(*padded));
    const auto [op, layout] = core::parse_op_key(op_key);
    if (op == "bmm" && shape.B == 1) {
        // The squeezed operands keep their strides, so the mm keeps the layout.
        const std::string mm_key = layout == "nn" ? std::string("mm") : "mm_" + layout;
        forms.push_back(InductorProblem{mm_key, shape});
        if (auto padded = inductor_padded_problem(mm_key, shape)) forms.push_back(std::move(*padded));
    }
    return forms;
}

std::vector<RankedConfig> kernel_configs_and_vendor(const std::vector<RankedConfig>& ranked, std::size_t count) {
    std::vector<RankedConfig> kept;
    std::size_t kernels = 0;
    for (const auto& r : ranked) {
        if (kernels == count) break;
        if (!collect::is_reference_config(r.config)) ++kernels;
        kept.push_back(r);
    }
    return kept;
}

bool pairs_with_vendor(double kernel_ms, double vendor_ms, const AtenPairing& rule) {
    if (vendor_ms <= kernel_ms && vendor_ms >= rule.vendor_alone_from_ms) return false;
    const double faster = std::min(kernel_ms, vendor_ms), slower = std::max(kernel_ms, vendor_ms);
    return slower <= faster * (1.0 + rule.margin) || faster >= rule.from_ms;
}

std::vector<RankedConfig> kernel_or_vendor(const std::vector<RankedConfig>& ranked, const AtenPairing& rule) {
    const auto is_vendor = [](const RankedConfig& r) { return collect::is_reference_config(r.config); };
    const auto kernel = std::find_if_not(ranked.begin(), ranked.end(), is_vendor);
    const auto vendor = std::find_if(ranked.begin(), ranked.end(), is_vendor);
    if (kernel == ranked.end() || vendor == ranked.end()) {
        throw core::Error("--with-aten", "the ranking needs a kernel config and the vendor entry");
    }
    if (pairs_with_vendor(kernel->predicted_ms, vendor->predicted_ms, rule)) {
        if (vendor < kernel) return {*vendor, *kernel};
        return {*kernel, *vendor};
    }
    return {kernel->predicted_ms <= vendor->predicted_ms ? *kernel : *vendor};
}

bool vendor_alone_for_gemv(const std::vector<RankedConfig>& ranked, const core::MMShape& shape) {
    return shape.M == 1 && !ranked.empty() && collect::is_reference_config(ranked.front().config);
}

int accumulator_registers(const core::GemmConfig& config) {
    const int threads = std::max(1, config.num_warps) * 32;
    return (config.block_m * config.block_n + threads - 1) / threads;
}

namespace {
/// Where Triton unrolls the K loop in full and register-heavy kernels compile slowly.
bool k_compiles_slowly(std::int64_t k) { return k > kLongestCheapK && k <= kLongestUnrolledK; }

bool heavy_to_compile(const core::GemmConfig& config) {
    return accumulator_registers(config) >= kHeavyAccumulatorRegisters;
}
}  // namespace

bool prefer_fast_compile(std::vector<RankedConfig>& ranked, double margin, std::int64_t k) {
    if (!k_compiles_slowly(k)) return false;
    const auto is_kernel = [](const RankedConfig& r) { return !collect::is_reference_config(r.config); };
    const auto first = std::find_if(ranked.begin(), ranked.end(), is_kernel);
    if (first == ranked.end()) return false;
    const double limit = first->predicted_ms * (1.0 + margin);
    auto chosen = first;
    for (auto it = std::next(first); it != ranked.end(); ++it) {
        if (!is_kernel(*it) || it->predicted_ms > limit) continue;
        // Ties on registers keep the earlier, i.e. faster predicted, config.
        if (accumulator_registers(it->config) < accumulator_registers(chosen->config)) chosen = it;
    }
    if (chosen == first) return false;
    std::rotate(first, chosen, std::next(chosen));
    return true;
}

bool lighten_paired_pick(std::vector<RankedConfig>& table, std::vector<RankedConfig> ranked,
                         const AtenPairing& rule, double paired_margin, std::int64_t k) {
    if (table.size() != 2) return false;
    if (!prefer_fast_compile(ranked, paired_margin, k)) return false;
    auto lighter = kernel_or_vendor(ranked, rule);
    const bool vendor_alone = lighter.size() == 1 && collect::is_reference_config(lighter.front().config);
    if (lighter.size() != 2 && !vendor_alone) return false;
    const auto same = [](const std::vector<RankedConfig>& a, const std::vector<RankedConfig>& b) {
        return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                          [](const RankedConfig& x, const RankedConfig& y) { return x.config == y.config; });
    };
    if (same(lighter, table)) return false;
    table = std::move(lighter);
    return true;
}

bool unpair_heavy_pick(std::vector<RankedConfig>& table, double margin, std::int64_t k) {
    if (table.size() != 2 || !k_compiles_slowly(k)) return false;
    const auto& pick = table.front();
    const auto& vendor = table.back();
    if (collect::is_reference_config(pick.config) || !collect::is_reference_config(vendor.config)) return false;
    if (!heavy_to_compile(pick.config)) return false;
    if (vendor.predicted_ms <= pick.predicted_ms * (1.0 + margin)) return false;
    table.resize(1);
    return true;
}

bool add_runner_up(std::vector<RankedConfig>& table, const std::vector<RankedConfig>& ranked, double margin,
                   std::int64_t k, bool vendor_added) {
    const auto is_vendor = [](const RankedConfig& r) { return collect::is_reference_config(r.config); };
    const auto vendors = std::count_if(table.begin(), table.end(), is_vendor);
    if (table.size() - vendors != 1 || (vendors == 0 && !vendor_added)) return false;
    const auto pick = std::find_if_not(table.begin(), table.end(), is_vendor);
    // Only configs within the margin of the pick itself: the lightest within the margin of
    // the second best could be slower than that.
    const double limit = pick->predicted_ms * (1.0 + margin);
    // Where K makes heavy kernels compile slowly, one heavy kernel per table is enough: a
    // second one cost up to 3 s of compile per problem on the transformer shapes.
    const bool heavy_pick = k_compiles_slowly(k) && heavy_to_compile(pick->config);
    std::vector<RankedConfig> others;
    for (const auto& r : ranked) {
        if (is_vendor(r) || r.config == pick->config || r.predicted_ms > limit) continue;
        if (heavy_pick && heavy_to_compile(r.config)) continue;
        others.push_back(r);
    }
    if (others.empty()) return false;
    prefer_fast_compile(others, margin, k);
    table.insert(std::next(pick), others.front());
    return true;
}

bool inductor_table_adds_vendor(const std::vector<RankedConfig>& configs, bool with_aten) {
    const bool holds_vendor = std::any_of(configs.begin(), configs.end(), [](const RankedConfig& r) {
        return collect::is_reference_config(r.config);
    });
    return !holds_vendor && (configs.size() > 1 || with_aten);
}

TableOutcome table_outcome(const std::vector<RankedConfig>& table, const std::vector<core::TimedConfig>& measured,
                           std::optional<double> vendor_ms, bool vendor_added) {
    constexpr double kNone = std::numeric_limits<double>::infinity();
    TableOutcome outcome{vendor_ms.value_or(kNone), kNone, table.size()};
    for (const auto& timed : measured) outcome.best_ms = std::min(outcome.best_ms, timed.time_ms);
    bool vendor_in_table = false;
    for (const auto& entry : table) {
        const auto timed = std::find_if(measured.begin(), measured.end(),
                                        [&](const core::TimedConfig& t) { return t.config == entry.config; });
        const bool vendor = collect::is_reference_config(entry.config);
        vendor_in_table |= vendor;
        if (timed != measured.end()) {
            outcome.offered_ms = std::min(outcome.offered_ms, timed->time_ms);
        } else if (vendor && vendor_ms) {
            outcome.offered_ms = std::min(outcome.offered_ms, *vendor_ms);
        } else {
            throw core::Error("--score", "table entry " + entry.config.name + " has no measured time");
        }
    }
    if (vendor_added && !vendor_in_table) {
        if (!vendor_ms) throw core::Error("--score", "the vendor entry the table adds has no measured time");
        outcome.offered_ms = std::min(outcome.offered_ms, *vendor_ms);
        ++outcome.entries;
    }
    if (outcome.entries == 0) throw core::Error("--score", "an empty table");
    return outcome;
}

TableScore score_tables(const std::vector<TableOutcome>& outcomes) {
    TableScore score;
    score.problems = outcomes.size();
    if (outcomes.empty()) {
        score.geomean = score.median = score.p5 = score.worst = score.entries_per_table =
            std::numeric_limits<double>::quiet_NaN();
        return score;
    }
    std::vector<double> fractions;
    double log_sum = 0.0, entries = 0.0;
    for (const auto& o : outcomes) {
        const double fraction = o.best_ms / o.offered_ms;
        fractions.push_back(fraction);
        log_sum += std::log(fraction);
        entries += static_cast<double>(o.entries);
        score.below_85 += fraction < 0.85;
        score.timed += o.entries >= 2;
    }
    std::sort(fractions.begin(), fractions.end());
    const auto n = fractions.size();
    score.geomean = std::exp(log_sum / static_cast<double>(n));
    score.median = collect::median(fractions);
    score.p5 = nearest_rank_percentile(fractions, 0.05);
    score.worst = fractions.front();
    score.entries_per_table = entries / static_cast<double>(n);
    return score;
}

std::string inductor_template_id(const std::string& op_key) {
    return core::parse_op_key(op_key).first == "bmm" ? "triton::bmm" : "triton::mm";
}

std::string inductor_lut_json(const std::vector<RankedProblem>& problems,
                              const InductorLutOptions& options) {
    auto device_of = [&](const RankedProblem& problem) {
        if (!options.include_device) return std::string();
        return options.device_name.empty() ? problem.hardware : options.device_name;
    };
    ordered_json table = ordered_json::object();
    for (const auto& problem : problems) {
        const std::string key = inductor_lookup_key(problem.op, problem.shape, device_of(problem));
        if (table.contains(key)) {
            throw core::InputError("lookup table",
                                   "two problems give the Inductor key '" + key +
                                       "' (select one hardware with --hardware-name, or add "
                                       "device names to the keys)");
        }
        table[key] = inductor_entries(problem.op, problem.configs, std::nullopt, options, std::nullopt).entries;
    }
    // After every problem's own key, so another form's key never takes a real problem's place.
    for (const auto& problem : problems) {
        for (const auto& form : inductor_alternate_problems(problem.op, problem.shape)) {
            const std::string key = inductor_lookup_key(form.op_key, form.shape, device_of(problem));
            if (table.contains(key)) continue;
            const auto ranked = std::find_if(problem.forms.begin(), problem.forms.end(), [&](const RankedForm& r) {
                return r.form.op_key == form.op_key && r.form.shape == form.shape;
            });
            const auto& configs = ranked != problem.forms.end() ? ranked->configs : problem.configs;
            table[key] = inductor_entries(form.op_key, configs, form.shape.K, options, std::nullopt).entries;
        }
    }
    return core::python_json_dumps(table, 2) + "\n";
}

std::string diode_table_json(const std::vector<RankedProblem>& problems) {
    ordered_json hardware = ordered_json::object();
    std::set<std::string> seen;
    for (const auto& problem : problems) {
        if (!seen.insert(problem_label(problem)).second) {
            throw core::InputError("lookup table",
                                   "problem listed twice: " + problem_label(problem));
        }
        auto& hw = hardware[problem.hardware];
        if (!hw.contains("operation")) {
            hw["operation"] = ordered_json::object();
            hw["version"] = 1;
        }
        auto& op = hw["operation"][problem.op];
        if (!op.contains("solution")) {
            op["solution"] = ordered_json::object();
            op["version"] = 1;
        }
        ordered_json configs = ordered_json::array();
        for (const auto& ranked : problem.configs) {
            configs.push_back(core::config_to_document(ranked.config));
        }
        op["solution"][core::shape_key(problem.shape)] = {{"config", configs}, {"version", 1}};
    }
    const ordered_json table = {{"hardware", hardware}, {"version", 1}};
    return core::python_json_dumps(table, 2) + "\n";
}

void write_lookup_table(const std::filesystem::path& path,
                        const std::vector<RankedProblem>& problems, LutFormat format,
                        const InductorLutOptions& options) {
    const std::string text = format == LutFormat::inductor ? inductor_lut_json(problems, options)
                                                           : diode_table_json(problems);
    core::write_file_atomically(path, text);
}

}  // namespace mmt::model
