// The progress hook's backoff (mpi_coll/algorithms/progress_backoff.h).
#include "progress_backoff.h"

#include <gtest/gtest.h>

namespace {

// Calls of the hook, each polling with `events` when it polls; how many
// of them polled.
unsigned polls_in(doorbell_coll_backoff_t &b, unsigned calls, unsigned events = 0)
{
    unsigned polls = 0;
    for (unsigned i = 0; i < calls; i++) {
        if (doorbell_coll_backoff_poll(&b)) {
            doorbell_coll_backoff_polled(&b, events);
            ++polls;
        }
    }
    return polls;
}

TEST(CollProgressBackoff, PollsEveryCallUntilTheEmptyLimit)
{
    doorbell_coll_backoff_t b;
    doorbell_coll_backoff_init(&b, 64, 16);
    EXPECT_EQ(polls_in(b, 64), 64u);
    // then one call in 16
    EXPECT_EQ(polls_in(b, 160), 10u);
    EXPECT_FALSE(doorbell_coll_backoff_poll(&b)); // the 161st: 1 of 16
}

TEST(CollProgressBackoff, AnEventMakesItPollEveryCallAgain)
{
    doorbell_coll_backoff_t b;
    doorbell_coll_backoff_init(&b, 4, 8);
    EXPECT_EQ(polls_in(b, 4), 4u);
    EXPECT_EQ(polls_in(b, 8), 1u);
    // a poll that moves something: every call polls until 4 empty ones
    unsigned calls = 0;
    while (!doorbell_coll_backoff_poll(&b)) {
        ++calls;
    }
    EXPECT_EQ(calls, 7u);
    doorbell_coll_backoff_polled(&b, 3);
    EXPECT_EQ(polls_in(b, 4), 4u);
    EXPECT_EQ(polls_in(b, 16), 2u);
}

TEST(CollProgressBackoff, ACollectiveResetsIt)
{
    doorbell_coll_backoff_t b;
    doorbell_coll_backoff_init(&b, 4, 8);
    EXPECT_EQ(polls_in(b, 12), 5u);
    doorbell_coll_backoff_reset(&b);
    EXPECT_EQ(polls_in(b, 4), 4u);
    EXPECT_EQ(polls_in(b, 8), 1u);
}

TEST(CollProgressBackoff, ZeroLimitNeverBacksOffAndZeroEveryIsOne)
{
    doorbell_coll_backoff_t b;
    doorbell_coll_backoff_init(&b, 0, 16);
    EXPECT_EQ(polls_in(b, 1000), 1000u);
    doorbell_coll_backoff_init(&b, 2, 0);
    EXPECT_EQ(polls_in(b, 10), 10u);
}

} // namespace
