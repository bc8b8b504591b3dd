/* Messages of several packets and read responses travel in data segments
 * (the shorter DataHeader), read off the wire by a plain UDP socket;
 * one-packet AMs travel in packs; and a receiver takes hostile
 * data segments apart safely. */
#include "loopback_pair.h"
#include "raw_peer.h"

#include "devices/udp/parser.h"

using namespace doorbell::test;
using namespace doorbell::udp;

namespace {

constexpr uint32_t kMtu       = 1000;           /* full-header payload */
constexpr uint32_t kSendSeg   = kMtu + 64 - 40; /* a SEND data segment */
constexpr uint32_t kWriteSeg  = kMtu + 64 - 56; /* a WRITE data segment */
constexpr uint32_t kReadChunk = kMtu + 64 - 48; /* a READ_RESP's payload */

/// Reads the datagrams of one message of `total` bytes sent in segments of
/// `seg` payload bytes (progressing `sender` while it waits); each must
/// parse and is checked by check(result, offset); their payloads, in order,
/// go to *got.
template <typename Check>
void read_segments(RawPeer &peer, doorbell_iface_t *sender, size_t total, uint32_t seg, Check check,
                   std::vector<uint8_t> *got)
{
    got->clear();
    for (uint32_t off = 0; off < total; off += seg) {
        auto        d = peer.next(sender);
        ParseResult r = parse(d.data(), d.size());
        ASSERT_EQ(ParseStatus::kOk, r.status) << "at " << off;
        check(r, off);
        got->insert(got->end(), r.payload, r.payload + r.header.length);
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
    EXPECT_EQ(0u, l.max_am_bcopy % kSendSeg);
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

    /* an AM of whole segments */
    auto am = pattern(l.max_am_bcopy, 3);
    ASSERT_EQ(ssize_t(am.size()), doorbell_qp_am_bcopy(qp, 9, pack, &am));
    std::vector<uint8_t> got;
    ASSERT_NO_FATAL_FAILURE(read_segments(
        peer, pair.a, am.size(), kSendSeg,
        [&](const ParseResult &r, uint32_t off) {
            EXPECT_EQ(40u, r.header_bytes);
            EXPECT_EQ(uint8_t(Opcode::kSend), r.header.opcode);
            EXPECT_EQ(RawPeer::kRawQp, r.header.dst_qp);
            EXPECT_EQ(9, r.header.am_id);
            EXPECT_EQ(kSendSeg, r.header.length);
            EXPECT_EQ(off, r.header.msg_offset);
            EXPECT_EQ(am.size(), r.header.msg_length);
            EXPECT_EQ(off == 0, (r.header.flags & kFlagFirst) != 0);
            EXPECT_EQ(off + kSendSeg == am.size(), (r.header.flags & kFlagLast) != 0);
        },
        &got));
    EXPECT_EQ(am, got);

    /* a put: WRITE segments carry the target */
    auto       data = pattern(3000, 4);
    iovec      iov{data.data(), data.size()};
    Completion c;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_put_zcopy(qp, &iov, 1, 0x10000, 0x55, &c));
    ASSERT_NO_FATAL_FAILURE(read_segments(
        peer, pair.a, data.size(), kWriteSeg,
        [&](const ParseResult &r, uint32_t off) {
            EXPECT_EQ(56u, r.header_bytes);
            EXPECT_EQ(uint8_t(Opcode::kWrite), r.header.opcode);
            EXPECT_EQ(0x10000u, r.header.remote_addr);
            EXPECT_EQ(0x55u, r.header.rkey);
            EXPECT_EQ(off, r.header.msg_offset);
            EXPECT_EQ(std::min<uint32_t>(kWriteSeg, 3000 - off), r.header.length);
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
        EXPECT_EQ(size == kMtu ? 28u : 40u, r.header_bytes) << size;
        EXPECT_EQ(size == kMtu ? 1u : 0u, r.pack_count) << size;
        EXPECT_EQ(size, r.header.length);
        EXPECT_EQ(0, std::memcmp(one.data(), r.payload, size));
    }
    doorbell_qp_destroy(qp); /* the put never completes: nobody ACKs */
}

TEST(UdpDataSegments, ReceiverTakesDataSegmentsApartSafely)
{
    LoopbackPair pair;
    AmLog        log;
    doorbell_iface_set_am_handler(pair.b, log_am, &log);
    Region  target(pair.pd, 256, DOORBELL_ACCESS_REMOTE_WRITE, 0x33);
    RawPeer peer;
    auto    send = [&](const WireHeader &h, const std::vector<uint8_t> &payload,
                    uint32_t reserved = 0) {
        uint8_t  buf[128];
        uint32_t n = encode_data_header(h, buf);
        if (reserved != 0) {
            std::memcpy(buf + sizeof(DataHeader) + 12, &reserved, 4);
        }
        std::vector<uint8_t> d(buf, buf + n);
        d.insert(d.end(), payload.begin(), payload.end());
        peer.send_to(pair.b, d.data(), d.size());
    };
    ASSERT_TRUE(peer.connect_to(pair.b));
    WireHeader h{};
    h.token  = peer.conn_token;
    h.dst_qp = peer.remote_qp;
    h.flags  = kFlagFirst | kFlagLast;

    /* a whole AM in one data segment: delivered, though not in place */
    auto am      = pattern(40, 6);
    h.opcode     = uint8_t(Opcode::kSend);
    h.am_id      = 3;
    h.psn        = peer.next_psn;
    h.msg_length = uint32_t(am.size());
    send(h, am);
    ASSERT_TRUE(pair.wait([&] { return log.msgs.size() == 1; }));
    EXPECT_EQ(am, log.msgs[0]);

    /* a WRITE whose reserved word is set is malformed: dropped */
    auto data        = pattern(64, 7);
    h.opcode         = uint8_t(Opcode::kWrite);
    h.am_id          = 0;
    h.psn            = peer.next_psn + 1;
    h.msg_length     = 64;
    h.remote_addr    = target.addr();
    h.rkey           = target.rkey;
    uint64_t dropped = pair.counters(pair.b).rx_dropped;
    send(h, data, 1);
    ASSERT_TRUE(pair.wait([&] { return pair.counters(pair.b).rx_dropped > dropped; }));
    EXPECT_EQ(std::vector<uint8_t>(256, 0x33), target.bytes);

    /* the same WRITE, well formed, lands */
    send(h, data);
    ASSERT_TRUE(pair.wait([&] { return target.bytes[0] != 0x33; }));
    EXPECT_EQ(0, std::memcmp(target.bytes.data(), data.data(), 64));
}

TEST(UdpDataSegments, ReadResponsesTravelInDataSegments)
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
    ASSERT_NO_FATAL_FAILURE(read_segments(
        peer, pair.b, data.size(), kReadChunk,
        [&](const ParseResult &r, uint32_t off) {
            EXPECT_EQ(48u, r.header_bytes);
            EXPECT_EQ(uint8_t(Opcode::kReadResp), r.header.opcode);
            EXPECT_EQ(77u, r.header.dst_qp);
            EXPECT_EQ(peer.conn_token, r.header.token);
            EXPECT_EQ(psn, r.header.psn);
            EXPECT_EQ(off, r.header.msg_offset);
            EXPECT_EQ(3000u, r.header.msg_length);
            EXPECT_EQ(std::min<uint32_t>(kReadChunk, 3000 - off), r.header.length);
            EXPECT_EQ(0x123456789ull, r.header.ts_echo);
            EXPECT_EQ(off == 0, (r.header.flags & kFlagFirst) != 0);
        },
        &got));
    EXPECT_EQ(data, got);
}
