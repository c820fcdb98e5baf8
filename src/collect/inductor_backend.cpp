#include "matmul_toolkit/collect/inductor_backend.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <spdlog/spdlog.h>

#include "matmul_toolkit/build_config.hpp"
#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/collect/problem_generator.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/core/json_codec.hpp"
#include "python_worker.hpp"

namespace fs = std::filesystem;

namespace mmt::collect {
namespace {

using Json = core::OrderedJson;
using detail::ChildProcess;

bool holds_package(const fs::path& dir) {
    std::error_code ec;
    return !dir.empty() && fs::is_regular_file(dir / "matmul_toolkit_inductor" / "worker.py", ec);
}

Json config_to_protocol(const core::GemmConfig& c) {
    Json j;
    j["block_m"] = c.block_m;
    j["block_n"] = c.block_n;
    j["block_k"] = c.block_k;
    j["group_m"] = c.group_m;
    j["num_stages"] = c.num_stages;
    j["num_warps"] = c.num_warps;
    j["even_k"] = c.even_k;
    j["allow_tf32"] = c.allow_tf32;
    j["use_fast_accum"] = c.use_fast_accum;
    j["acc_type"] = c.acc_type;
    return j;
}

core::GemmConfig config_from_protocol(const Json& j, const std::string& name) {
    core::GemmConfig c;
    c.name = name;
    c.block_m = j.at("block_m").get<int>();
    c.block_n = j.at("block_n").get<int>();
    c.block_k = j.at("block_k").get<int>();
    c.group_m = j.at("group_m").get<int>();
    c.num_stages = j.at("num_stages").get<int>();
    c.num_warps = j.at("num_warps").get<int>();
    c.even_k = j.value("even_k", c.even_k);
    c.allow_tf32 = j.value("allow_tf32", c.allow_tf32);
    c.use_fast_accum = j.value("use_fast_accum", c.use_fast_accum);
    c.acc_type = j.value("acc_type", c.acc_type);
    return c;
}

// Inductor's benchmarker reports its minimum; that is the dataset's time. The runs it made
// give the sidecar its spread.
Timing timing_from_protocol(const Json& entry) {
    Timing t;
    t.median_ms = entry.at("time_ms").get<double>();
    if (entry.contains("samples_ms") && entry.at("samples_ms").is_array()) {
        t.samples_ms = entry.at("samples_ms").get<std::vector<double>>();
    }
    if (t.samples_ms.empty()) t.samples_ms = {t.median_ms};
    t.min_ms = t.max_ms = t.samples_ms.front();
    for (const double s : t.samples_ms) {
        t.min_ms = std::min(t.min_ms, s);
        t.max_ms = std::max(t.max_ms, s);
    }
    return t;
}

std::string entry_name(const std::string& template_name, const Problem& problem) {
    if (template_name == "mm" || template_name == "bmm") return config_name(problem.op);
    return problem.op + "_" + template_name + "_config";
}

}  // namespace

core::OrderedJson problem_to_protocol(const Problem& p) {
    Json j;
    j["op"] = p.op;
    j["layout"] = p.layout;
    j["B"] = p.shape.B;
    j["M"] = p.shape.M;
    j["N"] = p.shape.N;
    j["K"] = p.shape.K;
    j["dtype"] = p.dtype();
    j["alpha"] = p.alpha;
    j["beta"] = p.beta;
    return j;
}

fs::path find_inductor_package() {
    std::vector<fs::path> candidates;
    if (const char* env = std::getenv("MMT_INDUCTOR_PYTHONPATH"); env != nullptr && *env != '\0') {
        candidates.emplace_back(env);
    }
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        candidates.push_back(exe.parent_path() / "python");
        candidates.push_back(exe.parent_path() / ".." / "share" / "matmul_toolkit" / "python");
    }
    candidates.push_back(fs::path(MMT_SOURCE_DIR) / "python");
    for (const auto& dir : candidates) {
        if (holds_package(dir)) return fs::weakly_canonical(dir, ec);
    }
    return {};
}

bool inductor_python_usable(const std::string& python, std::string* why) {
    auto fail = [&](const std::string& text) {
        if (why != nullptr) *why = text;
        return false;
    };
    // One JSON line; nothing imported at the top so a missing module is reported, not raised.
    static const char* kProbe =
        "import json, sys\n"
        "out = {'python': sys.version.split()[0]}\n"
        "try:\n"
        "    import torch\n"
        "    out['torch'] = torch.__version__\n"
        "    out['cuda'] = bool(torch.cuda.is_available())\n"
        "except Exception as e:\n"
        "    out['error'] = 'no torch: %s' % e\n"
        "try:\n"
        "    import triton\n"
        "    out['triton'] = triton.__version__\n"
        "except Exception as e:\n"
        "    out.setdefault('error', 'no triton: %s' % e)\n"
        "print(json.dumps(out), flush=True)\n";
    std::string line;
    try {
        ChildProcess probe({python, "-c", kProbe}, {}, /*discard_stderr=*/true);
        probe.send("");
        const auto read = probe.read_line(line, std::chrono::seconds(60), false);
        if (read != ChildProcess::Read::line) {
            const std::string status = read == ChildProcess::Read::timed_out ? "took longer than 60 s"
                                                                             : probe.reap(std::chrono::seconds(5));
            probe.kill_and_reap();
            if (status == "exited with code 127") return fail("cannot run " + python);
            return fail("the probe " + status);
        }
    } catch (const std::exception& e) {
        return fail(e.what());
    }
    Json found;
    try {
        found = core::parse_json_text(line, python);
    } catch (const std::exception& e) {
        return fail(std::string("unreadable probe answer: ") + e.what());
    }
    if (found.contains("error")) return fail(found.at("error").get<std::string>());
    const std::string torch = found.value("torch", std::string());
    const std::string versions = "torch " + torch + ", triton " + found.value("triton", std::string());
    int major = 0, minor = 0;
    if (std::sscanf(torch.c_str(), "%d.%d", &major, &minor) != 2 || major < 2 || (major == 2 && minor < 9)) {
        return fail(versions + ": torch 2.9 or newer is needed");
    }
    if (!found.value("cuda", false)) return fail(versions + ": torch sees no CUDA device");
    if (why != nullptr) *why = versions;
    return true;
}

InductorBackend::InductorBackend(InductorBackendOptions options) : m_options(std::move(options)) {
    if (m_options.worker_timeout_s < 1) throw core::InputError("--worker-timeout", "must be at least 1 second");
    if (m_options.package_dir.empty()) m_options.package_dir = find_inductor_package();
    if (m_options.worker_command.empty() && !holds_package(m_options.package_dir)) {
        throw core::InputError("--backend", "inductor: the matmul_toolkit_inductor package was not found "
                                            "(set MMT_INDUCTOR_PYTHONPATH to the folder holding it)");
    }
    start_worker();
}

InductorBackend::~InductorBackend() = default;

std::string InductorBackend::worker_label() const {
    return m_options.worker_command.empty() ? m_options.python : m_options.worker_command.front();
}

void InductorBackend::start_worker() {
    std::vector<std::string> argv = m_options.worker_command;
    if (argv.empty()) argv = {m_options.python, "-m", "matmul_toolkit_inductor.worker"};
    std::vector<std::pair<std::string, std::string>> env;
    if (!m_options.package_dir.empty()) env.emplace_back("PYTHONPATH", m_options.package_dir.string());
    const std::string subject = "inductor: " + worker_label();
    try {
        m_worker = std::make_unique<ChildProcess>(argv, env);
    } catch (const std::exception& e) {
        throw core::InputError("--backend", subject + ": " + e.what());
    }
    auto refuse = [&](const std::string& what) -> void {
        m_worker->kill_and_reap();
        m_worker.reset();
        throw core::InputError("--backend", subject + ": " + what);
    };
    const Json hello{{"type", "hello"}, {"protocol", kInductorProtocol}, {"device_index", m_options.device_index}};
    m_worker->send(hello.dump());
    std::string line;
    for (;;) {
        const auto read = m_worker->read_line(line, std::chrono::seconds(m_options.hello_timeout_s), true);
        if (read == ChildProcess::Read::interrupted) {
            m_worker->kill_and_reap();
            m_worker.reset();
            throw core::Interrupted("interrupted while the inductor worker started");
        }
        if (read == ChildProcess::Read::timed_out) {
            refuse("the worker did not answer its hello within " + std::to_string(m_options.hello_timeout_s) + " s");
        }
        if (read == ChildProcess::Read::ended) {
            const std::string status = m_worker->reap(std::chrono::seconds(5));
            refuse(status == "exited with code 127" ? "the worker could not be started"
                                                    : "the worker " + status + " before its hello (its log above says why)");
        }
        if (!line.empty() && line.front() == '{') break;
        spdlog::debug("inductor worker stdout: {}", line);
    }
    Json reply;
    try {
        reply = core::parse_json_text(line, "hello");
    } catch (const std::exception& e) {
        refuse(std::string("unreadable hello: ") + e.what());
    }
    const std::string type = reply.value("type", std::string());
    if (type == "error") refuse(reply.value("error", std::string("the worker refused its hello")));
    if (type != "hello") refuse("expected a hello, got: " + line.substr(0, 200));
    if (reply.value("protocol", -1) != kInductorProtocol) {
        refuse("the worker speaks protocol " + reply.value("protocol", Json()).dump() + ", this binary " +
               std::to_string(kInductorProtocol));
    }
    try {
        const std::string hardware = reply.at("hardware").get<std::string>();
        if (!m_hardware.empty() && hardware != m_hardware) {
            refuse("a new worker reports " + hardware + ", the first one " + m_hardware);
        }
        m_hardware = hardware;
        m_versions.clear();
        if (reply.contains("versions")) {
            for (const auto& [key, value] : reply.at("versions").items()) {
                m_versions.emplace_back(key, value.is_string() ? value.get<std::string>() : value.dump());
            }
        }
    } catch (const core::InputError&) {
        throw;
    } catch (const std::exception& e) {
        refuse(std::string("malformed hello: ") + e.what());
    }
}

void InductorBackend::stop_worker() {
    if (m_worker) m_worker->reap(std::chrono::seconds(10));
    m_worker.reset();
}

CollectionDefaults InductorBackend::collection_defaults() const {
    CollectionDefaults d;
    // Inductor's benchmarker: 100 runs at most, capped at 25 ms.
    d.timing.warmup = 1;
    d.timing.repeat = 100;
    d.max_size = 4096;
    d.dtypes = {"bfloat16", "float16"};
    return d;
}

PruneResult InductorBackend::prune(const std::vector<core::GemmConfig>& configs, const Problem&) const {
    return {configs, {}};
}

void InductorBackend::prepare(const Problem&, std::uint64_t seed) { m_seed = seed; }

Timing InductorBackend::time(const Problem&, const core::GemmConfig&, const TimingOptions&) {
    throw core::Error("inductor backend", "measures whole problems (measure_batch)");
}

Timing InductorBackend::time_reference(const Problem&, const TimingOptions&) {
    throw core::Error("inductor backend", "measures whole problems (measure_batch)");
}

std::vector<std::pair<std::string, std::string>> InductorBackend::environment() const {
    std::vector<std::pair<std::string, std::string>> env{{"python_executable", worker_label()}};
    env.insert(env.end(), m_versions.begin(), m_versions.end());
    return env;
}

void InductorBackend::replace_worker(const std::string& category, const std::string& what, const Problem& problem) {
    m_worker->kill_and_reap();
    m_worker.reset();
    ++m_restarts;
    spdlog::error("inductor worker on device {}: {} on {}; {}", m_options.device_index,
                  category.empty() ? what : category + ": " + what, describe_problem(problem),
                  m_restarts > kInductorMaxRestarts ? "no new worker is started" : "a new worker takes its place");
    throw core::Error(category, what);
}

core::OrderedJson InductorBackend::exchange(core::OrderedJson request, const Problem& problem) {
    if (!m_worker) {
        if (m_restarts > kInductorMaxRestarts) {
            throw core::Error("inductor worker", "died " + std::to_string(m_restarts) + " times; no new one is started");
        }
        start_worker();
    }
    const std::int64_t id = m_next_id++;
    request["id"] = id;
    (void)m_worker->send(request.dump());  // a worker that is gone shows as ended below
    std::string line;
    for (;;) {
        const auto read = m_worker->read_line(line, std::chrono::seconds(m_options.worker_timeout_s), true);
        if (read == ChildProcess::Read::interrupted) {
            m_worker->kill_and_reap();
            m_worker.reset();
            throw core::Interrupted("interrupted while the inductor worker worked on " + describe_problem(problem));
        }
        // A worker that died, hung or talks nonsense is replaced; its problem fails.
        if (read == ChildProcess::Read::timed_out) {
            replace_worker("", "worker timed out after " + std::to_string(m_options.worker_timeout_s) + " s", problem);
        }
        if (read == ChildProcess::Read::ended) {
            const std::string status = m_worker->reap(std::chrono::seconds(5));
            replace_worker("worker died", status, problem);
        }
        if (!line.empty() && line.front() == '{') break;
        spdlog::debug("inductor worker stdout: {}", line);
    }
    Json reply;
    try {
        reply = core::parse_json_text(line, "inductor worker reply");
        if (reply.contains("id") && reply.at("id").get<std::int64_t>() != id) {
            throw core::Error("", "reply to request " + reply.at("id").dump() + ", expected " + std::to_string(id));
        }
        const std::string type = reply.at("type").get<std::string>();
        if (type != "error" && type != request.at("type").get<std::string>()) {
            throw core::Error("", "unexpected reply type '" + type + "'");
        }
    } catch (const std::exception& e) {
        replace_worker("inductor worker", std::string("garbled reply (") + e.what() + "): " + line.substr(0, 200),
                       problem);
    }
    if (reply.at("type") == "error") {
        throw core::Error("inductor worker", reply.value("error", std::string("the worker could not do the request")));
    }
    return reply;
}

core::OrderedJson InductorBackend::profile(const Problem& problem, std::uint64_t seed, core::OrderedJson settings) {
    settings["type"] = "profile";
    settings["problem"] = problem_to_protocol(problem);
    settings["seed"] = seed;
    return exchange(std::move(settings), problem);
}

std::vector<Backend::BatchEntry> InductorBackend::measure_batch(const Problem& problem,
                                                                const std::vector<core::GemmConfig>& kept_configs,
                                                                const std::string& own_space, bool with_reference,
                                                                const TimingOptions& options) {
    // The engine specialised the configs: ALLOW_TF32 is set on them when the run allows it.
    bool allow_tf32 = false;
    Json configs = Json::array();
    for (const auto& c : kept_configs) {
        allow_tf32 = allow_tf32 || c.allow_tf32;
        if (own_space.empty()) configs.push_back(config_to_protocol(c));
    }
    Json request;
    request["type"] = "measure";
    request["problem"] = problem_to_protocol(problem);
    request["search_space"] = own_space.empty() ? Json() : Json(own_space);
    request["configs"] = std::move(configs);
    request["reference"] = with_reference;
    request["allow_tf32"] = allow_tf32;
    request["seed"] = m_seed;
    request["repeat"] = options.repeat;

    const Json reply = exchange(std::move(request), problem);
    std::vector<BatchEntry> entries;
    try {
        for (const auto& e : reply.at("entries")) {
            BatchEntry entry;
            const std::string template_name = e.at("template").get<std::string>();
            entry.reference = template_name == "aten";
            entry.config = entry.reference ? reference_config(problem)
                                           : config_from_protocol(e.at("config"), entry_name(template_name, problem));
            if (e.contains("error") && !e.at("error").is_null()) {
                entry.error = e.at("error").get<std::string>();
            } else {
                entry.timing = timing_from_protocol(e);
                for (const double s : entry.timing->samples_ms) m_timed_seconds += s / 1e3;
            }
            entries.push_back(std::move(entry));
        }
    } catch (const std::exception& e) {
        replace_worker("inductor worker", std::string("garbled reply (") + e.what() + "): " + reply.dump().substr(0, 200),
                       problem);
    }
    return entries;
}

}  // namespace mmt::collect
