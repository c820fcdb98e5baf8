#pragma once
// A child process spoken to by JSON lines on its stdin/stdout (the Inductor worker, the
// Python probe). Private to src/collect.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace mmt::collect::detail {

/// A child process in its own process group (so Ctrl-C at the terminal reaches only the
/// parent), with pipes on its stdin and stdout; stderr is inherited or discarded.
class ChildProcess {
public:
    /// Starts `argv` (argv[0] searched on PATH) with `env_prepend` prepended (':'-joined) to
    /// those environment variables. Throws core::Error when the process can't be created.
    ChildProcess(const std::vector<std::string>& argv,
                 const std::vector<std::pair<std::string, std::string>>& env_prepend, bool discard_stderr = false);
    /// Closes its stdin and waits for it to exit; kills its group after 10 s.
    ~ChildProcess();
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;

    /// Writes `line` and a newline; false when the child has gone (EPIPE).
    bool send(const std::string& line);

    enum class Read { line, ended, timed_out, interrupted };
    /// Waits for one line of output until `timeout` passes. With `watch_interrupt`,
    /// collect::interrupt_requested() is checked every 200 ms. `ended`: its stdout closed.
    Read read_line(std::string& line, std::chrono::milliseconds timeout, bool watch_interrupt);

    /// Kills the process group and reaps the child; returns describe_exit() of its status.
    std::string kill_and_reap();
    /// Waits up to `grace` for the child to exit by itself (then kills its group); returns
    /// how it ended.
    std::string reap(std::chrono::milliseconds grace);

    pid_t pid() const { return m_pid; }

private:
    std::string kill_and_reap_exited();

    pid_t m_pid = -1;
    int m_to = -1;
    int m_from = -1;
    std::string m_buffer;
    bool m_reaped = false;
    int m_status = 0;
};

/// "exited with code N", "was killed by signal N (NAME)".
std::string describe_exit(int status);

}  // namespace mmt::collect::detail
