#include "matmul_toolkit/collect/worker_pool.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <istream>
#include <ostream>
#include <set>
#include <sstream>

#include <spdlog/spdlog.h>

#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/collect/dataset_collector.hpp"
#include "matmul_toolkit/collect/interrupt.hpp"
#include "matmul_toolkit/core/json_codec.hpp"
#include "output_writer.hpp"

namespace mmt::collect {
namespace {

using Clock = std::chrono::steady_clock;
using Json = core::OrderedJson;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// Only what changes how one problem is measured travels to the workers.
Json options_to_json(const CollectOptions& o) {
    Json j;
    j["search_space"] = search_space_name(o.search_space);
    j["configs_file"] = o.configs_file.string();
    j["search_mode"] = o.search_mode;
    j["allow_tf32"] = o.allow_tf32;
    j["time_reference"] = o.time_reference;
    j["warmup"] = o.warmup ? Json(*o.warmup) : Json();
    j["repeat"] = o.repeat ? Json(*o.repeat) : Json();
    j["seed"] = o.seed;
    return j;
}

CollectOptions options_from_json(const Json& j) {
    CollectOptions o;
    o.search_space = parse_search_space(j.at("search_space").get<std::string>());
    o.configs_file = j.at("configs_file").get<std::string>();
    o.search_mode = j.at("search_mode").get<std::string>();
    o.allow_tf32 = j.at("allow_tf32").get<bool>();
    o.time_reference = j.at("time_reference").get<bool>();
    if (!j.at("warmup").is_null()) o.warmup = j.at("warmup").get<int>();
    if (!j.at("repeat").is_null()) o.repeat = j.at("repeat").get<int>();
    o.seed = j.at("seed").get<std::uint64_t>();
    return o;
}

Json problem_to_json(const Problem& p) {
    return {{"op", p.op}, {"layout", p.layout}, {"shape", core::shape_key(p.shape)},
            {"alpha", p.alpha}, {"beta", p.beta}};
}

Problem problem_from_json(const Json& j) {
    Problem p;
    p.op = j.at("op").get<std::string>();
    p.layout = j.at("layout").get<std::string>();
    p.shape = core::parse_shape_key(j.at("shape").get<std::string>(), "worker request");
    p.alpha = j.at("alpha").get<float>();
    p.beta = j.at("beta").get<float>();
    return p;
}

template <typename Map>
void add_counts(Map& into, const Json& from) {
    for (const auto& [reason, n] : from.items()) into[reason] += n.template get<std::size_t>();
}

std::string describe_status(int status) {
    if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
    if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
    return "stopped";
}

bool write_all(int fd, const std::string& text) {
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<std::size_t>(n);
    }
    return true;
}

struct Worker {
    int device = 0;
    pid_t pid = -1;
    int to = -1;    // its stdin
    int from = -1;  // its stdout
    std::string buffer;
    long current = -1;  // index into the plan's problems, -1 when idle
    bool alive = false;
    int crashes = 0;    // workers on this device that died so far
};

Worker spawn(const WorkerPoolOptions& pool, int device) {
    int to[2], from[2];
    if (::pipe2(to, O_CLOEXEC) != 0 || ::pipe2(from, O_CLOEXEC) != 0) {
        throw core::Error("--devices", std::string("pipe: ") + std::strerror(errno));
    }
    std::vector<std::string> args = pool.command;
    args.push_back("--device-index");
    args.push_back(std::to_string(device));
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) throw core::Error("--devices", std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        ::dup2(to[0], 0);
        ::dup2(from[1], 1);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    ::close(to[0]);
    ::close(from[1]);
    Worker w;
    w.device = device;
    w.pid = pid;
    w.to = to[1];
    w.from = from[0];
    w.alive = true;
    return w;
}

// A worker that reported a device fault exits on its own (its teardown may take a moment:
// kernel cache threads, NVRTC processes); one that hangs is killed.
void reap(pid_t pid) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
        const pid_t done = ::waitpid(pid, nullptr, WNOHANG);
        if (done == pid || (done < 0 && errno != EINTR)) return;
        ::usleep(20000);
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
}

// A worker that dies (crash, kill) is replaced this many times per device, so a run on
// one device survives a crash too; past that the device is left out.
constexpr int kMaxCrashRestarts = 2;

// Each fault costs a worker restart; a problem that faults this often is kept with what
// was measured (a device faulting on everything must not restart workers forever).
constexpr int kMaxFaultsPerProblem = 8;

// Writes to a worker that died must fail with EPIPE, not end the parent.
class IgnoreSigpipe {
public:
    IgnoreSigpipe() {
        struct sigaction ignore {};
        ignore.sa_handler = SIG_IGN;
        ::sigaction(SIGPIPE, &ignore, &m_previous);
    }
    ~IgnoreSigpipe() { ::sigaction(SIGPIPE, &m_previous, nullptr); }

private:
    struct sigaction m_previous {};
};

}  // namespace

std::vector<int> parse_devices(const std::string& text, int available) {
    std::vector<int> devices;
    if (text == "all") {
        if (available < 1) throw core::InputError("--devices", "all: no device available");
        for (int i = 0; i < available; ++i) devices.push_back(i);
        return devices;
    }
    std::vector<std::string> items;
    for (std::size_t begin = 0;;) {
        const std::size_t comma = text.find(',', begin);
        items.push_back(text.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin));
        if (comma == std::string::npos) break;
        begin = comma + 1;
    }
    for (const auto& item : items) {
        std::size_t used = 0;
        int device = -1;
        try {
            device = std::stoi(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (item.empty() || used != item.size() || device < 0) {
            throw core::InputError("--devices", "'" + item + "' is not a device index (expected 0,1,... or all)");
        }
        if (device >= available) {
            throw core::InputError("--devices", "device " + item + " is not available (" +
                                                    std::to_string(available) + " devices)");
        }
        for (const int d : devices) {
            if (d == device) throw core::InputError("--devices", "device " + item + " is listed twice");
        }
        devices.push_back(device);
    }
    if (devices.empty()) throw core::InputError("--devices", "no device given");
    return devices;
}

bool serve_worker(Backend& backend, std::istream& in, std::ostream& out) {
    std::string line;
    if (!std::getline(in, line)) return false;
    const CollectOptions base = options_from_json(core::parse_json_text(line, "worker options"));
    try {
        // The problems the parent expects to hand this worker, in order: the CUDA backend
        // starts building their kernels now (each problem in hand still plans itself first).
        const Json header = core::parse_json_text(line, "worker options");
        if (header.contains("plan") && !header.at("plan").empty()) {
            CollectOptions planned = base;
            for (const auto& p : header.at("plan")) planned.problems.push_back(problem_from_json(p));
            const CollectionPlan all = plan_collection(planned, backend);
            backend.plan(all.problems, [&](const Problem& p) {
                return specialize_configs(planned_configs(all, p), p, base.allow_tf32);
            });
        }
    } catch (const std::exception& e) {
        spdlog::debug("worker: no kernel plan ({})", e.what());
    }
    auto add_summary = [](Json& reply, const CollectionSummary& s) {
        reply["configs_considered"] = s.configs_considered;
        reply["configs_timed"] = s.configs_timed;
        reply["references_timed"] = s.references_timed;
        reply["pruned"] = s.pruned;
        reply["failed"] = s.failed;
        reply["reference_failed"] = s.reference_failed;
        reply["timed_kernel_seconds"] = s.timed_kernel_seconds;
    };
    while (std::getline(in, line)) {
        const Json request = core::parse_json_text(line, "worker request");
        Json reply;
        reply["index"] = request.at("index");
        reply["hardware"] = backend.hardware_name();
        try {
            CollectOptions options = base;
            options.problems = {problem_from_json(request.at("problem"))};
            if (request.contains("skip")) options.skip_configs = request.at("skip").get<std::vector<std::string>>();
            const CollectionSummary s = run_collection(options, backend);
            reply["dataset"] = core::dataset_to_document(s.dataset);
            reply["meta"] = s.problems_meta;
            add_summary(reply, s);
        } catch (const CollectionFaulted& e) {
            // The device is unusable: report what was measured and which configs were
            // tried, then stop; the parent starts a fresh worker for the rest.
            const ProblemResult& partial = e.partial();
            DatasetCollector measured(partial.hardware);
            if (!partial.timed_configs.empty()) measured.add_problem(partial.op, partial.shape, partial.timed_configs);
            reply["dataset"] = core::dataset_to_document(measured.get_dataset());
            reply["meta"] = Json::object();
            reply["meta"][core::meta_problem_key(partial.hardware, partial.op, partial.shape)] = e.partial_meta();
            add_summary(reply, e.summary());
            reply["fault"] = {{"config", e.config()}, {"error", e.cause()}};
            reply["attempted"] = e.attempted();
            out << reply.dump() << '\n' << std::flush;
            return true;
        } catch (const core::Interrupted&) {
            throw;
        } catch (const std::exception& e) {
            reply["error"] = e.what();
        }
        out << reply.dump() << '\n' << std::flush;
    }
    return false;
}

CollectionSummary run_worker_collection(const CollectOptions& options, const Backend& backend,
                                        const WorkerPoolOptions& pool, ProgressSink* progress) {
    const auto start = Clock::now();
    auto silent = make_silent_progress();
    ProgressSink& sink = progress != nullptr ? *progress : *silent;
    if (!options.trace_dir.empty()) {
        throw core::InputError("--trace-dir", "is not available with --devices (trace one device at a time)");
    }
    if (pool.devices.empty()) throw core::InputError("--devices", "no device given");
    if (pool.command.empty()) throw core::Error("--devices", "no worker command");

    CollectionStart run = start_collection(options, backend);
    const CollectionPlan& plan = run.plan;
    CollectionSummary& summary = run.summary;
    OutputWriter& writer = *run.writer;
    ProgressState& state = run.progress;
    std::deque<std::size_t> queue(run.pending.begin(), run.pending.end());

    std::size_t finished = 0;
    auto refresh_rates = [&] { update_rates(state, seconds_since(start), summary.configs_timed, finished); };
    sink.on_start(state);

    IgnoreSigpipe ignore_sigpipe;
    std::vector<Worker> workers;
    // Each worker also gets the problems still queued that it will most likely be handed
    // (every n-th for n workers), so its backend can build their kernels ahead.
    auto header_for = [&](std::size_t slot) {
        Json header = options_to_json(options);
        const auto n = pool.devices.size();
        Json planned = Json::array();
        for (std::size_t i = slot; i < queue.size(); i += n) planned.push_back(problem_to_json(plan.problems[queue[i]]));
        header["plan"] = std::move(planned);
        return header.dump() + "\n";
    };
    // Slot i runs on pool.devices[i] (a device may have several slots).
    auto start_worker = [&](std::size_t slot) {
        Worker w = spawn(pool, pool.devices[slot]);
        (void)write_all(w.to, header_for(slot));  // a worker that is gone fails its first request
        return w;
    };
    workers.reserve(pool.devices.size());
    for (std::size_t slot = 0; slot < pool.devices.size(); ++slot) workers.push_back(start_worker(slot));
    auto slot_of = [&](const Worker& w) { return static_cast<std::size_t>(&w - workers.data()); };
    spdlog::info("{} workers on {} devices", workers.size(), backend.name());

    // Problems resumed after device faults: what earlier workers measured, and the configs
    // they tried (never tried again).
    struct Resume {
        std::vector<core::TimedConfig> timed;
        Json meta = Json::object();
        std::vector<std::string> skip;
        int faults = 0;
    };
    std::map<std::size_t, Resume> resumes;

    // Writes a problem's result (or counts it empty) and reports it.
    auto finalize = [&](std::size_t index, ProblemResult result, const Json& meta, const std::string& line) {
        ++state.problems_done;
        ++finished;
        if (result.timed_configs.empty()) {
            ++summary.problems_empty;
        } else {
            writer.add(result, meta);
            publish_result(result);
            ++summary.problems_collected;
        }
        resumes.erase(index);
        writer.checkpoint(seconds_since(start));
        refresh_rates();
        sink.on_problem_done(state, line);
    };

    std::set<std::size_t> retried;
    auto bury = [&](Worker& w) {
        w.alive = false;
        ::close(w.to);
        ::close(w.from);
        int status = 0;
        ::waitpid(w.pid, &status, 0);
        if (interrupt_requested()) return;
        std::string what = "worker on device " + std::to_string(w.device) + " (pid " + std::to_string(w.pid) +
                           ") " + describe_status(status);
        if (w.current >= 0) {
            const auto index = static_cast<std::size_t>(w.current);
            what += " while measuring " + describe_problem(plan.problems[index]);
            if (retried.insert(index).second) {
                queue.push_front(index);
                what += "; retrying it on another worker";
            } else {
                ++summary.failed["a worker died on this problem twice"];
                auto it = resumes.find(index);
                ProblemResult result{summary.hardware, plan.problems[index].op_key(), plan.problems[index].shape,
                                     it != resumes.end() ? it->second.timed : std::vector<core::TimedConfig>{}};
                const Json meta = it != resumes.end() ? it->second.meta : Json::object();
                what += " for the second time; giving it up";
                finalize(index, std::move(result), meta, describe_problem(plan.problems[index]) + ": given up");
            }
        }
        w.current = -1;
        if (w.crashes < kMaxCrashRestarts) {
            const int crashes = w.crashes + 1;
            w = start_worker(slot_of(w));
            w.crashes = crashes;
            what += "; a new worker takes its place";
        } else {
            what += "; no new worker on this device (" + std::to_string(w.crashes + 1) + " died)";
        }
        spdlog::error("{}", what);
        summary.worker_failures.push_back(what);
    };
    // A worker that reported a device fault exits by itself; a fresh one takes its place.
    auto restart = [&](Worker& w) {
        ::close(w.to);
        ::close(w.from);
        reap(w.pid);
        const int device = w.device;
        const std::size_t slot = slot_of(w);
        w = Worker{};
        w.device = device;
        if (interrupt_requested()) return;
        w = start_worker(slot);
    };
    // Returns true when the worker reported a device fault (and must be replaced).
    auto accept = [&](Worker& w, const std::string& line) -> bool {
        const Json reply = core::parse_json_text(line, "worker on device " + std::to_string(w.device));
        const auto index = static_cast<std::size_t>(w.current);
        w.current = -1;
        const Problem& problem = plan.problems[index];
        auto resume = resumes.find(index);
        if (reply.contains("error")) {
            ++summary.failed[reply.at("error").get<std::string>()];
            ProblemResult result{summary.hardware, problem.op_key(), problem.shape,
                                 resume != resumes.end() ? resume->second.timed : std::vector<core::TimedConfig>{}};
            const Json meta = resume != resumes.end() ? resume->second.meta : Json::object();
            finalize(index, std::move(result), meta,
                     describe_problem(problem) + ": failed, " + reply.at("error").get<std::string>());
            return false;
        }
        if (reply.at("hardware").get<std::string>() != summary.hardware) {
            throw core::InputError("--devices", "device " + std::to_string(w.device) + " is a " +
                                                    reply.at("hardware").get<std::string>() + ", not a " +
                                                    summary.hardware + "; collect different hardware separately");
        }
        // A resumed problem's configs were considered and pruned by its first worker already.
        if (resume == resumes.end()) {
            summary.configs_considered += reply.at("configs_considered").get<std::size_t>();
            add_counts(summary.pruned, reply.at("pruned"));
        }
        summary.configs_timed += reply.at("configs_timed").get<std::size_t>();
        summary.references_timed += reply.at("references_timed").get<std::size_t>();
        summary.timed_kernel_seconds += reply.at("timed_kernel_seconds").get<double>();
        add_counts(summary.failed, reply.at("failed"));
        add_counts(summary.reference_failed, reply.at("reference_failed"));
        const core::Dataset measured = core::dataset_from_document(reply.at("dataset"), "worker reply");
        std::vector<core::TimedConfig> timed;
        if (const auto* hw = measured.find_hardware(reply.at("hardware").get<std::string>())) {
            if (const auto* op = hw->find(problem.op_key())) {
                if (const auto* p = op->find(problem.shape)) timed = p->timed_configs;
            }
        }
        const auto key = core::meta_problem_key(summary.hardware, problem.op_key(), problem.shape);
        const Json& meta = reply.at("meta");
        Json problem_meta = meta.contains(key) ? meta.at(key) : Json::object();

        if (reply.contains("fault")) {
            Resume& r = resumes[index];
            r.timed.insert(r.timed.end(), timed.begin(), timed.end());
            for (const auto& [label, doc] : problem_meta.items()) r.meta[label] = doc;
            for (const auto& label : reply.at("attempted")) r.skip.push_back(label.get<std::string>());
            ++r.faults;
            const std::string config = reply.at("fault").at("config").get<std::string>();
            std::string what = "worker on device " + std::to_string(w.device) + ": device fault" +
                               (config.empty() ? std::string() : " in config " + config) + " on " +
                               describe_problem(problem) + " (" + reply.at("fault").at("error").get<std::string>() +
                               "); counted as failed, worker restarted";
            if (r.faults >= kMaxFaultsPerProblem) {
                what += "; " + std::to_string(r.faults) + " faults on this problem: keeping what was measured";
                ProblemResult result{summary.hardware, problem.op_key(), problem.shape, r.timed};
                const Json kept = r.meta;
                finalize(index, std::move(result), kept, describe_problem(problem) + ": given up after faults");
            } else {
                what += ", problem resumed without the " + std::to_string(r.skip.size()) + " configs tried";
                queue.push_front(index);
            }
            spdlog::error("{}", what);
            summary.worker_failures.push_back(what);
            return true;
        }

        ProblemResult result{summary.hardware, problem.op_key(), problem.shape, {}};
        if (resume != resumes.end()) {
            result.timed_configs = resume->second.timed;
            Json merged = resume->second.meta;
            for (const auto& [label, doc] : problem_meta.items()) merged[label] = doc;
            problem_meta = std::move(merged);
        }
        result.timed_configs.insert(result.timed_configs.end(), timed.begin(), timed.end());
        const std::string line_out = describe_problem(problem) + ": " + std::to_string(result.timed_configs.size()) +
                                     " entries on device " + std::to_string(w.device);
        finalize(index, std::move(result), problem_meta, line_out);
        return false;
    };

    try {
        for (;;) {
            if (interrupt_requested()) {
                summary.interrupted = true;
                break;
            }
            const bool stop_starting = past_stop_time(options, seconds_since(start));
            for (auto& w : workers) {
                if (!w.alive || w.current >= 0 || queue.empty() || stop_starting) continue;
                w.current = static_cast<long>(queue.front());
                queue.pop_front();
                Json request{{"index", w.current}, {"problem", problem_to_json(plan.problems[w.current])}};
                if (auto it = resumes.find(static_cast<std::size_t>(w.current)); it != resumes.end()) {
                    request["skip"] = it->second.skip;
                }
                state.current = describe_problem(plan.problems[w.current]);
                sink.on_config(state);
                if (!write_all(w.to, request.dump() + "\n")) {
                    // It died while idle: the problem never reached it, so this is no retry.
                    queue.push_front(static_cast<std::size_t>(w.current));
                    w.current = -1;
                    bury(w);
                }
            }
            std::vector<pollfd> fds;
            std::vector<Worker*> polled;
            for (auto& w : workers) {
                if (!w.alive || w.current < 0) continue;
                fds.push_back({w.from, POLLIN, 0});
                polled.push_back(&w);
            }
            if (fds.empty()) {
                if (stop_starting) {
                    summary.problems_not_started = queue.size();
                    break;
                }
                bool any_alive = false;
                for (const auto& w : workers) any_alive = any_alive || w.alive;
                if (!queue.empty() && !any_alive) {
                    throw core::Error("--devices", "every worker died; " + std::to_string(queue.size()) +
                                                       " problems are not collected (run again to resume)");
                }
                if (queue.empty()) break;
                continue;  // a restarted worker takes the queue's next problem
            }
            // A bounded wait, so Ctrl-C is noticed while every worker is busy.
            if (::poll(fds.data(), fds.size(), 200) < 0 && errno != EINTR) {
                throw core::Error("--devices", std::string("poll: ") + std::strerror(errno));
            }
            for (std::size_t i = 0; i < fds.size(); ++i) {
                if (fds[i].revents == 0) continue;
                Worker& w = *polled[i];
                char chunk[65536];
                const ssize_t n = ::read(w.from, chunk, sizeof chunk);
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) {
                    bury(w);
                    continue;
                }
                w.buffer.append(chunk, static_cast<std::size_t>(n));
                std::size_t newline;
                bool faulted = false;
                while (!faulted && w.current >= 0 && (newline = w.buffer.find('\n')) != std::string::npos) {
                    const std::string line = w.buffer.substr(0, newline);
                    w.buffer.erase(0, newline + 1);
                    faulted = accept(w, line);
                }
                if (faulted) restart(w);
            }
        }
    } catch (...) {
        run.writer->save();
        for (auto& w : workers) {
            if (!w.alive) continue;
            ::kill(w.pid, SIGTERM);
            ::close(w.to);
            ::close(w.from);
            ::waitpid(w.pid, nullptr, 0);
        }
        throw;
    }

    for (auto& w : workers) {
        if (!w.alive) continue;
        if (w.current >= 0) {
            ++summary.problems_abandoned;
            ::kill(w.pid, SIGTERM);
        }
        ::close(w.to);  // end of input: an idle worker exits
        ::close(w.from);
        ::waitpid(w.pid, nullptr, 0);
        w.alive = false;
    }
    refresh_rates();
    state.current.clear();
    sink.on_finish(state);
    finish_collection(run, seconds_since(start));
    return std::move(run.summary);
}

}  // namespace mmt::collect
