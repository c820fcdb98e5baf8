#pragma once
/// A child process that runs NVRTC for its parent. NVRTC serialises the stages of
/// concurrent compilations inside one process (per-stage locks), so compiling on several
/// CPU cores needs several processes: KernelCache forks one per worker thread.

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>

#include "nvrtc_compiler.hpp"

namespace mmt::collect::cuda {

class CompileWorker {
public:
    /// Forks a worker that compiles `source` with preludes sent to it; nullptr when fork
    /// fails. Call it before starting threads that may be inside NVRTC: the child runs
    /// NVRTC code, which must not inherit a lock held by another thread.
    static std::unique_ptr<CompileWorker> spawn(std::string_view source);

    ~CompileWorker();
    CompileWorker(const CompileWorker&) = delete;
    CompileWorker& operator=(const CompileWorker&) = delete;

    /// Compiles prelude + source for `arch` in the child. Throws core::Error when the
    /// child is gone (it crashed or was killed); the caller then compiles in-process.
    CompileResult compile(const std::string& prelude, const std::string& arch);

    /// False once a compile() found the child gone.
    bool alive() const { return m_alive; }
    /// The child's process id.
    pid_t pid() const { return m_pid; }

private:
    CompileWorker(pid_t pid, int fd) : m_pid(pid), m_fd(fd) {}

    pid_t m_pid;
    int m_fd;
    bool m_alive = true;
};

}  // namespace mmt::collect::cuda
