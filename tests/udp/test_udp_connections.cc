/* Connections as an RC NIC has them, and what a software NIC adds: a QP
 * takes packets only with its connection's token, from the address it
 * connected to, at the PSN it expects; the handshake is bound to the iface's
 * token; strangers create no state, evict nobody and fill no memory; a peer
 * that dies is found by keepalive. */
#include "loopback_pair.h"
#include "raw_peer.h"

#include "devices/udp/fault_injector.h"
#include "devices/udp/parser.h"

#include <netinet/ip.h>
#include <netinet/udp.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <functional>
#include <memory>
#include <random>

using namespace doorbell::test;
using namespace doorbell::udp;

namespace {

struct Conn {
    uint64_t token      = 0;
    uint32_t remote_qpn = 0;
    uint32_t next_psn   = 0;
};

Conn connection(doorbell_qp_t *qp)
{
    Conn c;
    EXPECT_TRUE(connection_of(qp, &c.token, &c.remote_qpn, &c.next_psn));
    return c;
}

/// The UDP address an iface sends from.
sockaddr_in address_of(doorbell_iface_t *iface)
{
    sockaddr_in a{};
    a.sin_family = AF_INET;
    doorbell_iface_get_device_address(iface, &a.sin_addr);
    a.sin_port = iface_address(iface).port;
    return a;
}

std::vector<uint8_t> bytes_of(const WireHeader &h, const std::vector<uint8_t> &payload = {})
{
    std::vector<uint8_t> d(sizeof(h));
    std::memcpy(d.data(), &h, sizeof(h));
    d.insert(d.end(), payload.begin(), payload.end());
    return d;
}

/// A one-packet WRITE of 16 bytes of 0xee to target on connection (token,
/// dst_qp) at psn.
std::vector<uint8_t> write16(const Region &target, uint64_t token, uint32_t dst_qp, uint32_t psn)
{
    WireHeader h  = make_header(Opcode::kWrite);
    h.flags       = kFlagFirst | kFlagLast;
    h.token       = token;
    h.dst_qp      = dst_qp;
    h.src_qp      = 99;
    h.psn         = psn;
    h.remote_addr = target.addr();
    h.rkey        = target.rkey;
    h.msg_length  = 16;
    h.length      = 16;
    return bytes_of(h, std::vector<uint8_t>(16, 0xee));
}

/// Sends a UDP datagram with a forged source address through a raw IP
/// socket: false without CAP_NET_RAW.
bool send_spoofed(const sockaddr_in &from, const sockaddr_in &to, const std::vector<uint8_t> &d)
{
    int fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
    if (fd < 0) {
        return false;
    }
    std::vector<uint8_t> pkt(sizeof(iphdr) + sizeof(udphdr) + d.size());
    auto                *ip  = reinterpret_cast<iphdr *>(pkt.data());
    auto                *udp = reinterpret_cast<udphdr *>(pkt.data() + sizeof(iphdr));
    ip->version              = 4;
    ip->ihl                  = 5;
    ip->ttl                  = 64;
    ip->protocol             = IPPROTO_UDP;
    ip->tot_len              = htons(uint16_t(pkt.size()));
    ip->saddr                = from.sin_addr.s_addr;
    ip->daddr                = to.sin_addr.s_addr;
    udp->source              = from.sin_port;
    udp->dest                = to.sin_port;
    udp->len                 = htons(uint16_t(sizeof(udphdr) + d.size()));
    udp->check               = 0; /* none: allowed over IPv4 */
    std::memcpy(pkt.data() + sizeof(iphdr) + sizeof(udphdr), d.data(), d.size());
    bool ok = sendto(fd, pkt.data(), pkt.size(), 0, reinterpret_cast<const sockaddr *>(&to),
                     sizeof(to)) == ssize_t(pkt.size());
    close(fd);
    return ok;
}

struct AmCount {
    int                  calls = 0;
    std::vector<uint8_t> ids;
};

doorbell_status_t count_am(void *arg, uint8_t id, void *, size_t)
{
    auto *c = static_cast<AmCount *>(arg);
    ++c->calls;
    c->ids.push_back(id);
    return DOORBELL_OK;
}

} // namespace

TEST(UdpConnections, StrangersAreDroppedAndCountedBesideARunningTransfer)
{
    LoopbackPair pair;
    Region       target(pair.pd, 4 << 20, DOORBELL_ACCESS_REMOTE_WRITE);
    Region       decoy(pair.pd, 64, DOORBELL_ACCESS_REMOTE_WRITE, 0x33);
    auto         data = pattern(4 << 20, 1);
    Completion   done;
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, target, done));
    Conn live = connection(pair.qa);

    /* an earlier connection of the same iface, gone: its token is stale */
    doorbell_qp_t *old_qp = LoopbackPair::connect(pair.a, pair.b);
    ASSERT_TRUE(pair.wait([&] { return LoopbackPair::connected(old_qp); }));
    Conn stale = connection(old_qp);
    doorbell_qp_destroy(old_qp); /* DISCONNECT */
    uint64_t v = 1;
    Region   mark(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, mark.addr(), mark.rkey));
    Completion behind;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_flush(pair.qa, &behind));
    ASSERT_TRUE(pair.wait([&] { return behind.count == 1; })); /* the DISCONNECT is in */

    RawPeer stranger;
    auto    before = pair.counters(pair.b);
    /* from an unconnected source, naming no connection */
    stranger.send_to(pair.b, write16(decoy, 0x0123456789abcdefull, live.remote_qpn ^ 0x5a5a, 0));
    /* the live connection's QP with a wrong token */
    stranger.send_to(pair.b, write16(decoy, live.token + 1, live.remote_qpn, live.next_psn));
    /* the live connection's token, sniffed, from another address */
    stranger.send_to(pair.b, write16(decoy, live.token, live.remote_qpn, live.next_psn));
    /* the stale token of the connection that went: to its old QP, and to
     * the live connection's QP, from the address that had it */
    sockaddr_in a_addr = address_of(pair.a);
    auto        late1  = write16(decoy, stale.token, stale.remote_qpn, stale.next_psn);
    auto        late2  = write16(decoy, stale.token, live.remote_qpn, live.next_psn);
    inject_datagram(pair.b, late1.data(), late1.size(), a_addr);
    inject_datagram(pair.b, late2.data(), late2.size(), a_addr);
    /* the source address spoofed, without the token (inject: as the socket
     * would deliver it) */
    auto spoof = write16(decoy, 0x1111, live.remote_qpn, live.next_psn);
    inject_datagram(pair.b, spoof.data(), spoof.size(), a_addr);

    /* a member of the job with a connection of its own: a PSN ahead (a gap,
     * NAKed, not executed) and one outside any window */
    RawPeer member;
    ASSERT_TRUE(member.connect_to(pair.b));
    WireHeader w  = make_header(Opcode::kWrite);
    w.flags       = kFlagFirst | kFlagLast;
    w.remote_addr = decoy.addr();
    w.rkey        = decoy.rkey;
    w.msg_length  = 16;
    member.send_to(pair.b, member.request(w, std::vector<uint8_t>(16, 0xee), member.next_psn + 5));
    member.send_to(pair.b,
                   member.request(w, std::vector<uint8_t>(16, 0xee), member.next_psn + (1u << 30)));

    ASSERT_TRUE(
        pair.wait([&] { return pair.counters(pair.b).rx_dropped >= before.rx_dropped + 8; }));
    ASSERT_TRUE(pair.wait([&] { return done.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, done.status);
    EXPECT_EQ(data, target.bytes); /* the transfer beside them, intact */
    EXPECT_EQ(std::vector<uint8_t>(64, 0x33), decoy.bytes);
    EXPECT_EQ(0, pair.error_a.count) << pair.error_a.message;

    auto c = pair.counters(pair.b);
    EXPECT_EQ(before.rx_drop_no_conn + 2, c.rx_drop_no_conn); /* unconnected, stale QP */
    EXPECT_EQ(before.rx_drop_token + 3, c.rx_drop_token);     /* wrong, stale, spoofed */
    EXPECT_EQ(before.rx_drop_source + 1, c.rx_drop_source);   /* sniffed token */
    EXPECT_EQ(before.rx_drop_psn + 2, c.rx_drop_psn);         /* ahead, outside */
    EXPECT_EQ(before.rx_dropped + 8, c.rx_dropped);
}

// Atomics take the path of every request and response: an ATOMIC_REQ
// without the connection's token, from another address, or at a PSN ahead
// never runs, and an ATOMIC_RESP without the token or from another address
// never completes the requester's fetch; the genuine atomic beside them
// runs once and returns the genuine value.
TEST(UdpConnections, ForgedAtomicsNeitherRunNorAnswer)
{
    LoopbackPair pair;
    Region       word(pair.pd, 8, DOORBELL_ACCESS_REMOTE_ATOMIC);
    uint64_t     start = 1000;
    std::memcpy(word.bytes.data(), &start, 8);
    Conn live   = connection(pair.qa);
    auto before = pair.counters(pair.b);

    auto request = [&](uint64_t token, uint32_t dst_qp, uint32_t psn) {
        WireHeader h  = make_header(Opcode::kAtomicReq);
        h.flags       = kFlagFirst | kFlagLast;
        h.am_id       = DOORBELL_ATOMIC_ADD;
        h.token       = token;
        h.dst_qp      = dst_qp;
        h.src_qp      = 99;
        h.psn         = psn;
        h.remote_addr = word.addr();
        h.rkey        = word.rkey;
        h.msg_length  = 8;
        h.length      = sizeof(AtomicArgs);
        AtomicArgs           args{0, 1u << 20};
        std::vector<uint8_t> d = bytes_of(h);
        d.resize(sizeof(h) + sizeof(args));
        std::memcpy(d.data() + sizeof(h), &args, sizeof(args));
        return d;
    };
    RawPeer stranger;
    stranger.send_to(pair.b, request(live.token ^ 1, live.remote_qpn, live.next_psn)); /* token */
    stranger.send_to(pair.b, request(live.token, live.remote_qpn, live.next_psn));     /* source */
    auto spoof = request(0x2222, live.remote_qpn, live.next_psn);
    inject_datagram(pair.b, spoof.data(), spoof.size(), address_of(pair.a)); /* token */
    RawPeer member;
    ASSERT_TRUE(member.connect_to(pair.b));
    WireHeader ahead  = make_header(Opcode::kAtomicReq);
    ahead.flags       = kFlagFirst | kFlagLast;
    ahead.am_id       = DOORBELL_ATOMIC_ADD;
    ahead.remote_addr = word.addr();
    ahead.rkey        = word.rkey;
    ahead.msg_length  = 8;
    std::vector<uint8_t> operand(sizeof(AtomicArgs), 0);
    operand[8 + 2] = 0x10;                                                       /* 1 << 20 */
    member.send_to(pair.b, member.request(ahead, operand, member.next_psn + 3)); /* PSN */
    ASSERT_TRUE(
        pair.wait([&] { return pair.counters(pair.b).rx_dropped >= before.rx_dropped + 4; }));

    /* the genuine fetch-and-add, and forged answers to it that reach a
     * before the genuine one is read */
    uint64_t   result = 0;
    Completion done;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_atomic(pair.qa, DOORBELL_ATOMIC_ADD, 8, 1, 0,
                                                      word.addr(), word.rkey, &result, &done))
        << doorbell_last_error();
    auto       before_a = pair.counters(pair.a);
    uint32_t   qpn      = static_cast<doorbell::QpCore *>(pair.qa)->qpn;
    WireHeader r        = make_header(Opcode::kAtomicResp);
    r.flags             = kFlagFirst;
    r.dst_qp            = qpn;
    r.src_qp            = live.remote_qpn;
    r.psn               = live.next_psn;
    r.msg_length        = 8;
    set_atomic_value(r, 0xdeadbeef);
    r.token    = live.token ^ 0x40;
    auto wrong = bytes_of(r);
    inject_datagram(pair.a, wrong.data(), wrong.size(), address_of(pair.b)); /* token */
    r.token      = live.token;
    auto sniffed = bytes_of(r);
    stranger.send_to(pair.a, sniffed); /* source */
    ASSERT_TRUE(pair.wait([&] { return done.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, done.status);
    EXPECT_EQ(start, result);
    uint64_t now;
    std::memcpy(&now, word.bytes.data(), 8);
    EXPECT_EQ(start + 1, now); /* the genuine add, once; no forged one */
    ASSERT_TRUE(pair.wait(
        [&] { return pair.counters(pair.a).rx_drop_source >= before_a.rx_drop_source + 1; }));
    auto ca = pair.counters(pair.a);
    EXPECT_EQ(before_a.rx_drop_token + 1, ca.rx_drop_token);
    EXPECT_EQ(before_a.rx_drop_source + 1, ca.rx_drop_source);
    auto cb = pair.counters(pair.b);
    EXPECT_EQ(before.rx_drop_token + 2, cb.rx_drop_token);
    EXPECT_EQ(before.rx_drop_source + 1, cb.rx_drop_source);
    EXPECT_EQ(before.rx_drop_psn + 1, cb.rx_drop_psn);
    EXPECT_EQ(0, pair.error_a.count) << pair.error_a.message;
}

// A QP connects when it is first used: one never used sends nothing, even
// when checked (UCP creates endpoints it may never use and checks each; they
// would otherwise handshake and be kept alive), and its first post connects
// and completes.
TEST(UdpConnections, QpConnectsOnFirstUseAndAnUnusedOneSendsNothing)
{
    LoopbackPair pair;
    auto         before = pair.counters(pair.b);
    uint8_t      dev[16], ifa[16];
    doorbell_iface_get_device_address(pair.b, dev);
    doorbell_iface_get_address(pair.b, ifa);
    doorbell_qp_t *qp = nullptr;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_create(pair.a, dev, ifa, &qp)) << doorbell_last_error();
    EXPECT_EQ(DOORBELL_OK, doorbell_qp_check(qp)); /* nothing depends on its peer yet */
    for (int i = 0; i < 100; ++i) {
        pair.progress();
    }
    EXPECT_FALSE(LoopbackPair::connected(qp));
    EXPECT_EQ(before.rx_packets, pair.counters(pair.b).rx_packets);
    EXPECT_EQ(before.connects, pair.counters(pair.b).connects);

    Region   mark(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t v = 0x5eed;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(qp, &v, 8, mark.addr(), mark.rkey));
    Completion done;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_flush(qp, &done));
    ASSERT_TRUE(pair.wait([&] { return done.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, done.status);
    EXPECT_TRUE(LoopbackPair::connected(qp));
    EXPECT_EQ(before.connects + 1, pair.counters(pair.b).connects);
    uint64_t got;
    std::memcpy(&got, mark.bytes.data(), 8);
    EXPECT_EQ(v, got);
    doorbell_qp_destroy(qp);
}

TEST(UdpConnections, SpoofedSourceAddressWithoutTheTokenIsDropped)
{
    LoopbackPair pair;
    Region       decoy(pair.pd, 64, DOORBELL_ACCESS_REMOTE_WRITE, 0x33);
    Conn         live   = connection(pair.qa);
    auto         before = pair.counters(pair.b);
    /* a raw IP socket forges a's address and port: only the token is
     * missing, and the token is what is checked first */
    if (!send_spoofed(address_of(pair.a), address_of(pair.b),
                      write16(decoy, live.token ^ 0x8000, live.remote_qpn, live.next_psn))) {
        GTEST_SKIP() << "sending from a forged address needs CAP_NET_RAW (a raw IP socket)";
    }
    ASSERT_TRUE(
        pair.wait([&] { return pair.counters(pair.b).rx_drop_token > before.rx_drop_token; }));
    EXPECT_EQ(std::vector<uint8_t>(64, 0x33), decoy.bytes);
    uint64_t v = 2;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, decoy.addr(), decoy.rkey));
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa)); /* the connection is untouched */
    EXPECT_EQ(2, decoy.bytes[0]);
}

TEST(UdpConnections, ForgedSendsNeverReachTheHandler)
{
    LoopbackPair pair;
    AmCount      got;
    doorbell_iface_set_am_handler(pair.b, count_am, &got);
    Conn    live = connection(pair.qa);
    RawPeer stranger;

    /* The 72-byte datagram that aborted a rank: a SEND of UCP's AM id 23
     * whose 8-byte payload claims header_length 0xffff0000, and UCP's
     * software PUT (AM id 17) to address 0x1000; in the version-2 format it
     * was sent in, and in this one with every token a stranger can try. */
    std::vector<uint8_t> ucp_am{0x00, 0x00, 0xff, 0xff, 0, 0, 0, 0};
    std::vector<uint8_t> ucp_put{0x00, 0x10, 0, 0, 0, 0, 0, 0};
    for (uint8_t id : {uint8_t(23), uint8_t(17)}) {
        const auto &payload = id == 23 ? ucp_am : ucp_put;
        WireHeader  h       = make_header(Opcode::kSend);
        h.flags             = kFlagFirst | kFlagLast;
        h.am_id             = id;
        h.msg_length        = 8;
        h.length            = 8;
        auto v2             = bytes_of(h, payload);
        v2[4]               = 2; /* version 2: PSN 0 from a fresh source was taken */
        ASSERT_EQ(72u, v2.size());
        stranger.send_to(pair.b, v2);
        for (uint64_t token : {uint64_t(0x1), live.token ^ 1, live.token}) {
            h.token  = token;
            h.dst_qp = live.remote_qpn;
            h.psn    = live.next_psn;
            stranger.send_to(pair.b, bytes_of(h, payload));
        }
    }
    ASSERT_TRUE(pair.wait([&] { return pair.counters(pair.b).rx_dropped >= 8; }));
    EXPECT_EQ(0, got.calls);
    auto c = pair.counters(pair.b);
    EXPECT_EQ(2u, c.rx_drop_foreign);
    EXPECT_EQ(4u, c.rx_drop_token);
    EXPECT_EQ(2u, c.rx_drop_source);

    /* the connection's own AM is delivered, once */
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_am_short(pair.qa, 23, 0, nullptr, 0));
    ASSERT_TRUE(pair.wait([&] { return got.calls == 1; }));
    EXPECT_EQ(std::vector<uint8_t>{23}, got.ids);
}

TEST(UdpConnections, HandshakeFloodCannotEvictAConnectedPeer)
{
    LoopbackPair pair;
    Region       target(pair.pd, 64, DOORBELL_ACCESS_REMOTE_WRITE);
    sockaddr_in  from{};
    from.sin_family      = AF_INET;
    from.sin_addr.s_addr = htonl(0x7f000003); /* 127.0.0.3: nobody listens */
    from.sin_port        = htons(4000);
    IfaceAddress b_addr  = iface_address(pair.b);

    auto connect_packet = [&](uint64_t target_token, uint32_t qpn) {
        WireHeader h = make_header(Opcode::kConnect);
        h.token      = target_token;
        h.src_qp     = qpn;
        h.psn        = 1;
        h.length     = sizeof(ConnectPayload);
        h.aux        = 1;
        ConnectPayload       p{0xc0ffee00ull + qpn, 0xfeedull};
        std::vector<uint8_t> pl(sizeof(p));
        std::memcpy(pl.data(), &p, sizeof(p));
        return bytes_of(h, pl);
    };
    /* 200 000 handshakes and ACK requests from distinct QPs without the
     * iface's token: each is one table lookup and one compare, nothing more */
    for (uint32_t i = 1; i <= 100000; ++i) {
        auto       d     = connect_packet(b_addr.token ^ i, i);
        WireHeader probe = make_header(Opcode::kAckReq);
        probe.token      = i;
        probe.dst_qp     = i;
        auto q           = bytes_of(probe);
        inject_datagram(pair.b, d.data(), d.size(), from);
        inject_datagram(pair.b, q.data(), q.size(), from);
    }
    auto c = pair.counters(pair.b);
    EXPECT_EQ(0u, c.connects);
    EXPECT_EQ(200000u, c.rx_drop_token + c.rx_drop_no_conn);
    EXPECT_GE(c.rx_drop_token, 100000u); /* every CONNECT */

    /* and valid handshakes, from a member of the job that has the token,
     * until the table is full: the live connection is not among those that
     * make room, and what does not fit is refused */
    uint32_t n = 0;
    while (pair.counters(pair.b).conn_refused == 0 && n < 70000) {
        auto d = connect_packet(b_addr.token, ++n);
        inject_datagram(pair.b, d.data(), d.size(), from);
    }
    EXPECT_EQ(1u, pair.counters(pair.b).conn_refused);
    EXPECT_EQ(kMaxResponders - 1 /* and qa's */, pair.counters(pair.b).connects) << "after " << n;
    uint64_t v = 9;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    EXPECT_EQ(9, target.bytes[0]);
    EXPECT_EQ(0, pair.error_a.count) << pair.error_a.message;

    /* a real QP that asks now is refused, and says why */
    doorbell_qp_t *late = LoopbackPair::connect(pair.a, pair.b);
    ASSERT_TRUE(pair.wait([&] { return pair.error_a.count == 1; }));
    EXPECT_EQ(DOORBELL_ERR_REMOTE, pair.error_a.status);
    EXPECT_NE(pair.error_a.message.find("refused the connection"), std::string::npos)
        << pair.error_a.message;
    doorbell_qp_destroy(late);
}

TEST(UdpConnections, ReassemblyMemoryStaysUnderItsBound)
{
    doorbell_iface_params_t p = lo_params();
    p.mtu                     = 1000; /* an 8000-byte AM takes 8 packets */
    p.rx_reassembly_bytes     = 64 << 10;
    p.keepalive_interval_ns   = 0;
    p.keepalive_timeout_ns    = 100000000; /* 100 ms: half-finished messages go */
    LoopbackPair   pair(p, p);
    AmCount        got;
    const uint32_t seg  = 1000 + 64 - 24; /* a SEND's FIRST segment's payload */
    const uint32_t need = 64 + 8000;      /* a reassembly allocation */
    const uint32_t own  = 7000;           /* the genuine message: one AM's worth at this MTU */
    doorbell_iface_set_am_handler(pair.b, count_am, &got);

    /* a stranger's endless first segments hold nothing */
    RawPeer  stranger;
    uint32_t live_qp = connection(pair.qa).remote_qpn;
    for (int i = 0; i < 1000; ++i) {
        WireHeader h = make_header(Opcode::kSend);
        h.flags      = kFlagFirst;
        h.token      = 0xabcdef00 + i;
        h.dst_qp     = live_qp;
        h.msg_length = 8000;
        std::vector<uint8_t> d(2048);
        uint32_t             n = encode_seg_header(h, d.data());
        d.resize(n + seg);
        stranger.send_to(pair.b, d);
    }
    ASSERT_TRUE(pair.wait([&] { return pair.counters(pair.b).rx_drop_token == 1000; }));
    EXPECT_EQ(0u, pair.counters(pair.b).reasm_peak);

    /* members of the job that start messages and never finish them: at most
     * the bound is held, the rest is put off (the sender offers it again),
     * and the silent ones are reclaimed after KEEPALIVE_TIMEOUT */
    std::vector<std::unique_ptr<RawPeer>> members;
    for (int i = 0; i < 32; ++i) {
        members.push_back(std::make_unique<RawPeer>());
        ASSERT_TRUE(members.back()->connect_to(pair.b, 100 + i));
        WireHeader h = make_header(Opcode::kSend);
        h.flags      = kFlagFirst;
        h.token      = members.back()->conn_token;
        h.dst_qp     = members.back()->remote_qp;
        h.psn        = members.back()->next_psn;
        h.msg_length = 8000;
        std::vector<uint8_t> d(2048);
        uint32_t             n = encode_seg_header(h, d.data());
        d.resize(n + seg);
        members.back()->send_to(pair.b, d);
    }
    const uint64_t fit = (64 << 10) / need; /* 8 */
    ASSERT_TRUE(pair.wait([&] {
        auto c = pair.counters(pair.b);
        return c.reasm_busy + fit >= 32 && c.reasm_bytes == fit * need;
    }));
    EXPECT_LE(pair.counters(pair.b).reasm_peak, uint64_t(64 << 10));

    /* a genuine message of several packets waits for room, then arrives */
    auto big = pattern(own, 3);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_am_short(pair.qa, 5, 0, nullptr, 0));
    iovec      iov{big.data(), big.size()};
    Completion sent;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_am_zcopy(pair.qa, 6, nullptr, 0, &iov, 1, &sent));
    ASSERT_TRUE(pair.wait([&] { return sent.count == 1 && got.calls == 2; }));
    EXPECT_EQ(DOORBELL_OK, sent.status);
    /* the silent members' messages go, each KEEPALIVE_TIMEOUT after its
     * segment */
    ASSERT_TRUE(pair.wait([&] { return pair.counters(pair.b).reasm_bytes == 0; }));
    auto c = pair.counters(pair.b);
    EXPECT_EQ(fit, c.reasm_reclaimed);
    EXPECT_LE(c.reasm_peak, uint64_t(64 << 10));
    EXPECT_EQ(0, pair.error_a.count) << pair.error_a.message;
    /* a reclaimed member that goes on hears why its connection ended (the
     * others were put off as busy: their next segment is a gap) */
    uint64_t abandoned = 0;
    for (auto &m : members) {
        m->drain();
        WireHeader h = make_header(Opcode::kSend);
        h.token      = m->conn_token;
        h.dst_qp     = m->remote_qp;
        h.psn        = m->next_psn + 1;
        h.msg_offset = kOffsetImplied;
        std::vector<uint8_t> d(2048);
        d.resize(encode_seg_header(h, d.data()) + 64);
        m->send_to(pair.b, d);
        WireHeader nak = m->next_of(pair.b, Opcode::kNak);
        if (NakCode(nak.am_id) == NakCode::kInvalid) {
            EXPECT_EQ(uint32_t(NakCause::kAbandoned), nak.rkey);
            EXPECT_EQ(m->next_psn, nak.psn);
            ++abandoned;
        } else {
            EXPECT_EQ(uint8_t(NakCode::kSequence), nak.am_id);
        }
    }
    EXPECT_EQ(fit, abandoned);
}

TEST(UdpConnections, KilledIdlePeerBecomesAnErrorWithinTheConfiguredTime)
{
    doorbell_iface_params_t p = lo_params();
    p.keepalive_interval_ns   = 20000000;  /* 20 ms */
    p.keepalive_timeout_ns    = 200000000; /* 200 ms */
    doorbell_pd_t    *pd;
    doorbell_iface_t *iface;
    ASSERT_EQ(DOORBELL_OK, doorbell_pd_create(&pd));
    ASSERT_EQ(DOORBELL_OK, doorbell_iface_open(pd, &p, &iface)) << doorbell_last_error();
    QpError error;
    doorbell_iface_set_error_handler(iface, on_qp_error, &error);
    IfaceAddress mine = iface_address(iface);

    /* the peer: another process that connects back and progresses until
     * it is killed */
    int to_child[2], to_parent[2];
    ASSERT_EQ(0, pipe(to_child));
    ASSERT_EQ(0, pipe(to_parent));
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        doorbell_pd_t    *cpd;
        doorbell_iface_t *ci;
        if (doorbell_pd_create(&cpd) != DOORBELL_OK ||
            doorbell_iface_open(cpd, &p, &ci) != DOORBELL_OK) {
            _exit(2);
        }
        IfaceAddress ca = iface_address(ci);
        uint8_t      dev[4];
        doorbell_iface_get_device_address(ci, dev);
        doorbell_qp_t *cq;
        if (doorbell_qp_create(ci, dev, &mine, &cq) != DOORBELL_OK) {
            _exit(3);
        }
        connect_now(cq); /* the handshake now */
        if (write(to_parent[1], &ca, sizeof(ca)) != ssize_t(sizeof(ca))) {
            _exit(3);
        }
        for (;;) {
            doorbell_iface_progress(ci);
        }
    }
    IfaceAddress peer;
    ASSERT_EQ(ssize_t(sizeof(peer)), read(to_parent[0], &peer, sizeof(peer)));
    uint8_t dev[4];
    doorbell_iface_get_device_address(iface, dev);
    doorbell_qp_t *qp;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_create(iface, dev, &peer, &qp));
    connect_now(qp); /* the handshake now, as a first post */
    auto progress_until = [&](const std::function<bool()> &pred) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (!pred() && std::chrono::steady_clock::now() < deadline) {
            doorbell_iface_progress(iface);
        }
        return pred();
    };
    ASSERT_TRUE(progress_until([&] { return LoopbackPair::connected(qp); }));
    doorbell_counters_t c;
    /* alive and idle: probes are answered, nothing fails */
    ASSERT_TRUE(progress_until([&] {
        doorbell_iface_get_counters(iface, &c);
        return c.keepalives >= 3;
    }));
    EXPECT_EQ(0, error.count) << error.message;

    /* killed while nothing is outstanding to it */
    ASSERT_EQ(0, kill(child, SIGKILL));
    int status;
    ASSERT_EQ(child, waitpid(child, &status, 0));
    auto killed = std::chrono::steady_clock::now();
    ASSERT_TRUE(progress_until([&] { return error.count > 0; }));
    auto after = std::chrono::steady_clock::now() - killed;
    EXPECT_EQ(1, error.count);
    EXPECT_EQ(DOORBELL_ERR_TIMED_OUT, error.status);
    EXPECT_NE(error.message.find("keepalive"), std::string::npos) << error.message;
    /* (how long it took is recorded, not asserted: on a loaded host the
     * first unanswered probe may have left well before the kill) */
    RecordProperty("detected_after_ms",
                   int(std::chrono::duration_cast<std::chrono::milliseconds>(after).count()));
    doorbell_qp_destroy(qp);
    doorbell_iface_close(iface);
    doorbell_pd_destroy(pd);
    for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) {
        close(fd);
    }
}

TEST(UdpConnections, CheckProbesAnIdlePeerAndAnAnsweringOneLives)
{
    doorbell_iface_params_t p = steady_params(); /* no keepalive of its own */
    p.keepalive_timeout_ns    = 50000000;        /* 50 ms */
    LoopbackPair pair(p, p);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_check(pair.qa));
    EXPECT_EQ(1u, pair.counters(pair.a).keepalives);
    ASSERT_TRUE(pair.wait([&] { return pair.counters(pair.a).rx_packets >= 1; })); /* the ACK */
    /* the answer came: no error however long it stays idle now */
    auto idle = std::chrono::steady_clock::now() + std::chrono::milliseconds(120);
    while (std::chrono::steady_clock::now() < idle) {
        pair.progress();
    }
    EXPECT_EQ(0, pair.error_a.count) << pair.error_a.message;

    /* the peer vanishes (its iface closed, no goodbye for our QP): a check
     * is not answered and the QP fails after KEEPALIVE_TIMEOUT */
    pair.close_b();
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_check(pair.qa));
    ASSERT_TRUE(pair.wait([&] { return pair.error_a.count == 1; }));
    EXPECT_EQ(DOORBELL_ERR_TIMED_OUT, pair.error_a.status);
    EXPECT_EQ(DOORBELL_ERR_CANCELED, doorbell_qp_check(pair.qa));
}

TEST(UdpConnections, LostHandshakesAreRetried)
{
    doorbell_iface_params_t p = lo_params();
    doorbell_pd_t          *pd;
    doorbell_iface_t       *a, *b;
    ASSERT_EQ(DOORBELL_OK, doorbell_pd_create(&pd));
    ASSERT_EQ(DOORBELL_OK, doorbell_iface_open(pd, &p, &a));
    ASSERT_EQ(DOORBELL_OK, doorbell_iface_open(pd, &p, &b));
    /* b loses every CONNECT, then a loses every ACCEPT */
    FaultConfig all{};
    all.rx_drop = 1.0;
    set_fault_injection(b, &all);
    doorbell_qp_t *qp      = LoopbackPair::connect(a, b);
    auto           target_ = std::make_unique<Region>(pd, 64, DOORBELL_ACCESS_REMOTE_WRITE);
    Region        &target  = *target_;
    uint64_t       v       = 42;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(qp, &v, 8, target.addr(), target.rkey));
    doorbell_counters_t ca{}, cb{};
    auto                spin = [&](const std::function<bool()> &pred) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (!pred() && std::chrono::steady_clock::now() < deadline) {
            doorbell_iface_progress(a);
            doorbell_iface_progress(b);
            doorbell_iface_get_counters(a, &ca);
            doorbell_iface_get_counters(b, &cb);
        }
        return pred();
    };
    ASSERT_TRUE(spin([&] { return ca.tx_packets >= 3; })); /* CONNECT sent three times */
    set_fault_injection(b, nullptr);
    set_fault_injection(a, &all);
    ASSERT_TRUE(spin([&] { return cb.connects == 1 && cb.rx_duplicates >= 1; }));
    set_fault_injection(a, nullptr);
    ASSERT_TRUE(spin([&] { return target.bytes[0] == 42; })); /* the put waited, then went */
    EXPECT_EQ(1u, cb.connects); /* repeated CONNECTs got the same connection */
    target_.reset();
    doorbell_qp_destroy(qp);
    doorbell_iface_close(a);
    doorbell_iface_close(b);
    doorbell_pd_destroy(pd);
}

TEST(UdpConnections, UnansweredHandshakeFailsTheQp)
{
    doorbell_iface_params_t p = lo_params();
    p.rto_min_ns              = 100000; /* 100 us */
    p.rto_max_ns              = 1000000;
    p.retry_count             = 3;
    LoopbackPair   pair(p, p);
    RawPeer        silent; /* reads nothing, answers nothing */
    IfaceAddress   addr{silent.address().sin_port, RawPeer::kIfaceToken};
    doorbell_qp_t *qp = nullptr;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_create(pair.a, &silent.address().sin_addr, &addr, &qp));
    connect_now(qp); /* the handshake starts */
    ASSERT_TRUE(pair.wait([&] { return pair.error_a.count == 1; }));
    EXPECT_EQ(DOORBELL_ERR_TIMED_OUT, pair.error_a.status);
    EXPECT_NE(pair.error_a.message.find("did not accept the connection"), std::string::npos)
        << pair.error_a.message;
    doorbell_qp_destroy(qp);
}

TEST(UdpConnections, RestartedPeerAndRecreatedQpLeaveNoStaleConnection)
{
    LoopbackPair pair;
    Region       target(pair.pd, 64, DOORBELL_ACCESS_REMOTE_WRITE, 0x33);
    /* a QP destroyed and made again: the new one works, the old token is
     * refused (the DISCONNECT forgot it, and it is not the new one's) */
    Conn old = connection(pair.qa);
    doorbell_qp_destroy(pair.qa);
    pair.qa = LoopbackPair::connect(pair.a, pair.b);
    ASSERT_TRUE(pair.wait([&] { return LoopbackPair::connected(pair.qa); }));
    Conn now = connection(pair.qa);
    EXPECT_NE(old.token, now.token);
    uint64_t v = 3;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    auto before = pair.counters(pair.b);
    auto late   = write16(target, old.token, old.remote_qpn, old.next_psn);
    inject_datagram(pair.b, late.data(), late.size(), address_of(pair.a));
    EXPECT_EQ(before.rx_drop_no_conn + 1, pair.counters(pair.b).rx_drop_no_conn);

    /* a member's iface restarts on the same address and port (new token):
     * its earlier connections are forgotten at its first new handshake */
    RawPeer member;
    ASSERT_TRUE(member.connect_to(pair.b, 300));
    auto stale_conn = member.conn_token;
    auto stale_qp   = member.remote_qp;
    auto d          = member.request(make_header(Opcode::kAckReq), {});
    member.send_to(pair.b, d); /* alive: answered */
    member.next(pair.b);
    /* the restarted iface: same socket address, another iface token */
    WireHeader   h = make_header(Opcode::kConnect);
    IfaceAddress b = iface_address(pair.b);
    h.token        = b.token;
    h.src_qp       = 301;
    h.psn          = 5;
    h.length       = sizeof(ConnectPayload);
    h.aux          = 1;
    ConnectPayload cp{0x600d, RawPeer::kIfaceToken + 1};
    member.send_to(pair.b, bytes_of(h, std::vector<uint8_t>(reinterpret_cast<uint8_t *>(&cp),
                                                            reinterpret_cast<uint8_t *>(&cp) +
                                                                sizeof(cp))));
    auto accept = member.next(pair.b);
    ASSERT_EQ(sizeof(WireHeader), accept.size());
    before           = pair.counters(pair.b);
    WireHeader probe = make_header(Opcode::kAckReq);
    probe.token      = stale_conn;
    probe.dst_qp     = stale_qp;
    probe.psn        = 1000;
    member.send_to(pair.b, bytes_of(probe));
    ASSERT_TRUE(pair.wait(
        [&] { return pair.counters(pair.b).rx_drop_no_conn == before.rx_drop_no_conn + 1; }));
    EXPECT_EQ(3, target.bytes[0]);    /* the new QP's put */
    EXPECT_EQ(0x33, target.bytes[8]); /* not the late write's 0xee */
}

/* What the receive fuzzer (fuzz_receive.cc, Clang builds) does, in every
 * build with a fixed seed: valid packets of every kind on a live connection,
 * mutated (bit flips, random bytes, truncation) with the connection's token
 * and QP spliced back in half the time, injected from the peer's address,
 * the receiver's own or a stranger's. Nothing crashes (the sanitized build
 * runs it too), no memory is written outside a registered region, the
 * reassembly bound holds, and the connection works afterwards. */
TEST(UdpConnections, MutatedPacketsThroughTheWholeReceivePath)
{
    doorbell_iface_params_t p = lo_params();
    p.mtu                     = 1000;
    p.rx_reassembly_bytes     = 64 << 10;
    LoopbackPair pair(p, p);
    AmCount      got;
    doorbell_iface_set_am_handler(pair.b, count_am, &got);
    Region          mem(pair.pd, 4096, DOORBELL_ACCESS_REMOTE_READ | DOORBELL_ACCESS_REMOTE_WRITE);
    Region          ro(pair.pd, 4096, DOORBELL_ACCESS_REMOTE_READ, 0x5a);
    std::mt19937_64 rng(1);
    auto            qa_conn = connection(pair.qa);
    auto            qb_conn = connection(pair.qb);

    /* seeds: one of every opcode, in every header format it has */
    std::vector<std::vector<uint8_t>> seeds;
    for (Opcode op :
         {Opcode::kWrite, Opcode::kReadReq, Opcode::kSend, Opcode::kAckReq, Opcode::kSignal,
          Opcode::kDisconnect, Opcode::kConnect, Opcode::kAck, Opcode::kNak, Opcode::kAccept}) {
        WireHeader h  = make_header(op);
        h.flags       = kFlagFirst | kFlagLast;
        h.token       = qa_conn.token;
        h.dst_qp      = qa_conn.remote_qpn;
        h.src_qp      = 5;
        h.psn         = qa_conn.next_psn;
        h.remote_addr = mem.addr();
        h.rkey        = mem.rkey;
        h.msg_length  = op == Opcode::kSignal ? 8 : 64;
        h.aux         = op == Opcode::kReadReq ? 512 : 0;
        h.am_id       = op == Opcode::kNak ? 1 : 0;
        uint32_t len  = (op == Opcode::kWrite || op == Opcode::kSend) ? 64 :
                        op == Opcode::kSignal                         ? 8 :
                        op == Opcode::kConnect                        ? 16 :
                                                                        0;
        h.length      = len;
        if (op == Opcode::kConnect) {
            h.token  = iface_address(pair.b).token;
            h.dst_qp = 0;
            h.aux    = 1;
        }
        seeds.push_back(bytes_of(h, std::vector<uint8_t>(len, 0x42)));
    }
    for (Opcode op :
         {Opcode::kWrite, Opcode::kSend, Opcode::kReadResp, Opcode::kWrite, Opcode::kSend}) {
        WireHeader h  = make_header(op);
        h.flags       = seeds.size() % 2 ? kFlagFirst : kFlagLast; /* a FIRST, or a later one */
        h.token       = qa_conn.token;
        h.dst_qp      = qa_conn.remote_qpn;
        h.psn         = qa_conn.next_psn;
        h.remote_addr = mem.addr();
        h.rkey        = mem.rkey;
        h.msg_length  = 3000;
        std::vector<uint8_t> d(2048);
        d.resize(encode_seg_header(h, d.data()) + 900);
        seeds.push_back(d);
    }
    for (uint32_t count : {1u, 3u}) { /* packs: one AM, and several with a rider */
        std::vector<uint8_t> d(64);
        d.resize(encode_pack_header(d.data(), count == 1 ? 0 : kFlagRide, count, 4, qa_conn.token,
                                    qa_conn.remote_qpn, qa_conn.next_psn, count == 1 ? 0 : 77));
        for (uint32_t i = 0; i < count; ++i) {
            if (count > 1) {
                PackMember  m{uint8_t(i), 40};
                const auto *b = reinterpret_cast<const uint8_t *>(&m);
                d.insert(d.end(), b, b + sizeof(m));
            }
            d.resize(d.size() + 40, 0x42);
        }
        if (count > 1) {
            RideAck ride{};
            ride.token    = qb_conn.token;
            ride.qp       = 1;
            const auto *b = reinterpret_cast<const uint8_t *>(&ride);
            d.insert(d.end(), b, b + sizeof(ride));
        }
        seeds.push_back(d);
    }
    sockaddr_in from_a = address_of(pair.a), from_b = address_of(pair.b), stranger = from_a;
    stranger.sin_port = htons(9);
    for (int i = 0; i < 50000; ++i) {
        std::vector<uint8_t> d = seeds[rng() % seeds.size()];
        switch (rng() % 4) {
        case 0: /* flip bits */
            for (int k = 0, n = 1 + int(rng() % 4); k < n && !d.empty(); ++k) {
                d[rng() % d.size()] ^= uint8_t(1u << (rng() % 8));
            }
            break;
        case 1: /* random bytes */
            for (int k = 0, n = 1 + int(rng() % 8); k < n && !d.empty(); ++k) {
                d[rng() % d.size()] = uint8_t(rng());
            }
            break;
        case 2: /* truncate */
            d.resize(rng() % (d.size() + 1));
            break;
        default: /* the PSN anywhere */
            if (d.size() >= 28) {
                uint32_t psn = uint32_t(rng());
                std::memcpy(d.data() + 24, &psn, 4);
            }
            break;
        }
        bool to_b = rng() % 4 != 0;
        if (rng() % 2 && d.size() >= 20) { /* the live connection's token and QP */
            Conn c = to_b ? qa_conn : qb_conn;
            std::memcpy(d.data() + 8, &c.token, 8);
            bool compact = d[0] == kPackKind || d[0] == kSegKind; /* its QP at 4 */
            std::memcpy(d.data() + (compact ? 4 : 16), &c.remote_qpn, 4);
        }
        unsigned    src  = unsigned(rng() % 3);
        sockaddr_in from = src == 0 ? (to_b ? from_a : from_b) :
                           src == 1 ? stranger :
                                      (to_b ? from_b : from_a);
        inject_datagram(to_b ? pair.b : pair.a, d.data(), d.size(), from);
        if (i % 64 == 0) {
            pair.progress();
        }
    }
    pair.progress();
    EXPECT_EQ(std::vector<uint8_t>(4096, 0x5a), ro.bytes); /* read-only stayed so */
    EXPECT_LE(pair.counters(pair.b).reasm_peak, uint64_t(64 << 10));
    EXPECT_GT(pair.counters(pair.b).rx_drop_token + pair.counters(pair.b).rx_drop_source, 0u);

    /* the connections may have failed (a forged NAK with the right token can
     * do that, as on a NIC); new ones work */
    doorbell_qp_destroy(pair.qa);
    pair.qa = LoopbackPair::connect(pair.a, pair.b);
    ASSERT_TRUE(pair.wait([&] { return LoopbackPair::connected(pair.qa); }));
    uint64_t v = 11;
    Region   target(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    EXPECT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    EXPECT_EQ(11, target.bytes[0]);
}

/* A spine probe that reaches the peer (its TTL did not expire: no spine
 * between) tells the peer's QPs to the prober that their path crosses no
 * spine (udp_path_probe.cc, near_path): only from the connection's
 * requester with its token, only with a TTL that could not cross a spine,
 * once per QP, and a QP made later learns it at creation. */
TEST(UdpConnections, ASpineProbeThatReachesThePeerMarksItsQpsNear)
{
    LoopbackPair pair(steady_params(), steady_params());
    Conn         live   = connection(pair.qa);
    sockaddr_in  a_addr = address_of(pair.a);
    auto         probe  = [&](uint64_t token, uint32_t ttl) {
        WireHeader h = make_header(Opcode::kAckReq);
        h.token      = token;
        h.dst_qp     = live.remote_qpn;
        h.src_qp     = 99;
        h.psn        = live.next_psn;
        h.aux        = ttl;
        auto d       = bytes_of(h);
        inject_datagram(pair.b, d.data(), d.size(), a_addr);
    };
    auto near = [&] { return pair.counters(pair.b).near_paths; };
    ASSERT_EQ(0u, near());
    probe(live.token, 0);     /* an ordinary ACK request */
    probe(live.token, 3);     /* a TTL that could have crossed a spine */
    probe(live.token + 1, 2); /* not the connection's token */
    EXPECT_EQ(0u, near());
    probe(live.token, 2);
    EXPECT_EQ(1u, near()) << "b's QP to a";
    probe(live.token, 2);
    EXPECT_EQ(1u, near()) << "a QP learns it once";
    EXPECT_EQ(0u, pair.counters(pair.a).near_paths) << "a learns from b's probes only";
    /* b's next QP to a, made after the probe */
    doorbell_qp_t *again = LoopbackPair::connect(pair.b, pair.a);
    EXPECT_EQ(2u, near());
    doorbell_qp_destroy(again);
    /* the probes were answered as ACK requests: the connection still works */
    uint64_t v = 7;
    Region   target(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    EXPECT_EQ(0, std::memcmp(target.bytes.data(), &v, 8));
}
