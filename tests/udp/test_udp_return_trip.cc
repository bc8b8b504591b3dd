/* The queue an answer met on its way back (udp_return_trip.h): its one-way
 * trip on two hosts' clocks less the window's least trip, whatever the
 * clocks' offset; and a round trip less that queue, never below the base
 * round trip nor above the round trip. */
#include "devices/udp/udp_return_trip.h"

#include <gtest/gtest.h>

using namespace doorbell::udp;

namespace {

constexpr uint64_t kUs = 1000;

/// Answers that left the peer at `sent` (its clock) and took `trip` to
/// arrive, on a host whose clock reads `offset` ns ahead of the peer's.
struct Link {
    ReturnTrip back;
    int64_t    offset;
    uint64_t   queue(uint64_t sent, uint64_t trip)
    {
        uint64_t arrived = uint64_t(int64_t(sent + trip) + offset);
        return back.queue_ns(arrived, arrived, sent);
    }
};

} // namespace

TEST(ReturnTrip, QueueIsTheTripLessTheLeastWhateverTheClocksOffset)
{
    /* the peer's clock far ahead of ours, equal, far behind: a monotonic
     * clock counts from each host's boot */
    for (int64_t offset : {-int64_t(86400) * 1000000000, int64_t(0), int64_t(3600) * 1000000000}) {
        Link     l{ReturnTrip{}, offset};
        uint64_t t = uint64_t(5) * 1000000000;
        EXPECT_EQ(l.queue(t, 20 * kUs), 0u) << "the first trip is its own minimum";
        EXPECT_EQ(l.queue(t + 100 * kUs, 20 * kUs + 700 * kUs), 700 * kUs) << offset;
        EXPECT_EQ(l.queue(t + 200 * kUs, 15 * kUs), 0u) << "a shorter trip is the new least";
        EXPECT_EQ(l.queue(t + 300 * kUs, 15 * kUs + 1200 * kUs), 1200 * kUs) << offset;
    }
}

TEST(ReturnTrip, AQueueThatStandsAWholeWindowIsForgotten)
{
    /* the least trip is kept for a window, then the least since: a path
     * whose way back lengthened (a route, a clock that drifted) is
     * re-learnt, as a base RTT is */
    Link     l{ReturnTrip{}, 0};
    uint64_t t = kReturnWindowNs;
    l.queue(t, 10 * kUs);
    EXPECT_EQ(l.queue(t + kReturnWindowNs / 2, 60 * kUs), 50 * kUs);
    l.queue(t + kReturnWindowNs + 1, 60 * kUs);     /* rotation: the least since */
    l.queue(t + 2 * kReturnWindowNs + 2, 60 * kUs); /* and again: the old least is gone */
    EXPECT_EQ(l.queue(t + 2 * kReturnWindowNs + 3, 60 * kUs), 0u);
}

TEST(ReturnTrip, ForwardRoundTripTakesTheWayBackOutDownToTheBase)
{
    constexpr uint64_t kAllow = 200 * kUs;
    /* a 1.9 ms round trip whose answer queued 1.2 ms on its way back, behind
     * the peer's data: the way back beyond the allowance comes out */
    EXPECT_EQ(forward_round_trip(1900 * kUs, 1200 * kUs, 6 * kUs, kAllow, true), 900 * kUs);
    EXPECT_EQ(forward_round_trip(1900 * kUs, 1200 * kUs, 6 * kUs, 0, true), 700 * kUs);
    /* the same answer with no data coming back: the kernels' delay, kept */
    EXPECT_EQ(forward_round_trip(1900 * kUs, 1200 * kUs, 6 * kUs, kAllow, false), 1900 * kUs);
    /* a way back within the allowance: kept */
    EXPECT_EQ(forward_round_trip(900 * kUs, kAllow, 6 * kUs, kAllow, true), 900 * kUs);
    /* the way back read longer than the round trip less the base (clock
     * noise): the base, never below it */
    EXPECT_EQ(forward_round_trip(300 * kUs, 310 * kUs, 6 * kUs, 0, true), 6 * kUs);
    EXPECT_EQ(forward_round_trip(300 * kUs, 296 * kUs, 6 * kUs, 0, true), 6 * kUs);
    /* a round trip already below the base is left as it is */
    EXPECT_EQ(forward_round_trip(4 * kUs, 50 * kUs, 6 * kUs, 0, true), 4 * kUs);
    /* no base known yet: unchanged */
    EXPECT_EQ(forward_round_trip(900 * kUs, 500 * kUs, 0, 0, true), 900 * kUs);
}
