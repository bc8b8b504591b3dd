/* The packet parser over valid, random and mutated-valid input (the same
 * property the fuzz target checks, deterministic for every compiler). */
#include "devices/udp/parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

using namespace doorbell::udp;

namespace {

std::vector<uint8_t> datagram(const WireHeader &h, size_t payload)
{
    std::vector<uint8_t> v(sizeof(h) + payload, 0x5c);
    std::memcpy(v.data(), &h, sizeof(h));
    return v;
}

WireHeader header(Opcode op, uint32_t length, uint32_t msg_length, uint32_t offset)
{
    WireHeader h{};
    h.magic      = kMagic;
    h.version    = kVersion;
    h.opcode     = uint8_t(op);
    h.length     = length;
    h.msg_length = msg_length;
    h.msg_offset = offset;
    h.token      = 0x70c3e11;     /* every packet belongs to a connection */
    h.dst_qp     = 0x51;          /* and names its receiver's QP */
    if (op == Opcode::kConnect) { /* ... but a CONNECT, to an iface */
        h.dst_qp = 0;
        h.src_qp = 0x52;
        h.aux    = 1; /* the ports it sends from */
    }
    if (op == Opcode::kAccept) {
        h.src_qp = 0x53; /* the responder's QP for the connection */
        h.aux    = 1;
    }
    if (op == Opcode::kReadReq) {
        h.aux = 1000;
    }
    if (op == Opcode::kNak) {
        h.am_id = uint8_t(NakCode::kSequence);
    }
    if (op == Opcode::kAtomicReq) {
        h.am_id = DOORBELL_ATOMIC_CSWAP;
    }
    return h;
}

/// h as a segment (SegHeader) with payload bytes after it.
std::vector<uint8_t> seg_datagram(const WireHeader &h, size_t payload)
{
    uint8_t              hdr[64];
    uint32_t             n = encode_seg_header(h, hdr);
    std::vector<uint8_t> v(hdr, hdr + n);
    v.resize(n + payload, 0x5c);
    return v;
}

/// A segment of op: a WRITE's or SEND's FIRST of a msg_length-byte message
/// (with its length and target), or one after it (neither), stamped or
/// not; a READ_RESP at offset, the FIRST answer (with the echo) or not.
WireHeader segment(Opcode op, bool first, bool stamped, uint32_t msg_length = 3000,
                   uint32_t offset = 0)
{
    WireHeader h  = header(op, 0, 0, 0);
    h.dst_qp      = 0x1234;
    h.psn         = 77;
    h.flags       = first ? kFlagFirst : kFlagLast;
    h.ts_send     = stamped ? 0x1122334455667788ull : 0;
    h.am_id       = op == Opcode::kSend ? 5 : 0;
    h.remote_addr = op == Opcode::kWrite && first ? 0x7f0000001000ull : 0;
    h.rkey        = op == Opcode::kWrite && first ? 0xabcd : 0;
    h.msg_length  = op != Opcode::kReadResp && first ? msg_length : 0;
    h.msg_offset  = op == Opcode::kReadResp ? offset : first ? 0 : kOffsetImplied;
    if (op == Opcode::kReadResp) {
        h.ts_send = 0;
        h.ts_echo = first ? 0x0102030405060708ull : 0;
        h.flags   = first ? kFlagFirst : 0; /* a READ_RESP has no LAST */
    }
    return h;
}

/// h with kFlagRide and a RideAck behind payload bytes of payload.
std::vector<uint8_t> ride_datagram(WireHeader h, size_t payload)
{
    h.flags |= kFlagRide;
    std::vector<uint8_t> v = datagram(h, payload);
    RideAck              a{};
    a.token       = 0x5eed;
    a.qp          = 0x61;
    a.psn         = 9;
    a.hold        = 1000;
    a.ts_echo     = 0x1234;
    a.ce_bytes    = 64;
    const auto *b = reinterpret_cast<const uint8_t *>(&a);
    v.insert(v.end(), b, b + sizeof(a));
    return v;
}

/// A RideAck as the samples carry it.
RideAck sample_ride()
{
    RideAck a{};
    a.token    = 0x5eed;
    a.qp       = 0x61;
    a.psn      = 9;
    a.hold     = 1000;
    a.ts_echo  = 0x1234;
    a.ce_bytes = 64;
    return a;
}

/// A pack of messages of these lengths (their bytes 0x40 + index), stamped
/// with ts (0: not), asking for an ACK, carrying a RideAck.
std::vector<uint8_t> pack_datagram(const std::vector<uint32_t> &lens, uint64_t ts = 0,
                                   bool ack_req = false, bool ride = false)
{
    uint8_t              head[64];
    uint32_t             n = encode_pack_header(head,
                                                uint8_t((ack_req ? kFlagAckReq : 0) | (ride ? kFlagRide : 0)),
                                                uint32_t(lens.size()), 7, 0x70c3e11, 0x51, 1000, ts);
    std::vector<uint8_t> v(head, head + n);
    for (size_t i = 0; i < lens.size(); ++i) {
        if (lens.size() > 1) {
            PackMember  m{uint8_t(10 + i), uint16_t(lens[i])};
            const auto *b = reinterpret_cast<const uint8_t *>(&m);
            v.insert(v.end(), b, b + sizeof(m));
        }
        v.resize(v.size() + lens[i], uint8_t(0x40 + i));
    }
    if (ride) {
        RideAck     a = sample_ride();
        const auto *b = reinterpret_cast<const uint8_t *>(&a);
        v.insert(v.end(), b, b + sizeof(a));
    }
    return v;
}

/// Packs of every shape: one message and several, stamped or not, with an
/// ACK request and a rider.
std::vector<std::vector<uint8_t>> pack_samples()
{
    return {
        pack_datagram({8}),
        pack_datagram({0}),
        pack_datagram({22}, 0x1122334455667788ull, true, true),
        pack_datagram({8, 16, 1}),
        pack_datagram({100, 0, 7}, 0x99, false, true),
        pack_datagram(std::vector<uint32_t>(64, 3), 0x5, true),
    };
}

std::vector<std::vector<uint8_t>> valid_samples()
{
    return {
        ride_datagram(header(Opcode::kWrite, 8, 8, 0), 8),
        ride_datagram(header(Opcode::kSend, 8, 8, 0), 8),
        ride_datagram(header(Opcode::kReadReq, 0, 4096, 0), 0),
        seg_datagram(segment(Opcode::kWrite, true, true), 1000),
        seg_datagram(segment(Opcode::kWrite, false, false), 1000),
        seg_datagram(segment(Opcode::kSend, true, false), 1000),
        seg_datagram(segment(Opcode::kSend, false, true), 1000),
        seg_datagram(segment(Opcode::kReadResp, true, false, 0, 2000), 1000),
        seg_datagram(segment(Opcode::kReadResp, false, false, 0, 3000), 1000),
        datagram(header(Opcode::kWrite, 100, 300, 200), 100),
        datagram(header(Opcode::kWrite, 0, 0, 0), 0),
        datagram(header(Opcode::kSend, 8, 8, 0), 8),
        datagram(header(Opcode::kReadReq, 0, 4096, 0), 0),
        datagram(header(Opcode::kReadResp, 1000, 4096, 3000), 1000),
        datagram(header(Opcode::kAck, 0, 0, 0), 0),
        datagram(header(Opcode::kNak, 0, 0, 0), 0),
        datagram(header(Opcode::kSignal, 8, 8, 0), 8),
        datagram(header(Opcode::kAtomicReq, 16, 8, 0), 16),
        datagram(header(Opcode::kAtomicReq, 16, 4, 0), 16),
        datagram(header(Opcode::kAtomicResp, 0, 8, 0), 0),
        datagram(header(Opcode::kAckReq, 0, 0, 0), 0),
        datagram(header(Opcode::kConnect, 16, 0, 0), 16),
        datagram(header(Opcode::kAccept, 0, 0, 0), 0),
        datagram(header(Opcode::kDisconnect, 0, 0, 0), 0),
    };
}

/// What every accepted pack guarantees: messages within the datagram, each
/// a one-packet SEND of the connection at consecutive PSNs, exactly to the
/// datagram's end (a rider after them).
void check_pack(const ParseResult &r, const uint8_t *bytes, size_t len)
{
    ASSERT_EQ(kPackKind, bytes[0]);
    ASSERT_LE(len, kPackMaxBytes);
    ASSERT_GE(r.pack_count, 1u);
    ASSERT_LE(r.pack_count, kPackMaxMessages);
    ASSERT_EQ(r.has_ride, (bytes[1] & kFlagRide) != 0);
    Prefix p;
    ASSERT_TRUE(read_prefix(bytes, len, p));
    ASSERT_TRUE(known_prefix(p));
    ASSERT_EQ(uint8_t(Opcode::kSend), p.opcode);
    ASSERT_NE(0u, p.token);
    ASSERT_NE(0u, p.dst_qp);
    size_t end = len - (r.has_ride ? sizeof(RideAck) : 0);
    if (r.has_ride) {
        ASSERT_EQ(0, std::memcmp(&r.ride, bytes + end, sizeof(RideAck)));
        ASSERT_NE(0u, r.ride.token);
        ASSERT_NE(0u, r.ride.qp);
    }
    PackReader     reader(r);
    WireHeader     h;
    const uint8_t *payload;
    uint32_t       n        = 0;
    size_t         bytes_in = r.header_bytes - (r.pack_count > 1 ? sizeof(PackMember) : 0);
    while (reader.next(h, payload)) {
        ASSERT_EQ(uint8_t(Opcode::kSend), h.opcode);
        ASSERT_EQ(p.token, h.token);
        ASSERT_EQ(p.dst_qp, h.dst_qp);
        ASSERT_EQ(r.header.psn + n, h.psn);
        ASSERT_EQ(h.length, h.msg_length);
        ASSERT_EQ(0u, h.msg_offset);
        ASSERT_EQ(kFlagFirst | kFlagLast, h.flags & ~kFlagAckReq);
        ASSERT_TRUE(payload >= bytes && payload + h.length <= bytes + end);
        bytes_in += h.length + (r.pack_count > 1 ? sizeof(PackMember) : 0);
        ++n;
        ASSERT_EQ((h.flags & kFlagAckReq) != 0, r.pack_ack_req && n == r.pack_count);
    }
    ASSERT_EQ(r.pack_count, n);
    ASSERT_EQ(end, bytes_in);
}

/// What every accepted datagram guarantees to the receive path.
void check_invariants(const ParseResult &r, const uint8_t *bytes, size_t len)
{
    ASSERT_EQ(ParseStatus::kOk, r.status);
    if (r.pack_count != 0) {
        check_pack(r, bytes, len);
        return;
    }
    const WireHeader &h = r.header;
    ASSERT_EQ(r.has_ride, (h.flags & kFlagRide) != 0);
    ASSERT_EQ(len, r.header_bytes + h.length + (r.has_ride ? sizeof(RideAck) : 0));
    if (r.has_ride) {
        /* behind the payload of a request with the full header, whole */
        ASSERT_TRUE(may_carry_ack(h.opcode));
        ASSERT_EQ(sizeof(WireHeader), r.header_bytes);
        ASSERT_EQ(0, std::memcmp(&r.ride, bytes + len - sizeof(RideAck), sizeof(RideAck)));
        ASSERT_NE(0u, r.ride.token);
        ASSERT_NE(0u, r.ride.qp);
    }
    ASSERT_EQ(bytes + r.header_bytes, r.payload);
    bool seg = bytes[0] == kSegKind;
    if (seg) {
        /* a segment: the header its flags say, the fields a segment has */
        ASSERT_NE(r.header_bytes, sizeof(WireHeader));
        ASSERT_TRUE(h.opcode == uint8_t(Opcode::kWrite) || h.opcode == uint8_t(Opcode::kSend) ||
                    h.opcode == uint8_t(Opcode::kReadResp));
        ASSERT_EQ(seg_header_bytes(Opcode(h.opcode), h.flags & kFlagFirst, h.ts_send != 0),
                  r.header_bytes);
        if (h.opcode == uint8_t(Opcode::kReadResp)) {
            ASSERT_GT(h.length, 0u);
            ASSERT_LE(uint64_t(h.msg_offset) + h.length, UINT32_MAX);
            ASSERT_EQ(0u, h.ts_send);
        } else if (h.flags & kFlagFirst) {
            ASSERT_EQ(0u, h.msg_offset);
            ASSERT_LE(h.length, h.msg_length);
            ASSERT_TRUE(!(h.flags & kFlagLast) || h.length == h.msg_length);
        } else {
            ASSERT_EQ(kOffsetImplied, h.msg_offset); /* the responder's to fill */
            ASSERT_EQ(0u, h.msg_length);
        }
    }
    ASSERT_GT(h.opcode, 0);
    ASSERT_LT(h.opcode, uint8_t(Opcode::kLast));
    /* a connection (CONNECT: an iface) is named, at the prefix's offsets */
    ASSERT_NE(0u, h.token);
    ASSERT_EQ(h.dst_qp == 0, h.opcode == uint8_t(Opcode::kConnect));
    Prefix p;
    ASSERT_TRUE(read_prefix(bytes, len, p));
    ASSERT_EQ(h.token, p.token);
    ASSERT_EQ(h.dst_qp, p.dst_qp);
    ASSERT_EQ(h.opcode, p.opcode);
    switch (Opcode(h.opcode)) {
    case Opcode::kWrite:
    case Opcode::kSend:
    case Opcode::kReadResp:
        if (!seg) {
            ASSERT_LE(uint64_t(h.msg_offset) + h.length, h.msg_length);
        }
        break;
    case Opcode::kReadReq:
        ASSERT_EQ(0u, h.length);
        ASSERT_GT(h.aux, 0u);
        ASSERT_LE(h.aux, kMaxDatagram - seg_header_max(Opcode::kReadResp));
        break;
    case Opcode::kSignal:
        ASSERT_EQ(8u, h.length);
        ASSERT_EQ(8u, h.msg_length);
        ASSERT_EQ(0u, h.msg_offset);
        ASSERT_LE(h.am_id, uint8_t(DOORBELL_SIGNAL_ADD));
        ASSERT_GE(h.remote_addr + 8, h.remote_addr);
        break;
    case Opcode::kAtomicReq:
        ASSERT_EQ(sizeof(AtomicArgs), h.length);
        ASSERT_TRUE(h.msg_length == 4 || h.msg_length == 8);
        ASSERT_EQ(0u, h.msg_offset);
        ASSERT_LT(h.am_id, uint8_t(DOORBELL_ATOMIC_LAST));
        ASSERT_GE(h.remote_addr + h.msg_length, h.remote_addr);
        break;
    case Opcode::kNak:
        ASSERT_EQ(0u, h.length);
        ASSERT_GT(h.am_id, 0u);
        ASSERT_LT(h.am_id, uint8_t(NakCode::kLast));
        ASSERT_LT(h.rkey, uint32_t(NakCause::kLast));
        break;
    case Opcode::kAtomicResp:
        ASSERT_EQ(0u, h.length);
        ASSERT_TRUE(h.msg_length == 4 || h.msg_length == 8);
        ASSERT_TRUE(h.msg_length == 8 || (atomic_value(h) >> 32) == 0);
        break;
    case Opcode::kConnect:
        ASSERT_EQ(sizeof(ConnectPayload), h.length);
        ASSERT_NE(0u, h.src_qp);
        ASSERT_GE(h.aux, 1u);
        ASSERT_LE(uint64_t(h.aux) + h.am_id, kMaxPaths);
        break;
    case Opcode::kAccept:
        ASSERT_NE(0u, h.src_qp);
        ASSERT_EQ(0u, h.length);
        ASSERT_GE(h.aux, 1u);
        ASSERT_LE(uint64_t(h.aux) + h.am_id, kMaxPaths);
        break;
    default:
        ASSERT_EQ(0u, h.length);
    }
}

} // namespace

TEST(Parser, AcceptsValidPackets)
{
    for (auto &d : valid_samples()) {
        ParseResult r = parse(d.data(), d.size());
        ASSERT_EQ(ParseStatus::kOk, r.status) << int(d[5]);
        check_invariants(r, d.data(), d.size());
    }
    for (auto &d : pack_samples()) {
        ParseResult r = parse(d.data(), d.size());
        ASSERT_EQ(ParseStatus::kOk, r.status) << d.size();
        check_invariants(r, d.data(), d.size());
    }
}

/* A pack stands for one-packet SENDs at consecutive PSNs: each comes out as
 * the full header it would have had alone, with its own bytes. */
TEST(Parser, PacksExpandToOneSendEach)
{
    auto        one = pack_datagram({22}, 0x1122334455667788ull, true, true);
    ParseResult r   = parse(one.data(), one.size());
    ASSERT_EQ(ParseStatus::kOk, r.status);
    EXPECT_EQ(1u, r.pack_count);
    EXPECT_EQ(28u, r.header_bytes) << "20 bytes and the stamp";
    EXPECT_EQ(one.size(), 28u + 22 + sizeof(RideAck));
    EXPECT_TRUE(r.has_ride);
    EXPECT_EQ(0x5eedu, r.ride.token);
    WireHeader expect = make_header(Opcode::kSend);
    expect.flags      = kFlagFirst | kFlagLast | kFlagAckReq;
    expect.am_id      = 7;
    expect.token      = 0x70c3e11;
    expect.dst_qp     = 0x51;
    expect.psn        = 1000;
    expect.length     = 22;
    expect.msg_length = 22;
    expect.ts_send    = 0x1122334455667788ull;
    EXPECT_EQ(0, std::memcmp(&expect, &r.header, sizeof(expect)));

    auto        three = pack_datagram({8, 16, 1});
    ParseResult t     = parse(three.data(), three.size());
    ASSERT_EQ(ParseStatus::kOk, t.status);
    EXPECT_EQ(3u, t.pack_count);
    EXPECT_EQ(three.size(), 20u + 3 * sizeof(PackMember) + 8 + 16 + 1) << "unstamped";
    PackReader     reader(t);
    WireHeader     h;
    const uint8_t *payload;
    const uint32_t lens[] = {8, 16, 1};
    for (uint32_t i = 0; i < 3; ++i) {
        ASSERT_TRUE(reader.next(h, payload));
        EXPECT_EQ(1000 + i, h.psn);
        EXPECT_EQ(10 + i, h.am_id);
        EXPECT_EQ(lens[i], h.length);
        EXPECT_EQ(0u, h.ts_send) << "not stamped: no RTT sample";
        EXPECT_EQ(kFlagFirst | kFlagLast, h.flags);
        EXPECT_EQ(std::vector<uint8_t>(lens[i], uint8_t(0x40 + i)),
                  std::vector<uint8_t>(payload, payload + h.length));
    }
    EXPECT_FALSE(reader.next(h, payload));
}

TEST(Parser, ClassifiesBadPacks)
{
    auto status = [](const std::vector<uint8_t> &d) { return parse(d.data(), d.size()).status; };
    auto three  = pack_datagram({8, 16, 1});
    EXPECT_EQ(ParseStatus::kTruncated, status({three.begin(), three.begin() + 19}));
    EXPECT_EQ(ParseStatus::kTruncated, status({three.begin(), three.end() - 1}));
    auto longer = three;
    longer.push_back(0); /* a byte after the last message */
    EXPECT_EQ(ParseStatus::kMalformed, status(longer));
    auto none = three;
    none[2]   = 0; /* no message */
    EXPECT_EQ(ParseStatus::kMalformed, status(none));
    auto many = pack_datagram(std::vector<uint32_t>(64, 3));
    many[2]   = 65; /* more than a batch */
    EXPECT_EQ(ParseStatus::kMalformed, status(many));
    auto flags = three;
    flags[1]   = kFlagFirst; /* a pack has no segments */
    EXPECT_EQ(ParseStatus::kMalformed, status(flags));
    auto am_id = three;
    am_id[3]   = 1; /* several: each names its own */
    EXPECT_EQ(ParseStatus::kMalformed, status(am_id));
    auto qp = three;
    std::memset(qp.data() + offsetof(PackHeader, dst_qp), 0, 4);
    EXPECT_EQ(ParseStatus::kMalformed, status(qp));
    auto token = three;
    std::memset(token.data() + offsetof(PackHeader, token), 0, 8);
    EXPECT_EQ(ParseStatus::kMalformed, status(token));
    auto stamp = pack_datagram({8}, 0x77);
    std::memset(stamp.data() + sizeof(PackHeader), 0, 8); /* stamped "not stamped" */
    EXPECT_EQ(ParseStatus::kMalformed, status(stamp));
    auto ride = pack_datagram({8}, 0, false, true);
    std::memset(ride.data() + ride.size() - sizeof(RideAck), 0, 8); /* an ACK of no connection */
    EXPECT_EQ(ParseStatus::kMalformed, status(ride));
    auto past                    = three;
    past[sizeof(PackHeader) + 1] = 0xff; /* the first message runs past the end */
    EXPECT_EQ(ParseStatus::kTruncated, status(past));
    auto huge = pack_datagram({kPackMaxBytes - 20 + 1});
    EXPECT_EQ(ParseStatus::kMalformed, status(huge));
    auto fits = pack_datagram({kPackMaxBytes - 20});
    EXPECT_EQ(ParseStatus::kOk, status(fits));
    /* a pack is never read from a peek */
    EXPECT_EQ(ParseStatus::kTruncated, parse_header(three.data(), 20, three.size()).status);
}

TEST(Parser, ClassifiesBadPackets)
{
    auto d = datagram(header(Opcode::kWrite, 100, 100, 0), 100);
    EXPECT_EQ(ParseStatus::kTruncated, parse(d.data(), 10).status);
    EXPECT_EQ(ParseStatus::kTruncated, parse(d.data(), d.size() - 1).status);
    EXPECT_EQ(ParseStatus::kTruncated, parse(nullptr, 0).status);
    auto longer = d;
    longer.push_back(0);
    EXPECT_EQ(ParseStatus::kMalformed, parse(longer.data(), longer.size()).status);
    auto foreign = d;
    foreign[0] ^= 1;
    EXPECT_EQ(ParseStatus::kForeign, parse(foreign.data(), foreign.size()).status);
    auto version = d;
    version[4]   = kVersion + 1;
    EXPECT_EQ(ParseStatus::kForeign, parse(version.data(), version.size()).status);
    auto past = datagram(header(Opcode::kWrite, 100, 150, 100), 100);
    EXPECT_EQ(ParseStatus::kMalformed, parse(past.data(), past.size()).status);
    auto wrap        = header(Opcode::kWrite, 0, 16, 0);
    wrap.remote_addr = ~uint64_t(0) - 4;
    auto wd          = datagram(wrap, 0);
    EXPECT_EQ(ParseStatus::kMalformed, parse(wd.data(), wd.size()).status);
    auto chunk = header(Opcode::kReadReq, 0, 100, 0);
    chunk.aux  = 0;
    auto cd    = datagram(chunk, 0);
    EXPECT_EQ(ParseStatus::kMalformed, parse(cd.data(), cd.size()).status);
}

TEST(Parser, EveryPacketNamesAConnection)
{
    auto malformed = [](const WireHeader &h, size_t payload) {
        auto d = datagram(h, payload);
        return parse(d.data(), d.size()).status == ParseStatus::kMalformed;
    };
    auto h  = header(Opcode::kWrite, 8, 8, 0);
    h.token = 0; /* no connection has token 0 */
    EXPECT_TRUE(malformed(h, 8));
    h        = header(Opcode::kWrite, 8, 8, 0);
    h.dst_qp = 0; /* nor QP 0 */
    EXPECT_TRUE(malformed(h, 8));
    auto c   = header(Opcode::kConnect, 16, 0, 0);
    c.dst_qp = 7; /* a CONNECT goes to an iface, not to a QP */
    EXPECT_TRUE(malformed(c, 16));
    c = header(Opcode::kConnect, 8, 0, 0); /* its payload is 16 bytes */
    EXPECT_TRUE(malformed(c, 8));
    c        = header(Opcode::kConnect, 16, 0, 0);
    c.src_qp = 0; /* from a QP */
    EXPECT_TRUE(malformed(c, 16));
    auto a   = header(Opcode::kAccept, 0, 0, 0);
    a.src_qp = 0; /* naming the responder's QP */
    EXPECT_TRUE(malformed(a, 0));
    /* the ports a side sends from: 1 to kMaxPaths */
    c     = header(Opcode::kConnect, 16, 0, 0);
    c.aux = 0;
    EXPECT_TRUE(malformed(c, 16));
    c.aux = kMaxPaths + 1;
    EXPECT_TRUE(malformed(c, 16));
    c.aux = kMaxPaths;
    EXPECT_FALSE(malformed(c, 16));
    a     = header(Opcode::kAccept, 0, 0, 0);
    a.aux = 0;
    EXPECT_TRUE(malformed(a, 0));
    a.aux = kMaxPaths + 1;
    EXPECT_TRUE(malformed(a, 0));
    /* and the spare ones after them (am_id): no more than kMaxPaths in all,
     * a sum that would wrap included */
    c.aux   = kMaxPaths / 2;
    c.am_id = uint8_t(kMaxPaths / 2);
    EXPECT_FALSE(malformed(c, 16));
    c.am_id = uint8_t(kMaxPaths / 2 + 1);
    EXPECT_TRUE(malformed(c, 16));
    c.aux   = 0xffffffffu;
    c.am_id = 1;
    EXPECT_TRUE(malformed(c, 16));
    a.aux   = 1;
    a.am_id = uint8_t(kMaxPaths - 1);
    EXPECT_FALSE(malformed(a, 0));
    a.am_id = uint8_t(kMaxPaths);
    EXPECT_TRUE(malformed(a, 0));
    a.aux   = 0xffffffffu;
    a.am_id = 0xff;
    EXPECT_TRUE(malformed(a, 0));
    EXPECT_TRUE(malformed(header(Opcode::kDisconnect, 4, 4, 0), 4));
    /* the prefix is where the receive path looks first, in every format */
    auto   seg = seg_datagram(segment(Opcode::kSend, true, false), 100);
    Prefix p;
    ASSERT_TRUE(read_prefix(seg.data(), seg.size(), p));
    EXPECT_EQ(0x70c3e11u, p.token);
    EXPECT_EQ(0x1234u, p.dst_qp);
    EXPECT_FALSE(read_prefix(seg.data(), kPrefixBytes - 1, p));
}

TEST(Parser, SegmentsExpandToTheFullHeader)
{
    struct Case {
        Opcode   op;
        bool     first, stamped;
        uint32_t bytes; /* the header on the wire */
    };
    for (Case c :
         {Case{Opcode::kWrite, true, false, 36}, Case{Opcode::kWrite, true, true, 44},
          Case{Opcode::kWrite, false, false, 20}, Case{Opcode::kWrite, false, true, 28},
          Case{Opcode::kSend, true, false, 24}, Case{Opcode::kSend, false, false, 20},
          Case{Opcode::kReadResp, true, false, 32}, Case{Opcode::kReadResp, false, false, 24}}) {
        WireHeader  h = segment(c.op, c.first, c.stamped, 3000,
                               c.op == Opcode::kReadResp ? 1000 : 0);
        auto        d = seg_datagram(h, 1000);
        ParseResult r = parse(d.data(), d.size());
        ASSERT_EQ(ParseStatus::kOk, r.status) << int(c.op) << c.first << c.stamped;
        EXPECT_EQ(c.bytes, r.header_bytes) << int(c.op) << c.first << c.stamped;
        EXPECT_EQ(seg_header_bytes(c.op, c.first, c.stamped), r.header_bytes);
        h.length = 1000; /* the datagram's rest */
        EXPECT_EQ(0, std::memcmp(&h, &r.header, sizeof(h))) << int(c.op) << c.first << c.stamped;
        check_invariants(r, d.data(), d.size());
    }
}

TEST(Parser, ClassifiesBadSegments)
{
    auto status = [](const std::vector<uint8_t> &d) { return parse(d.data(), d.size()).status; };
    auto w      = seg_datagram(segment(Opcode::kWrite, true, false), 1000);
    EXPECT_EQ(ParseStatus::kTruncated, status({w.begin(), w.begin() + 19}));
    EXPECT_EQ(ParseStatus::kTruncated, status({w.begin(), w.begin() + 30})) << "no target";
    auto am_id = w;
    am_id[3]   = 1; /* a WRITE has none */
    EXPECT_EQ(ParseStatus::kMalformed, status(am_id));
    auto flags = w;
    flags[1]   = 0x80;
    EXPECT_EQ(ParseStatus::kMalformed, status(flags));
    auto ride = w;
    ride[1] |= kFlagRide; /* no segment carries an ACK */
    EXPECT_EQ(ParseStatus::kMalformed, status(ride));
    auto qp = w;
    std::memset(qp.data() + offsetof(SegHeader, dst_qp), 0, 4);
    EXPECT_EQ(ParseStatus::kMalformed, status(qp));
    auto token = w;
    std::memset(token.data() + offsetof(SegHeader, token), 0, 8);
    EXPECT_EQ(ParseStatus::kMalformed, status(token));
    /* a FIRST longer than its message, or one that is also LAST and shorter */
    EXPECT_EQ(ParseStatus::kMalformed,
              status(seg_datagram(segment(Opcode::kSend, true, false, 999), 1000)));
    WireHeader whole = segment(Opcode::kSend, true, false, 1001);
    whole.flags |= kFlagLast;
    EXPECT_EQ(ParseStatus::kMalformed, status(seg_datagram(whole, 1000)));
    whole.msg_length = 1000;
    EXPECT_EQ(ParseStatus::kOk, status(seg_datagram(whole, 1000)));
    WireHeader wrap  = segment(Opcode::kWrite, true, false);
    wrap.remote_addr = ~uint64_t(0) - 4; /* the target would wrap */
    EXPECT_EQ(ParseStatus::kMalformed, status(seg_datagram(wrap, 100)));
    auto stamp = seg_datagram(segment(Opcode::kSend, false, true), 100);
    std::memset(stamp.data() + sizeof(SegHeader), 0, 8); /* stamped "not stamped" */
    EXPECT_EQ(ParseStatus::kMalformed, status(stamp));
    /* a READ_RESP: data, no AM id, no ACK request, an echo when FIRST */
    auto rr = seg_datagram(segment(Opcode::kReadResp, true, false, 0, 1000), 1000);
    EXPECT_EQ(ParseStatus::kTruncated, status({rr.begin(), rr.begin() + 28})) << "no echo";
    auto rr_id = rr;
    rr_id[3]   = 1;
    EXPECT_EQ(ParseStatus::kMalformed, status(rr_id));
    auto rr_ack = rr;
    rr_ack[1] |= kFlagAckReq;
    EXPECT_EQ(ParseStatus::kMalformed, status(rr_ack));
    EXPECT_EQ(ParseStatus::kMalformed,
              status(seg_datagram(segment(Opcode::kReadResp, false, false, 0, 1000), 0)));
    EXPECT_EQ(ParseStatus::kMalformed,
              status(seg_datagram(segment(Opcode::kReadResp, false, false, 0, UINT32_MAX), 1)));
    /* only WRITE, SEND and READ_RESP travel in segments */
    for (Opcode op : {Opcode::kAck, Opcode::kNak, Opcode::kReadReq, Opcode::kSignal,
                      Opcode::kAckReq, Opcode::kAtomicReq, Opcode::kAtomicResp}) {
        auto other = seg_datagram(segment(Opcode::kSend, true, false), 100);
        other[2]   = uint8_t(op);
        EXPECT_EQ(ParseStatus::kMalformed, status(other)) << int(op);
    }
}

TEST(Parser, AHeaderParsesFromItsFirstBytes)
{
    /* a peek holds the header and part of the payload: the same result as
     * the whole datagram, and nothing past head_len is read */
    for (auto &d : valid_samples()) {
        ParseResult whole = parse(d.data(), d.size());
        ASSERT_EQ(ParseStatus::kOk, whole.status);
        std::vector<uint8_t> head(d.begin(), d.begin() + whole.header_bytes);
        ParseResult          peek = parse_header(head.data(), head.size(), d.size());
        ASSERT_EQ(ParseStatus::kOk, peek.status);
        EXPECT_EQ(0, std::memcmp(&whole.header, &peek.header, sizeof(WireHeader)));
        EXPECT_EQ(whole.header_bytes, peek.header_bytes);
        EXPECT_EQ(ParseStatus::kTruncated,
                  parse_header(head.data(), head.size() - 1, d.size()).status);
    }
}

TEST(Parser, ARideAckIsCheckedWhole)
{
    auto        d = ride_datagram(header(Opcode::kWrite, 8, 8, 0), 8);
    ParseResult r = parse(d.data(), d.size());
    ASSERT_EQ(ParseStatus::kOk, r.status);
    EXPECT_TRUE(r.has_ride);
    EXPECT_EQ(8u, r.header.length);
    EXPECT_EQ(0x5eedu, r.ride.token);
    EXPECT_EQ(0x61u, r.ride.qp);
    EXPECT_EQ(9u, r.ride.psn);
    EXPECT_EQ(64u, r.ride.ce_bytes);

    /* cut short, one byte more; the header and payload alone (a peek) */
    EXPECT_EQ(ParseStatus::kTruncated, parse(d.data(), d.size() - 1).status);
    auto longer = d;
    longer.push_back(0);
    EXPECT_EQ(ParseStatus::kMalformed, parse(longer.data(), longer.size()).status);
    ParseResult peek = parse_header(d.data(), sizeof(WireHeader) + 8, d.size());
    EXPECT_EQ(ParseStatus::kOk, peek.status) << "a peek leaves the ACK to the full parse";
    EXPECT_FALSE(peek.has_ride);
    /* an ACK of no connection */
    size_t at = d.size() - sizeof(RideAck);
    for (size_t field : {offsetof(RideAck, token), offsetof(RideAck, qp)}) {
        auto bad = d;
        std::memset(bad.data() + at + field, 0, field == 0 ? 8 : 4);
        EXPECT_EQ(ParseStatus::kMalformed, parse(bad.data(), bad.size()).status) << field;
    }
    /* only a request of the send path carries one: not a response, a probe,
     * a handshake, nor a data segment */
    for (Opcode op : {Opcode::kAck, Opcode::kNak, Opcode::kAckReq, Opcode::kAtomicResp,
                      Opcode::kAccept, Opcode::kDisconnect}) {
        auto bad = ride_datagram(header(op, 0, op == Opcode::kAtomicResp ? 8 : 0, 0), 0);
        EXPECT_EQ(ParseStatus::kMalformed, parse(bad.data(), bad.size()).status) << int(op);
    }
    WireHeader seg = segment(Opcode::kWrite, true, false);
    seg.flags |= kFlagRide;
    auto bad = seg_datagram(seg, 1000);
    EXPECT_EQ(ParseStatus::kMalformed, parse(bad.data(), bad.size()).status);
}

TEST(Parser, ANakHasAKnownCodeAndCause)
{
    auto nak = header(Opcode::kNak, 0, 0, 0);
    for (uint8_t code = 1; code < uint8_t(NakCode::kLast); ++code) {
        for (uint32_t cause = 0; cause < uint32_t(NakCause::kLast); ++cause) {
            nak.am_id = code;
            nak.rkey  = cause;
            auto d    = datagram(nak, 0);
            auto r    = parse(d.data(), d.size());
            ASSERT_EQ(ParseStatus::kOk, r.status) << int(code) << " " << cause;
            EXPECT_EQ(cause, r.header.rkey);
            EXPECT_STRNE("an unknown cause", nak_cause_text(NakCause(cause)));
        }
    }
    nak.am_id = uint8_t(NakCode::kAccess);
    for (uint32_t cause : {uint32_t(NakCause::kLast), 0xffu, 0x100u, ~0u}) {
        nak.rkey = cause; /* no cause of this version */
        auto d   = datagram(nak, 0);
        EXPECT_EQ(ParseStatus::kMalformed, parse(d.data(), d.size()).status) << cause;
    }
    nak.rkey  = 0;
    nak.am_id = uint8_t(NakCode::kLast); /* no code of this version */
    auto d    = datagram(nak, 0);
    EXPECT_EQ(ParseStatus::kMalformed, parse(d.data(), d.size()).status);
}

TEST(Parser, SignalIsOneWordSetOrAdd)
{
    EXPECT_EQ(
        ParseStatus::kOk,
        parse(datagram(header(Opcode::kSignal, 8, 8, 0), 8).data(), sizeof(WireHeader) + 8).status);
    auto op  = header(Opcode::kSignal, 8, 8, 0);
    op.am_id = DOORBELL_SIGNAL_ADD + 1; /* neither SET nor ADD */
    auto bad = datagram(op, 8);
    EXPECT_EQ(ParseStatus::kMalformed, parse(bad.data(), bad.size()).status);
    auto wide = datagram(header(Opcode::kSignal, 16, 16, 0), 16);
    EXPECT_EQ(ParseStatus::kMalformed, parse(wide.data(), wide.size()).status);
    auto wrap        = header(Opcode::kSignal, 8, 8, 0);
    wrap.remote_addr = ~uint64_t(0) - 3; /* the word would wrap */
    auto w           = datagram(wrap, 8);
    EXPECT_EQ(ParseStatus::kMalformed, parse(w.data(), w.size()).status);
}

TEST(Parser, AtomicIsOneWordOfAKnownOperation)
{
    auto ok = datagram(header(Opcode::kAtomicReq, 16, 8, 0), 16);
    EXPECT_EQ(ParseStatus::kOk, parse(ok.data(), ok.size()).status);
    auto op  = header(Opcode::kAtomicReq, 16, 8, 0);
    op.am_id = DOORBELL_ATOMIC_LAST; /* no such operation */
    auto bad = datagram(op, 16);
    EXPECT_EQ(ParseStatus::kMalformed, parse(bad.data(), bad.size()).status);
    for (uint32_t size : {0u, 2u, 16u}) { /* 4 or 8 bytes only */
        auto s = datagram(header(Opcode::kAtomicReq, 16, size, 0), 16);
        EXPECT_EQ(ParseStatus::kMalformed, parse(s.data(), s.size()).status) << size;
    }
    auto args = datagram(header(Opcode::kAtomicReq, 8, 8, 0), 8); /* operands cut short */
    EXPECT_EQ(ParseStatus::kMalformed, parse(args.data(), args.size()).status);
    auto off = datagram(header(Opcode::kAtomicReq, 16, 8, 8), 16);
    EXPECT_EQ(ParseStatus::kMalformed, parse(off.data(), off.size()).status);
    auto wrap        = header(Opcode::kAtomicReq, 16, 8, 0);
    wrap.remote_addr = ~uint64_t(0) - 3;
    auto w           = datagram(wrap, 16);
    EXPECT_EQ(ParseStatus::kMalformed, parse(w.data(), w.size()).status);
    /* an answer carries no payload, and a 4-byte word's value fits it */
    auto resp = datagram(header(Opcode::kAtomicResp, 8, 8, 0), 8);
    EXPECT_EQ(ParseStatus::kMalformed, parse(resp.data(), resp.size()).status);
    auto wide = header(Opcode::kAtomicResp, 0, 4, 0);
    set_atomic_value(wide, uint64_t(1) << 32);
    auto wd = datagram(wide, 0);
    EXPECT_EQ(ParseStatus::kMalformed, parse(wd.data(), wd.size()).status);
    set_atomic_value(wide, 0xffffffffu);
    wd = datagram(wide, 0);
    EXPECT_EQ(ParseStatus::kOk, parse(wd.data(), wd.size()).status);
}

TEST(Parser, RandomBytesNeverCrashAndRarelyParse)
{
    std::mt19937_64      rng(1234);
    std::vector<uint8_t> buf(512);
    int                  ok = 0;
    for (int i = 0; i < 100000; ++i) {
        size_t len = rng() % buf.size();
        for (size_t j = 0; j < len; ++j) {
            buf[j] = uint8_t(rng());
        }
        ParseResult r = parse(buf.data(), len);
        if (r.status == ParseStatus::kOk) {
            ++ok;
            check_invariants(r, buf.data(), len);
        }
    }
    EXPECT_EQ(0, ok); /* a random 32-bit magic */
}

TEST(Parser, MutatedValidPacketsKeepInvariants)
{
    std::mt19937_64 rng(99);
    auto            samples = valid_samples();
    for (auto &p : pack_samples()) {
        samples.push_back(p);
    }
    int accepted = 0, rejected = 0;
    for (int i = 0; i < 200000; ++i) {
        std::vector<uint8_t> d     = samples[rng() % samples.size()];
        int                  flips = 1 + int(rng() % 4);
        for (int f = 0; f < flips; ++f) {
            switch (rng() % 4) {
            case 0: /* flip a bit in the header (a pack's may be shorter) */
                d[rng() % std::min(d.size(), sizeof(WireHeader))] ^= uint8_t(1u << (rng() % 8));
                break;
            case 1: /* overwrite a header byte */
                d[rng() % std::min(d.size(), sizeof(WireHeader))] = uint8_t(rng());
                break;
            case 2: /* cut the tail */
                d.resize(rng() % (d.size() + 1));
                break;
            default: /* grow */
                d.resize(d.size() + rng() % 64, 0xee);
                break;
            }
            if (d.empty()) {
                break;
            }
        }
        ParseResult r = parse(d.data(), d.size());
        if (r.status == ParseStatus::kOk) {
            ++accepted;
            check_invariants(r, d.data(), d.size());
        } else {
            ++rejected;
        }
    }
    /* both outcomes occur: the mutations reach the checks */
    EXPECT_GT(accepted, 1000);
    EXPECT_GT(rejected, 1000);
}
