// Ctrl-C: the handler raises a flag and leaves the process running; the old handler returns;
// the same stop delivered twice is one stop, a later second one terminates.

#include "matmul_toolkit/collect/interrupt.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>

#include <gtest/gtest.h>

namespace mmt::collect {
namespace {

TEST(Interrupt, RequestAndClearMoveTheFlag) {
    clear_interrupt();
    EXPECT_FALSE(interrupt_requested());
    request_interrupt();
    EXPECT_TRUE(interrupt_requested());
    clear_interrupt();
    EXPECT_FALSE(interrupt_requested());
}

TEST(InterruptHandlerScope, SigintAndSigtermRaiseTheFlagInsteadOfKilling) {
    {
        InterruptHandlerScope scope;
        EXPECT_FALSE(interrupt_requested());
        ::raise(SIGINT);
        EXPECT_TRUE(interrupt_requested());
    }
    {
        InterruptHandlerScope scope;  // a new scope starts lowered
        EXPECT_FALSE(interrupt_requested());
        ::raise(SIGTERM);
        EXPECT_TRUE(interrupt_requested());
    }
    clear_interrupt();
}

// `timeout -s INT` signals its command and then the command's process group: the same
// stop twice, microseconds apart. The run must go on to save its work and print its
// summary, not die of the second one.
TEST(InterruptHandlerScope, TheSameStopDeliveredTwiceRaisesTheFlagOnce) {
    {
        InterruptHandlerScope scope;
        ::raise(SIGINT);
        ::raise(SIGINT);
        EXPECT_TRUE(interrupt_requested());
    }
    clear_interrupt();
}

// A later second Ctrl-C still kills a run that does not stop.
TEST(InterruptHandlerScopeDeathTest, ALaterSecondSignalTerminates) {
    EXPECT_EXIT(
        {
            InterruptHandlerScope scope;
            ::raise(SIGINT);
            ::usleep(300'000);
            ::raise(SIGINT);
            std::_Exit(0);  // not reached
        },
        ::testing::KilledBySignal(SIGINT), "");
}

TEST(InterruptHandlerScope, RestoresThePreviousHandler) {
    struct sigaction before {};
    sigaction(SIGINT, nullptr, &before);
    {
        InterruptHandlerScope scope;
        struct sigaction during {};
        sigaction(SIGINT, nullptr, &during);
        EXPECT_NE(during.sa_handler, before.sa_handler);
    }
    struct sigaction after {};
    sigaction(SIGINT, nullptr, &after);
    EXPECT_EQ(after.sa_handler, before.sa_handler);
}

}  // namespace
}  // namespace mmt::collect
