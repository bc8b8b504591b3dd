/* Multipath steering (udp_paths.h): stamped packets take every port in
 * turn; the others skip ports whose round trip stands well above the best,
 * and take them again once they come down; a stamp names its port. */
#include "devices/udp/udp_paths.h"

#include <gtest/gtest.h>

#include <map>

using namespace doorbell::udp;

namespace {

std::map<int, int> picks(PathTable &t, uint32_t paths, bool stamped, int n)
{
    std::map<int, int> count;
    for (int i = 0; i < n; ++i) {
        ++count[t.pick(paths, stamped)];
    }
    return count;
}

} // namespace

TEST(UdpPaths, OnePathIsPortZero)
{
    PathTable t;
    EXPECT_EQ(0, t.pick(1, false));
    EXPECT_EQ(0, t.pick(1, true));
}

TEST(UdpPaths, UnmeasuredPortsAreTakenInTurn)
{
    PathTable t;
    auto      c = picks(t, 8, false, 80);
    ASSERT_EQ(8u, c.size());
    for (auto [port, n] : c) {
        EXPECT_EQ(10, n) << port;
    }
}

TEST(UdpPaths, APortWithAQueueIsSkippedUntilItComesDown)
{
    PathTable t;
    for (uint8_t k = 0; k < 4; ++k) {
        t.sample(k, 20000); /* 20 us */
    }
    t.sample(1, 900000); /* a queue: (3 x 20 + 900) / 4 = 240 us */
    ASSERT_EQ(240000u, t.rtt(1));
    auto c = picks(t, 4, false, 30);
    EXPECT_EQ(0, c.count(1)) << "above 20 + max(10, 100) us";
    EXPECT_EQ(10, c[0]);
    EXPECT_EQ(10, c[2]);
    EXPECT_EQ(10, c[3]);
    /* stamped packets still measure it */
    c = picks(t, 4, true, 8);
    EXPECT_EQ(2, c[1]);
    /* it comes down: taken again */
    for (int i = 0; i < 8; ++i) {
        t.sample(1, 20000);
    }
    c = picks(t, 4, false, 40);
    EXPECT_EQ(10, c[1]);
}

TEST(UdpPaths, WithinTheSlackEveryPortIsTaken)
{
    PathTable t;
    t.sample(0, 300000);
    t.sample(1, 440000); /* below 300 + 150 us */
    t.sample(2, 460000); /* above */
    auto c = picks(t, 3, false, 20);
    EXPECT_EQ(10, c[0]);
    EXPECT_EQ(10, c[1]);
    EXPECT_EQ(0, c.count(2));
}

TEST(UdpPaths, AStampNamesItsPort)
{
    for (uint8_t p = 0; p < DOORBELL_MAX_PATHS; ++p) {
        uint64_t s = path_stamp(123456789012345ull, p);
        EXPECT_EQ(p, stamp_path(s));
        EXPECT_EQ(123456789012345ull >> kPathBits, s >> kPathBits) << "within 16 ns";
    }
    PathTable t;
    t.sample(DOORBELL_MAX_PATHS, 5); /* no such port: ignored */
    EXPECT_EQ(0u, t.rtt(0));
}

/* A read's requester names the responder's slow ports (of the first 8) in
 * its READ_REQ; the responder's answers leave them out, but the first
 * answer to each request (the requester's sample) takes every port in turn. */
TEST(UdpPaths, ReadResponsesLeaveOutThePortsTheRequesterNames)
{
    PathTable peer;
    for (uint8_t k = 0; k < 4; ++k) {
        peer.sample(k, 30000);
    }
    peer.sample(2, 2000000);
    uint8_t avoid = peer.avoid_mask(4);
    EXPECT_EQ(1u << 2, avoid);
    EXPECT_EQ(0u, PathTable{}.avoid_mask(4)) << "nothing measured: nothing left out";

    uint32_t           next = 0, first = 0;
    std::map<int, int> later, firsts;
    for (int i = 0; i < 30; ++i) {
        ++later[read_response_path(4, avoid, false, next, first)];
    }
    for (int i = 0; i < 8; ++i) {
        ++firsts[read_response_path(4, avoid, true, next, first)];
    }
    EXPECT_EQ(0, later.count(2));
    EXPECT_EQ(10, later[0]);
    EXPECT_EQ(2, firsts[2]);
    /* every port named: taken in turn all the same */
    std::map<int, int> all;
    for (int i = 0; i < 8; ++i) {
        ++all[read_response_path(4, 0xf, false, next, first)];
    }
    EXPECT_EQ(4u, all.size());
    EXPECT_EQ(0, read_response_path(1, 0xff, false, next, first));
}
