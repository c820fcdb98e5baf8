#include "compile_worker.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <algorithm>
#include <cstring>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect::cuda {
namespace {

bool write_all(int fd, const void* data, std::size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
        // send(MSG_NOSIGNAL): a dead peer gives EPIPE, never a SIGPIPE that kills us.
        const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

bool read_all(int fd, void* data, std::size_t size) {
    char* p = static_cast<char*>(data);
    while (size > 0) {
        const ssize_t n = ::read(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

bool write_string(int fd, const std::string& s) {
    const std::uint64_t n = s.size();
    return write_all(fd, &n, sizeof n) && write_all(fd, s.data(), s.size());
}

bool read_string(int fd, std::string& s) {
    std::uint64_t n = 0;
    if (!read_all(fd, &n, sizeof n) || n > (std::uint64_t{1} << 32)) return false;
    s.resize(n);
    return read_all(fd, s.data(), n);
}

[[noreturn]] void serve(int fd, std::string_view source) {
    std::string prelude, arch;
    while (read_string(fd, arch) && read_string(fd, prelude)) {
        CompileResult r;
        try {
            r = compile_kernel(prelude, source, arch);
        } catch (const std::exception& e) {
            r.ok = false;
            r.log = e.what();
        }
        const std::uint8_t ok = r.ok ? 1 : 0;
        if (!write_all(fd, &ok, 1) || !write_all(fd, &r.seconds, sizeof r.seconds) || !write_string(fd, r.log) ||
            !write_string(fd, r.image))
            break;
    }
    // _exit: no atexit handlers or static destructors of the parent's image (CUDA, cuBLAS).
    ::_exit(0);
}

}  // namespace

std::unique_ptr<CompileWorker> CompileWorker::spawn(std::string_view source) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return nullptr;
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(fds[0]);
        ::close(fds[1]);
        return nullptr;
    }
    if (pid == 0) {
        // The child: die with the parent, leave Ctrl-C to the parent (which then closes
        // the socket), and keep no other descriptor of the parent's open.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(0);
        ::signal(SIGINT, SIG_IGN);
        ::signal(SIGPIPE, SIG_IGN);
        const int fd = fds[1];
        const long max_fd = std::min<long>(::sysconf(_SC_OPEN_MAX), 1 << 16);
        for (int other = 3; other < max_fd; ++other)
            if (other != fd) ::close(other);
        serve(fd, source);
    }
    ::close(fds[1]);
    return std::unique_ptr<CompileWorker>(new CompileWorker(pid, fds[0]));
}

CompileWorker::~CompileWorker() {
    ::close(m_fd);  // the child sees EOF and exits
    int status = 0;
    while (::waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {
    }
}

CompileResult CompileWorker::compile(const std::string& prelude, const std::string& arch) {
    CompileResult r;
    std::uint8_t ok = 0;
    if (!m_alive || !write_string(m_fd, arch) || !write_string(m_fd, prelude) || !read_all(m_fd, &ok, 1) ||
        !read_all(m_fd, &r.seconds, sizeof r.seconds) || !read_string(m_fd, r.log) || !read_string(m_fd, r.image)) {
        m_alive = false;
        throw core::Error("NVRTC worker", "compile worker process " + std::to_string(m_pid) + " exited");
    }
    r.ok = ok != 0;
    return r;
}

}  // namespace mmt::collect::cuda
