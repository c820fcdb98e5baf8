#include "matmul_toolkit/model/decision_policy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::model {
namespace {

bool is_vendor(const RankedConfig& r) { return collect::is_reference_config(r.config); }

bool is_non_negative(double value) { return value >= 0.0 && std::isfinite(value); }

void check_percentage(const char* option, const std::optional<double>& fraction) {
    if (fraction && !is_non_negative(*fraction)) throw core::InputError(option, "must be a percentage of 0 or more");
}

void check_time(const char* option, const std::optional<double>& ms) {
    if (ms && !is_non_negative(*ms)) throw core::InputError(option, "must be a time of 0 microseconds or more");
}

void check_pick_beside_aten(const char* option, const DecisionPolicy& p) {
    if (!p.with_aten) throw core::InputError(option, "needs --with-aten");
    if (p.top_k != 1) throw core::InputError(option, "needs --top-k 1");
}

/// The graph rule writes single entries: no option that pairs may join it.
void check_graph_rule(const DecisionPolicy& p) {
    if (!is_non_negative(*p.kernel_margin)) {
        throw core::InputError("--policy", "the kernel margin must be a fraction of 0 or more");
    }
    const auto refuse = [](const std::string& option) {
        throw core::InputError(option, "cannot be combined with the kernel margin (the graph rule never pairs "
                                       "a kernel pick with ATen)");
    };
    if (p.with_aten) refuse("--with-aten");
    if (p.pairs_by_rule()) refuse(p.pairing_option());
    if (p.paired_compile_margin) refuse("--paired-compile-margin");
    if (p.runner_up_margin) refuse("--runner-up-within");
    if (p.heavy_pick_alone_margin) refuse("--heavy-pick-alone");
    if (p.top_k != 1) throw core::InputError("--top-k", "the kernel margin (graph rule) keeps one entry: needs 1");
}

/// Without a pairing rule a with_aten top-1 table always pairs the pick with ATen.
bool every_table_paired(const DecisionPolicy& p) { return p.with_aten && !p.pairs_by_rule() && p.top_k == 1; }

}  // namespace

void DecisionCounts::add(const Decision& decision, const std::vector<RankedConfig>& table) {
    ++problems;
    if (table.size() >= 2) {
        ++aten_paired;
    } else if (table.size() == 1 && is_vendor(table.front())) {
        ++aten_alone;
    } else {
        ++kernel_alone;
    }
    compile_moves += decision.compile_move;
    paired_moves += decision.paired_move;
    gemv_alone += decision.gemv_alone;
    runner_ups += decision.runner_up;
    heavy_alone += decision.heavy_alone;
}

bool DecisionPolicy::pairs_by_rule() const {
    return aten_within || aten_from_ms || aten_alone_from_ms || aten_alone_gemv;
}

bool DecisionPolicy::chooses_per_problem() const { return pairs_by_rule() || kernel_margin.has_value(); }

std::string DecisionPolicy::pairing_option() const {
    return aten_within          ? "--aten-within"
           : aten_from_ms       ? "--aten-from"
           : aten_alone_from_ms ? "--aten-alone-from"
                                : "--aten-alone-gemv";
}

AtenPairing DecisionPolicy::pairing() const {
    AtenPairing rule;
    if (aten_within) rule.margin = *aten_within;
    if (aten_from_ms) rule.from_ms = *aten_from_ms;
    if (aten_alone_from_ms) rule.vendor_alone_from_ms = *aten_alone_from_ms;
    // Alone, --aten-alone-gemv leaves every other table as --with-aten makes it: a pair.
    if (!aten_within && !aten_from_ms && !aten_alone_from_ms) rule.margin = std::numeric_limits<double>::infinity();
    return rule;
}

void DecisionPolicy::validate() const {
    if (top_k == 0) throw core::InputError("--top-k", "must be at least 1");
    if (pairs_by_rule()) {
        check_pick_beside_aten(pairing_option().c_str(), *this);
        check_percentage("--aten-within", aten_within);
        check_time("--aten-from", aten_from_ms);
        check_time("--aten-alone-from", aten_alone_from_ms);
    }
    check_percentage("--compile-margin", compile_margin);
    check_percentage("--paired-compile-margin", paired_compile_margin);
    check_percentage("--runner-up-within", runner_up_margin);
    check_percentage("--heavy-pick-alone", heavy_pick_alone_margin);
    if (paired_compile_margin) {
        check_pick_beside_aten("--paired-compile-margin", *this);
        // Without a pairing rule every top-1 table is a pair, so one of the margins would be ignored.
        if (compile_margin && !pairs_by_rule()) {
            throw core::InputError("--compile-margin",
                                   "every table of --with-aten --top-k 1 without a pairing rule (--aten-within, "
                                   "--aten-from, ...) is a pair, whose margin --paired-compile-margin sets: give "
                                   "one of the two");
        }
    }
    if (heavy_pick_alone_margin && !pairs_by_rule()) {
        throw core::InputError("--heavy-pick-alone", "needs a pairing rule (--aten-from, --aten-within, ...)");
    }
    if (runner_up_margin) check_pick_beside_aten("--runner-up-within", *this);
    if (kernel_margin) check_graph_rule(*this);
}

bool DecisionPolicy::needs_vendor_predictions() const { return chooses_per_problem(); }

std::size_t DecisionPolicy::ranked_per_problem() const {
    if (chooses_per_problem() || compile_margin || paired_compile_margin || runner_up_margin) {
        return std::numeric_limits<std::size_t>::max();
    }
    return with_aten ? top_k + 1 : top_k;
}

double DecisionPolicy::ranking_margin() const {
    double factor = 1.0;
    for (const auto& margin : {compile_margin, paired_compile_margin, runner_up_margin}) {
        if (margin) factor *= 1.0 + *margin;
    }
    return factor;
}

std::size_t DecisionPolicy::ranked_at_least() const { return with_aten ? top_k + 1 : top_k; }

Decision DecisionPolicy::decide(std::vector<RankedConfig>& ranked, const core::MMShape& shape) const {
    Decision decision;
    const bool all_paired = every_table_paired(*this);
    // Where every table is a pair, the paired margin is the only margin.
    const bool paired_margin_only = all_paired && paired_compile_margin;
    const auto margin = paired_margin_only ? paired_compile_margin : compile_margin;
    std::vector<RankedConfig> unmoved;
    if (paired_compile_margin && !all_paired) unmoved = ranked;
    if (margin) {
        const bool moved = prefer_fast_compile(ranked, *margin, shape.K);
        (paired_margin_only ? decision.paired_move : decision.compile_move) = moved;
    }
    std::vector<RankedConfig> before_cut;
    if (runner_up_margin) before_cut = ranked;
    if (kernel_margin) {
        ranked = kernel_alone_or_vendor(ranked, *kernel_margin);
    } else if (aten_alone_gemv && vendor_alone_for_gemv(ranked, shape)) {
        ranked.resize(1);
        decision.gemv_alone = true;
    } else if (pairs_by_rule()) {
        const AtenPairing rule = pairing();
        ranked = kernel_or_vendor(ranked, rule);
        if (paired_compile_margin) {
            decision.paired_move =
                lighten_paired_pick(ranked, std::move(unmoved), rule, *paired_compile_margin, shape.K);
        }
        if (heavy_pick_alone_margin) {
            decision.heavy_alone = unpair_heavy_pick(ranked, *heavy_pick_alone_margin, shape.K);
        }
    } else if (with_aten) {
        ranked = kernel_configs_and_vendor(ranked, top_k);
    } else if (ranked.size() > top_k) {
        ranked.resize(top_k);  // ranked in full for the compile margin
    }
    if (runner_up_margin) {
        decision.runner_up = add_runner_up(ranked, before_cut, *runner_up_margin, shape.K, writer_adds_vendor());
    }
    return decision;
}

bool DecisionPolicy::writer_adds_vendor() const {
    // With a pairing rule the table holds ATen only where the rule chose it.
    return with_aten && !pairs_by_rule();
}

InductorLutOptions DecisionPolicy::inductor_options(InductorLutOptions options) const {
    options.with_aten = writer_adds_vendor();
    options.bias_addmm_only = bias_addmm_only;
    return options;
}

DecisionPolicy DecisionPolicy::top_k_only() const {
    DecisionPolicy only;
    only.name = name;
    only.top_k = top_k;
    return only;
}

std::vector<RankedConfig> kernel_alone_or_vendor(const std::vector<RankedConfig>& ranked, double margin) {
    const auto kernel = std::find_if_not(ranked.begin(), ranked.end(), is_vendor);
    const auto vendor = std::find_if(ranked.begin(), ranked.end(), is_vendor);
    if (vendor == ranked.end()) throw core::Error("graph rule", "the ranking needs the vendor entry");
    // No kernel config left (every one over the shared-memory limit, or none in the space):
    // ATen, which always runs.
    if (kernel == ranked.end()) return {*vendor};
    if (kernel->predicted_ms * (1.0 + margin) < vendor->predicted_ms) return {*kernel};
    return {*vendor};
}

void check_vendor_predictions(const DecisionPolicy& policy, bool vendor_rows, const std::string& model_path) {
    if (!policy.needs_vendor_predictions() || vendor_rows) return;
    const std::string missing = model_path + " predicts no ATen times (trained with --no-aten)";
    if (policy.name.empty()) throw core::InputError(policy.pairing_option(), missing);
    throw core::InputError("--policy",
                           "policy " + policy.name + ": " + missing + "; --top-k writes the kernel configs alone");
}

ProblemDecision decide_problem(const DecisionPolicy& policy, const std::string& op_key, const core::MMShape& shape,
                               std::vector<RankedConfig> ranked) {
    ProblemDecision decided;
    const auto kernel = std::find_if_not(ranked.begin(), ranked.end(), is_vendor);
    const auto vendor = std::find_if(ranked.begin(), ranked.end(), is_vendor);
    if (kernel != ranked.end()) decided.kernel_ms = kernel->predicted_ms;
    if (vendor != ranked.end()) decided.vendor_ms = vendor->predicted_ms;
    decided.how = policy.decide(ranked, shape);
    decided.table = std::move(ranked);
    decided.written = inductor_table(op_key, decided.table, policy.inductor_options(), decided.vendor_ms);
    const auto kernels = std::count_if(decided.table.begin(), decided.table.end(),
                                       [](const RankedConfig& r) { return !is_vendor(r); });
    if (kernels == 0) {
        decided.verdict = "aten";
    } else if (decided.written.entries.size() == 1) {
        decided.verdict = "kernel";
    } else {
        decided.verdict = "pair";
    }
    return decided;
}

core::OrderedJson decision_document(const DecisionPolicy& policy, const ProblemDecision& decided) {
    const auto ms = [](const std::optional<double>& value) {
        return value && std::isfinite(*value) ? core::OrderedJson(*value) : core::OrderedJson(nullptr);
    };
    core::OrderedJson predicted = core::OrderedJson::array();
    for (const auto& value : decided.written.predicted_ms) predicted.push_back(ms(value));
    return {{"policy", policy.name},
            {"entries", decided.written.entries},
            {"predicted_ms", predicted},
            {"kernel_ms", ms(decided.kernel_ms)},
            {"vendor_ms", ms(decided.vendor_ms)},
            {"decision", decided.verdict}};
}

std::vector<std::string> policy_names() { return {"graph", "graph-both-addmm", "isolated"}; }

DecisionPolicy graph_policy() {
    DecisionPolicy policy;
    policy.name = "graph";
    policy.top_k = 1;
    policy.kernel_margin = 0.10;
    policy.bias_addmm_only = true;
    policy.compile_margin = 5.0 / 100.0;
    return policy;
}

DecisionPolicy graph_both_addmm_policy() {
    DecisionPolicy policy = graph_policy();
    policy.name = "graph-both-addmm";
    policy.bias_addmm_only = false;
    return policy;
}

DecisionPolicy isolated_policy() {
    DecisionPolicy policy;
    policy.name = "isolated";
    policy.top_k = 1;
    policy.with_aten = true;
    policy.aten_from_ms = 10.0 / 1000.0;
    policy.compile_margin = 5.0 / 100.0;
    policy.aten_alone_from_ms = 100.0 / 1000.0;
    policy.aten_alone_gemv = true;
    policy.runner_up_margin = 5.0 / 100.0;
    policy.heavy_pick_alone_margin = 5.0 / 100.0;
    return policy;
}

DecisionPolicy policy_named(const std::string& name) {
    if (name == "graph") return graph_policy();
    if (name == "graph-both-addmm") return graph_both_addmm_policy();
    if (name == "isolated") return isolated_policy();
    std::string names;
    for (const auto& known : policy_names()) names += (names.empty() ? "" : ", ") + known;
    throw core::InputError("--policy", "unknown policy '" + name + "' (expected one of " + names + ")");
}

}  // namespace mmt::model
