/* The posting policies alone: batching, signaling, the ring's indices. */
#include "core/batcher.h"
#include "core/send_ring.h"

#include <gtest/gtest.h>

using doorbell::Batcher;
using doorbell::SendRing;
using doorbell::Signaler;

TEST(Batcher, IdleQueueRingsAtOnce)
{
    Batcher b(64);
    EXPECT_TRUE(b.ring_now(1, false));
    EXPECT_FALSE(b.ring_now(0, false)); /* nothing to ring */
}

TEST(Batcher, BusyQueueCoalescesUpToBatch)
{
    Batcher b(64);
    for (uint64_t n = 1; n < 64; ++n) {
        EXPECT_FALSE(b.ring_now(n, true)) << n;
    }
    EXPECT_TRUE(b.ring_now(64, true));
    EXPECT_TRUE(b.ring_now(65, true));
}

TEST(Batcher, BatchOfZeroMeansOne)
{
    Batcher b(0);
    EXPECT_EQ(1u, b.batch());
    EXPECT_TRUE(b.ring_now(1, true));
}

TEST(Signaler, OneInEveryModeration)
{
    Signaler         s(4);
    std::vector<int> signaled;
    for (int i = 0; i < 12; ++i) {
        if (s.next(false, false)) {
            signaled.push_back(i);
        }
    }
    EXPECT_EQ((std::vector<int>{3, 7, 11}), signaled);
}

TEST(Signaler, ForcedSignalRestartsTheCount)
{
    Signaler s(4);
    EXPECT_FALSE(s.next(false, false));
    EXPECT_TRUE(s.next(true, false)); /* a flush or a cookie */
    EXPECT_FALSE(s.next(false, false));
    EXPECT_FALSE(s.next(false, false));
    EXPECT_FALSE(s.next(false, false));
    EXPECT_TRUE(s.next(false, false));
}

TEST(Signaler, WqeThatFillsTheRingIsSignaled)
{
    Signaler s(64);
    EXPECT_TRUE(s.next(false, true));
}

TEST(SendRing, IndicesAndWrap)
{
    SendRing r(4);
    EXPECT_EQ(4u, r.free_slots());
    for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < 4; ++i) {
            doorbell_wqe_t &w = r.prepare();
            EXPECT_EQ(0, w.opcode); /* zeroed */
            w.opcode = DOORBELL_OP_PUT;
            w.length = uint32_t(round * 4 + i);
            r.commit();
        }
        EXPECT_EQ(0u, r.free_slots());
        EXPECT_EQ(4u, r.unrung());
        r.ring();
        EXPECT_EQ(0u, r.unrung());
        EXPECT_EQ(uint32_t(round * 4 + 2), r.wqe(r.head() + 2).length);
        r.reclaim_to(r.tail());
        EXPECT_EQ(4u, r.free_slots());
    }
    EXPECT_EQ(12u, r.tail());
}
