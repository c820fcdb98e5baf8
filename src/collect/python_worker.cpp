#include "python_worker.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <map>

#include "matmul_toolkit/collect/interrupt.hpp"
#include "matmul_toolkit/core/error.hpp"

extern char** environ;

namespace mmt::collect::detail {
namespace {

using Clock = std::chrono::steady_clock;

// The child's environment: ours, with the requested variables prepended to.
std::vector<std::string> child_environment(const std::vector<std::pair<std::string, std::string>>& prepend) {
    std::map<std::string, std::string> extra(prepend.begin(), prepend.end());
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string entry = *e;
        const auto eq = entry.find('=');
        const std::string key = entry.substr(0, eq);
        if (auto it = extra.find(key); it != extra.end() && eq != std::string::npos) {
            env.push_back(key + "=" + it->second + ":" + entry.substr(eq + 1));
            extra.erase(it);
        } else {
            env.push_back(entry);
        }
    }
    for (const auto& [key, value] : extra) env.push_back(key + "=" + value);
    return env;
}

}  // namespace

std::string describe_exit(int status) {
    if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        const char* name = ::sigabbrev_np(sig);
        return "was killed by signal " + std::to_string(sig) + (name ? std::string(" (SIG") + name + ")" : "");
    }
    if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
    return "stopped";
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv_in,
                           const std::vector<std::pair<std::string, std::string>>& env_prepend,
                           bool discard_stderr) {
    if (argv_in.empty()) throw core::Error("worker process", "no command");
    int to[2], from[2];
    if (::pipe2(to, O_CLOEXEC) != 0) throw core::Error("worker process", std::string("pipe: ") + std::strerror(errno));
    if (::pipe2(from, O_CLOEXEC) != 0) {
        ::close(to[0]);
        ::close(to[1]);
        throw core::Error("worker process", std::string("pipe: ") + std::strerror(errno));
    }
    // Everything the child needs is built before fork: after it only async-signal-safe calls.
    std::vector<std::string> args = argv_in;
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env = child_environment(env_prepend);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const pid_t parent = ::getpid();

    const pid_t pid = ::fork();
    if (pid < 0) throw core::Error("worker process", std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        ::setpgid(0, 0);
        // Dies with its parent, even when the parent is SIGKILLed.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(126);
        ::dup2(to[0], 0);
        ::dup2(from[1], 1);
        if (discard_stderr) {
            const int null = ::open("/dev/null", O_WRONLY);
            if (null >= 0) ::dup2(null, 2);
        }
        struct sigaction deflt {};
        deflt.sa_handler = SIG_DFL;
        ::sigaction(SIGINT, &deflt, nullptr);
        ::sigaction(SIGTERM, &deflt, nullptr);
        ::sigaction(SIGPIPE, &deflt, nullptr);
        ::execvpe(argv[0], argv.data(), envp.data());
        ::_exit(127);
    }
    ::setpgid(pid, pid);  // also here: no race with the child's own call
    ::close(to[0]);
    ::close(from[1]);
    m_pid = pid;
    m_to = to[1];
    m_from = from[0];
}

ChildProcess::~ChildProcess() {
    try {
        reap(std::chrono::seconds(10));
    } catch (...) {
    }
    if (m_from >= 0) ::close(m_from);
}

bool ChildProcess::send(const std::string& line) {
    if (m_to < 0) return false;
    // A child that died must give EPIPE here, not end the parent.
    struct sigaction ignore {}, previous {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, &previous);
    const std::string text = line + "\n";
    std::size_t done = 0;
    bool ok = true;
    while (done < text.size()) {
        const ssize_t n = ::write(m_to, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            ok = false;
            break;
        }
        done += static_cast<std::size_t>(n);
    }
    ::sigaction(SIGPIPE, &previous, nullptr);
    return ok;
}

ChildProcess::Read ChildProcess::read_line(std::string& line, std::chrono::milliseconds timeout,
                                           bool watch_interrupt) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        if (const auto newline = m_buffer.find('\n'); newline != std::string::npos) {
            line = m_buffer.substr(0, newline);
            m_buffer.erase(0, newline + 1);
            return Read::line;
        }
        if (m_from < 0) return Read::ended;
        if (watch_interrupt && interrupt_requested()) return Read::interrupted;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return Read::timed_out;
        const int wait_ms = static_cast<int>(std::min<long long>(left.count(), watch_interrupt ? 200 : 1000));
        pollfd fd{m_from, POLLIN, 0};
        const int ready = ::poll(&fd, 1, wait_ms);
        if (ready < 0 && errno != EINTR) throw core::Error("worker process", std::string("poll: ") + std::strerror(errno));
        if (ready <= 0) continue;
        char chunk[65536];
        const ssize_t n = ::read(m_from, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            ::close(m_from);
            m_from = -1;
            continue;
        }
        m_buffer.append(chunk, static_cast<std::size_t>(n));
    }
}

std::string ChildProcess::kill_and_reap() {
    if (m_to >= 0) {
        ::close(m_to);
        m_to = -1;
    }
    if (!m_reaped) {
        ::kill(-m_pid, SIGKILL);
        ::kill(m_pid, SIGKILL);
        while (::waitpid(m_pid, &m_status, 0) < 0 && errno == EINTR) {
        }
        m_reaped = true;
    }
    return describe_exit(m_status);
}

std::string ChildProcess::kill_and_reap_exited() {
    ::kill(-m_pid, SIGKILL);
    while (::waitpid(m_pid, &m_status, 0) < 0 && errno == EINTR) {
    }
    m_reaped = true;
    return describe_exit(m_status);
}

std::string ChildProcess::reap(std::chrono::milliseconds grace) {
    if (m_to >= 0) {
        ::close(m_to);  // end of input: a worker exits
        m_to = -1;
    }
    if (m_reaped) return describe_exit(m_status);
    const auto deadline = Clock::now() + grace;
    while (Clock::now() < deadline) {
        // Looked at without reaping: while the child is a zombie its group id can't be
        // reused, so whatever it started (compile workers) can go with it.
        siginfo_t info{};
        const int done = ::waitid(P_PID, static_cast<id_t>(m_pid), &info, WEXITED | WNOHANG | WNOWAIT);
        if (done == 0 && info.si_pid == m_pid) return kill_and_reap_exited();
        if (done < 0 && errno != EINTR) {
            m_reaped = true;
            return "vanished";
        }
        ::usleep(10000);
    }
    return kill_and_reap();
}

}  // namespace mmt::collect::detail
