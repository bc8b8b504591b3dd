/* Messages of several packets and read responses travel in segments (the
 * shorter SegHeader: after a message's FIRST, no length, target or offset),
 * read off the wire by a plain UDP socket; one-packet AMs travel in packs;
 * and a receiver takes hostile segments apart safely. */
#include "loopback_pair.h"
#include "raw_peer.h"

#include "devices/udp/parser.h"

#include "am_seg_size.h" /* mpi_coll/algorithms: the collective's SEG_SIZE */

#include <functional>

using namespace doorbell::test;
using namespace doorbell::udp;

namespace {

constexpr uint32_t kMtu       = 1000;           /* full-header payload */
constexpr uint32_t kSendFirst = kMtu + 64 - 32; /* a SEND's FIRST segment, stamped */
constexpr uint32_t kSendSeg   = kMtu + 64 - 28; /* a SEND segment after it, stamped */
constexpr uint32_t kReadChunk = kMtu + 64 - 32; /* a READ_RESP's payload (room for the echo) */

/// Reads the datagrams of one message of `total` bytes sent in segments
/// (progressing `sender` while it waits), each a full datagram but the
/// last; each must parse and is checked by check(result, offset); their
/// payloads, in order, go to *got.
template <typename Check>
void read_segments(RawPeer &peer, doorbell_iface_t *sender, size_t total, Check check,
                   std::vector<uint8_t> *got)
{
    got->clear();
    for (uint32_t off = 0; off < total;) {
        auto        d = peer.next(sender);
        ParseResult r = parse(d.data(), d.size());
        ASSERT_EQ(ParseStatus::kOk, r.status) << "at " << off;
        check(r, off);
        got->insert(got->end(), r.payload, r.payload + r.header.length);
        off += r.header.length;
        if (off < total) {
            EXPECT_EQ(kMtu + 64, d.size()) << "a segment fills its datagram, at " << off;
        }
        ASSERT_GT(r.header.length, 0u);
    }
}

size_t pack(void *dest, void *arg)
{
    auto *v = static_cast<std::vector<uint8_t> *>(arg);
    std::memcpy(dest, v->data(), v->size());
    return v->size();
}

struct AmLog {
    std::vector<std::vector<uint8_t>> msgs;
};

doorbell_status_t log_am(void *arg, uint8_t, void *data, size_t length)
{
    auto *p = static_cast<uint8_t *>(data);
    static_cast<AmLog *>(arg)->msgs.emplace_back(p, p + length);
    return DOORBELL_OK;
}

doorbell_iface_params_t small_mtu()
{
    doorbell_iface_params_t p = steady_params(); /* no resend, no probe */
    p.mtu                     = kMtu;
    return p;
}

} // namespace

TEST(UdpDataSegments, ActiveMessagesFillWholeSegments)
{
    LoopbackPair            pair(small_mtu(), small_mtu());
    doorbell_iface_limits_t l;
    doorbell_iface_query_limits(pair.a, &l);
    /* whole segments even where every one is stamped: never a packet more */
    EXPECT_EQ(0u, (l.max_am_bcopy - kSendFirst) % kSendSeg);
    EXPECT_GT(l.max_am_bcopy + kSendSeg, 8192u); /* of the 8 KiB default */
    EXPECT_EQ(l.max_am_bcopy, l.max_am_zcopy);
    EXPECT_EQ(8192u, l.max_bcopy); /* puts are not rounded */

    LoopbackPair big_mtu; /* lo's MTU: an 8 KiB message is one packet */
    doorbell_iface_query_limits(big_mtu.a, &l);
    EXPECT_EQ(8192u, l.max_am_bcopy);
}

TEST(UdpDataSegments, MessagesOfSeveralPacketsTravelInDataSegments)
{
    LoopbackPair   pair(small_mtu(), small_mtu());
    RawPeer        peer;
    doorbell_qp_t *qp = peer.connect_from(pair.a);
    ASSERT_NE(nullptr, qp);
    doorbell_iface_limits_t l;
    doorbell_iface_query_limits(pair.a, &l);

    /* an AM of whole segments: the FIRST names its length, the others
     * nothing but their PSN (all stamped here: the connection has no RTT) */
    auto am = pattern(l.max_am_bcopy, 3);
    ASSERT_EQ(ssize_t(am.size()), doorbell_qp_am_bcopy(qp, 9, pack, &am));
    std::vector<uint8_t> got;
    uint32_t             psn0 = 0;
    ASSERT_NO_FATAL_FAILURE(read_segments(
        peer, pair.a, am.size(),
        [&](const ParseResult &r, uint32_t off) {
            bool first = off == 0;
            psn0       = first ? r.header.psn : psn0;
            EXPECT_EQ(first ? 32u : 28u, r.header_bytes);
            EXPECT_EQ(uint8_t(Opcode::kSend), r.header.opcode);
            EXPECT_EQ(RawPeer::kRawQp, r.header.dst_qp);
            EXPECT_EQ(9, r.header.am_id);
            EXPECT_NE(0u, r.header.ts_send);
            EXPECT_EQ(first ? 0u : kOffsetImplied, r.header.msg_offset);
            EXPECT_EQ(first ? am.size() : 0u, r.header.msg_length);
            EXPECT_EQ(first, (r.header.flags & kFlagFirst) != 0);
            EXPECT_EQ(off + r.header.length == am.size(), (r.header.flags & kFlagLast) != 0);
        },
        &got));
    EXPECT_EQ(am, got);

    /* a put: the FIRST carries the target, the rest only data */
    auto       data = pattern(3000, 4);
    iovec      iov{data.data(), data.size()};
    Completion c;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_put_zcopy(qp, &iov, 1, 0x10000, 0x55, &c));
    ASSERT_NO_FATAL_FAILURE(read_segments(
        peer, pair.a, data.size(),
        [&](const ParseResult &r, uint32_t off) {
            bool first = off == 0;
            EXPECT_EQ(first ? 44u : 28u, r.header_bytes);
            EXPECT_EQ(uint8_t(Opcode::kWrite), r.header.opcode);
            EXPECT_EQ(first ? 0x10000u : 0u, r.header.remote_addr);
            EXPECT_EQ(first ? 0x55u : 0u, r.header.rkey);
            EXPECT_EQ(first ? 3000u : 0u, r.header.msg_length);
        },
        &got));
    EXPECT_EQ(data, got);

    /* one packet's worth travels in a pack (20 bytes, and the stamp: this
     * connection has no RTT yet); one byte more is a data segment */
    for (uint32_t size : {kMtu, kMtu + 1}) {
        auto one = pattern(size, 5);
        ASSERT_EQ(ssize_t(size), doorbell_qp_am_bcopy(qp, 2, pack, &one));
        auto        d = peer.next(pair.a);
        ParseResult r = parse(d.data(), d.size());
        ASSERT_EQ(ParseStatus::kOk, r.status);
        EXPECT_EQ(size == kMtu ? 28u : 32u, r.header_bytes) << size;
        EXPECT_EQ(size == kMtu ? 1u : 0u, r.pack_count) << size;
        EXPECT_EQ(size, r.header.length);
        EXPECT_EQ(0, std::memcmp(one.data(), r.payload, size));
    }
    doorbell_qp_destroy(qp); /* the put never completes: nobody ACKs */
}

/* The responder takes a WRITE's and a SEND's later segments at the offsets
 * their FIRST began, and a segment that belongs to no message in progress,
 * runs past its message's end or ends it short is a protocol error (NAK
 * INVALID, the connection stops executing): memory is not touched. */
TEST(UdpDataSegments, ReceiverTakesSegmentsApartSafely)
{
    LoopbackPair pair;
    AmLog        log;
    doorbell_iface_set_am_handler(pair.b, log_am, &log);
    Region  target(pair.pd, 256, DOORBELL_ACCESS_REMOTE_WRITE, 0x33);
    RawPeer peer;
    auto    send = [&](WireHeader h, const std::vector<uint8_t> &payload) {
        peer.send_to(pair.b, peer.segment(h, payload));
    };
    auto first = [](Opcode op, uint32_t msg_length) {
        WireHeader h  = RawPeer::header(op);
        h.flags       = kFlagFirst;
        h.msg_length  = msg_length;
        h.am_id       = op == Opcode::kSend ? 3 : 0;
        h.remote_addr = 0;
        return h;
    };
    auto later = [](Opcode op, bool last) {
        WireHeader h = RawPeer::header(op);
        h.flags      = last ? kFlagLast : 0;
        h.am_id      = op == Opcode::kSend ? 3 : 0;
        h.msg_offset = kOffsetImplied;
        return h;
    };
    uint32_t qpn       = 100;
    auto     reconnect = [&] {               /* after an error the connection executes nothing */
                           peer.drain(); /* its ACKs and NAKs */
                           peer.conn_token += 1;
                           ASSERT_TRUE(peer.connect_to(pair.b, ++qpn));
    };
    ASSERT_TRUE(peer.connect_to(pair.b, qpn));

    /* a whole AM in one segment, and one in three */
    auto am = pattern(40, 6);
    send(
        [&] {
            WireHeader h = first(Opcode::kSend, 40);
            h.flags |= kFlagLast;
            return h;
        }(),
        am);
    ASSERT_TRUE(pair.wait([&] { return log.msgs.size() == 1; }));
    EXPECT_EQ(am, log.msgs[0]);
    auto three = pattern(90, 7);
    send(first(Opcode::kSend, 90), {three.begin(), three.begin() + 30});
    send(later(Opcode::kSend, false), {three.begin() + 30, three.begin() + 60});
    send(later(Opcode::kSend, true), {three.begin() + 60, three.end()});
    ASSERT_TRUE(pair.wait([&] { return log.msgs.size() == 2; }));
    EXPECT_EQ(three, log.msgs[1]);

    /* a WRITE in three segments: the later two land after the FIRST */
    auto       data = pattern(96, 8);
    WireHeader w    = first(Opcode::kWrite, 96);
    w.remote_addr   = target.addr() + 16;
    w.rkey          = target.rkey;
    send(w, {data.begin(), data.begin() + 32});
    send(later(Opcode::kWrite, false), {data.begin() + 32, data.begin() + 64});
    send(later(Opcode::kWrite, true), {data.begin() + 64, data.end()});
    ASSERT_TRUE(pair.wait([&] { return target.bytes[16 + 95] != 0x33; }));
    EXPECT_EQ(0, std::memcmp(target.bytes.data() + 16, data.data(), 96));
    EXPECT_EQ(0x33, target.bytes[15]);
    EXPECT_EQ(0x33, target.bytes[16 + 96]);

    /* hostile segments, each on a fresh connection (an error ends one) */
    auto          before = pair.counters(pair.b).naks;
    const uint8_t fill   = target.bytes[0];
    struct Bad {
        const char           *what;
        NakCause              cause; ///< the NAK names it
        std::function<void()> go;
    };
    std::vector<Bad> bad = {
        {"a later WRITE segment with no WRITE in progress", NakCause::kOutOfSequence,
         [&] { send(later(Opcode::kWrite, true), std::vector<uint8_t>(8, 0xee)); }},
        {"a later SEND segment with no SEND in progress", NakCause::kOutOfSequence,
         [&] { send(later(Opcode::kSend, true), std::vector<uint8_t>(8, 0xee)); }},
        {"a later WRITE segment past its message's end", NakCause::kPastEnd,
         [&] {
             WireHeader f  = first(Opcode::kWrite, 16);
             f.remote_addr = target.addr();
             f.rkey        = target.rkey;
             send(f, std::vector<uint8_t>(8, fill));
             send(later(Opcode::kWrite, false), std::vector<uint8_t>(64, 0xee));
         }},
        {"a LAST SEND segment that ends its message short", NakCause::kPastEnd,
         [&] {
             send(first(Opcode::kSend, 100), std::vector<uint8_t>(8, 0xee));
             send(later(Opcode::kSend, true), std::vector<uint8_t>(8, 0xee));
         }},
    };
    for (auto &b : bad) {
        reconnect();
        b.go();
        WireHeader nak = peer.next_of(pair.b, Opcode::kNak);
        EXPECT_EQ(qpn, nak.dst_qp) << b.what;
        EXPECT_EQ(uint8_t(NakCode::kInvalid), nak.am_id) << b.what;
        EXPECT_EQ(uint32_t(b.cause), nak.rkey) << b.what;
        EXPECT_GT(pair.counters(pair.b).naks, before) << b.what;
        before = pair.counters(pair.b).naks;
    }
    for (int i = 0; i < 50; ++i) {
        pair.progress();
    }
    EXPECT_EQ(2u, log.msgs.size()) << "no hostile AM was delivered";
    for (size_t i = 0; i < target.bytes.size(); ++i) {
        ASSERT_NE(0xee, target.bytes[i]) << "at " << i;
    }
}

TEST(UdpDataSegments, ReadResponsesTravelInSegments)
{
    LoopbackPair pair(small_mtu(), small_mtu());
    Region       source(pair.pd, 3000, DOORBELL_ACCESS_REMOTE_READ);
    auto         data = pattern(3000, 8);
    std::memcpy(source.bytes.data(), data.data(), data.size());
    RawPeer peer;
    ASSERT_TRUE(peer.connect_to(pair.b));

    /* a requester's READ_REQ asks for the chunk its iface would ask for */
    WireHeader req     = RawPeer::header(Opcode::kReadReq);
    req.flags          = kFlagFirst | kFlagLast;
    req.remote_addr    = source.addr();
    req.rkey           = source.rkey;
    req.msg_length     = 3000;
    req.aux            = kReadChunk;
    req.ts_send        = 0x123456789ull;
    const uint32_t psn = peer.next_psn;
    peer.send_to(pair.b, peer.request(req, {}));

    std::vector<uint8_t> got;
    for (uint32_t off = 0; off < data.size(); off += kReadChunk) {
        auto        d = peer.next(pair.b);
        ParseResult r = parse(d.data(), d.size());
        ASSERT_EQ(ParseStatus::kOk, r.status) << "at " << off;
        EXPECT_EQ(off == 0 ? 32u : 24u, r.header_bytes) << "the echo on the FIRST only";
        EXPECT_EQ(uint8_t(Opcode::kReadResp), r.header.opcode);
        EXPECT_EQ(77u, r.header.dst_qp);
        EXPECT_EQ(peer.conn_token, r.header.token);
        EXPECT_EQ(psn, r.header.psn);
        EXPECT_EQ(off, r.header.msg_offset);
        EXPECT_EQ(std::min<uint32_t>(kReadChunk, 3000 - off), r.header.length);
        EXPECT_EQ(off == 0 ? 0x123456789ull : 0u, r.header.ts_echo);
        EXPECT_EQ(off == 0, (r.header.flags & kFlagFirst) != 0);
        got.insert(got.end(), r.payload, r.payload + r.header.length);
    }
    EXPECT_EQ(data, got);
}

/* The collective component asks its UCP context for a SEG_SIZE
 * (mpi_coll/algorithms/am_seg_size.h) so that a step of up to
 * coll_doorbell_am_max bytes, its 32-byte header and UCP's eager header go as
 * one active message: UCP cuts a longer one into fragments. Checked against
 * this device's own rounding at a small MTU, a 1500-byte Ethernet's and a
 * jumbo frame's. */
TEST(UdpDataSegments, TheCollectivesSegSizeCarriesItsLargestStepAsOneMessage)
{
    static_assert(DOORBELL_COLL_SEG_SIZE_DEFAULT == DOORBELL_DEFAULT_SEG_SIZE);
    static_assert(DOORBELL_COLL_SEG_SIZE_MAX == DOORBELL_MAX_SEG_SIZE);
    constexpr size_t kHeaders = 64; /* the component's 32 bytes and UCP's, with room */
    for (uint32_t mtu : {kMtu, 1408u, 8936u}) {
        for (size_t am_max : {size_t(4096), size_t(8192), size_t(16384), size_t(32768)}) {
            if (mtu > 1408 && am_max > 16384)
                continue; /* a jumbo segment's rounding is more than the slack */
            doorbell_iface_params_t p   = steady_params();
            size_t                  seg = doorbell_coll_am_seg_size(am_max);
            p.mtu                       = mtu;
            if (seg != 0)
                p.seg_size = uint32_t(seg);
            LoopbackPair            pair(p, p);
            doorbell_iface_limits_t l;
            doorbell_iface_query_limits(pair.a, &l);
            EXPECT_GE(l.max_am_bcopy, am_max + kHeaders) << "mtu " << mtu << " am_max " << am_max;
        }
    }
    /* nothing to ask for without active messages; never past the largest */
    EXPECT_EQ(0u, doorbell_coll_am_seg_size(0));
    EXPECT_EQ(size_t(DOORBELL_MAX_SEG_SIZE), doorbell_coll_am_seg_size(size_t(1) << 20));
}

/* A receiver takes an active message longer than its own SEG_SIZE from a
 * peer whose SEG_SIZE is larger (the collective component asks its own
 * context for a larger one; a rank may be configured apart): the message
 * arrives whole, the connection stays healthy, and one longer than any
 * iface sends is still a protocol error. */
TEST(UdpDataSegments, AMessageLongerThanTheReceiversSegSizeArrivesWhole)
{
    doorbell_iface_params_t big = small_mtu(), own = small_mtu();
    big.seg_size = 16384;
    LoopbackPair pair(big, own);
    AmLog        log;
    doorbell_iface_set_am_handler(pair.b, log_am, &log);
    doorbell_iface_limits_t la, lb;
    doorbell_iface_query_limits(pair.a, &la);
    doorbell_iface_query_limits(pair.b, &lb);
    ASSERT_GT(la.max_am_bcopy, 12000u);
    ASSERT_LT(lb.max_am_bcopy, 12000u) << "the receiver's own limit is below the message";

    for (uint8_t seed : {1, 2}) {
        auto am = pattern(12000, seed);
        ASSERT_EQ(ssize_t(am.size()), doorbell_qp_am_bcopy(pair.qa, 5, pack, &am));
        ASSERT_TRUE(pair.wait([&] { return log.msgs.size() == seed; }));
        EXPECT_EQ(am, log.msgs.back());
    }
    EXPECT_EQ(0u, pair.counters(pair.b).naks);
    EXPECT_EQ(0, pair.error_a.count) << pair.error_a.message;

    /* past the largest any iface sends: NAK INVALID, nothing delivered */
    RawPeer peer;
    ASSERT_TRUE(peer.connect_to(pair.b, 77));
    WireHeader h = RawPeer::header(Opcode::kSend);
    h.flags      = kFlagFirst;
    h.am_id      = 5;
    h.msg_length = DOORBELL_MAX_SEG_SIZE + 1;
    auto naks    = pair.counters(pair.b).naks;
    peer.send_to(pair.b, peer.segment(h, std::vector<uint8_t>(512, 0xee)));
    WireHeader nak = peer.next_of(pair.b, Opcode::kNak);
    EXPECT_EQ(uint8_t(NakCode::kInvalid), nak.am_id);
    EXPECT_EQ(uint32_t(NakCause::kTooLong), nak.rkey);
    EXPECT_GT(pair.counters(pair.b).naks, naks);
    EXPECT_EQ(2u, log.msgs.size());
}
