/* Hostile input on the wire: malformed, truncated, foreign and stale
 * datagrams, and forged requests (bad keys and bounds of the requests a
 * QP makes are in the device contract, tests/contract). */
#include "loopback_pair.h"
#include "raw_peer.h"

#include "devices/udp/wire.h"

using namespace doorbell::test;
using doorbell::udp::NakCause;
using doorbell::udp::NakCode;
using doorbell::udp::Opcode;
using doorbell::udp::WireHeader;

namespace {

WireHeader valid_write(uint32_t len)
{
    WireHeader h{};
    h.magic      = doorbell::udp::kMagic;
    h.version    = doorbell::udp::kVersion;
    h.opcode     = uint8_t(Opcode::kWrite);
    h.flags      = doorbell::udp::kFlagFirst | doorbell::udp::kFlagLast;
    h.token      = 0x77;
    h.dst_qp     = 77;
    h.length     = len;
    h.msg_length = len;
    return h;
}

} // namespace

TEST(UdpRawInput, MalformedTruncatedForeignAndStaleAreCountedAndDropped)
{
    LoopbackPair                      pair;
    Region                            target(pair.pd, 256, DOORBELL_ACCESS_REMOTE_WRITE, 0x33);
    RawPeer                           raw;
    std::vector<std::vector<uint8_t>> bad;

    auto bytes_of = [](const WireHeader &h, size_t payload) {
        std::vector<uint8_t> v(sizeof(h) + payload, 0xcc);
        std::memcpy(v.data(), &h, sizeof(h));
        return v;
    };
    bad.push_back({});                             /* empty */
    bad.push_back(std::vector<uint8_t>(10, 0x44)); /* shorter than a header */
    WireHeader h  = valid_write(16);
    h.remote_addr = target.addr();
    h.rkey        = target.rkey;
    h.magic       = 0x12345678;
    bad.push_back(bytes_of(h, 16)); /* foreign magic */
    h         = valid_write(16);
    h.version = 9;
    bad.push_back(bytes_of(h, 16)); /* future version */
    h         = valid_write(16);
    h.version = 2;
    bad.push_back(bytes_of(h, 16)); /* the version before connections */
    h        = valid_write(16);
    h.opcode = 200;
    bad.push_back(bytes_of(h, 16)); /* unknown opcode: names no connection */
    h            = valid_write(16);
    h.msg_offset = 0xfffffff8;
    bad.push_back(bytes_of(h, 16)); /* offset past message: no connection either */
    h        = valid_write(0);
    h.opcode = uint8_t(Opcode::kAck);
    h.dst_qp = 0xdeadbeef;
    bad.push_back(bytes_of(h, 0)); /* ACK for no QP: stale */
    h        = valid_write(0);
    h.opcode = uint8_t(Opcode::kConnect);
    h.dst_qp = 0;
    h.src_qp = 5;
    h.length = 16;
    h.aux    = 1;
    bad.push_back(bytes_of(h, 16)); /* a handshake without the iface's token */

    for (auto &d : bad) {
        raw.send_to(pair.b, d.data(), d.size());
    }
    ASSERT_TRUE(pair.wait([&] { return pair.counters(pair.b).rx_dropped >= bad.size(); }))
        << pair.counters(pair.b).rx_dropped;
    auto c = pair.counters(pair.b);
    EXPECT_EQ(bad.size(), c.rx_dropped);
    EXPECT_EQ(2u, c.rx_drop_malformed);
    EXPECT_EQ(3u, c.rx_drop_foreign);
    EXPECT_EQ(3u, c.rx_drop_no_conn);
    EXPECT_EQ(1u, c.rx_drop_token);
    EXPECT_EQ(0u, c.connects);
    EXPECT_EQ(std::vector<uint8_t>(256, 0x33), target.bytes);

    /* the iface still works */
    uint64_t v = 7;
    Region   ok(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, ok.addr(), ok.rkey));
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    EXPECT_EQ(7, ok.bytes[0]);
}

TEST(UdpRawInput, MalformedPacketsOfAConnectionAreDropped)
{
    /* a member of the job with a connection, sending what the parser refuses:
     * the token passes, the packet does not */
    LoopbackPair pair;
    Region       target(pair.pd, 256, DOORBELL_ACCESS_REMOTE_WRITE, 0x33);
    RawPeer      raw;
    ASSERT_TRUE(raw.connect_to(pair.b));
    WireHeader w  = RawPeer::header(Opcode::kWrite);
    w.flags       = doorbell::udp::kFlagFirst | doorbell::udp::kFlagLast;
    w.remote_addr = target.addr();
    w.rkey        = target.rkey;
    w.msg_length  = 16;
    auto trunc    = raw.request(w, std::vector<uint8_t>(16, 0xcc));
    trunc.pop_back(); /* length says 16, 15 follow */
    raw.send_to(pair.b, trunc);
    w.msg_offset = 0xfffffff8;
    raw.send_to(pair.b, raw.request(w, std::vector<uint8_t>(16, 0xcc), raw.next_psn));
    w.msg_offset = 0;
    w.flags      = 0x80;
    raw.send_to(pair.b, raw.request(w, std::vector<uint8_t>(16, 0xcc), raw.next_psn));
    WireHeader n = RawPeer::header(Opcode::kNak); /* a NAK without a code, as a request */
    raw.send_to(pair.b, raw.request(n, {}, raw.next_psn));
    ASSERT_TRUE(pair.wait([&] { return pair.counters(pair.b).rx_dropped >= 4; }));
    auto c = pair.counters(pair.b);
    EXPECT_EQ(4u, c.rx_dropped);
    EXPECT_EQ(3u, c.rx_drop_malformed);
    EXPECT_EQ(1u, c.rx_drop_no_conn); /* a NAK names a requester's QP */
    EXPECT_EQ(std::vector<uint8_t>(256, 0x33), target.bytes);
}

TEST(UdpRawInput, ForgedWriteWithValidKeyButBadBoundsIsRejected)
{
    LoopbackPair pair;
    Region       target(pair.pd, 256, DOORBELL_ACCESS_REMOTE_WRITE, 0x33);
    RawPeer      raw;
    ASSERT_TRUE(raw.connect_to(pair.b));
    WireHeader h  = valid_write(64);
    h.remote_addr = target.addr(250);
    h.rkey        = target.rkey;
    raw.send_to(pair.b, raw.request(h, std::vector<uint8_t>(64, 0xcc)));
    WireHeader nak = raw.next_of(pair.b, Opcode::kNak);
    EXPECT_EQ(uint8_t(NakCode::kAccess), nak.am_id);
    EXPECT_EQ(uint32_t(NakCause::kOutOfRange), nak.rkey);
    EXPECT_EQ(1u, pair.counters(pair.b).remote_access_errors);
    EXPECT_EQ(std::vector<uint8_t>(256, 0x33), target.bytes);
}

/* Each refused request's NAK names the check that failed (in its rkey), so
 * the requester's error can say it: the protection domain's three verdicts
 * for a WRITE, a READ and a SIGNAL, and a SIGNAL's alignment. The target's
 * memory is untouched, and the verdict is repeated unchanged for the next
 * request of the failed connection. */
TEST(UdpRawInput, ARefusedRequestsNakNamesItsCause)
{
    LoopbackPair pair;
    Region       writable(pair.pd, 256, DOORBELL_ACCESS_REMOTE_WRITE, 0x33);
    Region       readable(pair.pd, 256, DOORBELL_ACCESS_REMOTE_READ, 0x44);
    RawPeer      raw;
    auto         write = [](const Region &r, size_t at, int key_delta) {
        WireHeader h  = valid_write(16);
        h.remote_addr = r.addr(at);
        h.rkey        = r.rkey + uint32_t(key_delta);
        return std::pair{h, std::vector<uint8_t>(16, 0xee)};
    };
    auto read = [](const Region &r, size_t at, size_t len) {
        WireHeader h  = RawPeer::header(Opcode::kReadReq);
        h.remote_addr = r.addr(at);
        h.rkey        = r.rkey;
        h.msg_length  = uint32_t(len);
        h.aux         = 1024;
        return std::pair{h, std::vector<uint8_t>{}};
    };
    auto signal = [](const Region &r, size_t at) {
        WireHeader h  = RawPeer::header(Opcode::kSignal);
        h.remote_addr = r.addr(at);
        h.rkey        = r.rkey;
        h.msg_length  = 8;
        return std::pair{h, std::vector<uint8_t>(8, 0xee)};
    };
    struct Case {
        const char                                 *what;
        std::pair<WireHeader, std::vector<uint8_t>> req;
        NakCause                                    cause;
    };
    const Case cases[] = {
        {"a WRITE under a key no region has", write(writable, 0, 1), NakCause::kUnknownKey},
        {"a WRITE past its region's end", write(writable, 248, 0), NakCause::kOutOfRange},
        {"a WRITE to a read-only region", write(readable, 0, 0), NakCause::kNotGranted},
        {"a READ of a write-only region", read(writable, 0, 64), NakCause::kNotGranted},
        {"a READ past its region's end", read(readable, 200, 64), NakCause::kOutOfRange},
        {"a SIGNAL to a word not 8-byte aligned", signal(writable, 4), NakCause::kMisaligned},
        {"a SIGNAL to a read-only region", signal(readable, 8), NakCause::kNotGranted},
    };
    uint32_t qpn = 300;
    for (const Case &c : cases) {
        raw.conn_token += 1; /* a refusal ends its connection */
        ASSERT_TRUE(raw.connect_to(pair.b, ++qpn)) << c.what;
        raw.send_to(pair.b, raw.request(c.req.first, c.req.second));
        WireHeader nak = raw.next_of(pair.b, Opcode::kNak);
        EXPECT_EQ(qpn, nak.dst_qp) << c.what;
        EXPECT_EQ(uint8_t(NakCode::kAccess), nak.am_id) << c.what;
        EXPECT_EQ(uint32_t(c.cause), nak.rkey) << c.what;
        /* the next request is not executed; the verdict comes again */
        raw.send_to(pair.b,
                    raw.request(write(writable, 0, 0).first, std::vector<uint8_t>(16, 0xee)));
        WireHeader again = raw.next_of(pair.b, Opcode::kNak);
        EXPECT_EQ(nak.psn, again.psn) << c.what;
        EXPECT_EQ(uint32_t(c.cause), again.rkey) << c.what;
    }
    EXPECT_EQ(std::vector<uint8_t>(256, 0x33), writable.bytes);
    EXPECT_EQ(std::vector<uint8_t>(256, 0x44), readable.bytes);
    EXPECT_EQ(std::size(cases), pair.counters(pair.b).remote_access_errors);
}

/* The requester's error names the cause its peer gave: a put the target
 * refuses fails its QP with REMOTE_ACCESS and a message with the device,
 * the peer, the PSN and the check. */
TEST(UdpRawInput, ARefusedPutsErrorNamesTheCheckThatFailed)
{
    struct Case {
        unsigned access;
        int      key_delta;
        size_t   offset;
        NakCause cause;
    };
    for (const Case &c : {Case{DOORBELL_ACCESS_REMOTE_WRITE, 7, 0, NakCause::kUnknownKey},
                          Case{DOORBELL_ACCESS_REMOTE_WRITE, 0, 4000, NakCause::kOutOfRange},
                          Case{DOORBELL_ACCESS_REMOTE_READ, 0, 0, NakCause::kNotGranted}}) {
        LoopbackPair pair;
        Region       target(pair.pd, 4096, c.access, 0x5a);
        auto         data = pattern(200, 3);
        ASSERT_EQ(DOORBELL_OK,
                  doorbell_qp_put_short(pair.qa, data.data(), data.size(), target.addr(c.offset),
                                        target.rkey + uint32_t(c.key_delta)));
        EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, pair.flush(pair.qa));
        ASSERT_EQ(1, pair.error_a.count);
        const std::string &m = pair.error_a.message;
        EXPECT_NE(std::string::npos, m.find(doorbell::udp::nak_cause_text(c.cause))) << m;
        EXPECT_NE(std::string::npos, m.find("rejected the remote access at PSN")) << m;
        RecordProperty("message_" + std::to_string(int(c.cause)), m);
        EXPECT_EQ(std::vector<uint8_t>(4096, 0x5a), target.bytes);
    }
}

/* A NAK is remote input too: one whose cause is no cause of this version is
 * dropped as malformed and fails nothing; a NAK(INVALID) fails the QP with
 * its cause in the message. */
TEST(UdpRawInput, ANaksCauseIsCheckedAndNamedInTheError)
{
    LoopbackPair   pair;
    RawPeer        peer;
    doorbell_qp_t *qp = peer.connect_from(pair.a);
    ASSERT_NE(nullptr, qp);
    uint64_t token  = 0;
    uint32_t remote = 0, next = 0;
    ASSERT_TRUE(doorbell::udp::connection_of(qp, &token, &remote, &next));
    uint64_t word = 1;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(qp, &word, sizeof(word), 0x1000, 0x55));
    doorbell::udp::ParseResult req;
    for (;;) { /* the put, after any probe */
        std::vector<uint8_t> d = peer.next(pair.a);
        ASSERT_FALSE(d.empty());
        req = doorbell::udp::parse(d.data(), d.size());
        if (req.status == doorbell::udp::ParseStatus::kOk &&
            Opcode(req.header.opcode) == Opcode::kWrite) {
            break;
        }
    }
    WireHeader n = RawPeer::header(Opcode::kNak);
    n.am_id      = uint8_t(NakCode::kInvalid);
    n.token      = token;
    n.dst_qp     = req.header.src_qp;
    n.src_qp     = RawPeer::kRawQp;
    n.psn        = req.header.psn;
    n.rkey       = uint32_t(NakCause::kLast); /* no cause of this version */
    auto dropped = pair.counters(pair.a).rx_drop_malformed;
    peer.send_to(pair.a, &n, sizeof(n));
    ASSERT_TRUE(pair.wait([&] { return pair.counters(pair.a).rx_drop_malformed > dropped; }));
    EXPECT_EQ(0, pair.error_a.count) << pair.error_a.message;

    n.rkey = uint32_t(NakCause::kTooLong);
    peer.send_to(pair.a, &n, sizeof(n));
    ASSERT_TRUE(pair.wait([&] { return pair.error_a.count == 1; }));
    EXPECT_EQ(DOORBELL_ERR_REMOTE, pair.error_a.status);
    const std::string &m = pair.error_a.message;
    EXPECT_NE(std::string::npos, m.find("rejected the request at PSN " +
                                        std::to_string(req.header.psn) + " as malformed"))
        << m;
    EXPECT_NE(std::string::npos, m.find(doorbell::udp::nak_cause_text(NakCause::kTooLong))) << m;
}
