/* UDP GRO on the receive path: the datagram size is read from the kernel's
 * control message only, a truncated buffer keeps its whole datagrams only,
 * and on lo the super-datagrams a GSO sender sends reach a GRO socket
 * merged and are taken apart into the datagrams the sender counted: puts,
 * reads (whose data would otherwise be received in place) and active
 * messages a handler keeps, byte for byte. */
#include "loopback_pair.h"

#include "devices/udp/udp_gro.h"
#include "devices/udp/udp_gso.h"

#include <netinet/in.h>
#include <netinet/udp.h>

#include <cstring>

using namespace doorbell::test;
using namespace doorbell::udp;

namespace {

doorbell_iface_params_t mtu(uint32_t bytes)
{
    doorbell_iface_params_t p = steady_params(); /* no resend, no probe */
    p.mtu                     = bytes;
    return p;
}

/// With lo's quick retransmission timer (a test that loses datagrams).
doorbell_iface_params_t lo_mtu(uint32_t bytes)
{
    doorbell_iface_params_t p = lo_params();
    p.mtu                     = bytes;
    return p;
}

/// A control buffer holding one message of level/type with an int.
struct Control {
    alignas(cmsghdr) uint8_t buf[CMSG_SPACE(sizeof(int))] = {};
    const cmsghdr *make(int level, int type, int value, size_t data_len = sizeof(int))
    {
        auto *c       = reinterpret_cast<cmsghdr *>(buf);
        c->cmsg_level = level;
        c->cmsg_type  = type;
        c->cmsg_len   = CMSG_LEN(data_len);
        std::memcpy(CMSG_DATA(c), &value, sizeof(value));
        return c;
    }
};

/// Both ends on lo with GSO at a (the sender) and GRO at b; skips where the
/// kernel takes either option on no UDP socket.
#define REQUIRE_GSO_GRO(pair)                                                                 \
    do {                                                                                      \
        set_gro((pair).b, true);                                                              \
        if (!gso_stats((pair).a).enabled || !gro_stats((pair).b).enabled) {                   \
            GTEST_SKIP() << "this kernel takes no UDP_SEGMENT or no UDP_GRO on a UDP socket"; \
        }                                                                                     \
    } while (0)

struct Kept {
    std::vector<std::vector<uint8_t>> got;
    std::vector<uint8_t *>            where;
    std::vector<void *>               kept;
};

/// Records a message, scribbles over its headroom (the callee's to use) and
/// keeps every other one.
doorbell_status_t keep_odd(void *arg, uint8_t, void *data, size_t length)
{
    auto *k = static_cast<Kept *>(arg);
    auto *p = static_cast<uint8_t *>(data);
    k->got.emplace_back(p, p + length);
    k->where.push_back(p);
    std::memset(p - DOORBELL_AM_HEADROOM, 0xab, DOORBELL_AM_HEADROOM);
    if (k->got.size() % 2 == 0) {
        k->kept.push_back(data);
        return DOORBELL_INPROGRESS;
    }
    return DOORBELL_OK;
}

/// Puts 256 KiB of pattern seed from a to b and checks that it landed.
void put_256k(LoopbackPair &pair, uint32_t seed)
{
    auto       data = pattern(256 << 10, seed);
    Region     dst(pair.pd, data.size(), DOORBELL_ACCESS_REMOTE_WRITE);
    Completion c;
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, dst, c)) << doorbell_last_error();
    ASSERT_TRUE(pair.wait([&] { return c.count > 0; }));
    EXPECT_EQ(DOORBELL_OK, c.status);
    EXPECT_EQ(data, dst.bytes);
}

} // namespace

TEST(UdpGro, TheDatagramSizeComesFromTheKernelsMessageOnly)
{
    Control c;
    EXPECT_EQ(1064u, gro_segment(c.make(SOL_UDP, UDP_GRO, 1064)));
    EXPECT_EQ(0u, gro_segment(nullptr));
    EXPECT_EQ(0u, gro_segment(c.make(IPPROTO_IP, UDP_GRO, 1064)));  /* another level */
    EXPECT_EQ(0u, gro_segment(c.make(SOL_UDP, UDP_SEGMENT, 1064))); /* another type */
    EXPECT_EQ(0u, gro_segment(c.make(SOL_UDP, UDP_GRO, 1064, 2)));  /* too short */
    EXPECT_EQ(0u, gro_segment(c.make(SOL_UDP, UDP_GRO, 0)));
    EXPECT_EQ(0u, gro_segment(c.make(SOL_UDP, UDP_GRO, -5)));
}

TEST(UdpGro, ATruncatedBufferKeepsItsWholeDatagramsOnly)
{
    EXPECT_EQ(5000u, gro_whole_bytes(5000, 1064, false)); /* the last one shorter */
    EXPECT_EQ(4256u, gro_whole_bytes(5000, 1064, true));  /* 4 whole of 1064 */
    EXPECT_EQ(0u, gro_whole_bytes(1000, 1064, true));
    EXPECT_EQ(0u, gro_whole_bytes(5000, 0, true));
    EXPECT_EQ(5000u, gro_whole_bytes(5000, 0, false));
}

// A 256 KiB put at a 1000-byte MTU leaves in super-datagrams and reaches b
// merged: b takes them apart into exactly the datagrams a counted, and every
// byte lands.
TEST(UdpGro, MergedBuffersArriveAsTheDatagramsSent)
{
    LoopbackPair pair(mtu(1000), mtu(1000));
    REQUIRE_GSO_GRO(pair);
    put_256k(pair, 23);
    GroStats g = gro_stats(pair.b);
    EXPECT_GT(g.buffers, 0u);
    EXPECT_GT(g.segments, 2 * g.buffers); /* runs, not pairs */
    EXPECT_EQ(0u, g.truncated);
    EXPECT_TRUE(pair.wait(
        [&] { return pair.counters(pair.b).rx_packets == pair.counters(pair.a).tx_packets; }));
    EXPECT_EQ(0u, pair.counters(pair.b).rx_drop_malformed);
    EXPECT_EQ(0u, pair.counters(pair.a).retransmits);
}

// At a 9000-byte MTU a reader receives read data in place (a peek, then the
// chunk straight into the destination); a merged buffer of chunks is not one
// chunk, so it takes the receive buffer, and the data is the same.
TEST(UdpGro, MergedReadResponsesLandWhereTheyBelong)
{
    LoopbackPair pair(mtu(9000), mtu(9000));
    set_gro(pair.b, true);
    if (!gso_stats(pair.a).enabled || !gro_stats(pair.b).enabled) {
        GTEST_SKIP() << "this kernel takes no UDP_SEGMENT or no UDP_GRO on a UDP socket";
    }
    auto   data = pattern(512 << 10, 29);
    Region src(pair.pd, data.size(), DOORBELL_ACCESS_REMOTE_READ);
    std::memcpy(src.bytes.data(), data.data(), data.size());
    std::vector<uint8_t> back(data.size());
    iovec                iov{back.data(), back.size()};
    Completion           g;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_get_zcopy(pair.qb, &iov, 1, src.addr(), src.rkey, &g));
    ASSERT_TRUE(pair.wait([&] { return g.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, g.status);
    EXPECT_EQ(data, back);
    EXPECT_GT(gro_stats(pair.b).buffers, 0u);
    EXPECT_EQ(0u, pair.counters(pair.b).rx_drop_malformed);
}

// Active messages of one datagram each, of one size, leave in a run and
// arrive merged: each is delivered once, in order and intact, with its
// headroom; the handler keeps every other one, and what it keeps is never
// overwritten by the messages after it in the same buffer.
TEST(UdpGro, MessagesOfAMergedBufferAreDeliveredAndKeptIntact)
{
    LoopbackPair pair(mtu(1000), mtu(1000));
    REQUIRE_GSO_GRO(pair);
    Kept k;
    doorbell_iface_set_am_handler(pair.b, keep_odd, &k);
    std::vector<std::vector<uint8_t>> sent;
    for (unsigned i = 0; i < 24; ++i) {
        Bytes b{pattern(900, 100 + i)}; /* one per datagram: no two fit */
        ASSERT_EQ(900, doorbell_qp_am_bcopy(pair.qa, 1, pack_bytes, &b)) << doorbell_last_error();
        sent.push_back(b.v);
    }
    ASSERT_TRUE(pair.wait([&] { return k.got.size() == sent.size(); }));
    EXPECT_GT(gro_stats(pair.b).buffers, 0u);
    for (size_t i = 0; i < sent.size(); ++i) {
        EXPECT_EQ(sent[i], k.got[i]) << i;
    }
    for (size_t i = 1; i < sent.size(); i += 2) { /* the kept ones, after the rest */
        EXPECT_EQ(0, std::memcmp(k.where[i], sent[i].data(), sent[i].size())) << i;
    }
    for (void *data : k.kept) {
        doorbell_iface_release_am(pair.b, data);
    }
    EXPECT_EQ(DOORBELL_OK, pair.flush(pair.qa));
}

// A merged buffer larger than the receive may fill is cut short: b keeps
// its whole datagrams, counts the rest as lost, and the sender's
// retransmissions (themselves merged and cut) deliver every byte intact.
TEST(UdpGro, ATruncatedMergedBufferLosesOnlyItsTailAndTheDataArrives)
{
    LoopbackPair pair(lo_mtu(1000), lo_mtu(1000));
    REQUIRE_GSO_GRO(pair);
    set_rx_room(pair.b, 5000); /* four datagrams of 1064 bytes and a piece */
    put_256k(pair, 41);
    GroStats g = gro_stats(pair.b);
    EXPECT_GT(g.truncated, 0u);
    EXPECT_GT(g.buffers, 0u);
    EXPECT_GE(pair.counters(pair.b).rx_drop_malformed, g.truncated);
    EXPECT_GT(pair.counters(pair.a).retransmits, 0u);
}

// Without GRO (the kernel cuts the super-datagrams at b's socket) nothing
// arrives merged, and the same transfer is as intact.
TEST(UdpGro, OffNothingArrivesMerged)
{
    LoopbackPair pair(mtu(1000), mtu(1000));
    set_gro(pair.b, false);
    put_256k(pair, 31);
    GroStats g = gro_stats(pair.b);
    EXPECT_FALSE(g.enabled);
    EXPECT_EQ(0u, g.buffers);
    EXPECT_TRUE(pair.counters(pair.b).rx_packets >= (256u << 10) / 1064);
}

// A bulk transfer turns GRO on by itself, where the kernel takes it.
TEST(UdpGro, BulkTrafficTurnsItOn)
{
    LoopbackPair pair(mtu(1000), mtu(1000));
    EXPECT_FALSE(gro_stats(pair.b).enabled); /* a connection's set-up is not bulk */
    put_256k(pair, 37);
    int       on  = 0;
    socklen_t len = sizeof(on);
    if (getsockopt(static_cast<UdpIface *>(pair.b)->socket_fd(), SOL_UDP, UDP_GRO, &on, &len) !=
        0) {
        GTEST_SKIP() << "this kernel takes no UDP_GRO on a UDP socket";
    }
    EXPECT_TRUE(gro_stats(pair.b).enabled);
    EXPECT_EQ(1, on);
}
