/* Loss, reordering and duplication (the fault-injection seam), receiver
 * pressure on active messages, and a peer that stops answering. */
#include "loopback_pair.h"

#include "devices/udp/fault_injector.h"

#include <deque>

using namespace doorbell::test;
using doorbell::udp::FaultConfig;
using doorbell::udp::set_fault_injection;

namespace {

struct AmStream {
    std::vector<uint8_t> bytes; ///< concatenated payloads, in arrival order
    unsigned             count = 0;
};

doorbell_status_t append_am(void *arg, uint8_t, void *data, size_t length)
{
    auto *s = static_cast<AmStream *>(arg);
    auto *p = static_cast<uint8_t *>(data);
    s->bytes.insert(s->bytes.end(), p, p + length);
    ++s->count;
    return DOORBELL_OK;
}

struct PackArg {
    const uint8_t *src;
    size_t         length;
};

size_t pack(void *dest, void *arg)
{
    auto *p = static_cast<PackArg *>(arg);
    std::memcpy(dest, p->src, p->length);
    return p->length;
}

/// Faults on both ifaces, seeded differently.
void inject(LoopbackPair &pair, FaultConfig config)
{
    set_fault_injection(pair.a, &config);
    config.seed += 1000;
    set_fault_injection(pair.b, &config);
}

/// Writes, reads and active messages through a faulty wire; every byte must
/// arrive once, in order, intact.
void exercise(LoopbackPair &pair, uint32_t seed)
{
    /* a stream of AMs of varied sizes: order and content checked */
    AmStream stream;
    doorbell_iface_set_am_handler(pair.b, append_am, &stream);
    auto     am_data = pattern(300000, seed);
    size_t   offset  = 0;
    unsigned sent    = 0;
    while (offset < am_data.size()) {
        size_t  len = std::min<size_t>(1 + (offset * 7 + 13) % 8191, am_data.size() - offset);
        PackArg arg{am_data.data() + offset, len};
        ssize_t rc;
        while ((rc = doorbell_qp_am_bcopy(pair.qa, 1, pack, &arg)) == DOORBELL_ERR_NO_RESOURCE) {
            pair.progress();
        }
        ASSERT_EQ(ssize_t(len), rc) << doorbell_last_error();
        offset += len;
        ++sent;
    }

    /* a large write and a large read in the other direction */
    const size_t size = 3 << 20;
    Region       target(pair.pd, size, DOORBELL_ACCESS_REMOTE_WRITE);
    Region       source(pair.pd, size, DOORBELL_ACCESS_REMOTE_READ);
    auto         wdata = pattern(size, seed + 1);
    auto         rdata = pattern(size, seed + 2);
    std::memcpy(source.bytes.data(), rdata.data(), size);
    std::vector<uint8_t> dest(size);
    iovec                wiov{wdata.data(), size}, riov{dest.data(), size};
    Completion           w, r;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair.qb, &wiov, 1, target.addr(), target.rkey, &w));
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_get_zcopy(pair.qb, &riov, 1, source.addr(), source.rkey, &r));
    ASSERT_TRUE(pair.wait([&] { return stream.count == sent && w.count == 1 && r.count == 1; }))
        << "ams " << stream.count << "/" << sent;
    EXPECT_EQ(DOORBELL_OK, w.status);
    EXPECT_EQ(DOORBELL_OK, r.status);
    EXPECT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    EXPECT_EQ(DOORBELL_OK, pair.flush(pair.qb));
    EXPECT_EQ(sent, stream.count); /* no AM delivered twice */
    EXPECT_TRUE(stream.bytes == am_data);
    /* the AMs of one packet went in packs, several to a datagram */
    auto a = pair.counters(pair.a);
    EXPECT_GT(a.packs, 0u);
    EXPECT_GT(a.packed, a.packs);
    EXPECT_TRUE(target.bytes == wdata);
    EXPECT_TRUE(dest == rdata);
    EXPECT_EQ(0, pair.error_a.count) << pair.error_a.message;
    EXPECT_EQ(0, pair.error_b.count) << pair.error_b.message;
}

} // namespace

TEST(UdpReliability, CleanWire)
{
    LoopbackPair pair;
    exercise(pair, 1);
}

TEST(UdpReliability, Loss)
{
    LoopbackPair pair;
    inject(pair, {.tx_drop = 0.05, .rx_drop = 0.05, .seed = 11});
    exercise(pair, 2);
    auto a = pair.counters(pair.a), b = pair.counters(pair.b);
    EXPECT_GT(a.retransmits + b.retransmits, 0u);
}

TEST(UdpReliability, Reordering)
{
    LoopbackPair pair;
    inject(pair, {.reorder = 0.2, .seed = 12});
    exercise(pair, 3);
    auto a = pair.counters(pair.a), b = pair.counters(pair.b);
    EXPECT_GT(a.naks + b.naks, 0u);
}

TEST(UdpReliability, Duplication)
{
    LoopbackPair pair;
    inject(pair, {.duplicate = 0.2, .seed = 13});
    exercise(pair, 4);
    auto a = pair.counters(pair.a), b = pair.counters(pair.b);
    EXPECT_GT(a.rx_duplicates + b.rx_duplicates, 0u);
}

TEST(UdpReliability, EverythingAtOnce)
{
    doorbell_iface_params_t p = lo_params();
    p.mtu                     = 4000; /* more packets, more faults */
    LoopbackPair pair(p, p);
    inject(pair,
           {.tx_drop = 0.03, .rx_drop = 0.02, .duplicate = 0.05, .reorder = 0.05, .seed = 14});
    exercise(pair, 5);
}

/* ------------------------------------------------------------ multipath */

namespace {

/// Both sides send from four ports (udp_device.h, Multipath). On lo each
/// port's share of a flush leaves as one batch after the other's, so a
/// probe (a stamped packet from another port than the home, udp_paths.h)
/// arrives after packets sent behind it: what a fabric's paths do, on
/// every flush that probes.
doorbell_iface_params_t multipath_params()
{
    doorbell_iface_params_t p = lo_params();
    p.paths                   = 4;
    p.mtu                     = 4000; /* more packets per message */
    return p;
}

} // namespace

TEST(UdpReliability, MultipathHoldsWhatOvertookAGapAndExecutesInOrder)
{
    LoopbackPair pair(multipath_params(), multipath_params());
    exercise(pair, 21);
    auto a = pair.counters(pair.a), b = pair.counters(pair.b);
    EXPECT_GT(a.rx_held, 0u) << "b's read responses and AMs' ACKs arrive out of order";
    EXPECT_GT(b.rx_held, 0u);
    EXPECT_EQ(0u, a.naks + b.naks) << "a gap that fills is no loss";
    EXPECT_EQ(0u, a.rx_drop_source + b.rx_drop_source) << "every port of the peer is accepted";
}

TEST(UdpReliability, MultipathLoss)
{
    LoopbackPair pair(multipath_params(), multipath_params());
    inject(pair, {.tx_drop = 0.03, .rx_drop = 0.03, .seed = 22});
    exercise(pair, 22);
    auto a = pair.counters(pair.a), b = pair.counters(pair.b);
    EXPECT_GT(a.retransmits + b.retransmits, 0u);
    EXPECT_GT(a.rx_held + b.rx_held, 0u);
}

TEST(UdpReliability, MultipathEverythingAtOnce)
{
    LoopbackPair pair(multipath_params(), multipath_params());
    inject(pair,
           {.tx_drop = 0.03, .rx_drop = 0.02, .duplicate = 0.05, .reorder = 0.05, .seed = 23});
    exercise(pair, 23);
}

/// One side on several paths, the other on one: each accepts the other's.
TEST(UdpReliability, MultipathMeetsOnePath)
{
    doorbell_iface_params_t one = lo_params();
    one.paths                   = 1;
    LoopbackPair pair(multipath_params(), one);
    exercise(pair, 24);
    auto a = pair.counters(pair.a), b = pair.counters(pair.b);
    EXPECT_EQ(0u, a.rx_held) << "b sends from one port: in order";
    EXPECT_GT(b.rx_held, 0u);
}

TEST(UdpReliability, CeMarksAreEchoed)
{
    LoopbackPair pair;
    set_fault_injection(pair.b, [] {
        static FaultConfig c{.ce = 1.0, .seed = 3};
        return &c;
    }());
    Region     target(pair.pd, 1 << 20, DOORBELL_ACCESS_REMOTE_WRITE);
    auto       data = pattern(1 << 20, 3);
    Completion c;
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, target, c));
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_GT(pair.counters(pair.b).ce_marks, 0u);
}

/* -------------------------------------------- active-message pressure */

namespace {

/// Holds every AM (INPROGRESS) until the test releases it.
struct Holder {
    std::deque<void *>    held;
    std::vector<uint64_t> order;
};

doorbell_status_t hold_am(void *arg, uint8_t, void *data, size_t length)
{
    auto *h = static_cast<Holder *>(arg);
    EXPECT_EQ(8u, length);
    uint64_t seq;
    std::memcpy(&seq, data, 8);
    h->order.push_back(seq);
    h->held.push_back(data);
    return DOORBELL_INPROGRESS;
}

} // namespace

TEST(UdpAm, ReceiverOutOfBuffersNeverDropsAnAm)
{
    doorbell_iface_params_t pa = lo_params(), pb = lo_params();
    pb.rx_queue_len = 4; /* the receiver lends out at most 4 buffers */
    pa.am_credits   = 64;
    LoopbackPair pair(pa, pb);
    Holder       holder;
    doorbell_iface_set_am_handler(pair.b, hold_am, &holder);

    const unsigned total = 40;
    for (unsigned i = 0; i < total; ++i) {
        doorbell_status_t s;
        while ((s = doorbell_qp_am_short(pair.qa, 2, i, nullptr, 0)) == DOORBELL_ERR_NO_RESOURCE) {
            pair.progress();
        }
        ASSERT_EQ(DOORBELL_OK, s);
    }
    /* the receiver fills up: exactly 4 delivered, the rest is refused
     * (receiver-busy NAK) and kept by the sender */
    ASSERT_TRUE(
        pair.wait([&] { return holder.held.size() == 4 && pair.counters(pair.b).naks > 0; }));
    for (int i = 0; i < 100; ++i) {
        pair.progress();
    }
    EXPECT_EQ(4u, holder.held.size());
    /* releasing lets the rest in, one buffer at a time, in order */
    unsigned released = 0;
    ASSERT_TRUE(pair.wait([&] {
        if (!holder.held.empty()) {
            doorbell_iface_release_am(pair.b, holder.held.front());
            holder.held.pop_front();
            ++released;
        }
        return released == total;
    })) << released;
    ASSERT_EQ(total, holder.order.size());
    for (unsigned i = 0; i < total; ++i) {
        EXPECT_EQ(i, holder.order[i]);
    }
    EXPECT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    EXPECT_EQ(0, pair.error_a.count) << pair.error_a.message;
}

TEST(UdpAm, HandlerMayPostAndUseHeadroom)
{
    LoopbackPair pair;
    struct Echo {
        doorbell_qp_t *reply;
        int            got = 0;
    } echo{pair.qb};
    doorbell_iface_set_am_handler(
        pair.b,
        [](void *arg, uint8_t, void *data, size_t length) {
            auto *e = static_cast<Echo *>(arg);
            /* the headroom before data is ours to scribble on */
            std::memset(static_cast<uint8_t *>(data) - DOORBELL_AM_HEADROOM, 0xab,
                        DOORBELL_AM_HEADROOM);
            uint64_t hdr;
            std::memcpy(&hdr, data, 8);
            EXPECT_EQ(8u, length);
            return doorbell_qp_am_short(e->reply, 9, hdr + 1, nullptr, 0);
        },
        &echo);
    doorbell_iface_set_am_handler(
        pair.a,
        [](void *arg, uint8_t id, void *data, size_t) {
            uint64_t hdr;
            std::memcpy(&hdr, data, 8);
            EXPECT_EQ(9, id);
            EXPECT_EQ(42u, hdr);
            ++*static_cast<int *>(arg);
            return DOORBELL_OK;
        },
        &echo.got);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_am_short(pair.qa, 1, 41, nullptr, 0));
    ASSERT_TRUE(pair.wait([&] { return echo.got == 1; }));
}

/* --------------------------------------------------- peer goes away */

TEST(UdpTimeout, RetriesExhaustedReportTimedOut)
{
    doorbell_iface_params_t p = lo_params();
    p.rto_min_ns              = 100000;  /* 100 us */
    p.rto_max_ns              = 1000000; /* 1 ms */
    p.retry_count             = 4;
    LoopbackPair pair(p, p);
    Region       target(pair.pd, 4096, DOORBELL_ACCESS_REMOTE_WRITE);
    pair.close_b(); /* the peer is gone */

    auto       data = pattern(100, 1);
    Completion zc;
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, target, zc));
    ASSERT_EQ(DOORBELL_OK,
              doorbell_qp_put_short(pair.qa, data.data(), 8, target.addr(), target.rkey));
    Completion f;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_flush(pair.qa, &f));
    ASSERT_TRUE(pair.wait([&] { return f.count == 1 && pair.error_a.count == 1; }));
    EXPECT_EQ(DOORBELL_ERR_TIMED_OUT, zc.status);
    EXPECT_EQ(DOORBELL_ERR_TIMED_OUT, f.status);
    EXPECT_EQ(DOORBELL_ERR_TIMED_OUT, pair.error_a.status);
    EXPECT_NE(pair.error_a.message.find("127.0.0.1"), std::string::npos) << pair.error_a.message;
    /* each timeout resends the oldest packet alone (no flood into a peer
     * that may only be slow): retry_count resends, whatever the timing */
    EXPECT_EQ(4u, pair.counters(pair.a).retransmits);
    /* the QP is dead: later operations are canceled */
    EXPECT_EQ(DOORBELL_ERR_CANCELED,
              doorbell_qp_put_short(pair.qa, data.data(), 8, target.addr(), target.rkey));
}

TEST(UdpTimeout, ReadFromVanishedPeerTimesOut)
{
    doorbell_iface_params_t p = lo_params();
    p.rto_min_ns              = 100000;  /* 100 us */
    p.rto_max_ns              = 1000000; /* 1 ms */
    p.retry_count             = 3;
    LoopbackPair pair(p, p);
    Region       source(pair.pd, 1 << 20, DOORBELL_ACCESS_REMOTE_READ);
    pair.close_b();
    std::vector<uint8_t> dest(1 << 20, 0x77);
    iovec                iov{dest.data(), dest.size()};
    Completion           c;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_get_zcopy(pair.qa, &iov, 1, source.addr(), source.rkey, &c));
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_EQ(DOORBELL_ERR_TIMED_OUT, c.status);
    EXPECT_EQ(1, pair.error_a.count);
    EXPECT_EQ(std::vector<uint8_t>(1 << 20, 0x77), dest);
}

/* ------------------------------------------- a peer that is descheduled */

/* The peer stops running for a while (here: it is not progressed), so the
 * sender's timer fires although nothing was lost. Each timeout must resend
 * one packet, not the window: a spurious timeout must not turn into a flood
 * of duplicates, and once the peer runs again the transfer ends with every
 * resend accounted for as one duplicate. */
/* The last packet of a burst is lost: nothing after it shows the gap. A
 * tail-loss probe (a few round trips later) asks the peer, whose NAK brings
 * the resend; the 5 s retransmit timeout never fires. */
TEST(UdpTimeout, TailLossIsFoundByAProbeNotTheTimeout)
{
    LoopbackPair pair(steady_params(), steady_params());
    Region       target(pair.pd, 4096, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t     v = 1;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa)); /* an RTT sample */

    auto        data = pattern(100, 3);
    FaultConfig lose_all{.tx_drop = 1.0, .seed = 1};
    set_fault_injection(pair.a, &lose_all);
    Completion c;
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, target, c));
    set_fault_injection(pair.a, nullptr); /* the put went out and was lost */
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, c.status);
    EXPECT_EQ(0, std::memcmp(target.bytes.data(), data.data(), data.size()));
    auto a = pair.counters(pair.a);
    EXPECT_GE(a.tail_probes, 1u);
    EXPECT_EQ(0u, a.timeouts);
    EXPECT_EQ(1u, a.retransmits);
    EXPECT_GE(pair.counters(pair.b).naks, 1u);
}

/* All the data of a read is lost on the way back. Its request was executed,
 * so no NAK will come: tail-loss probes find out (the probe's ACK shows the
 * request arrived, the next one asks for the missing data again); the 5 s
 * retransmit timeout never fires. */
TEST(UdpTimeout, LostReadDataIsAskedForAgainWithoutATimeout)
{
    LoopbackPair pair(steady_params(), steady_params());
    const size_t len  = 200000;
    auto         data = pattern(len, 6);
    Region       source(pair.pd, len, DOORBELL_ACCESS_REMOTE_READ | DOORBELL_ACCESS_REMOTE_WRITE);
    std::copy(data.begin(), data.end(), source.bytes.begin());
    uint64_t v = 1;
    ASSERT_EQ(DOORBELL_OK,
              doorbell_qp_put_short(pair.qa, &v, 8, source.addr(len - 8), source.rkey));
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa)); /* an RTT sample */
    std::copy(data.end() - 8, data.end(), source.bytes.end() - 8);

    std::vector<uint8_t> dest(len);
    iovec                iov{dest.data(), len};
    Completion           c;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_get_zcopy(pair.qa, &iov, 1, source.addr(), source.rkey, &c));
    FaultConfig lose_all{.rx_drop = 1.0, .seed = 2};
    set_fault_injection(pair.a, &lose_all);
    /* the responder answers; every response is lost at the requester */
    const uint64_t b_sent = pair.counters(pair.b).tx_packets;
    while (pair.counters(pair.b).tx_packets == b_sent) {
        doorbell_iface_progress(pair.b);
    }
    /* every datagram b sent reaches a and is dropped there (a progress
     * call may take them one at a time) */
    const uint64_t answers = pair.counters(pair.b).tx_packets - b_sent;
    const uint64_t a_rx    = pair.counters(pair.a).rx_packets;
    while (pair.counters(pair.a).rx_packets - a_rx < answers) {
        doorbell_iface_progress(pair.a);
    }
    set_fault_injection(pair.a, nullptr);
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, c.status);
    EXPECT_EQ(data, dest);
    auto a = pair.counters(pair.a);
    EXPECT_GE(a.tail_probes, 1u);
    EXPECT_GE(a.retransmits, 1u); /* the request for the missing data */
    EXPECT_EQ(0u, a.timeouts);
}

TEST(UdpTimeout, DescheduledPeerGetsOneResendPerTimeoutNotAFlood)
{
    doorbell_iface_params_t p = lo_params();
    p.mtu                     = 1000; /* 16 packets in flight (fits any
                                          window: 16 KB) */
    LoopbackPair pair(p, p);
    const size_t size = 16000;
    Region       target(pair.pd, size, DOORBELL_ACCESS_REMOTE_WRITE);
    auto         data = pattern(size, 9);
    iovec        iov{data.data(), size};
    Completion   c;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair.qa, &iov, 1, target.addr(), target.rkey, &c));
    ASSERT_EQ(16u, pair.counters(pair.a).tx_packets);
    /* only the sender runs: three timeouts, three single resends (each
     * progress call handles at most one timeout) */
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (pair.counters(pair.a).retransmits < 3 && std::chrono::steady_clock::now() < deadline) {
        doorbell_iface_progress(pair.a);
    }
    EXPECT_EQ(3u, pair.counters(pair.a).retransmits);
    EXPECT_EQ(16u + 3u, pair.counters(pair.a).tx_packets);
    /* the peer runs again: it finds the originals and the resends queued */
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, c.status);
    EXPECT_EQ(data, target.bytes);
    auto a = pair.counters(pair.a), b = pair.counters(pair.b);
    EXPECT_EQ(a.retransmits, b.rx_duplicates); /* nothing was resent twice */
    EXPECT_EQ(0, pair.error_a.count) << pair.error_a.message;
}
