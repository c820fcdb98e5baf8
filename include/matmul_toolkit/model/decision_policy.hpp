#pragma once
/// What a lookup table offers for one problem, decided from the model's best-first ranking:
/// the kernel pick alone, ATen alone, or entries Inductor times against each other. One
/// policy object holds every threshold, so that every caller (export-lut, a C library, the
/// in-process hook inside torch.compile) decides alike. Plain C++: no LibTorch.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "matmul_toolkit/core/types.hpp"
#include "matmul_toolkit/model/lut_export.hpp"

namespace mmt::model {

/// What DecisionPolicy::decide did to one ranking, beyond cutting it to a table.
struct Decision {
    bool compile_move = false;  ///< the compile margin put a lighter kernel first
    bool paired_move = false;   ///< the paired compile margin put a lighter kernel in the pair
    bool gemv_alone = false;    ///< ATen left alone on a GEMV it ranks first
    bool runner_up = false;     ///< a second kernel config joined a pair
    bool heavy_alone = false;   ///< a heavy kernel pick stands alone instead of beside ATen
};

/// Decisions summed over problems (one ranking each), for the line export-lut prints.
struct DecisionCounts {
    std::size_t problems = 0;
    std::size_t aten_paired = 0;   ///< tables of two or more entries (ATen beside the pick)
    std::size_t aten_alone = 0;    ///< tables of the vendor entry alone
    std::size_t kernel_alone = 0;  ///< tables of one kernel config alone
    std::size_t compile_moves = 0;
    std::size_t paired_moves = 0;
    std::size_t gemv_alone = 0;
    std::size_t runner_ups = 0;
    std::size_t heavy_alone = 0;

    /// Counts `decision` and the table it left.
    void add(const Decision& decision, const std::vector<RankedConfig>& table);
};

/// The rules that cut a problem's best-first ranking (kernel configs and the vendor entry,
/// aten_*) to the table Inductor gets. Margins are fractions (0.05: 5 %), times milliseconds;
/// an unset rule does not apply. export-lut's flags set the fields of the same names; a
/// preset (policy_named) sets them all.
struct DecisionPolicy {
    std::string name;  ///< the preset's name; empty for a policy built from export-lut's flags
    std::size_t top_k = 1;  ///< kernel configs kept per problem (--top-k)
    /// Offer ATen beside the kernel configs, also where the model ranks ATen first (--with-aten).
    bool with_aten = false;
    /// Pairing rules (top_k 1, with_aten), the AtenPairing fields: ATen beside the pick only
    /// where predicted within this factor of it (--aten-within) ...
    std::optional<double> aten_within;
    /// ... or where the faster of the two is predicted to take this long or more (--aten-from);
    std::optional<double> aten_from_ms;
    /// ATen alone where predicted faster than the pick and at this time or more (--aten-alone-from).
    std::optional<double> aten_alone_from_ms;
    /// ATen alone on a GEMV (M = 1) where the model ranks it first (--aten-alone-gemv).
    bool aten_alone_gemv = false;
    /// Among kernels within this factor of the best, the one with the fewest accumulator
    /// registers first, where K compiles slowly (--compile-margin; prefer_fast_compile).
    std::optional<double> compile_margin;
    /// The compile margin of a pick paired with ATen (--paired-compile-margin; lighten_paired_pick).
    std::optional<double> paired_compile_margin;
    /// A second kernel within this factor of a paired pick joins the pair (--runner-up-within).
    std::optional<double> runner_up_margin;
    /// A heavy pick predicted faster than ATen by more than this factor leaves the pair
    /// (--heavy-pick-alone; unpair_heavy_pick).
    std::optional<double> heavy_pick_alone_margin;
    /// The graph rule, in place of the pairing rules: the best kernel config alone where
    /// predicted faster than ATen by more than this factor (kernel_alone_or_vendor), ATen
    /// alone everywhere else; no table of two entries, so Inductor benchmarks nothing.
    std::optional<double> kernel_margin;
    /// Write an addmm's ATen entry as aten::bias_addmm alone (InductorLutOptions::bias_addmm_only).
    bool bias_addmm_only = false;

    /// Whether a pairing rule (aten_within, aten_from_ms, aten_alone_from_ms, aten_alone_gemv)
    /// decides where ATen joins the pick, rather than always.
    bool pairs_by_rule() const;
    /// Whether each table is the kernel pick alone, ATen alone or the two (a pairing rule or
    /// the graph rule), so that the counts of DecisionCounts say what the policy chose.
    bool chooses_per_problem() const;
    /// The option of the first pairing rule set, for messages ("--aten-within", ...).
    std::string pairing_option() const;
    /// The pairing rules as kernel_or_vendor applies them.
    AtenPairing pairing() const;

    /// Throws core::InputError naming the option (export-lut's) a threshold or combination is
    /// wrong for: a margin below 0, a rule without --with-aten or --top-k 1, ...
    void validate() const;
    /// Whether the rules need the model's prediction for the vendor entry (a model trained
    /// with --no-aten has none).
    bool needs_vendor_predictions() const;
    /// Configs to rank per problem: every candidate where a rule compares them (ATen's
    /// predicted time, every config within a margin), else top_k (top_k + 1 with with_aten,
    /// so that top_k kernel configs remain where ATen ranks among them).
    std::size_t ranked_per_problem() const;
    /// Where decide() looks in a best-first ranking: the first ranked_at_least() entries, the
    /// vendor entry, and the kernel configs predicted within the factor ranking_margin() of
    /// the best one (the compile, paired-compile and runner-up margins, compounded: a
    /// runner-up is compared with a pick the compile margin may have moved). The rest of the
    /// ranking never changes a table, so a ranking cut there (CandidateRanker::top_within)
    /// decides as the whole one does.
    double ranking_margin() const;
    std::size_t ranked_at_least() const;
    /// Cuts `ranked` (best first, ranked_per_problem() configs) to the problem's table.
    /// Every form of a problem (inductor_alternate_problems) gets the same treatment.
    Decision decide(std::vector<RankedConfig>& ranked, const core::MMShape& shape) const;

    /// Whether the Inductor writer adds ATen to a one-config table (InductorLutOptions::with_aten).
    bool writer_adds_vendor() const;
    /// `options` (device keys) with the fields this policy's tables need set.
    InductorLutOptions inductor_options(InductorLutOptions options = {}) const;
    /// Only top_k: what a torch-diode Table takes from a preset (it lists configs, not ATen).
    DecisionPolicy top_k_only() const;
};

/// Throws core::InputError when `policy` needs the model's predictions for the vendor entry
/// and the model at `model_path` has none (`vendor_rows` false: trained with --no-aten),
/// naming --policy for a preset, else the option of its first pairing rule.
void check_vendor_predictions(const DecisionPolicy& policy, bool vendor_rows, const std::string& model_path);

/// One problem decided on its own, as a caller inside a compiler asks (libmmt_rank's
/// mmt_rank_decide): the policy's table, the Inductor entries export-lut writes for it under
/// the problem's own key, and the times they were chosen by.
struct ProblemDecision {
    std::vector<RankedConfig> table;  ///< what DecisionPolicy::decide left of the ranking
    InductorTable written;            ///< its entries, each with its predicted time
    std::optional<double> kernel_ms;  ///< the ranking's best kernel config's predicted time
    std::optional<double> vendor_ms;  ///< the vendor entry's, where the ranking holds it
    Decision how;
    /// "kernel": one kernel config alone (Inductor compiles it and times nothing); "aten":
    /// ATen alone (Inductor compiles nothing); "pair": a kernel config and other entries,
    /// which Inductor times against each other.
    std::string verdict;
};

/// Decides one problem from its best-first `ranked` (ranked_per_problem() configs, as a
/// CandidateRanker gives them), as export-lut decides each problem of a shapeset.
ProblemDecision decide_problem(const DecisionPolicy& policy, const std::string& op_key, const core::MMShape& shape,
                               std::vector<RankedConfig> ranked);

/// {"policy", "entries", "predicted_ms", "kernel_ms", "vendor_ms", "decision"} (times in ms,
/// null where unknown).
core::OrderedJson decision_document(const DecisionPolicy& policy, const ProblemDecision& decided);

/// The graph rule: the first kernel config of a best-first ranking alone where the model
/// predicts it faster than the vendor entry by more than the factor 1 + `margin`
/// (kernel_ms * (1 + margin) < vendor_ms), else the vendor entry alone; the vendor entry alone
/// too where the ranking holds no kernel config. Throws core::Error when it lacks the vendor entry.
std::vector<RankedConfig> kernel_alone_or_vendor(const std::vector<RankedConfig>& ranked, double margin);

/// The policy export-lut applies without --policy, --top-k or a rule flag. One constant, so
/// it can change after measurement.
inline constexpr const char* kDefaultPolicy = "graph";

/// Judged by whole-model runtime, never relying on Inductor's benchmark: inside a model,
/// Inductor's isolated timing (L2 flushed, epilogue unfused) misjudged which entry runs
/// faster, and default torch.compile (cuBLAS everywhere) beat max-autotune on real models.
/// So one entry per table: the kernel pick only where predicted more than 10 % faster than
/// ATen (kernel_margin), else ATen, as aten::bias_addmm alone for an addmm (the 1-D bias
/// cuBLASLt fuses, what default torch.compile runs); and the fast-compile move (compile
/// margin 5 %). Inductor compiles at most one kernel per problem and times nothing.
DecisionPolicy graph_policy();

/// The graph policy, except that an addmm left to ATen gets both ATen entries,
/// aten::bias_addmm and aten::addmm (the expanded bias, no cuBLASLt epilogue), for Inductor to
/// time: two cuBLAS calls, nothing compiled. The model's ATen label is the faster of the two
/// (the collector times both), and on small outputs with a long K the fused bias ran 2.8-3.2x
/// slower than the plain addmm (H100 and H200, 2026-12-02 and 06). Measured and not the
/// default: in GPT-2 and BERT Inductor kept aten::bias_addmm on every addmm, at up to 1.13x
/// default's compile time (docs/experiments/2026-12-06-both-addmm-and-three-compiles.md).
DecisionPolicy graph_both_addmm_policy();

/// Tuned against Inductor's isolated benchmark on single GEMMs (L2 flushed, one op): the
/// recommended export-lut flags `--top-k 1 --with-aten --aten-from 10 --compile-margin 5
/// --aten-alone-from 100 --aten-alone-gemv --runner-up-within 5 --heavy-pick-alone 5`.
/// Inductor times the pick against ATen where both are slow enough for its timing to be
/// trusted and a second compile to pay; elsewhere the one predicted faster stands alone.
DecisionPolicy isolated_policy();

/// The presets' names, for help text: {"graph", "graph-both-addmm", "isolated"}.
std::vector<std::string> policy_names();

/// A preset by name (graph_policy, graph_both_addmm_policy, isolated_policy); throws
/// core::InputError("--policy", ...) for another name.
DecisionPolicy policy_named(const std::string& name);

}  // namespace mmt::model
