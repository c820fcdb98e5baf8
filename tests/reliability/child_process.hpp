#pragma once
// Runs the built matmul_toolkit binary as a child the test can kill, restrict (file-size
// limit, another user) and wait for; stdout and stderr go to files.

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "matmul_toolkit/core/dataset_io.hpp"

namespace mmt::testing {

/// Limits applied in the child before it runs the binary.
struct ChildLimits {
    long long max_file_bytes = -1;  ///< RLIMIT_FSIZE; -1 leaves it alone
    int run_as_uid = -1;            ///< setuid to this user first (needs root); -1: stay
    std::string binary;             ///< runs this copy of the binary instead of MMT_CLI_PATH
};

class Child {
public:
    Child(const std::vector<std::string>& args, const std::filesystem::path& log_dir,
          const ChildLimits& limits = {})
        : m_log_dir(log_dir) {
        std::filesystem::create_directories(log_dir);
        m_pid = ::fork();
        if (m_pid != 0) return;
        const int out = ::open((log_dir / "stdout.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int err = ::open((log_dir / "stderr.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(out, 1);
        ::dup2(err, 2);
        if (limits.max_file_bytes >= 0) {
            // Ignored, SIGXFSZ would kill the child; a write past the limit then fails
            // with EFBIG, which is how a full disk looks to the program.
            ::signal(SIGXFSZ, SIG_IGN);
            const rlimit limit{static_cast<rlim_t>(limits.max_file_bytes),
                               static_cast<rlim_t>(limits.max_file_bytes)};
            if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(126);
        }
        if (limits.run_as_uid >= 0) {
            if (::setgid(static_cast<gid_t>(limits.run_as_uid)) != 0 ||
                ::setuid(static_cast<uid_t>(limits.run_as_uid)) != 0) {
                ::_exit(126);
            }
        }
        std::vector<char*> argv;
        std::string binary = limits.binary.empty() ? std::string(MMT_CLI_PATH) : limits.binary;
        argv.push_back(binary.data());
        std::vector<std::string> copy = args;
        for (auto& a : copy) argv.push_back(a.data());
        argv.push_back(nullptr);
        ::execv(binary.c_str(), argv.data());
        ::_exit(127);
    }
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;
    ~Child() {
        if (!m_waited) {
            ::kill(m_pid, SIGKILL);
            wait();
        }
    }

    void kill(int sig) const { ::kill(m_pid, sig); }
    pid_t pid() const { return m_pid; }
    /// True once the child has ended (then wait() returns at once).
    bool finished() {
        if (m_waited) return true;
        int status = 0;
        if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
            record(status);
            return true;
        }
        return false;
    }
    /// The exit code, or 128 + the signal that ended it.
    int wait() {
        if (!m_waited) {
            int status = 0;
            ::waitpid(m_pid, &status, 0);
            record(status);
        }
        return m_code;
    }
    std::string err() const { return slurp_file(m_log_dir / "stderr.txt"); }
    std::string out() const { return slurp_file(m_log_dir / "stdout.txt"); }

    static std::string slurp_file(const std::filesystem::path& path) {
        std::ifstream in(path, std::ios::binary);
        std::ostringstream buffer;
        buffer << in.rdbuf();
        return buffer.str();
    }

private:
    void record(int status) {
        m_waited = true;
        m_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }

    std::filesystem::path m_log_dir;
    pid_t m_pid = -1;
    bool m_waited = false;
    int m_code = -1;
};

/// Runs the binary to the end; returns the exit code.
inline int run_child(const std::vector<std::string>& args, const std::filesystem::path& log_dir,
                     const ChildLimits& limits = {}) {
    Child child(args, log_dir, limits);
    return child.wait();
}

/// Every file under `dir` (recursively) with its bytes, for "nothing changed" checks.
inline std::vector<std::pair<std::string, std::string>> snapshot(const std::filesystem::path& dir) {
    std::vector<std::pair<std::string, std::string>> files;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
        if (entry.is_regular_file()) files.emplace_back(entry.path().string(), Child::slurp_file(entry.path()));
    }
    std::sort(files.begin(), files.end());
    return files;
}

/// A fresh directory per test, removed by the caller.
inline std::filesystem::path fresh_dir(const std::string& prefix) {
    const auto dir = std::filesystem::temp_directory_path() /
                     (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(::rand()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

}  // namespace mmt::testing
