/* UDP GSO on the send path: which staged packets group into one
 * super-datagram (gso_run), a transfer on lo that leaves in super-datagrams
 * and arrives as the same datagrams byte for byte, on an unpaced iface and on
 * a paced one of several ports, and the fallback when the kernel refuses one
 * (through the send system call's seam). */
#include "loopback_pair.h"
#include "raw_peer.h"

#include "devices/udp/parser.h"
#include "devices/udp/udp_gso.h"
#include "devices/udp/udp_paths.h"

#include <arpa/inet.h>
#include <netinet/udp.h>

#include <cerrno>
#include <cstring>

using namespace doorbell::test;
using namespace doorbell::udp;

namespace {

sockaddr_in peer(uint16_t port)
{
    sockaddr_in a{};
    a.sin_family      = AF_INET;
    a.sin_port        = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

std::vector<GsoItem> items(std::initializer_list<std::pair<size_t, uint16_t>> list)
{
    std::vector<GsoItem> v;
    for (auto [bytes, port] : list) {
        v.push_back({bytes, peer(port)});
    }
    return v;
}

doorbell_iface_params_t small_mtu()
{
    doorbell_iface_params_t p = steady_params(); /* no resend, no probe */
    p.mtu                     = 1000;
    return p;
}

/// sendmmsg that refuses any super-datagram as a device without checksum
/// offload does (EIO), after sending the plain datagrams before it.
int refuse_gso(int fd, mmsghdr *msgs, unsigned n, int flags)
{
    unsigned plain = 0;
    while (plain < n && msgs[plain].msg_hdr.msg_controllen == 0) {
        ++plain;
    }
    if (plain == 0) {
        errno = EIO;
        return -1;
    }
    return sendmmsg(fd, msgs, plain, flags);
}

/// What the recording seam saw of super-datagrams: each one's datagrams, and
/// of those the stamped ones (a stamp names the port it was meant to leave
/// from) with the port they left from.
struct SuperDatagrams {
    uint64_t sends     = 0;
    uint64_t datagrams = 0;
    uint64_t stamped   = 0; ///< stamped datagrams inside super-datagrams
    uint64_t misplaced = 0; ///< of them, sent from another port than their stamp's
    uint64_t foreign   = 0; ///< datagrams the parser refused
    uint16_t base_port = 0; ///< the iface's first port (path 0)
};
SuperDatagrams g_super;

/// sendmmsg that first cuts every super-datagram as the kernel would and
/// reads its datagrams' headers.
int record_super(int fd, mmsghdr *msgs, unsigned n, int flags)
{
    sockaddr_in own{};
    socklen_t   len = sizeof(own);
    getsockname(fd, reinterpret_cast<sockaddr *>(&own), &len);
    const unsigned port = ntohs(own.sin_port) - g_super.base_port;
    for (unsigned i = 0; i < n; ++i) {
        const msghdr &m = msgs[i].msg_hdr;
        if (m.msg_controllen == 0) {
            continue;
        }
        uint16_t seg = 0;
        std::memcpy(&seg, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(seg));
        std::vector<uint8_t> bytes;
        for (size_t k = 0; k < m.msg_iovlen; ++k) {
            auto *b = static_cast<const uint8_t *>(m.msg_iov[k].iov_base);
            bytes.insert(bytes.end(), b, b + m.msg_iov[k].iov_len);
        }
        ++g_super.sends;
        for (size_t at = 0; at < bytes.size(); at += seg) {
            ++g_super.datagrams;
            ParseResult r = parse(bytes.data() + at, std::min<size_t>(seg, bytes.size() - at));
            if (r.status != ParseStatus::kOk) {
                ++g_super.foreign;
            } else if (r.header.ts_send != 0) {
                ++g_super.stamped;
                g_super.misplaced += stamp_path(r.header.ts_send) != port;
            }
        }
    }
    return sendmmsg(fd, msgs, n, flags);
}

/// Puts size bytes from a to b's region; returns the region's bytes.
std::vector<uint8_t> put_and_read(LoopbackPair &pair, size_t size)
{
    auto       data = pattern(size, 19);
    Region     dst(pair.pd, size, DOORBELL_ACCESS_REMOTE_WRITE);
    Completion c;
    EXPECT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, dst, c)) << doorbell_last_error();
    EXPECT_TRUE(pair.wait([&] { return c.count > 0; }));
    EXPECT_EQ(DOORBELL_OK, c.status);
    EXPECT_EQ(data, dst.bytes);
    return dst.bytes;
}

} // namespace

TEST(UdpGso, EqualPacketsToOnePeerGroup)
{
    auto v = items({{1000, 1}, {1000, 1}, {1000, 1}, {1000, 1}});
    EXPECT_EQ(4u, gso_run(v.data(), 4, 0));
    EXPECT_EQ(2u, gso_run(v.data(), 4, 2));
    EXPECT_EQ(1u, gso_run(v.data(), 4, 3)); /* alone: no super-datagram */
}

TEST(UdpGso, AShorterLastPacketEndsTheRun)
{
    auto v = items({{1000, 1}, {1000, 1}, {400, 1}, {1000, 1}});
    EXPECT_EQ(3u, gso_run(v.data(), 4, 0)); /* the kernel's last piece may be short */
}

TEST(UdpGso, ALongerPacketOrAnotherPeerBreaksTheRun)
{
    auto longer = items({{400, 1}, {400, 1}, {1000, 1}, {400, 1}});
    EXPECT_EQ(2u, gso_run(longer.data(), 4, 0));
    auto other = items({{1000, 1}, {1000, 2}, {1000, 1}});
    EXPECT_EQ(1u, gso_run(other.data(), 3, 0));
    auto port = items({{1000, 1}, {1000, 1}, {1000, 3}});
    EXPECT_EQ(2u, gso_run(port.data(), 3, 0));
}

TEST(UdpGso, RunsStopAtTheKernelsLimits)
{
    std::vector<GsoItem> many(100, GsoItem{100, peer(1)});
    EXPECT_EQ(kGsoMaxSegments, gso_run(many.data(), 100, 0));
    std::vector<GsoItem> big(100, GsoItem{9000, peer(1)});
    EXPECT_EQ(kGsoMaxBytes / 9000, gso_run(big.data(), 100, 0)); /* 7 x 9000 bytes */
}

// A 256 KiB put at a 1000-byte MTU leaves in super-datagrams; the kernel
// cuts them, so the receiver sees exactly the datagrams the sender counted,
// and every byte lands.
TEST(UdpGso, BulkLeavesInSuperDatagramsAndArrivesAsDatagrams)
{
    LoopbackPair pair(small_mtu(), small_mtu());
    if (!gso_stats(pair.a).enabled) {
        GTEST_SKIP() << "this kernel takes no UDP_SEGMENT on a UDP socket";
    }
    put_and_read(pair, 256 << 10);
    GsoStats g = gso_stats(pair.a);
    EXPECT_TRUE(g.enabled);
    EXPECT_GT(g.sends, 0u);
    EXPECT_GT(g.segments, 2 * g.sends); /* runs, not pairs */
    EXPECT_EQ(0u, g.fallbacks);
    EXPECT_TRUE(pair.wait(
        [&] { return pair.counters(pair.b).rx_packets == pair.counters(pair.a).tx_packets; }));
    /* datagrams of at most 1064 bytes, counted one by one */
    EXPECT_GT(pair.counters(pair.a).tx_packets, (256u << 10) / (1000 + 64));
}

// The kernel refuses the first super-datagram (as a device without checksum
// offload does): the device sends the same packets one datagram each, and
// from then on never tries again.
TEST(UdpGso, RefusedSuperDatagramFallsBackToDatagrams)
{
    LoopbackPair pair(small_mtu(), small_mtu());
    if (!gso_stats(pair.a).enabled) {
        GTEST_SKIP() << "this kernel takes no UDP_SEGMENT on a UDP socket";
    }
    set_tx_syscall(pair.a, refuse_gso);
    put_and_read(pair, 256 << 10);
    put_and_read(pair, 64 << 10);
    GsoStats g = gso_stats(pair.a);
    EXPECT_FALSE(g.enabled);
    EXPECT_EQ(1u, g.fallbacks);
    EXPECT_EQ(0u, g.sends);
    EXPECT_EQ(0u, pair.counters(pair.a).retransmits); /* nothing was lost */
}

// A paced iface of two ports (as a fabric's host runs) sends the runs its
// pacer released to one peer from one port as super-datagrams: each holds
// only its port's packets (a probe stamped for the other port leaves from
// that one), every datagram in it is one the parser accepts, and every byte
// lands once.
TEST(UdpGso, APacedIfaceOfSeveralPortsSendsEachPortsRuns)
{
    doorbell_iface_params_t p = small_mtu();
    p.cc                      = "ibrc";
    p.paths                   = 2;
    LoopbackPair pair(p, p);
    if (!gso_stats(pair.a).enabled) {
        GTEST_SKIP() << "this kernel takes no UDP_SEGMENT on a UDP socket";
    }
    g_super           = {};
    g_super.base_port = ntohs(iface_address(pair.a).port);
    set_tx_syscall(pair.a, record_super);
    for (int i = 0; i < 4; ++i) {
        put_and_read(pair, 256 << 10);
    }
    set_tx_syscall(pair.a, nullptr);
    GsoStats g = gso_stats(pair.a);
    EXPECT_TRUE(g.enabled);
    EXPECT_GT(g.sends, 0u);
    EXPECT_EQ(g.sends, g_super.sends);
    EXPECT_EQ(g.segments, g_super.datagrams);
    EXPECT_EQ(0u, g_super.foreign);
    EXPECT_GT(g_super.stamped, 0u) << "no stamped datagram rode in a super-datagram";
    EXPECT_EQ(0u, g_super.misplaced) << "a super-datagram held another port's packet";
    EXPECT_TRUE(pair.wait(
        [&] { return pair.counters(pair.b).rx_packets == pair.counters(pair.a).tx_packets; }));
}
