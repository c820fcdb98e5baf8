#include "matmul_toolkit/collect/interrupt.hpp"

#include <signal.h>

#include <atomic>

namespace mmt::collect {
namespace {

// Lock-free atomics are async-signal-safe; the handler touches nothing else.
std::atomic<bool> g_interrupted{false};
struct sigaction g_previous_int;
struct sigaction g_previous_term;

extern "C" void on_signal(int) { g_interrupted.store(true); }

}  // namespace

bool interrupt_requested() { return g_interrupted.load(); }
void request_interrupt() { g_interrupted.store(true); }
void clear_interrupt() { g_interrupted.store(false); }

InterruptHandlerScope::InterruptHandlerScope() {
    g_interrupted.store(false);
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    // SA_RESETHAND: the second signal gets the default action (terminate).
    action.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &action, &g_previous_int);
    sigaction(SIGTERM, &action, &g_previous_term);
}

InterruptHandlerScope::~InterruptHandlerScope() {
    sigaction(SIGINT, &g_previous_int, nullptr);
    sigaction(SIGTERM, &g_previous_term, nullptr);
}

}  // namespace mmt::collect
