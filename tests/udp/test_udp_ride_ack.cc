/* ACKs that ride on requests going the other way (udp_ride_ack.cc): the
 * rules (an owed ACK rides on the next request to its socket once it is
 * due, old or holds many packets, settled once; none rides on a segment of
 * several) and the receiver's checks of a riding
 * ACK (its own connection, token and source, apart from the request). */
#include "loopback_pair.h"

#include "devices/udp/parser.h"

#include <cstring>

using namespace doorbell::test;
using namespace doorbell::udp;

namespace {

/// The UDP address an iface sends from.
sockaddr_in address_of(doorbell_iface_t *iface)
{
    sockaddr_in a{};
    a.sin_family = AF_INET;
    doorbell_iface_get_device_address(iface, &a.sin_addr);
    IfaceAddress ia{};
    doorbell_iface_get_address(iface, &ia);
    a.sin_port = ia.port;
    return a;
}

UdpQp &udp_qp(doorbell_qp_t *qp)
{
    return static_cast<UdpQp &>(*static_cast<doorbell::QpCore *>(qp));
}

uint32_t qpn_of(doorbell_qp_t *qp)
{
    return udp_qp(qp).qpn;
}

/// A one-packet WRITE of 8 bytes of 0xee to target on qp's connection as its
/// peer would send it, skip PSNs ahead of qp's next, carrying ride.
std::vector<uint8_t> write_with_ride(doorbell_qp_t *qp, const Region &target, const RideAck &ride,
                                     uint32_t skip)
{
    uint64_t token;
    uint32_t dst, psn;
    EXPECT_TRUE(connection_of(qp, &token, &dst, &psn));
    WireHeader h  = make_header(Opcode::kWrite);
    h.flags       = kFlagFirst | kFlagLast | kFlagRide;
    h.token       = token;
    h.dst_qp      = dst;
    h.src_qp      = qpn_of(qp);
    h.psn         = psn + skip;
    h.remote_addr = target.addr();
    h.rkey        = target.rkey;
    h.msg_length  = 8;
    h.length      = 8;
    std::vector<uint8_t> d(sizeof(h) + 8 + sizeof(ride), 0xee);
    std::memcpy(d.data(), &h, sizeof(h));
    std::memcpy(d.data() + sizeof(h) + 8, &ride, sizeof(ride));
    return d;
}

} // namespace

/* b owes a the ACK of an unsignaled put for the whole ACK delay (625 ms
 * here). Young, it does not ride: b's own put to a leaves alone. Once it
 * holds half of kAckEvery packets, b's next put to a carries it: b sends one
 * datagram, and a's puts are acknowledged by it. */
TEST(UdpRideAck, AnOwedAckRidesOnceItHoldsHalfOfAckEvery)
{
    LoopbackPair pair(steady_params(), steady_params());
    Region       at_a(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    Region       at_b(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t     v = 0x1111;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, at_b.addr(), at_b.rkey));
    ASSERT_TRUE(pair.wait([&] { return at_b.bytes[0] == 0x11; }));
    EXPECT_EQ(1u, udp_qp(pair.qa).unacked.size());
    EXPECT_EQ(0u, pair.counters(pair.b).tx_packets) << "b holds the ACK";

    uint64_t w = 0x2222;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qb, &w, 8, at_a.addr(), at_a.rkey));
    ASSERT_TRUE(pair.wait([&] { return at_a.bytes[0] == 0x22; }));
    EXPECT_EQ(0u, pair.counters(pair.b).acks_carried) << "a young ACK waits";
    EXPECT_EQ(1u, pair.counters(pair.b).tx_packets);
    EXPECT_EQ(1u, udp_qp(pair.qa).unacked.size());

    /* a's puts up to half of kAckEvery: the next request b sends carries
     * the ACK of them all */
    for (uint32_t i = 1; i < kAckEvery / 2; ++i) {
        v = 0x1100 + i;
        ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, at_b.addr(), at_b.rkey));
        ASSERT_TRUE(pair.wait([&] { return at_b.bytes[0] == uint8_t(v); }));
    }
    EXPECT_EQ(kAckEvery / 2, udp_qp(pair.qa).unacked.size());
    w = 0x2233;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qb, &w, 8, at_a.addr(), at_a.rkey));
    ASSERT_TRUE(pair.wait([&] { return udp_qp(pair.qa).unacked.empty(); }));
    EXPECT_EQ(0x33, at_a.bytes[0]);
    auto b = pair.counters(pair.b);
    EXPECT_EQ(1u, b.acks_carried);
    EXPECT_EQ(0u, b.acks_sent);
    EXPECT_EQ(2u, b.tx_packets); /* the two puts, the second with its rider */
    EXPECT_EQ(0u, pair.counters(pair.a).rx_dropped);
}

/* When an owed ACK rides: due at once; deferred, once it holds half of
 * kAckEvery packets or has waited a quarter of the ACK delay. */
TEST(UdpRideAck, WhenAnOwedAckRides)
{
    const uint64_t delay = 8000;
    Responder      r{};
    EXPECT_FALSE(ack_rides_now(r, 100, delay)) << "nothing owed";
    r.ack_due = true;
    EXPECT_TRUE(ack_rides_now(r, 100, delay));
    r              = {};
    r.ack_deferred = true;
    r.ack_deadline = 100000 + delay; /* deferred at 100000 */
    r.unacked_pkts = 1;
    EXPECT_FALSE(ack_rides_now(r, 100000, delay));
    EXPECT_FALSE(ack_rides_now(r, 100000 + delay / 4 - 1, delay));
    EXPECT_TRUE(ack_rides_now(r, 100000 + delay / 4, delay));
    r.unacked_pkts = kAckEvery / 2 - 1;
    EXPECT_FALSE(ack_rides_now(r, 100000, delay));
    r.unacked_pkts = kAckEvery / 2;
    EXPECT_TRUE(ack_rides_now(r, 100000, delay));
}

/* A message of several packets travels in data segments, which never carry
 * an ACK: the owed one waits for its delay or a one-packet request. */
TEST(UdpRideAck, NoAckRidesOnSegments)
{
    doorbell_iface_params_t p = steady_params();
    p.mtu                     = 1024;
    LoopbackPair pair(p, p);
    Region       at_a(pair.pd, 4096, DOORBELL_ACCESS_REMOTE_WRITE);
    Region       at_b(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t     v = 0x1111;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, at_b.addr(), at_b.rkey));
    ASSERT_TRUE(pair.wait([&] { return at_b.bytes[0] == 0x11; }));
    std::vector<uint8_t> big = pattern(4096, 3);
    Completion           done;
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qb, big, at_a, done));
    ASSERT_TRUE(pair.wait([&] { return at_a.bytes == big; }));
    EXPECT_EQ(0u, pair.counters(pair.b).acks_carried);
    EXPECT_EQ(1u, udp_qp(pair.qa).unacked.size());
}

/* A riding ACK is checked as an ACK datagram: one naming no QP of the
 * receiver, or with another connection's token, is dropped by its reason
 * while the request that carried it is taken; the genuine one completes. */
TEST(UdpRideAck, ForgedRidersAreDroppedAndTheRequestTaken)
{
    LoopbackPair pair(steady_params(), steady_params());
    Region       at_a(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    Region       at_b(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t     v = 0x1111;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, at_b.addr(), at_b.rkey));
    ASSERT_TRUE(pair.wait([&] { return at_b.bytes[0] == 0x11; }));
    uint64_t qa_token;
    uint32_t responder, next;
    ASSERT_TRUE(connection_of(pair.qa, &qa_token, &responder, &next));

    RideAck ride{};
    ride.token = qa_token;
    ride.qp    = qpn_of(pair.qa);
    ride.psn   = next; /* everything a sent */
    struct Forgery {
        uint64_t token;
        uint32_t qp;
        uint64_t doorbell_counters_t::*reason;
    };
    uint32_t skip = 0;
    for (Forgery f : {Forgery{qa_token ^ 1, ride.qp, &doorbell_counters_t::rx_drop_token},
                      Forgery{qa_token, ride.qp + 0x1000, &doorbell_counters_t::rx_drop_no_conn}}) {
        RideAck forged = ride;
        forged.token   = f.token;
        forged.qp      = f.qp;
        at_a.bytes[0]  = 0;
        auto d         = write_with_ride(pair.qb, at_a, forged, skip++);
        inject_datagram(pair.a, d.data(), d.size(), address_of(pair.b));
        EXPECT_EQ(0xee, at_a.bytes[0]) << "the request is taken";
        EXPECT_EQ(1u, pair.counters(pair.a).*f.reason);
        EXPECT_EQ(1u, udp_qp(pair.qa).unacked.size()) << "its ACK is not";
    }
    auto d = write_with_ride(pair.qb, at_a, ride, skip);
    inject_datagram(pair.a, d.data(), d.size(), address_of(pair.b));
    EXPECT_TRUE(udp_qp(pair.qa).unacked.empty()) << "the genuine rider acknowledged it";
    EXPECT_EQ(2u, pair.counters(pair.a).rx_dropped);
}
