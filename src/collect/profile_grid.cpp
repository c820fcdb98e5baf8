#include "matmul_toolkit/collect/profile_grid.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/collect/inductor_backend.hpp"
#include "matmul_toolkit/collect/interrupt.hpp"
#include "matmul_toolkit/collect/problem_generator.hpp"
#include "matmul_toolkit/collect/trace.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/core/json_codec.hpp"

namespace fs = std::filesystem;

namespace mmt::collect {
namespace {

using Json = core::OrderedJson;

constexpr const char* kMetaFile = "meta.json";
constexpr const char* kSummaryFile = "profile_summary.csv";

// Why torch._int_mm (cuBLASLt on CUDA) cannot take the problem, or empty.
std::string int_mm_refusal(const Problem& p) {
    if (p.op != "mm") return "int8 is torch._int_mm: mm only (batch size 1)";
    const auto& s = p.shape;
    if (s.M <= 16 || s.N % 8 != 0 || s.K % 8 != 0 || s.K <= 16)
        return "int8: torch._int_mm takes M > 16, N and K multiples of 8, K > 16";
    return "";
}

template <typename T>
void require_positive(const std::vector<T>& values, const char* option) {
    if (values.empty()) throw core::InputError(option, "needs at least one value");
    for (const auto v : values)
        if (v < 1) throw core::InputError(option, "values must be at least 1, got " + std::to_string(v));
}

// A finished experiment's meta.json, or nullopt when the folder holds none.
std::optional<Json> finished_meta(const fs::path& dir) {
    std::error_code ec;
    if (!fs::is_regular_file(dir / kMetaFile, ec)) return std::nullopt;
    return core::parse_json_text(core::read_file(dir / kMetaFile), (dir / kMetaFile).string());
}

std::string csv_row(const std::vector<std::string>& cells) {
    std::string row;
    for (std::size_t i = 0; i < cells.size(); ++i) {
        if (i) row += ',';
        const bool quote = cells[i].find_first_of(",\"\n") != std::string::npos;
        if (!quote) {
            row += cells[i];
            continue;
        }
        row += '"';
        for (const char c : cells[i]) row += c == '"' ? std::string("\"\"") : std::string(1, c);
        row += '"';
    }
    return row + '\n';
}

std::string format_ms(const Json& meta) {
    if (!meta.contains("time_ms") || meta.at("time_ms").is_null()) return "";
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.6g", meta.at("time_ms").get<double>());
    return buffer;
}

void write_summary(const fs::path& path, const std::vector<Json>& metas) {
    std::string text = csv_row({"experiment", "op", "layout", "B", "M", "N", "K", "dtype", "status", "time_ms",
                                "kernel", "traces", "execution_trace", "reason"});
    for (const auto& m : metas) {
        const auto& p = m.at("problem");
        std::string traces;
        for (const auto& t : m.at("traces")) traces += (traces.empty() ? "" : " ") + t.get<std::string>();
        text += csv_row({m.at("experiment").get<std::string>(), p.at("op").get<std::string>(),
                         p.at("layout").get<std::string>(), std::to_string(p.at("B").get<std::int64_t>()),
                         std::to_string(p.at("M").get<std::int64_t>()), std::to_string(p.at("N").get<std::int64_t>()),
                         std::to_string(p.at("K").get<std::int64_t>()), p.at("dtype").get<std::string>(),
                         m.at("status").get<std::string>(), format_ms(m), m.value("kernel", std::string()), traces,
                         m.value("execution_trace", Json()).is_string() ? m.at("execution_trace").get<std::string>() : "",
                         m.value("reason", std::string())});
    }
    core::write_file_atomically(path, text);
}

// ------------------------------------------------------------------ this binary's backends

class BackendRunner final : public ExperimentRunner {
public:
    explicit BackendRunner(Backend& backend) : m_backend(backend) {}

    std::string backend_name() const override { return m_backend.name() == "cuda" ? "native" : m_backend.name(); }
    std::string hardware_name() const override { return m_backend.hardware_name(); }

    std::string unsupported_reason(const Problem& problem) const override {
        const auto dtypes = m_backend.supported_dtypes();
        if (std::find(dtypes.begin(), dtypes.end(), problem.dtype()) == dtypes.end())
            return "the " + m_backend.name() + " backend has no " + problem.dtype() + " kernel";
        return "";
    }

    ExperimentResult run(const Experiment& e, const fs::path& dir, const ProfileSteps& steps,
                         std::uint64_t seed) override {
        const Problem& p = e.problem;
        m_backend.prepare(p, seed);
        TimingOptions timing;
        timing.warmup = (steps.wait + steps.warmup) * steps.repeat;
        timing.repeat = steps.active * steps.repeat;
        ExperimentResult result;
        ProblemTrace trace(describe_problem(p));
        const auto clock_us = [] {
            return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch())
                .count();
        };
        // The vendor library first (what torch.matmul runs); a dtype it lacks (the CPU's
        // int8) runs the first DEFAULT config the backend keeps.
        std::string reference_error;
        const double start = clock_us();
        try {
            const Timing t = m_backend.time_reference(p, timing);
            trace.add_timing(describe_config(reference_config(p)), start, clock_us(), t);
            result.time_ms = mean(t.samples_ms);
            result.kernel = reference_config(p).name;
        } catch (const core::Error& error) {
            reference_error = error.what();
        }
        if (!result.time_ms) {
            const auto kept = m_backend.prune(specialize_configs(default_configs(), p, false), p).kept;
            if (kept.empty()) {
                result.status = "failed";
                result.reason = "no reference (" + reference_error + ") and no DEFAULT config runs here";
                return result;
            }
            const double config_start = clock_us();
            const Timing t = m_backend.time(p, kept.front(), timing);
            trace.add_timing(describe_config(kept.front()), config_start, clock_us(), t);
            result.time_ms = mean(t.samples_ms);
            result.kernel = describe_config(kept.front());
        }
        const std::string trace_name = "trace_" + m_backend.name() + ".json";
        trace.save(dir / trace_name);
        result.traces = {trace_name};
        result.execution_trace_note =
            "unavailable with the " + backend_name() +
            " backend: a Chakra execution trace records PyTorch ops (run profile with --backend inductor)";
        return result;
    }

private:
    static double mean(const std::vector<double>& values) {
        double sum = 0;
        for (const double v : values) sum += v;
        return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
    }

    Backend& m_backend;
};

// ------------------------------------------------------------------ the Inductor worker

class InductorRunner final : public ExperimentRunner {
public:
    explicit InductorRunner(InductorBackend& backend) : m_backend(backend) {}

    std::string backend_name() const override { return "inductor"; }
    std::string hardware_name() const override { return m_backend.hardware_name(); }
    std::vector<std::pair<std::string, std::string>> versions() const override { return m_backend.environment(); }
    // The worker knows its device (bf16 support); it answers such a problem with a skip.
    std::string unsupported_reason(const Problem&) const override { return ""; }

    ExperimentResult run(const Experiment& e, const fs::path& dir, const ProfileSteps& steps,
                         std::uint64_t seed) override {
        Json settings;
        settings["out_dir"] = fs::absolute(dir).string();
        settings["wait"] = steps.wait;
        settings["warmup"] = steps.warmup;
        settings["active"] = steps.active;
        settings["repeat"] = steps.repeat;
        const Json reply = m_backend.profile(e.problem, seed, settings);
        ExperimentResult result;
        try {
            if (reply.contains("skipped")) {
                result.status = "skipped";
                result.reason = reply.at("skipped").get<std::string>();
                return result;
            }
            for (const auto& t : reply.at("traces")) result.traces.push_back(t.get<std::string>());
            if (reply.contains("execution_trace") && reply.at("execution_trace").is_string())
                result.execution_trace = reply.at("execution_trace").get<std::string>();
            else
                result.execution_trace_note = reply.value("execution_trace_note", std::string("not written"));
            if (reply.contains("time_ms") && reply.at("time_ms").is_number())
                result.time_ms = reply.at("time_ms").get<double>();
            result.kernel = reply.value("kernel", std::string());
        } catch (const std::exception& error) {
            throw core::Error("inductor worker", std::string("malformed profile reply: ") + error.what());
        }
        for (const auto& name : result.traces) {
            std::error_code ec;
            if (!fs::is_regular_file(dir / name, ec))
                throw core::Error("inductor worker", "reported trace " + name + " that is not in " + dir.string());
        }
        return result;
    }

private:
    InductorBackend& m_backend;
};

}  // namespace

std::vector<std::int64_t> profile_search_sizes() { return {256, 512, 1024, 2048, 4096}; }
std::vector<std::string> profile_search_dtypes() { return {"float32", "float16", "bfloat16", "int8"}; }
std::vector<std::string> profile_search_layouts() { return {"nn", "nt", "tn", "tt"}; }
std::vector<std::int64_t> profile_search_batch_sizes() { return {1, 2, 4, 8, 16}; }

std::string experiment_name(std::size_t index) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "config_%04zu", index + 1);
    return buffer;
}

std::vector<Experiment> profile_grid(const ProfileAxes& axes) {
    require_positive(axes.sizes, "--sizes");
    require_positive(axes.batch_sizes, "--batch-sizes");
    if (axes.dtypes.empty()) throw core::InputError("--dtypes", "needs at least one dtype");
    for (const auto& d : axes.dtypes)
        if (d != "float32" && d != "float16" && d != "bfloat16" && d != "int8")
            throw core::InputError("--dtypes", "unknown dtype '" + d + "' (expected float32, float16, bfloat16, int8)");
    if (axes.layouts.empty()) throw core::InputError("--layouts", "needs at least one layout");
    for (const auto& l : axes.layouts)
        if (!core::is_known_layout(l)) throw core::InputError("--layouts", "unknown layout '" + l + "'");

    std::vector<std::array<std::int64_t, 3>> sizes;
    for (const auto m : axes.sizes) {
        if (!axes.rectangular) {
            sizes.push_back({m, m, m});
            continue;
        }
        for (const auto n : axes.sizes)
            for (const auto k : axes.sizes) sizes.push_back({m, n, k});
    }
    std::vector<Experiment> out;
    for (const auto batch : axes.batch_sizes)
        for (const auto& dtype : axes.dtypes)
            for (const auto& layout : axes.layouts)
                for (const auto& [m, n, k] : sizes) {
                    Experiment e;
                    e.name = experiment_name(out.size());
                    e.problem = make_problem(batch > 1 ? "bmm" : "mm", layout, batch, m, n, k, dtype);
                    if (dtype == "int8") e.skip_reason = int_mm_refusal(e.problem);
                    out.push_back(std::move(e));
                }
    return out;
}

std::unique_ptr<ExperimentRunner> make_backend_runner(Backend& backend) {
    return std::make_unique<BackendRunner>(backend);
}

std::unique_ptr<ExperimentRunner> make_inductor_runner(InductorBackend& backend) {
    return std::make_unique<InductorRunner>(backend);
}

ProfileSummary run_profile(const std::vector<Experiment>& experiments, const ProfileRunOptions& options,
                           ExperimentRunner& runner) {
    if (options.steps.wait < 0 || options.steps.warmup < 0 || options.steps.active < 1 || options.steps.repeat < 1)
        throw core::InputError("--active", "the schedule needs wait, warmup >= 0 and active, repeat >= 1");
    std::error_code ec;
    fs::create_directories(options.output_dir, ec);
    if (ec) throw core::InputError(options.output_dir.string(), "cannot create the output folder: " + ec.message());

    ProfileSummary summary;
    summary.summary_csv = options.output_dir / kSummaryFile;
    std::vector<Json> metas;
    // Finished folders first: a folder of another grid stops the run before anything runs.
    std::vector<std::optional<Json>> finished;
    for (const auto& e : experiments) {
        const fs::path dir = options.output_dir / e.name;
        auto meta = finished_meta(dir);
        if (meta && meta->value("problem", Json()) != problem_to_protocol(e.problem)) {
            throw core::InputError(dir.string(), "holds another experiment (" + meta->value("problem", Json()).dump() +
                                                     ") than this grid's " + describe_problem(e.problem) +
                                                     ": profile into a new --output-dir");
        }
        finished.push_back(std::move(meta));
    }

    for (std::size_t i = 0; i < experiments.size(); ++i) {
        const Experiment& e = experiments[i];
        const fs::path dir = options.output_dir / e.name;
        const std::string position = "[" + std::to_string(i + 1) + "/" + std::to_string(experiments.size()) + "] ";
        if (finished[i]) {
            ++summary.resumed;
            metas.push_back(*finished[i]);
            spdlog::info("{}{} {}: done in an earlier run", position, e.name, describe_problem(e.problem));
            continue;
        }
        if (interrupt_requested()) {
            summary.interrupted = true;
            break;
        }
        ExperimentResult result;
        std::string skip = e.skip_reason.empty() ? runner.unsupported_reason(e.problem) : e.skip_reason;
        if (!skip.empty()) {
            result.status = "skipped";
            result.reason = skip;
        } else {
            fs::create_directories(dir, ec);
            if (ec) throw core::InputError(dir.string(), "cannot create the experiment folder: " + ec.message());
            try {
                result = runner.run(e, dir, options.steps, options.seed + i);
            } catch (const core::Interrupted&) {
                summary.interrupted = true;
                break;
            } catch (const core::InputError&) {
                throw;
            } catch (const std::exception& error) {
                result = ExperimentResult{};
                result.status = "failed";
                result.reason = error.what();
            }
        }
        Json meta;
        meta["experiment"] = e.name;
        meta["status"] = result.status;
        if (!result.reason.empty()) meta["reason"] = result.reason;
        meta["problem"] = problem_to_protocol(e.problem);
        meta["backend"] = runner.backend_name();
        meta["hardware"] = runner.hardware_name();
        for (const auto& [key, value] : runner.versions()) meta["versions"][key] = value;
        meta["seed"] = options.seed + i;
        meta["schedule"] = {{"wait", options.steps.wait},
                            {"warmup", options.steps.warmup},
                            {"active", options.steps.active},
                            {"repeat", options.steps.repeat}};
        meta["kernel"] = result.kernel;
        meta["time_ms"] = result.time_ms ? Json(*result.time_ms) : Json();
        meta["traces"] = result.traces;
        meta["execution_trace"] = result.execution_trace.empty() ? Json() : Json(result.execution_trace);
        if (result.execution_trace.empty() && result.status == "done")
            meta["execution_trace_unavailable"] = result.execution_trace_note;
        // Skipped experiments get a folder too: the grid's numbering stays whole on disk.
        fs::create_directories(dir, ec);
        core::write_file_atomically(dir / kMetaFile, core::python_json_dumps(meta, 2));
        metas.push_back(meta);
        write_summary(summary.summary_csv, metas);
        if (result.status == "done") {
            ++summary.done;
            spdlog::info("{}{} {}: {:.4f} ms ({}), {}", position, e.name, describe_problem(e.problem), result.time_ms.value_or(0),
                         result.kernel, result.traces.empty() ? std::string("no trace") : result.traces.front());
        } else if (result.status == "skipped") {
            ++summary.skipped;
            spdlog::info("{}{} {}: skipped: {}", position, e.name, describe_problem(e.problem), result.reason);
        } else {
            ++summary.failed;
            spdlog::warn("{}{} {}: failed: {}", position, e.name, describe_problem(e.problem), result.reason);
        }
    }
    if (!metas.empty()) write_summary(summary.summary_csv, metas);
    return summary;
}

}  // namespace mmt::collect
