#include "matmul_toolkit/collect/engine.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <set>
#include <sstream>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "matmul_toolkit/build_config.hpp"
#include "matmul_toolkit/collect/dataset_collector.hpp"
#include "matmul_toolkit/collect/interrupt.hpp"
#include "matmul_toolkit/collect/output_files.hpp"
#include "output_writer.hpp"
#include "matmul_toolkit/collect/random.hpp"
#include "matmul_toolkit/collect/timing_stats.hpp"
#include "matmul_toolkit/collect/trace.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/meta_sidecar.hpp"

namespace fs = std::filesystem;

namespace mmt::collect {
namespace {

using Clock = std::chrono::steady_clock;

const std::vector<std::string> kSearchModes{"max-autotune", "default", "reduce-overhead",
                                            "max-autotune-no-cudagraphs"};

double seconds_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
    return out;
}

bool contains(const std::vector<std::string>& items, const std::string& item) {
    return std::find(items.begin(), items.end(), item) != items.end();
}

std::string problem_id(const Problem& p) { return p.op_key() + "|" + core::shape_key(p.shape); }

std::vector<Problem> plan_problems(const CollectOptions& options, const Backend& backend,
                                   const CollectionDefaults& defaults) {
    if (!options.problems.empty()) {
        const auto supported = backend.supported_dtypes();
        std::unordered_set<std::string> seen;
        for (const auto& p : options.problems) {
            if (!core::is_known_op(p.op) || !core::is_known_layout(p.layout)) {
                throw core::InputError("problems", "unknown op or layout in " + describe_problem(p));
            }
            if (p.shape.B < 1 || p.shape.M < 1 || p.shape.N < 1 || p.shape.K < 1) {
                throw core::InputError("problems", "dimensions must be positive in " + describe_problem(p));
            }
            if (!contains(supported, p.dtype())) {
                throw core::InputError("problems", "dtype " + p.dtype() + " is not supported by the " +
                                                       backend.name() + " backend");
            }
            if (!seen.insert(problem_id(p)).second) {
                throw core::InputError("problems", describe_problem(p) + " is listed twice");
            }
        }
        return options.problems;
    }
    if (!options.shapeset.empty()) {
        const auto shapeset = core::load_shapeset(options.shapeset);
        auto problems = problems_from_shapeset(shapeset, options.shapeset_operations,
                                               options.shapeset_dtypes);
        if (problems.empty()) {
            throw core::InputError(options.shapeset.string(),
                                   "no shapes for the operations " + join(options.shapeset_operations));
        }
        const auto supported = backend.supported_dtypes();
        for (const auto& p : problems) {
            if (!contains(supported, p.dtype())) {
                throw core::InputError(options.shapeset.string(),
                                       "dtype " + p.dtype() + " is not supported by the " +
                                           backend.name() + " backend (supported: " +
                                           join(supported) + "; --dtypes replaces the shapes' dtype)");
            }
        }
        return problems;
    }
    GeneratorOptions generator = options.generator;
    if (generator.dtypes.empty()) generator.dtypes = defaults.dtypes;
    if (options.max_size) {
        generator.sizes.max_size = *options.max_size;
    } else {
        generator.sizes.max_size = defaults.max_size;
        if (generator.sizes.min_size > generator.sizes.max_size) {
            throw core::InputError("--min-size", std::to_string(generator.sizes.min_size) +
                                                     " is above the " + backend.name() +
                                                     " backend's default --max-size " +
                                                     std::to_string(defaults.max_size) +
                                                     "; pass --max-size too");
        }
    }
    validate_generator_options(generator);
    const auto supported = backend.supported_dtypes();
    for (const auto& dtype : generator.dtypes) {
        if (!contains(supported, dtype)) {
            throw core::InputError("--dtypes", dtype + " is not supported by the " + backend.name() +
                                                   " backend (supported: " + join(supported) + ")");
        }
    }
    return generate_problems(generator, options.seed);
}

std::vector<std::pair<std::string, std::vector<core::GemmConfig>>> plan_configs(
    const CollectOptions& options, const std::vector<Problem>& problems) {
    std::vector<std::string> ops;
    for (const auto& p : problems) {
        if (!contains(ops, p.op)) ops.push_back(p.op);
    }
    std::vector<std::pair<std::string, std::vector<core::GemmConfig>>> out;
    if (options.configs_file.empty()) {
        const auto configs = configs_for(options.search_space);
        for (const auto& op : ops) out.emplace_back(op, configs);
        // Inductor autotunes torch._int_mm over a list of its own.
        const bool int8 = std::any_of(problems.begin(), problems.end(), [](const Problem& p) { return p.dtype() == "int8"; });
        if (int8 && options.search_space == SearchSpace::default_space) out.emplace_back("mm:int8", int8_default_configs());
        return out;
    }
    const auto solution = core::load_solution(options.configs_file);
    for (const auto& op : ops) {
        const auto& configs = solution.configs_for(op);
        if (configs.empty()) {
            throw core::InputError(options.configs_file.string(), "no configs for operation " + op);
        }
        out.emplace_back(op, configs);
    }
    return out;
}


std::string utc_timestamp() {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return text;
}

// A batch entry's error is counted by its category: the text before the first ':'.
std::string error_category(const std::string& error) {
    const auto colon = error.find(':');
    return error.empty() ? std::string("failed") : error.substr(0, colon);
}

core::OrderedJson timing_document(const Timing& t, int warmup) {
    core::OrderedJson doc;
    doc["median_ms"] = t.median_ms;
    doc["min_ms"] = t.min_ms;
    doc["max_ms"] = t.max_ms;
    doc["spread"] = relative_spread(t);
    doc["warmup"] = warmup;
    doc["repeat"] = static_cast<int>(t.samples_ms.size());
    return doc;
}


}  // namespace

const std::vector<core::GemmConfig>& planned_configs(const CollectionPlan& plan, const Problem& problem) {
    const std::string int8_key = problem.op + ":int8";
    if (problem.dtype() == "int8") {
        for (const auto& [name, configs] : plan.configs_per_op)
            if (name == int8_key) return configs;
    }
    for (const auto& [name, configs] : plan.configs_per_op)
        if (name == problem.op) return configs;
    throw core::Error("collection plan", "no configs planned for operation " + problem.op);
}

CollectionPlan plan_collection(const CollectOptions& options, const Backend& backend) {
    const CollectionDefaults defaults = backend.collection_defaults();
    CollectionPlan plan;
    plan.timing.warmup = options.warmup.value_or(defaults.timing.warmup);
    plan.timing.repeat = options.repeat.value_or(defaults.timing.repeat);
    if (plan.timing.warmup < 0) throw core::InputError("--warmup", "must be 0 or more");
    if (plan.timing.repeat < 1) throw core::InputError("--repeat", "must be at least 1");
    if (!contains(kSearchModes, options.search_mode)) {
        throw core::InputError("--search-mode", "unknown mode '" + options.search_mode +
                                                    "' (expected one of " + join(kSearchModes) + ")");
    }
    if (options.chunk_size && *options.chunk_size < 1) {
        throw core::InputError("--chunk-size", "must be at least 1");
    }
    if (options.chunk_size && options.output.empty()) {
        throw core::InputError("--chunk-size", "needs an output file");
    }

    validate_shard(options.shard);
    plan.problems = shard_problems(plan_problems(options, backend, defaults), options.shard);
    const auto ops = backend.supported_ops();
    for (const auto& p : plan.problems) {
        if (!contains(ops, p.op)) {
            throw core::InputError(options.shapeset.empty() ? "--ops" : options.shapeset.string(),
                                   "operation " + p.op + " is not supported by the " +
                                       backend.name() + " backend");
        }
    }
    plan.configs_per_op = plan_configs(options, plan.problems);

    if (!options.output.empty()) {
        plan.output = shard_output_path(resolve_output_path(options.output, options.format), options.shard);
        check_writable_directory(plan.output.parent_path(), "--output");
        // Before any GPU time is spent: the output is written (and resumed) in place.
        core::check_not_read_only(plan.output);
        core::check_not_read_only(core::meta_sidecar_path(plan.output));
    }
    if (!options.trace_dir.empty()) check_writable_directory(options.trace_dir, "--trace-dir");
    return plan;
}

core::OrderedJson run_metadata(const CollectOptions& options, const CollectionPlan& plan,
                               const Backend& backend) {
    core::OrderedJson run;
    run["backend"] = backend.name();
    run["hardware"] = backend.hardware_name();
    run["search_mode"] = options.search_mode;
    if (options.configs_file.empty()) {
        run["search_space"] = search_space_name(options.search_space);
    } else {
        run["configs_file"] = options.configs_file.string();
    }
    run["allow_tf32"] = options.allow_tf32;
    run["warmup"] = plan.timing.warmup;
    run["repeat"] = plan.timing.repeat;
    run["statistic"] = backend.statistic();
    run["seed"] = options.seed;
    if (!options.problems.empty()) {
        run["source"] = "problem list";
        run["num_shapes"] = options.problems.size();
    } else if (!options.shapeset.empty()) {
        run["source"] = "shapeset";
        run["shapeset"] = options.shapeset.string();
    } else {
        const auto& s = options.generator.sizes;
        run["source"] = s.log_normal ? "log_normal" : "random";
        run["num_shapes"] = options.generator.num_shapes;
        run["min_size"] = s.min_size;
        run["max_size"] = options.max_size.value_or(backend.collection_defaults().max_size);
        run["power_of_two"] = s.power_of_two;
        run["no_rectangular"] = s.no_rectangular;
        run["no_odd_sizes"] = s.no_odd_sizes;
        if (s.multiple_of > 1) run["multiple_of"] = s.multiple_of;
        if (s.log_normal) {
            run["log_normal"] = {{"m_mean", s.m.mean}, {"m_std", s.m.std}, {"n_mean", s.n.mean},
                                 {"n_std", s.n.std},   {"k_mean", s.k.mean}, {"k_std", s.k.std}};
        }
    }
    if (!options.shard.is_whole()) run["shard"] = {{"index", options.shard.index}, {"count", options.shard.count}};
    const auto environment = backend.environment();
    if (!environment.empty()) {
        core::OrderedJson env = core::OrderedJson::object();
        for (const auto& [key, value] : environment) env[key] = value;
        run["environment"] = std::move(env);
    }
    run["collected_at"] = utc_timestamp();
    return run;
}

CollectionSummary run_collection(const CollectOptions& options, Backend& backend,
                                 ProgressSink* progress) {
    const auto start = Clock::now();
    auto silent = make_silent_progress();
    ProgressSink& sink = progress != nullptr ? *progress : *silent;

    CollectionStart run = start_collection(options, backend);
    const CollectionPlan& plan = run.plan;
    CollectionSummary& summary = run.summary;
    OutputWriter& writer = *run.writer;
    ProgressState& state = run.progress;
    const std::set<std::string> skip(options.skip_configs.begin(), options.skip_configs.end());
    {
        // A backend that builds kernels per problem (CUDA) starts on all of them now, in
        // the order they will be measured, instead of one problem at a time.
        std::vector<Problem> pending;
        for (const std::size_t index : run.pending) pending.push_back(plan.problems[index]);
        backend.plan(pending, [&](const Problem& p) {
            return specialize_configs(planned_configs(plan, p), p, options.allow_tf32);
        });
    }

    const double kernel_seconds_before = backend.timed_kernel_seconds();
    auto refresh_rates = [&](std::size_t finished_this_run) {
        update_rates(state, seconds_between(start, Clock::now()), summary.configs_timed, finished_this_run);
    };
    sink.on_start(state);

    std::size_t finished = 0;
    for (std::size_t at = 0; at < run.pending.size(); ++at) {
        const std::size_t index = run.pending[at];
        if (interrupt_requested()) {
            summary.interrupted = true;
            break;
        }
        if (past_stop_time(options, seconds_between(start, Clock::now()))) {
            summary.problems_not_started = run.pending.size() - at;
            break;
        }
        const Problem& problem = plan.problems[index];
        state.current = describe_problem(problem);
        sink.on_config(state);

        ProblemResult result{summary.hardware, problem.op_key(), problem.shape, {}};
        core::OrderedJson problem_meta = core::OrderedJson::object();
        ProblemTrace trace(state.current);
        std::size_t pruned_here = 0, failed_here = 0;
        std::string reference_line;
        std::vector<std::string> attempted;
        std::string fault_config, fault_what;

        try {
            backend.prepare(problem, derive_seed(options.seed, "operands|" + problem_id(problem)));
        } catch (const DeviceFault& e) {
            fault_what = e.what();
            ++summary.failed[std::string("device fault: prepare failed: ") + e.what()];
        } catch (const std::exception& e) {
            ++summary.failed[std::string("prepare failed: ") + e.what()];
            ++summary.problems_empty;
            ++state.problems_done;
            ++finished;
            refresh_rates(finished);
            sink.on_problem_done(state, state.current + ": skipped, " + e.what());
            continue;
        }

        auto time_one = [&](const core::GemmConfig& config, bool reference) -> bool {
            const std::string label = describe_config(config);
            attempted.push_back(label);
            const double call_start = seconds_between(start, Clock::now()) * 1e6;
            try {
                const Timing timing = reference ? backend.time_reference(problem, plan.timing)
                                                : backend.time(problem, config, plan.timing);
                const double call_end = seconds_between(start, Clock::now()) * 1e6;
                result.timed_configs.push_back({config, timing.median_ms, 1});
                problem_meta[label] = timing_document(timing, plan.timing.warmup);
                trace.add_timing(label, call_start, call_end, timing);
                if (reference) {
                    ++summary.references_timed;
                    char text[64];
                    std::snprintf(text, sizeof text, "%s %.4f ms", config.name.c_str(), timing.median_ms);
                    reference_line = text;
                } else {
                    ++summary.configs_timed;
                }
            } catch (const core::Interrupted&) {
                summary.interrupted = true;
            } catch (const std::exception& e) {
                const double call_end = seconds_between(start, Clock::now()) * 1e6;
                trace.add_failure(label, call_start, call_end, e.what());
                const bool fault = dynamic_cast<const DeviceFault*>(&e) != nullptr;
                const std::string reason = fault ? std::string("device fault: ") + e.what() : e.what();
                if (reference) {
                    ++summary.reference_failed[reason];
                } else {
                    ++summary.failed[reason];
                    ++failed_here;
                }
                if (fault) {
                    // Nothing measured after a sticky fault could be trusted: stop here.
                    fault_config = label;
                    fault_what = e.what();
                    return false;
                }
            }
            refresh_rates(finished);
            sink.on_config(state);
            return !summary.interrupted && !interrupt_requested();
        };

        // A backend that measures whole problems (Inductor) answers once for all configs;
        // each entry is then counted as time_one() counts a config.
        auto time_batch = [&](const std::vector<core::GemmConfig>& kept) -> bool {
            const core::GemmConfig reference = reference_config(problem);
            const bool with_reference = options.time_reference && skip.count(describe_config(reference)) == 0;
            const std::string own_space =
                options.configs_file.empty() ? search_space_name(options.search_space) : std::string();
            const double batch_start = seconds_between(start, Clock::now()) * 1e6;
            std::vector<Backend::BatchEntry> entries;
            try {
                entries = backend.measure_batch(problem, kept, own_space, with_reference, plan.timing);
            } catch (const core::Interrupted&) {
                summary.interrupted = true;
                return false;
            } catch (const std::exception& e) {
                const double batch_end = seconds_between(start, Clock::now()) * 1e6;
                trace.add_failure("batch", batch_start, batch_end, e.what());
                summary.configs_considered += kept.size();
                for (const auto& config : kept) {
                    if (skip.count(describe_config(config)) != 0) continue;
                    ++summary.failed[e.what()];
                    ++failed_here;
                }
                if (with_reference) ++summary.reference_failed[e.what()];
                refresh_rates(finished);
                return !interrupt_requested();
            }
            // The batch's calls are drawn back to back from its start, each as long as its runs.
            double cursor = batch_start;
            for (const auto& entry : entries) {
                const std::string label = describe_config(entry.config);
                if (skip.count(label) != 0) continue;
                if (!entry.reference) ++summary.configs_considered;
                attempted.push_back(label);
                if (entry.timing) {
                    const Timing& timing = *entry.timing;
                    double span_ms = 0.0;
                    for (const double sample : timing.samples_ms) span_ms += sample;
                    if (span_ms <= 0.0) span_ms = timing.median_ms;
                    trace.add_timing(label, cursor, cursor + span_ms * 1e3, timing);
                    cursor += span_ms * 1e3;
                    result.timed_configs.push_back({entry.config, timing.median_ms, 1});
                    // The dataset keeps the backend's statistic (Inductor's minimum); the
                    // sidecar describes the runs themselves, and that statistic as time_ms.
                    Timing runs = timing;
                    if (!runs.samples_ms.empty()) summarize_samples(runs);
                    problem_meta[label] = timing_document(runs, plan.timing.warmup);
                    problem_meta[label]["time_ms"] = timing.median_ms;
                    if (entry.reference) {
                        ++summary.references_timed;
                        char text[64];
                        std::snprintf(text, sizeof text, "%s %.4f ms", entry.config.name.c_str(), timing.median_ms);
                        reference_line = text;
                    } else {
                        ++summary.configs_timed;
                    }
                } else {
                    trace.add_failure(label, cursor, cursor, entry.error);
                    const std::string reason = error_category(entry.error);
                    spdlog::debug("{}: {}: {}", state.current, label, entry.error);
                    if (entry.reference) {
                        ++summary.reference_failed[reason];
                    } else {
                        ++summary.failed[reason];
                        ++failed_here;
                    }
                }
            }
            refresh_rates(finished);
            sink.on_config(state);
            return true;
        };

        bool completed = fault_what.empty();
        if (completed && backend.measures_in_batches()) {
            const auto configs = specialize_configs(planned_configs(plan, problem), problem, options.allow_tf32);
            const PruneResult pruned = backend.prune(configs, problem);
            for (const auto& p : pruned.pruned) ++summary.pruned[p.reason];
            pruned_here = pruned.pruned.size();
            completed = time_batch(pruned.kept);
        } else if (completed) {
            const auto configs = specialize_configs(planned_configs(plan, problem), problem, options.allow_tf32);
            summary.configs_considered += configs.size();
            const PruneResult pruned = backend.prune(configs, problem);
            for (const auto& p : pruned.pruned) ++summary.pruned[p.reason];
            pruned_here = pruned.pruned.size();
            for (const auto& config : pruned.kept) {
                if (skip.count(describe_config(config)) != 0) continue;
                if (!time_one(config, false)) {
                    completed = false;
                    break;
                }
            }
            const core::GemmConfig reference = reference_config(problem);
            if (completed && options.time_reference && skip.count(describe_config(reference)) == 0) {
                completed = time_one(reference, true);
            }
        }
        if (!fault_what.empty()) {
            summary.timed_kernel_seconds = backend.timed_kernel_seconds() - kernel_seconds_before;
            complete_summary(run, seconds_between(start, Clock::now()));
            std::string what = "device fault";
            if (!fault_config.empty()) what += " in config " + fault_config;
            what += " on " + describe_problem(problem) + " (" + fault_what +
                    "); the device is unusable in this process. Finished problems are saved; run again to "
                    "resume (collect measures in worker processes, which survive faults, unless --trace-dir "
                    "or the CPU backend keep it in this one)";
            throw CollectionFaulted(what, std::move(summary), std::move(result), std::move(problem_meta),
                                    std::move(attempted), fault_config, fault_what);
        }
        if (!completed) {
            summary.interrupted = true;
            summary.problems_abandoned = 1;
            break;
        }

        ++state.problems_done;
        ++finished;
        if (result.timed_configs.empty()) {
            ++summary.problems_empty;
        } else {
            writer.add(result, problem_meta);
            if (plan.output.empty()) {
                summary.problems_meta[core::meta_problem_key(result.hardware, result.op, result.shape)] = problem_meta;
            }
            publish_result(result);
            ++summary.problems_collected;
        }
        if (!options.trace_dir.empty()) trace.save(trace_path(options.trace_dir, index, problem));
        writer.checkpoint(seconds_between(start, Clock::now()));

        refresh_rates(finished);
        std::ostringstream line;
        line << state.current << ": " << (result.timed_configs.size() - (reference_line.empty() ? 0 : 1))
             << " timed, " << pruned_here << " pruned, " << failed_here << " failed";
        const core::TimedConfig* best = nullptr;
        for (const auto& tc : result.timed_configs) {
            if (!is_reference_config(tc.config) && (best == nullptr || tc.time_ms < best->time_ms)) best = &tc;
        }
        if (best != nullptr) {
            char text[96];
            std::snprintf(text, sizeof text, "; best %s %.4f ms", describe_config(best->config).c_str(),
                          best->time_ms);
            line << text;
        }
        if (!reference_line.empty()) line << "; " << reference_line;
        sink.on_problem_done(state, line.str());
    }

    refresh_rates(finished);
    state.current.clear();
    sink.on_finish(state);
    summary.timed_kernel_seconds = backend.timed_kernel_seconds() - kernel_seconds_before;
    finish_collection(run, seconds_between(start, Clock::now()));
    return std::move(run.summary);
}

std::string format_summary(const CollectionSummary& s) {
    std::ostringstream out;
    out << "Collection summary (" << s.backend << ": " << s.hardware << ")\n";
    out << "  problems: " << s.problems_collected << " collected, " << s.problems_resumed
        << " already in the output, " << s.problems_empty << " without any timing";
    if (s.problems_abandoned > 0) out << ", " << s.problems_abandoned << " abandoned at the interrupt";
    if (s.problems_not_started > 0) {
        out << ", " << s.problems_not_started << " not started (--stop-after; run again to resume)";
    }
    out << " (of " << s.problems_planned << ")\n";
    std::size_t pruned = 0, failed = 0;
    for (const auto& [reason, n] : s.pruned) pruned += n;
    for (const auto& [reason, n] : s.failed) failed += n;
    out << "  configs: " << s.configs_considered << " considered, " << s.configs_timed << " timed, "
        << pruned << " pruned, " << failed << " failed; " << s.references_timed
        << " reference entries\n";
    for (const auto& [reason, n] : s.pruned) out << "    pruned " << n << ": " << reason << "\n";
    for (const auto& [reason, n] : s.failed) out << "    failed " << n << ": " << reason << "\n";
    for (const auto& [reason, n] : s.reference_failed) {
        out << "    reference failed " << n << ": " << reason << "\n";
    }
    char line[160];
    const double rate = s.wall_seconds > 0 ? static_cast<double>(s.configs_timed) / s.wall_seconds : 0.0;
    const double share = s.wall_seconds > 0 ? 100.0 * s.timed_kernel_seconds / s.wall_seconds : 0.0;
    std::snprintf(line, sizeof line,
                  "  time: %.2f s wall, %.1f configs/s, %.1f %% of wall time inside timed kernel runs",
                  s.wall_seconds, rate, share);
    out << line;
    if (s.problems_collected > 0) {
        // Wall time over the problems this run finished: with several workers, the
        // throughput per GEMM rather than any one problem's latency.
        std::snprintf(line, sizeof line, "; %.2f s per GEMM collected",
                      s.wall_seconds / static_cast<double>(s.problems_collected));
        out << line;
    }
    out << "\n";
    for (const auto& failure : s.worker_failures) out << "  worker failure: " << failure << "\n";
    for (const auto& file : s.files) out << "  file: " << file.string() << "\n";
    return out.str();
}

}  // namespace mmt::collect
