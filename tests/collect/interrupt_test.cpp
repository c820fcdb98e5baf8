// Ctrl-C: the handler raises a flag and leaves the process running; the old handler returns.

#include "matmul_toolkit/collect/interrupt.hpp"

#include <signal.h>

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
