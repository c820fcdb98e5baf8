// `export-lut`: the model's configs for every problem of a shapeset or a dataset, cut to
// tables by a decision policy (model/decision_policy.hpp: a preset by --policy, or one built
// from --top-k and the rule flags), written as a PyTorch Inductor lookup table or a
// torch-diode Table.

#include <iostream>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "command.hpp"
#include "matmul_toolkit/collect/backend_factory.hpp"
#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/dataset_stats.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/config_ranker.hpp"
#include "matmul_toolkit/model/decision_policy.hpp"
#include "matmul_toolkit/model/default_model.hpp"
#include "matmul_toolkit/model/features.hpp"
#include "matmul_toolkit/model/lut_export.hpp"
#include "matmul_toolkit/model/inference_model.hpp"
#include "matmul_toolkit/model/problems.hpp"
#include "matmul_toolkit/model/recommend.hpp"

namespace mmt::cli {
namespace {

/// --policy's help: the presets' names and what each is for.
std::string policy_help() {
    std::string names;
    for (const auto& name : model::policy_names()) names += (names.empty() ? "" : ", ") + name;
    const double graph_margin = *model::graph_policy().kernel_margin * 100.0;
    return fmt::format(
        "Decision policy for the tables: {} (default without --top-k and the rule flags: {}). graph: judged "
        "by whole-model runtime, never relying on Inductor's benchmark: one entry per table, the best kernel "
        "config where predicted more than {:g} % faster than ATen, else ATen (an addmm's as aten::bias_addmm "
        "alone). graph-both-addmm: graph, but an addmm left to ATen gets both aten::bias_addmm and "
        "aten::addmm for Inductor to time (measured, no gain over graph, more compile time). isolated: tuned "
        "against Inductor's isolated benchmark of single GEMMs, the recommended --top-k 1 --with-aten "
        "--aten-from 10 --compile-margin 5 --aten-alone-from 100 --aten-alone-gemv --runner-up-within 5 "
        "--heavy-pick-alone 5. Cannot be combined with --top-k or the rule flags; a torch-diode Table takes "
        "the policy's top-k only",
        names, model::kDefaultPolicy, graph_margin);
}

struct ExportLutOptions {
    std::string model;
    std::string shapeset;
    std::string dataset;
    std::optional<std::string> policy;
    std::optional<std::size_t> top_k;
    std::string output;
    std::string lut_format = "inductor";
    std::string search_space = "DEFAULT";
    bool allow_tf32 = false;
    bool no_prune = false;
    std::string hardware_name;
    std::string op_name;
    std::vector<std::string> file_extensions{"json", "msgpack"};
    bool force = false;
    bool with_device_key = false;
    std::string device_key;
    bool with_aten = false;
    std::optional<double> aten_within_percent;
    std::optional<double> aten_from_us;
    std::optional<double> aten_alone_from_us;
    std::optional<double> compile_margin_percent;
    std::optional<double> paired_compile_margin_percent;
    std::optional<double> runner_up_within_percent;
    std::optional<double> heavy_pick_alone_percent;
    bool aten_alone_gemv = false;
    bool score = false;

    void add_to(CLI::App& cmd) {
        cmd.add_option("--model", model,
                       "Trained model checkpoint (.pt); default: the shipped data/models/inductor_h200.pt (Inductor timings, NVIDIA H200)");
        auto* s = cmd.add_option("--shapeset", shapeset,
                                 "Shapeset file: rank the --search-space configs for each shape");
        auto* d = cmd.add_option("--dataset", dataset,
                                 "Dataset file or directory: rank each problem's measured configs");
        s->excludes(d);
        cmd.add_option("--policy", policy, policy_help())->type_name("NAME");
        cmd.add_option("--top-k", top_k,
                       "Configs kept per problem, best predicted first: the tables follow --top-k and the "
                       "rule flags instead of a --policy");
        cmd.add_option("--output", output, "Lookup table to write (.json)")->required();
        cmd.add_option("--lut-format", lut_format,
                       "inductor (torch._inductor lookup table) or diode (torch-diode Table)")
            ->capture_default_str();
        cmd.add_option("--search-space", search_space, "With --shapeset: DEFAULT or EXHAUSTIVE")
            ->capture_default_str();
        cmd.add_flag("--allow-tf32", allow_tf32, "With --shapeset: set ALLOW_TF32 on float32 problems");
        cmd.add_flag("--no-prune", no_prune,
                     "With --shapeset: keep configs this machine's backend for the model's "
                     "hardware would prune");
        cmd.add_option("--hardware-name", hardware_name, "With --dataset: only this hardware");
        cmd.add_option("--op-name", op_name, "With --dataset: only this operation");
        cmd.add_option("--file-extensions", file_extensions,
                       "Extensions of the dataset files read from a directory")
            ->capture_default_str();
        cmd.add_flag("--force", force,
                     "With --dataset: go on when it holds hardware the model was not trained on");
        cmd.add_flag("--with-device-key", with_device_key,
                     "Inductor keys start with the hardware name (device-specific keys); "
                     "default: device-agnostic keys");
        cmd.add_option("--device-key", device_key,
                       "Inductor keys start with this device name (as torch reports it), "
                       "e.g. \"NVIDIA H100 80GB HBM3\"");
        cmd.add_flag("--with-aten", with_aten,
                     "Inductor tables: the --top-k best kernel configs and the ATen choice, so "
                     "Inductor times them and keeps the fastest, also where the model ranks ATen "
                     "first (without it a top-1 table holds the pick alone; tables of two or more "
                     "configs always offer ATen)");
        cmd.add_option("--aten-within", aten_within_percent,
                       "With --with-aten and --top-k 1: offer ATen beside the kernel pick only where "
                       "the model predicts the two within PCT percent of each other; elsewhere the "
                       "table holds the one predicted faster alone, which Inductor uses without "
                       "compiling a second kernel or timing anything (validate-model reports the "
                       "top-1 of several margins)")
            ->type_name("PCT");
        cmd.add_option("--aten-from", aten_from_us,
                       "With --with-aten and --top-k 1: offer ATen beside the kernel pick where the "
                       "faster of the two is predicted to take US microseconds or more (or, with "
                       "--aten-within, where they are close); below, the one predicted faster alone. "
                       "Inductor's timing of the two is biased against Triton kernels of a few "
                       "microseconds, and a second compile costs most there")
            ->type_name("US");
        cmd.add_option("--aten-alone-from", aten_alone_from_us,
                       "With --with-aten and --top-k 1: where the model predicts ATen faster than the "
                       "kernel pick and at US microseconds or more, ATen alone, whatever --aten-within "
                       "and --aten-from say: on large GEMMs cuBLAS is within a few percent of "
                       "max-autotune's pick, and timing the two compiles the pick again (the recommended "
                       "table uses 100: at 60 the default model left ATen alone on two misaligned-K "
                       "problems where cuBLAS ran up to 2.2x slower than predicted; README, export-lut)")
            ->type_name("US");
        cmd.add_flag("--aten-alone-gemv", aten_alone_gemv,
                     "With --with-aten and --top-k 1: where M = 1 (a GEMV) and the model predicts ATen "
                     "fastest, ATen alone, whatever the other rules say: Inductor times cuBLAS's GEMV "
                     "after zeroing an L2-sized buffer, up to 2.5x slower than it runs (bf16 mm "
                     "1x4096x11008 on the H200), and then keeps a slower Triton kernel from the pair");
        cmd.add_option("--compile-margin", compile_margin_percent,
                       "Among the kernel configs predicted within PCT percent of the best, put first "
                       "the one with the fewest accumulator registers per thread (BLOCK_M x BLOCK_N / "
                       "(32 x num_warps)), on problems with 256 < K <= 2048: there Triton unrolls the K loop in "
                       "full and register-heavy kernels compile up to 5x slower (a 128x128 tile on 4 warps: "
                       "2.6 s at K = 768 on the H200), and a pick Inductor times against ATen is compiled "
                       "again; with shorter or longer K loops every config compiles in well under a second")
            ->type_name("PCT");
        cmd.add_option("--paired-compile-margin", paired_compile_margin_percent,
                       "With --with-aten and --top-k 1: the margin of --compile-margin where the table pairs "
                       "the kernel pick with ATen. Inductor compiles a paired pick two or three times (a "
                       "128x128 tile on 4 warps at K = 768: 11 s on the H200, a 64-register tile 2.1-2.7 s) "
                       "and times ATen beside it, so a lighter pick costs least runtime there; where ATen "
                       "is much slower than the kernels it costs runtime (README, End-to-end)")
            ->type_name("PCT");
        cmd.add_option("--heavy-pick-alone", heavy_pick_alone_percent,
                       "With a pairing rule (--aten-from, ...): on problems with 256 < K <= 2048, where the "
                       "table pairs a register-heavy kernel pick (128 or more accumulator registers per "
                       "thread) with ATen and the pick is predicted more than PCT percent faster, the pick "
                       "stands alone: Inductor compiles a paired pick two or three times, and such a kernel "
                       "takes 3-4 s to compile there (README, export-lut)")
            ->type_name("PCT");
        cmd.add_option("--runner-up-within", runner_up_within_percent,
                       "With --with-aten and --top-k 1: where the table pairs the kernel pick with ATen "
                       "(every table without a pairing rule such as --aten-from), "
                       "so Inductor times them anyway, also the best other kernel config predicted within "
                       "PCT percent of the pick (for 256 < K <= 2048 the one with the fewest accumulator "
                       "registers among those): a near-tie is settled by Inductor's timing instead of the "
                       "model. Costs one more compile on those problems (README, export-lut)")
            ->type_name("PCT");
        cmd.add_flag("--score", score,
                     "With --dataset: also score the tables on the dataset's measured times, as Inductor "
                     "would run them (every entry of a table of two or more timed, the fastest kept): "
                     "per problem the best measured time / the table's; prints the geomean, median, 5th "
                     "percentile and worst over problems, how many fall under 0.85, how many tables "
                     "Inductor would autotune, and the five problems that lose most. On problems the model never saw, what the rules would "
                     "achieve, without a GPU");
    }
};

std::optional<std::string> optional_filter(const std::string& value) {
    if (value.empty()) return std::nullopt;
    return value;
}

std::unique_ptr<collect::Backend> pruning_backend(const model::ModelInfo& info,
                                                  const GlobalOptions& global) {
    auto backend = collect::backend_for_hardware(model::model_hardware_names(info), resolved_device(global));
    if (!backend) {
        spdlog::info("keeping the whole space: the model's hardware '{}' is not this machine's", info.hardware_name);
    }
    return backend;
}

/// The rule flags given, --top-k first: each a threshold of the policy they build.
std::vector<std::string> given_rule_flags(const ExportLutOptions& o) {
    std::vector<std::string> given;
    const std::pair<const char*, bool> flags[] = {
        {"--top-k", o.top_k.has_value()},
        {"--with-aten", o.with_aten},
        {"--aten-within", o.aten_within_percent.has_value()},
        {"--aten-from", o.aten_from_us.has_value()},
        {"--aten-alone-from", o.aten_alone_from_us.has_value()},
        {"--aten-alone-gemv", o.aten_alone_gemv},
        {"--compile-margin", o.compile_margin_percent.has_value()},
        {"--paired-compile-margin", o.paired_compile_margin_percent.has_value()},
        {"--runner-up-within", o.runner_up_within_percent.has_value()},
        {"--heavy-pick-alone", o.heavy_pick_alone_percent.has_value()},
    };
    for (const auto& [flag, set] : flags) {
        if (set) given.emplace_back(flag);
    }
    return given;
}

/// The policy --top-k and the rule flags build: percentages as fractions, microseconds as
/// milliseconds.
model::DecisionPolicy policy_from_flags(const ExportLutOptions& o) {
    const auto scaled = [](const std::optional<double>& value, double divisor) {
        return value ? std::optional<double>(*value / divisor) : std::nullopt;
    };
    model::DecisionPolicy policy;
    policy.top_k = *o.top_k;
    policy.with_aten = o.with_aten;
    policy.aten_within = scaled(o.aten_within_percent, 100.0);
    policy.aten_from_ms = scaled(o.aten_from_us, 1000.0);
    policy.aten_alone_from_ms = scaled(o.aten_alone_from_us, 1000.0);
    policy.aten_alone_gemv = o.aten_alone_gemv;
    policy.compile_margin = scaled(o.compile_margin_percent, 100.0);
    policy.paired_compile_margin = scaled(o.paired_compile_margin_percent, 100.0);
    policy.runner_up_margin = scaled(o.runner_up_within_percent, 100.0);
    policy.heavy_pick_alone_margin = scaled(o.heavy_pick_alone_percent, 100.0);
    return policy;
}

/// --policy NAME; else the flags' policy where --top-k is given; else the default preset.
model::DecisionPolicy chosen_policy(const ExportLutOptions& o) {
    const auto flags = given_rule_flags(o);
    if (o.policy) {
        if (!flags.empty()) {
            throw core::InputError("--policy", "cannot be combined with " + flags.front() + " (a policy sets it)");
        }
        return model::policy_named(*o.policy);
    }
    if (o.top_k) return policy_from_flags(o);
    if (!flags.empty()) {
        throw core::InputError("--top-k", "needed with " + flags.front() + " (without --top-k and the rule flags, "
                                          "a --policy decides)");
    }
    return model::policy_named(model::kDefaultPolicy);
}

/// The other forms Inductor may autotune a problem in (padded, a batch-1 bmm as an mm): an
/// Inductor table ranks each as the problem it is, since after pad_mm the rows are aligned
/// and the kernels rank differently there. A torch-diode Table has no such keys.
std::vector<model::InductorProblem> inductor_forms(const ExportLutOptions& o, const std::string& op_key,
                                                   const core::MMShape& shape) {
    if (model::parse_lut_format(o.lut_format) != model::LutFormat::inductor) return {};
    return model::inductor_alternate_problems(op_key, shape);
}

/// `per_problem`: configs ranked per problem (DecisionPolicy::ranked_per_problem).
std::vector<model::RankedProblem> rank_shapeset(const ExportLutOptions& o, std::size_t per_problem,
                                                const model::InferenceModel& trained_model,
                                                const GlobalOptions& global) {
    const auto shapeset = core::load_shapeset(o.shapeset);
    if (shapeset.num_shapes() == 0) throw core::InputError(o.shapeset, "the shapeset holds no shapes");
    model::CandidateOptions candidates;
    candidates.space = collect::parse_search_space(o.search_space);
    candidates.allow_tf32 = o.allow_tf32;
    std::unique_ptr<collect::Backend> backend;
    if (!o.no_prune) backend = pruning_backend(trained_model.info(), global);
    candidates.backend = backend.get();
    model::CandidateRanker ranker(trained_model, model::candidate_options_for(trained_model.info(), candidates));

    std::vector<model::RankedProblem> ranked;
    for (const auto& entry : shapeset.operations) {
        for (const auto& shape : entry.shapes) {
            model::RankedProblem problem{trained_model.info().hardware_name, entry.op, shape,
                                         ranker.top_k(entry.op, shape, per_problem), {}};
            for (auto& form : inductor_forms(o, entry.op, shape)) {
                auto configs = ranker.top_k(form.op_key, form.shape, per_problem);
                problem.forms.push_back({std::move(form), std::move(configs)});
            }
            ranked.push_back(std::move(problem));
        }
    }
    return ranked;
}

/// A problem's measured times, for --score.
struct MeasuredProblem {
    std::vector<core::TimedConfig> timings;
    std::optional<double> vendor_ms;
};

/// `measured`, where given, receives each ranked problem's measured times.
std::vector<model::RankedProblem> rank_dataset(const ExportLutOptions& o, std::size_t per_problem,
                                               const model::InferenceModel& trained_model,
                                               const std::string& model_path,
                                               std::vector<MeasuredProblem>* measured = nullptr) {
    const auto dataset = core::load_dataset_any(o.dataset, o.file_extensions)
                             .filter(optional_filter(o.hardware_name), optional_filter(o.op_name));
    if (dataset.num_problems() == 0) {
        throw core::InputError(o.dataset, "no problems left after the --hardware-name / --op-name filters");
    }
    const auto warning = model::check_model_hardware(trained_model.info(), dataset, model_path, o.force);
    if (!warning.empty()) spdlog::warn("{}", warning);

    auto problems = model::group_problems(dataset, o.dataset);
    if (trained_model.info().vendor_rows) problems = model::with_reference_rows(std::move(problems));
    std::vector<model::RankedProblem> ranked;
    for (const auto& group : problems) {
        std::vector<core::GemmConfig> configs;
        configs.reserve(group.timings.size());
        for (const auto& timed : group.timings) configs.push_back(timed.config);
        const int units = model::lookup_hardware(group.hardware).parallel_units;
        model::RankedProblem problem{group.hardware, group.op_key, group.shape,
                                     model::top_k_configs(trained_model, group.op_key, group.shape, configs,
                                                          per_problem, units),
                                     {}};
        // The measured configs, ranked for each form as the problem it is: specialized as
        // Inductor sets them for its shape (EVEN_K for a padded K), ALLOW_TF32 as measured.
        for (auto& form : inductor_forms(o, group.op_key, group.shape)) {
            const auto [form_op, form_layout] = core::parse_op_key(form.op_key);
            const collect::Problem as_run{form_op, form_layout, form.shape};
            auto candidates = configs;
            for (auto& c : candidates) {
                if (!collect::is_reference_config(c)) c = collect::specialize_config(c, as_run, c.allow_tf32);
            }
            auto form_configs =
                model::top_k_configs(trained_model, form.op_key, form.shape, candidates, per_problem, units);
            problem.forms.push_back({std::move(form), std::move(form_configs)});
        }
        ranked.push_back(std::move(problem));
        if (measured) measured->push_back({group.timings, group.reference_ms});
    }
    return ranked;
}

/// Problems --score lists by name: the ones that lose most.
constexpr std::size_t kWorstScored = 5;

/// --score: the tables rated on the dataset's times, then the problems that lose most, each
/// with its table and its best measured config.
void print_score(const std::vector<model::RankedProblem>& ranked, const std::vector<MeasuredProblem>& measured,
                 bool with_aten) {
    std::vector<model::TableOutcome> outcomes;
    for (std::size_t i = 0; i < ranked.size(); ++i) {
        const auto& table = ranked[i].configs;
        outcomes.push_back(model::table_outcome(table, measured[i].timings, measured[i].vendor_ms,
                                                model::inductor_table_adds_vendor(table, with_aten)));
    }
    const auto s = model::score_tables(outcomes);
    std::cout << fmt::format(
        "score on the dataset's times (best / the table's, Inductor keeping a table's fastest entry): "
        "{} problems, geomean {:.4f}, median {:.4f}, 5th percentile {:.3f}, worst {:.3f}, {} under 0.85; "
        "{} tables of two or more entries (autotuned), {:.2f} entries per table\n",
        s.problems, s.geomean, s.median, s.p5, s.worst, s.below_85, s.timed, s.entries_per_table);

    std::vector<std::size_t> order(outcomes.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    const auto fraction = [&](std::size_t i) { return outcomes[i].best_ms / outcomes[i].offered_ms; };
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return fraction(a) < fraction(b); });
    order.resize(std::min(order.size(), kWorstScored));
    if (!order.empty()) std::cout << "the problems that lose most (best / the table's):\n";
    for (const std::size_t i : order) {
        const auto& problem = ranked[i];
        std::string table;
        for (const auto& entry : problem.configs) table += (table.empty() ? "" : ", ") + core::config_label(entry.config);
        if (model::inductor_table_adds_vendor(problem.configs, with_aten)) table += ", ATen";
        std::string best = "ATen";
        double best_ms = measured[i].vendor_ms.value_or(std::numeric_limits<double>::infinity());
        for (const auto& timed : measured[i].timings) {
            if (timed.time_ms <= best_ms) {  // on a tie the vendor row's own name
                best_ms = timed.time_ms;
                best = core::config_label(timed.config);
            }
        }
        std::cout << fmt::format("  {:.3f}  {} {} {}: table [{}] {:.4g} ms; best {} {:.4g} ms\n", fraction(i),
                                 problem.op, problem.shape.M_dtype, core::shape_label(problem.shape), table,
                                 outcomes[i].offered_ms, best, best_ms);
    }
}

/// What a preset did, in one line: "policy graph: the kernel pick alone on 3 problems, ...".
std::string policy_summary(const model::DecisionPolicy& policy, const model::DecisionCounts& counts) {
    const auto percent = [](double fraction) { return fmt::format("{:g} %", fraction * 100.0); };
    std::string line = "policy " + policy.name + ": ";
    if (policy.chooses_per_problem()) {
        line += fmt::format("the kernel pick alone on {} problems, ATen alone on {}, ATen beside the kernel pick on {}",
                            counts.kernel_alone, counts.aten_alone, counts.aten_paired);
    } else {
        line += fmt::format("the top {} kernel configs on {} problems", policy.top_k, counts.problems);
    }
    if (policy.kernel_margin) line += " (kernel margin " + percent(*policy.kernel_margin) + ")";
    if (policy.aten_alone_gemv) line += fmt::format("; ATen alone on {} GEMVs (M = 1)", counts.gemv_alone);
    if (policy.compile_margin) {
        line += fmt::format("; a kernel with fewer accumulator registers put first on {} (compile margin {})",
                            counts.compile_moves, percent(*policy.compile_margin));
    }
    if (policy.heavy_pick_alone_margin) {
        line += fmt::format("; a heavy kernel pick alone instead of beside ATen on {}", counts.heavy_alone);
    }
    if (policy.paired_compile_margin) {
        line += fmt::format("; a lighter kernel in the pair with ATen on {}", counts.paired_moves);
    }
    if (policy.runner_up_margin) {
        line += fmt::format("; a second kernel config beside the pair on {}", counts.runner_ups);
    }
    if (policy.bias_addmm_only) line += "; addmm's ATen entry aten::bias_addmm alone";
    return line + "\n";
}

/// The lines a policy built from the flags prints, one per rule, naming the flags as given.
void print_flag_counts(const ExportLutOptions& o, const model::DecisionPolicy& policy,
                       const model::DecisionCounts& counts) {
    if (policy.pairs_by_rule()) {
        std::cout << "ATen beside the kernel pick on " << counts.aten_paired << " problems, ATen alone on "
                  << counts.aten_alone << ", the kernel pick alone on " << counts.kernel_alone << "\n";
        if (o.aten_alone_gemv) {
            std::cout << "--aten-alone-gemv: ATen alone on " << counts.gemv_alone << " GEMVs (M = 1)\n";
        }
    }
    if (o.compile_margin_percent) {
        std::cout << "--compile-margin " << *o.compile_margin_percent << ": a kernel with fewer accumulator "
                  << "registers put first on " << counts.compile_moves << " problems\n";
    }
    if (o.heavy_pick_alone_percent) {
        std::cout << "--heavy-pick-alone " << *o.heavy_pick_alone_percent
                  << ": a heavy kernel pick alone instead of beside ATen on " << counts.heavy_alone << " problems\n";
    }
    if (o.paired_compile_margin_percent) {
        std::cout << "--paired-compile-margin " << *o.paired_compile_margin_percent
                  << ": a lighter kernel in the pair with ATen on " << counts.paired_moves << " problems\n";
    }
    if (o.runner_up_within_percent) {
        std::cout << "--runner-up-within " << *o.runner_up_within_percent
                  << ": a second kernel config beside the pair on " << counts.runner_ups << " problems\n";
    }
}

int run_export_lut(const ExportLutOptions& o, const GlobalOptions& global) {
    if (o.shapeset.empty() == o.dataset.empty()) {
        throw core::InputError("--shapeset", "give exactly one of --shapeset and --dataset");
    }
    auto policy = chosen_policy(o);
    const auto format = model::parse_lut_format(o.lut_format);
    // A torch-diode Table lists configs, not Inductor's ATen choice: a preset gives it its top-k.
    if (!policy.name.empty() && format != model::LutFormat::inductor) policy = policy.top_k_only();
    if (policy.with_aten && format != model::LutFormat::inductor) {
        throw core::InputError("--with-aten", "applies to --lut-format inductor only (a torch-diode "
                                              "Table lists configs, not Inductor's ATen choice)");
    }
    policy.validate();
    if (o.score && o.dataset.empty()) throw core::InputError("--score", "needs --dataset (measured times)");
    if (o.score && format != model::LutFormat::inductor) {
        throw core::InputError("--score", "rates Inductor tables (--lut-format inductor), as Inductor runs them");
    }
    model::InductorLutOptions keys;
    keys.include_device = o.with_device_key || !o.device_key.empty();
    keys.device_name = o.device_key;
    const auto lut = policy.inductor_options(keys);

    const std::string model_path = model::model_or_default(o.model);
    if (o.model.empty()) spdlog::info("--model not given: using the default model {}", model_path);
    const auto trained_model = model::InferenceModel::load(model_path);
    model::check_vendor_predictions(policy, trained_model.info().vendor_rows, model_path);
    std::vector<MeasuredProblem> measured;
    const std::size_t per_problem = policy.ranked_per_problem();
    auto ranked = o.shapeset.empty()
                      ? rank_dataset(o, per_problem, trained_model, model_path, o.score ? &measured : nullptr)
                      : rank_shapeset(o, per_problem, trained_model, global);
    model::DecisionCounts counts;
    for (auto& problem : ranked) {
        counts.add(policy.decide(problem.configs, problem.shape), problem.configs);
        for (auto& form : problem.forms) policy.decide(form.configs, form.form.shape);
    }
    model::write_lookup_table(o.output, ranked, format, lut);

    std::size_t entries = 0;
    for (const auto& p : ranked) entries += p.configs.size();
    std::cout << "wrote " << ranked.size() << " problems, " << entries << " configs ("
              << o.lut_format << " lookup table) to " << o.output << "\n";
    if (policy.name.empty()) {
        print_flag_counts(o, policy, counts);
    } else {
        std::cout << policy_summary(policy, counts);
    }
    if (o.score) print_score(ranked, measured, lut.with_aten);  // last: the rules' counts come first
    return core::kExitOk;
}

}  // namespace

void register_export_lut(CLI::App& app, const GlobalOptions& global) {
    auto options = std::make_shared<ExportLutOptions>();
    auto* cmd = app.add_subcommand(
        "export-lut", "Write the configs a decision policy (--policy, or --top-k and the rule flags) "
                      "keeps of the model's ranking for every problem of a shapeset or a dataset, as a "
                      "PyTorch Inductor lookup table or a torch-diode Table");
    options->add_to(*cmd);
    cmd->callback([options, &global] { exit_code() = run_export_lut(*options, global); });
}

}  // namespace mmt::cli
