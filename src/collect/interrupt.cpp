#include "matmul_toolkit/collect/interrupt.hpp"

#include <signal.h>
#include <time.h>

#include <atomic>
#include <cstdint>

namespace mmt::collect {
namespace {

// One stop can arrive twice: timeout(1) signals its command and then the command's
// process group, which holds the command again. Signals this close to the first are
// that duplicate; a person's second Ctrl-C comes later.
constexpr std::int64_t kDuplicateWindowNs = 200'000'000;

// Lock-free atomics are async-signal-safe; the handler touches nothing else besides
// clock_gettime, signal and raise, which POSIX lists as async-signal-safe too.
std::atomic<bool> g_interrupted{false};
std::atomic<std::int64_t> g_first_signal_ns{0};
struct sigaction g_previous_int;
struct sigaction g_previous_term;

std::int64_t monotonic_ns() {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

extern "C" void on_signal(int sig) {
    const std::int64_t now = monotonic_ns();
    std::int64_t first = 0;
    if (g_first_signal_ns.compare_exchange_strong(first, now)) {
        g_interrupted.store(true);
        return;
    }
    if (now - first < kDuplicateWindowNs) return;
    // A second stop: the default action (terminate), so a stuck run can still be killed.
    // The signal is blocked while its handler runs and is delivered when it returns.
    signal(sig, SIG_DFL);
    raise(sig);
}

}  // namespace

bool interrupt_requested() { return g_interrupted.load(); }
void request_interrupt() { g_interrupted.store(true); }
void clear_interrupt() {
    g_interrupted.store(false);
    g_first_signal_ns.store(0);
}

InterruptHandlerScope::InterruptHandlerScope() {
    clear_interrupt();
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;
    sigaction(SIGINT, &action, &g_previous_int);
    sigaction(SIGTERM, &action, &g_previous_term);
}

InterruptHandlerScope::~InterruptHandlerScope() {
    sigaction(SIGINT, &g_previous_int, nullptr);
    sigaction(SIGTERM, &g_previous_term, nullptr);
}

}  // namespace mmt::collect
