/* Multipath steering (udp_paths.h): a connection keeps to its home port
 * and probes the others with one stamped packet in kProbeEvery; a probe far
 * below a settled home, or a loss on the home, moves it with probability
 * one half; a stamp names its port; read responses keep to the home the
 * requester names. */
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

/// A table whose home (0) has settled at `home_ns`.
PathTable settled(uint64_t home_ns, uint32_t seed = 1)
{
    PathTable t;
    t.seed(seed);
    for (uint32_t i = 0; i < kSettleSamples; ++i) {
        t.sample(0, home_ns);
    }
    return t;
}

/// Probes of `port` at `ns` until the home moves (at most 64: a coin that
/// never comes up in 64 throws is broken).
int probes_until_moved(PathTable &t, uint8_t port, uint64_t ns)
{
    for (int i = 1; i <= 64; ++i) {
        t.sample(port, ns);
        if (t.home() != 0) {
            return i;
        }
    }
    return -1;
}

} // namespace

TEST(UdpPaths, OnePathIsPortZero)
{
    PathTable t;
    EXPECT_EQ(0, t.pick(1, false));
    EXPECT_EQ(0, t.pick(1, true));
    t.lost(1);
    EXPECT_EQ(0u, t.moves());
    EXPECT_EQ(0u, t.avoid_mask(1));
}

TEST(UdpPaths, AConnectionKeepsToItsHomeAndProbesTheOthersInTurn)
{
    PathTable t;
    auto      c = picks(t, 8, false, 100);
    ASSERT_EQ(1u, c.size()) << "unstamped packets: the home only";
    EXPECT_EQ(100, c[0]);
    c = picks(t, 8, true, 7 * kProbeEvery);
    EXPECT_EQ(int(7 * (kProbeEvery - 1)), c[0])
        << "(" << kProbeEvery - 1 << " in " << kProbeEvery << " stamped packets stay home)";
    for (int port = 1; port < 8; ++port) {
        EXPECT_EQ(1, c[port]) << "every other port probed once, port " << port;
    }
}

TEST(UdpPaths, AProbeFarBelowASettledHomeMovesItThere)
{
    PathTable t = settled(900000); /* 900 us: a queue */
    int       n = probes_until_moved(t, 3, 20000);
    ASSERT_GT(n, 0) << "an empty path (20 us) is taken";
    EXPECT_EQ(3, t.home());
    EXPECT_EQ(1u, t.moves());
    auto c = picks(t, 4, false, 10);
    EXPECT_EQ(10, c[3]);
    /* a new home settles before the next move: probes of an even emptier
     * port do nothing until it has kSettleSamples round trips */
    for (int i = 0; i < 64; ++i) {
        t.sample(1, 10000);
    }
    EXPECT_EQ(3, t.home());
    for (uint32_t i = 0; i < kSettleSamples; ++i) {
        t.sample(3, 900000);
    }
    EXPECT_GT(probes_until_moved(t, 1, 10000), 0);
    EXPECT_EQ(1, t.home());
}

/* Connections that collided on one path and probe the same empty one do
 * not all move at their first chance: about half of them do. */
TEST(UdpPaths, AMoveIsACoinThrow)
{
    int first = 0;
    for (uint32_t seed = 1; seed <= 64; ++seed) {
        PathTable t = settled(900000, seed);
        first += probes_until_moved(t, 2, 20000) == 1;
    }
    EXPECT_GT(first, 16);
    EXPECT_LT(first, 48);
}

TEST(UdpPaths, AProbeNotFarEnoughBelowTheHomeDoesNotMoveIt)
{
    /* within the ratio: 300 us against 60 (1/5) */
    PathTable t = settled(300000);
    EXPECT_EQ(-1, probes_until_moved(t, 1, 60000));
    /* within the slack: 90 us against 5 (1/18 but 85 us) */
    t = settled(90000);
    EXPECT_EQ(-1, probes_until_moved(t, 1, 5000));
    /* one low sample of a port whose smoothed round trip is high */
    t = settled(900000);
    t.sample(2, 800000);
    for (int i = 0; i < 8; ++i) {
        t.sample(0, 900000);
    }
    t.sample(2, 20000); /* smoothed: (3 x 800 + 20) / 4 = 605 us */
    EXPECT_EQ(0, t.home());
    /* nor does one before the home has settled */
    PathTable fresh;
    fresh.sample(0, 900000);
    EXPECT_EQ(-1, probes_until_moved(fresh, 1, 20000));
    EXPECT_EQ(0u, fresh.moves());
}

TEST(UdpPaths, ALossMovesTheHomeToTheOtherPortMeasuredBest)
{
    PathTable t = settled(400000);
    t.sample(1, 300000);
    t.sample(2, 30000);
    t.sample(3, 200000);
    for (int i = 0; i < 64 && t.home() == 0; ++i) {
        t.lost(4);
    }
    EXPECT_EQ(2, t.home());
    EXPECT_EQ(1u, t.moves());
    /* the losses of the old path's queue that follow do not move it on */
    for (int i = 0; i < 64; ++i) {
        t.lost(4);
    }
    EXPECT_EQ(2, t.home());
    /* nothing else measured: the next port */
    PathTable u = settled(400000);
    for (int i = 0; i < 64 && u.home() == 0; ++i) {
        u.lost(4);
    }
    EXPECT_EQ(1, u.home());
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

/* A read's requester names every port of the responder's first 8 but the
 * home it keeps for them in its READ_REQ; the responder's answers keep to
 * it, but the first answer to each request (the requester's sample, a
 * probe) takes every port in turn. */
TEST(UdpPaths, ReadResponsesKeepToTheHomeTheRequesterNames)
{
    PathTable peer = settled(900000);
    EXPECT_EQ(0xeu, peer.avoid_mask(4));
    ASSERT_GT(probes_until_moved(peer, 2, 20000), 0);
    uint8_t avoid = peer.avoid_mask(4);
    EXPECT_EQ(0xbu, avoid);
    EXPECT_EQ(0xfbu, peer.avoid_mask(8));
    EXPECT_EQ(0u, peer.avoid_mask(1)) << "one path: nothing left out";

    uint32_t           next = 0, first = 0;
    std::map<int, int> later, firsts;
    for (int i = 0; i < 30; ++i) {
        ++later[read_response_path(4, avoid, false, next, first)];
    }
    for (int i = 0; i < 8; ++i) {
        ++firsts[read_response_path(4, avoid, true, next, first)];
    }
    EXPECT_EQ(1u, later.size());
    EXPECT_EQ(30, later[2]);
    EXPECT_EQ(4u, firsts.size());
    EXPECT_EQ(2, firsts[2]);
    /* every port named: taken in turn all the same */
    std::map<int, int> all;
    for (int i = 0; i < 8; ++i) {
        ++all[read_response_path(4, 0xf, false, next, first)];
    }
    EXPECT_EQ(4u, all.size());
    EXPECT_EQ(0, read_response_path(1, 0xff, false, next, first));
}
