/* Multipath (udp_device.h, Multipath; udp_reorder.cc): an iface sends from
 * consecutive ports and says how many in its handshake; a connection is
 * taken from those ports of its peer and no other; requests ahead of a gap
 * are held within their bounds, executed in PSN order when it fills, and a
 * gap that stays open is NAKed as a loss. (Whole transfers over several
 * paths, with and without faults: test_udp_reliability.cc.) */
#include "loopback_pair.h"
#include "raw_peer.h"

#include <arpa/inet.h>
#include <poll.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

using namespace doorbell::test;
using namespace doorbell::udp;

namespace {

/// A socket bound to 127.0.0.1:port (or another loopback address); -1 when
/// the port is taken.
/// A UDP socket bound to ip:port, closed when it goes out of scope (a test
/// that skips or fails half-way leaks none); fd() is -1 where the bind failed.
class BoundSocket {
public:
    explicit BoundSocket(uint16_t port, uint32_t ip = INADDR_LOOPBACK) :
        fd_(socket(AF_INET, SOCK_DGRAM, 0))
    {
        sockaddr_in a{};
        a.sin_family      = AF_INET;
        a.sin_addr.s_addr = htonl(ip);
        a.sin_port        = htons(port);
        if (fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
            close(fd_);
            fd_ = -1;
        }
    }
    ~BoundSocket()
    {
        if (fd_ >= 0)
            close(fd_);
    }
    BoundSocket(const BoundSocket &)            = delete;
    BoundSocket &operator=(const BoundSocket &) = delete;
    int          fd() const { return fd_; }
    bool         ok() const { return fd_ >= 0; }

private:
    int fd_;
};

void send_from(int fd, doorbell_iface_t *to, const std::vector<uint8_t> &d)
{
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    doorbell_iface_get_device_address(to, &dst.sin_addr);
    dst.sin_port = iface_address(to).port;
    ASSERT_EQ(ssize_t(d.size()),
              sendto(fd, d.data(), d.size(), 0, reinterpret_cast<sockaddr *>(&dst), sizeof(dst)));
}

/// A one-packet WRITE of the 8-byte value v to target + off.
WireHeader write_of(const Region &target, size_t off)
{
    WireHeader h  = make_header(Opcode::kWrite);
    h.flags       = kFlagFirst | kFlagLast;
    h.remote_addr = target.addr(off);
    h.rkey        = target.rkey;
    h.msg_length  = 8;
    return h;
}

std::vector<uint8_t> value(uint64_t v)
{
    std::vector<uint8_t> d(8);
    std::memcpy(d.data(), &v, 8);
    return d;
}

uint64_t at(const Region &r, size_t off)
{
    uint64_t v;
    std::memcpy(&v, r.bytes.data() + off, 8);
    return v;
}

/// A device the UDP transport lists other than loopback; empty when the
/// machine has none.
std::string a_network_device()
{
    doorbell_device_info_t devs[32];
    int                    n = doorbell_query_devices(devs, 32);
    for (int i = 0; i < std::min(n, 32); ++i)
        if (devs[i].kind == DOORBELL_DEVICE_UDP && std::string(devs[i].name) != "lo")
            return devs[i].name;
    return {};
}

doorbell_counters_t counters_of(doorbell_iface_t *iface)
{
    doorbell_counters_t c;
    doorbell_iface_get_counters(iface, &c);
    return c;
}

} // namespace

/* An iface of 4 paths sends a connection's packets from its own port and
 * the 3 after it, says 4 in its CONNECT, keeps them on one (its home) and
 * probes the other three with one stamped packet in kProbeEvery. It binds
 * 4 spare ports after them, says so, and steers nothing onto them. */
TEST(UdpMultipath, AnIfaceSendsFromItsConsecutivePorts)
{
    doorbell_iface_params_t p = lo_params();
    p.paths                   = 4;
    doorbell_pd_t    *pd;
    doorbell_iface_t *iface = nullptr;
    ASSERT_EQ(DOORBELL_OK, doorbell_pd_create(&pd));
    ASSERT_EQ(DOORBELL_OK, doorbell_iface_open(pd, &p, &iface)) << doorbell_last_error();
    EXPECT_EQ(4u, static_cast<UdpIface *>(iface)->paths());
    EXPECT_EQ(8u, static_cast<UdpIface *>(iface)->ports());
    uint16_t port = ntohs(iface_address(iface).port);

    {
        RawPeer        peer;
        doorbell_qp_t *qp = peer.connect_from(iface);
        ASSERT_TRUE(LoopbackPair::connected(qp));
        Region             target(pd, 64, DOORBELL_ACCESS_REMOTE_WRITE);
        std::map<int, int> offsets;
        for (uint64_t i = 0; i < 5 * kProbeEvery; ++i) {
            ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(qp, &i, 8, target.addr(), target.rkey));
            sockaddr_in from{};
            auto        d = peer.next(iface, &from);
            ASSERT_FALSE(d.empty());
            ++offsets[int(ntohs(from.sin_port)) - int(port)];
        }
        /* short puts are stamped: every kProbeEvery-th stamped packet probes
         * (the connection's own ACK requests are stamped too) */
        EXPECT_EQ(4u, offsets.size());
        EXPECT_EQ(3, offsets.rbegin()->first) << "a spare port was steered onto";
        EXPECT_GE(offsets[0], int(4 * (kProbeEvery - 1)));
        EXPECT_EQ(4u, peer.connect_seen.aux) << "the steered ports";
        EXPECT_EQ(4u, peer.connect_seen.am_id) << "the spare ones";
        doorbell_qp_destroy(qp);
    }
    doorbell_iface_close(iface);

    /* automatic: one path on loopback, which has no other */
    p.paths = 0;
    ASSERT_EQ(DOORBELL_OK, doorbell_iface_open(pd, &p, &iface)) << doorbell_last_error();
    EXPECT_EQ(1u, static_cast<UdpIface *>(iface)->paths());
    EXPECT_EQ(1u, static_cast<UdpIface *>(iface)->ports()) << "one port has no spare";
    doorbell_iface_close(iface);
    doorbell_pd_destroy(pd);
}

/* Automatic on a network device: DOORBELL_AUTO_PATHS ports (the seven after
 * the first are the ones a connection probes for its spines). */
TEST(UdpMultipath, AnIfaceOnANetworkDeviceOpensTheAutomaticPortCount)
{
    std::string dev = a_network_device();
    if (dev.empty())
        GTEST_SKIP() << "no network device with an IPv4 address is up (only loopback)";
    doorbell_iface_params_t p = lo_params();
    p.device                  = dev.c_str();
    p.paths                   = 0;
    doorbell_pd_t    *pd;
    doorbell_iface_t *iface = nullptr;
    ASSERT_EQ(DOORBELL_OK, doorbell_pd_create(&pd));
    ASSERT_EQ(DOORBELL_OK, doorbell_iface_open(pd, &p, &iface)) << doorbell_last_error();
    EXPECT_EQ(8u, uint32_t(DOORBELL_AUTO_PATHS)) << "docs/transport.md and docs/btl.md say 8";
    EXPECT_EQ(uint32_t(DOORBELL_AUTO_PATHS), static_cast<UdpIface *>(iface)->paths()) << dev;
    EXPECT_EQ(2u * DOORBELL_AUTO_PATHS, static_cast<UdpIface *>(iface)->ports())
        << dev << ": as many spare ports again";
    doorbell_iface_close(iface);
    doorbell_pd_destroy(pd);
}

/* A connection whose requester said 3 paths is taken from its port and the
 * two after it, and from nothing else: not the port after those, not the
 * same port on another address. */
TEST(UdpMultipath, AConnectionIsTakenFromItsPeersPortsOnly)
{
    LoopbackPair pair;
    RawPeer      member;
    ASSERT_TRUE(member.connect_to(pair.b, 77, 1000, 3));
    uint16_t    port = ntohs(member.address().sin_port);
    BoundSocket second(uint16_t(port + 2)), outside(uint16_t(port + 3));
    BoundSocket foreign(uint16_t(port + 2), 0x7f000002); /* 127.0.0.2 */
    if (!second.ok() || !outside.ok() || !foreign.ok()) {
        GTEST_SKIP() << "ports " << port + 2 << "/" << port + 3 << " are taken on lo";
    }
    Region target(pair.pd, 32, DOORBELL_ACCESS_REMOTE_WRITE);
    auto   base = counters_of(pair.b);

    send_from(second.fd(), pair.b, member.request(write_of(target, 0), value(0x1111)));
    ASSERT_TRUE(pair.wait([&] { return at(target, 0) == 0x1111; }));
    send_from(outside.fd(), pair.b, member.request(write_of(target, 8), value(0x2222), 1001));
    send_from(foreign.fd(), pair.b, member.request(write_of(target, 8), value(0x3333), 1001));
    ASSERT_TRUE(
        pair.wait([&] { return counters_of(pair.b).rx_drop_source >= base.rx_drop_source + 2; }));
    EXPECT_EQ(0u, at(target, 8)) << "written from a port that is not the peer's";
    /* the connection is intact: its next request from its own port */
    member.send_to(pair.b, member.request(write_of(target, 16), value(0x4444)));
    ASSERT_TRUE(pair.wait([&] { return at(target, 16) == 0x4444; }));
    EXPECT_EQ(0u, at(target, 8));
}

/* A requester that said 2 steered ports and 2 spare ones is heard from its
 * fourth port (a spare one: a spine its steered ports do not reach), and not
 * from the fifth. */
TEST(UdpMultipath, AConnectionIsTakenFromItsPeersSparePortsToo)
{
    LoopbackPair pair;
    RawPeer      member;
    ASSERT_TRUE(member.connect_to(pair.b, 77, 1000, 2, 2));
    uint16_t    port = ntohs(member.address().sin_port);
    BoundSocket spare(uint16_t(port + 3)), outside(uint16_t(port + 4));
    if (!spare.ok() || !outside.ok()) {
        GTEST_SKIP() << "ports " << port + 3 << "/" << port + 4 << " are taken on lo";
    }
    Region target(pair.pd, 32, DOORBELL_ACCESS_REMOTE_WRITE);
    auto   base = counters_of(pair.b);
    send_from(spare.fd(), pair.b, member.request(write_of(target, 0), value(0x5555)));
    ASSERT_TRUE(pair.wait([&] { return at(target, 0) == 0x5555; }));
    send_from(outside.fd(), pair.b, member.request(write_of(target, 8), value(0x6666), 1001));
    ASSERT_TRUE(
        pair.wait([&] { return counters_of(pair.b).rx_drop_source >= base.rx_drop_source + 1; }));
    EXPECT_EQ(0u, at(target, 8)) << "written from beyond the peer's spare ports";
}

/* Requests ahead of a gap are held, at most kReorderMaxPackets of one
 * connection: the rest are dropped and the gap NAKed at once. When the
 * missing one comes, it and every held one execute in PSN order; what was
 * dropped is the requester's to send again. */
TEST(UdpMultipath, HeldRequestsAreBoundedAndExecuteInOrder)
{
    LoopbackPair pair;
    RawPeer      member;
    ASSERT_TRUE(member.connect_to(pair.b, 77, 1000, 2));
    const uint32_t n = kReorderMaxPackets + 20;
    Region         target(pair.pd, 8 * (n + 1), DOORBELL_ACCESS_REMOTE_WRITE);
    auto           base = counters_of(pair.b);
    for (uint32_t i = 1; i <= n; ++i) {
        member.send_to(pair.b, member.request(write_of(target, 8 * i), value(i), 1000 + i));
    }
    ASSERT_TRUE(pair.wait([&] { return counters_of(pair.b).rx_packets >= base.rx_packets + n; }));
    auto held = counters_of(pair.b);
    EXPECT_EQ(kReorderMaxPackets, held.rx_held - base.rx_held);
    EXPECT_EQ(n - kReorderMaxPackets, held.rx_drop_psn - base.rx_drop_psn);
    EXPECT_EQ(1u, held.naks - base.naks) << "the gap, NAKed once when the bound was reached";
    for (uint32_t i = 0; i <= n; ++i) {
        ASSERT_EQ(0u, at(target, 8 * i)) << "nothing executes ahead of the gap";
    }
    /* the missing request: it and the held ones, in order */
    member.send_to(pair.b, member.request(write_of(target, 0), value(0x77), 1000));
    ASSERT_TRUE(pair.wait([&] { return at(target, 8 * kReorderMaxPackets) != 0; }));
    EXPECT_EQ(0x77u, at(target, 0));
    for (uint32_t i = 1; i <= kReorderMaxPackets; ++i) {
        EXPECT_EQ(i, at(target, 8 * i)) << i;
    }
    EXPECT_EQ(0u, at(target, 8 * (kReorderMaxPackets + 1))) << "dropped, not held";
    /* sent again, as go-back-N would */
    for (uint32_t i = kReorderMaxPackets + 1; i <= n; ++i) {
        member.send_to(pair.b, member.request(write_of(target, 8 * i), value(i), 1000 + i));
    }
    ASSERT_TRUE(pair.wait([&] { return at(target, 8 * n) == n; }));
    EXPECT_EQ(0, pair.error_b.count) << pair.error_b.message;
}

/* A gap nothing fills is a loss: after kReorderWaitNs the responder NAKs
 * the PSN it expects, with requests held behind it. */
TEST(UdpMultipath, AGapThatStaysOpenIsNakedAsALoss)
{
    LoopbackPair pair;
    RawPeer      member;
    ASSERT_TRUE(member.connect_to(pair.b, 77, 1000, 2));
    Region target(pair.pd, 16, DOORBELL_ACCESS_REMOTE_WRITE);
    auto   base = counters_of(pair.b);
    member.send_to(pair.b, member.request(write_of(target, 8), value(5), 1001));
    auto start  = std::chrono::steady_clock::now();
    auto nak    = member.next(pair.b); /* progresses b until it answers */
    auto waited = std::chrono::steady_clock::now() - start;
    ASSERT_GE(nak.size(), sizeof(WireHeader));
    WireHeader h;
    std::memcpy(&h, nak.data(), sizeof(h));
    EXPECT_EQ(uint8_t(Opcode::kNak), h.opcode);
    EXPECT_EQ(uint8_t(NakCode::kSequence), h.am_id);
    EXPECT_EQ(1000u, h.psn);
    EXPECT_GE(waited, std::chrono::nanoseconds(kReorderWaitNs)) << "NAKed before the wait";
    EXPECT_EQ(1u, counters_of(pair.b).rx_held - base.rx_held);
    /* the resend fills it; the held request follows */
    member.send_to(pair.b, member.request(write_of(target, 0), value(4), 1000));
    ASSERT_TRUE(pair.wait([&] { return at(target, 8) == 5; }));
    EXPECT_EQ(4u, at(target, 0));
}

namespace {

/// This process's UDP socket bound to 127.0.0.1:port (an iface's sending
/// port), or -1.
int own_socket_at(uint16_t port)
{
    for (int fd = 3; fd < 4096; ++fd) {
        sockaddr_in a{};
        socklen_t   len  = sizeof(a);
        int         type = 0;
        socklen_t   tlen = sizeof(type);
        if (getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) == 0 &&
            a.sin_family == AF_INET && ntohs(a.sin_port) == port &&
            getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) == 0 && type == SOCK_DGRAM) {
            return fd;
        }
    }
    return -1;
}

} // namespace

/* QPs made together probe the same ports for their spines, and the answer
 * to one QP's probe makes an error pending on that port (IP_RECVERR): the
 * next send from it fails once. A probe that meets such an error reads the
 * port's queue and is sent again, so the next QP's try is not lost (it was:
 * that QP kept to one port, one spine, until a retry 1.1 s later). Here
 * the pending errors are ICMP port unreachables from lo, made before the
 * iface's first QP probes. */
TEST(UdpMultipath, ASpineProbeIsSentAgainAfterAnErrorPendingOnItsPort)
{
    doorbell_iface_params_t p = steady_params();
    p.paths                   = 4;
    doorbell_pd_t    *pd      = nullptr;
    doorbell_iface_t *a = nullptr, *b = nullptr;
    ASSERT_EQ(DOORBELL_OK, doorbell_pd_create(&pd));
    ASSERT_EQ(DOORBELL_OK, doorbell_iface_open(pd, &p, &a)) << doorbell_last_error();
    ASSERT_EQ(DOORBELL_OK, doorbell_iface_open(pd, &p, &b)) << doorbell_last_error();
    /* a port nothing listens on */
    sockaddr_in dead{};
    {
        BoundSocket closed(0); /* closed at the end of this block */
        ASSERT_TRUE(closed.ok());
        socklen_t len = sizeof(dead);
        ASSERT_EQ(0, getsockname(closed.fd(), reinterpret_cast<sockaddr *>(&dead), &len));
    }
    uint16_t port = ntohs(iface_address(a).port);
    for (uint16_t k : {1, 2}) { /* the ports a QP's first try probes */
        int fd = own_socket_at(uint16_t(port + k));
        ASSERT_GE(fd, 0) << "a's sending port " << port + k;
        ASSERT_EQ(1, sendto(fd, "x", 1, 0, reinterpret_cast<sockaddr *>(&dead), sizeof(dead)));
        pollfd pfd{fd, 0, 0};
        ASSERT_EQ(1, poll(&pfd, 1, 10000)) << "no ICMP error came back on port " << port + k;
        ASSERT_TRUE(pfd.revents & POLLERR);
    }
    doorbell_qp_t *qp       = LoopbackPair::connect(a, b);
    auto           progress = [&] {
        doorbell_iface_progress(a);
        doorbell_iface_progress(b);
    };
    /* the errors are read when a probe meets them, or (a probe lost) when
     * the iface watches its probed ports for answers */
    ASSERT_TRUE(wait_progressing(progress, [&] { return counters_of(a).path_errors >= 2; }))
        << "the pending errors were never read";
    EXPECT_GE(counters_of(a).spine_probes, 2u) << "a probe that met a pending error was lost";
    doorbell_qp_destroy(qp);
    doorbell_iface_close(a);
    doorbell_iface_close(b);
    doorbell_pd_destroy(pd);
}
