#pragma once
/// Ctrl-C handling for long work: a handler that only raises a flag, which the collection
/// engine checks between timed runs, so it can save what is done and stop cleanly.

namespace mmt::collect {

/// True once SIGINT or SIGTERM arrived under an InterruptHandlerScope (or
/// request_interrupt() was called).
bool interrupt_requested();
/// Raises the flag by hand (tests, embedding programs with their own signal handling).
void request_interrupt();
/// Lowers the flag.
void clear_interrupt();

/// Installs the SIGINT / SIGTERM handlers for its lifetime and restores the previous ones
/// afterwards. The first signal raises the flag; a second one gets the default action, so
/// a stuck run can still be killed with another Ctrl-C. A second signal within 200 ms of
/// the first is the same stop delivered twice (`timeout -s INT` signals the command and
/// its process group) and is ignored.
class InterruptHandlerScope {
public:
    InterruptHandlerScope();
    ~InterruptHandlerScope();
    InterruptHandlerScope(const InterruptHandlerScope&) = delete;
    InterruptHandlerScope& operator=(const InterruptHandlerScope&) = delete;
};

}  // namespace mmt::collect
