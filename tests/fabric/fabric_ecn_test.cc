// The ECN marker: ECT packets that find more than K bytes queued on a shaped
// spine port leave it with CE; packets below K and packets that are not
// ECN-capable are never marked. A bounded UDP burst from h1 to h3 through a
// 1 Mb/s spine, read with IP_RECVTOS.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>
#include <vector>

#include "fabric_test.h"

namespace doorbell::fabric_test {
namespace {

constexpr int kPayload   = 1000;                   ///< UDP payload, bytes
constexpr int kWireBytes = kPayload + 8 + 20 + 14; ///< as the marker counts it
constexpr int kThreshold = 15 * 1024;              ///< --ecn-k, bytes
constexpr int kBurst     = 120;                    ///< packets per burst (bounded)
constexpr int kIdleMs    = 1500;                   ///< receive until this long silent
constexpr int kEcnMask = 0x3, kEct0 = 0x2, kCe = 0x3;

struct Sockets {
    int tx = -1, rx = -1;
    ~Sockets()
    {
        if (tx >= 0)
            close(tx);
        if (rx >= 0)
            close(rx);
    }
};

// Sends kBurst datagrams with the given TOS as fast as possible and returns
// the TOS byte of every datagram received, in order.
std::vector<int> burst(Sockets &s, const sockaddr_in &to, int tos)
{
    EXPECT_EQ(setsockopt(s.tx, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)), 0);
    char payload[kPayload] = {};
    for (int i = 0; i < kBurst; i++)
        sendto(s.tx, payload, sizeof(payload), 0, reinterpret_cast<const sockaddr *>(&to),
               sizeof(to));

    std::vector<int> got;
    pollfd           p{s.rx, POLLIN, 0};
    while ((int)got.size() < kBurst && poll(&p, 1, kIdleMs) == 1) {
        char   buf[2048], cbuf[CMSG_SPACE(sizeof(int))];
        iovec  iov{buf, sizeof(buf)};
        msghdr m{};
        m.msg_iov        = &iov;
        m.msg_iovlen     = 1;
        m.msg_control    = cbuf;
        m.msg_controllen = sizeof(cbuf);
        if (recvmsg(s.rx, &m, 0) < 0)
            break;
        int seen = -1;
        for (cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
            if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS)
                seen = *reinterpret_cast<unsigned char *>(CMSG_DATA(c));
        got.push_back(seen);
    }
    return got;
}

TEST(FabricEcn, MarksCeOnlyAboveThresholdAndOnlyEct)
{
    if (std::string why = cannot_build_fabric(); !why.empty())
        GTEST_SKIP() << why;
    Fabric f('m');
    auto   up = f.up("--spines 1 --spine-rate 1mbit --buffer 60k --ecn-k " +
                     std::to_string(kThreshold));
    ASSERT_EQ(up.rc, 0) << up.out;
    auto hosts = f.hosts();
    ASSERT_EQ(hosts.size(), 4u);

    Sockets s;
    s.rx = socket_in_netns(f.ns("h3"), AF_INET, SOCK_DGRAM);
    s.tx = socket_in_netns(f.ns("h1"), AF_INET, SOCK_DGRAM);
    ASSERT_GE(s.rx, 0) << strerror(errno);
    ASSERT_GE(s.tx, 0) << strerror(errno);
    int one = 1, rcvbuf = 4 << 20;
    ASSERT_EQ(setsockopt(s.rx, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one)), 0);
    setsockopt(s.rx, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port   = htons(47000);
    ASSERT_EQ(inet_pton(AF_INET, hosts[2].c_str(), &to.sin_addr), 1);
    ASSERT_EQ(bind(s.rx, reinterpret_cast<sockaddr *>(&to), sizeof(to)), 0) << strerror(errno);

    // ECT(0) burst into an empty queue: unmarked up to K, then CE.
    auto ect = burst(s, to, kEct0);
    ASSERT_FALSE(ect.empty()) << "nothing crossed the spine";
    int first_ce = -1, ce = 0;
    for (size_t i = 0; i < ect.size(); i++) {
        ASSERT_NE(ect[i], -1) << "no IP_TOS control message";
        int ecn = ect[i] & kEcnMask;
        EXPECT_TRUE(ecn == kEct0 || ecn == kCe) << "packet " << i << " lost its ECN field: " << ecn;
        if (ecn == kCe && first_ce < 0)
            first_ce = (int)i;
        ce += ecn == kCe;
    }
    EXPECT_GT(ce, 0) << "a " << kBurst << "-packet burst into a 1 Mb/s port was never marked";
    // Below K the port never marks (draining only delays the first mark).
    EXPECT_GE(first_ce, kThreshold / kWireBytes - 1) << "marked before K bytes were queued";
    EXPECT_LT(ect.size(), (size_t)kBurst)
        << "the 60 KB buffer should have dropped part of the burst";

    // Not-ECT packets are never marked, however deep the queue.
    auto plain = burst(s, to, 0);
    ASSERT_FALSE(plain.empty());
    for (size_t i = 0; i < plain.size(); i++)
        EXPECT_EQ(plain[i] & kEcnMask, 0) << "Not-ECT packet " << i << " marked";

    // The port's counters agree (bpftool dump through `status`).
    auto st = run(tool(f.name()) + " status");
    if (st.out.find("bpftool not installed") == std::string::npos) {
        EXPECT_TRUE(std::regex_search(st.out, std::regex("l1 +s1 .* marked=[1-9]"))) << st.out;
    }
}

} // namespace
} // namespace doorbell::fabric_test
