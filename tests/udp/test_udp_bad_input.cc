/* Hostile input on the wire: malformed, truncated, foreign and stale
 * datagrams, and forged requests (bad keys and bounds of the requests a
 * QP makes are in the device contract, tests/contract). */
#include "loopback_pair.h"
#include "raw_peer.h"

#include "devices/udp/wire.h"

using namespace doorbell::test;
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
    ASSERT_TRUE(pair.wait([&] { return pair.counters(pair.b).remote_access_errors == 1; }));
    EXPECT_EQ(std::vector<uint8_t>(256, 0x33), target.bytes);
}
