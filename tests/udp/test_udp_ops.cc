/* What only the UDP device does with the operations: its devices and
 * addresses, segmentation at a small MTU, RTT samples. Every device's
 * operations, sizes 0 B to MiB, are the device contract (tests/contract). */
#include "loopback_pair.h"
#include "raw_peer.h"

#include <deque>

using namespace doorbell::test;

namespace {

struct AmLog {
    std::vector<std::pair<uint8_t, std::vector<uint8_t>>> msgs;
};

doorbell_status_t log_am(void *arg, uint8_t am_id, void *data, size_t length)
{
    auto *log = static_cast<AmLog *>(arg);
    auto *p   = static_cast<uint8_t *>(data);
    log->msgs.emplace_back(am_id, std::vector<uint8_t>(p, p + length));
    return DOORBELL_OK;
}

struct PackArg {
    const uint8_t *src;
    size_t         length;
};

size_t pack(void *dest, void *arg)
{
    auto *p = static_cast<PackArg *>(arg);
    if (p->length != 0) {
        std::memcpy(dest, p->src, p->length);
    }
    return p->length;
}


} // namespace

TEST(UdpOps, QueryDevicesListsLoopback)
{
    doorbell_device_info_t devs[32];
    int                    n = doorbell_query_devices(devs, 32);
    ASSERT_GT(n, 0);
    bool found = false;
    for (int i = 0; i < std::min(n, 32); ++i) {
        if (std::string(devs[i].name) == "lo") {
            found = true;
            EXPECT_EQ(DOORBELL_DEVICE_UDP, devs[i].kind);
            EXPECT_GT(devs[i].mtu, 60000u); /* lo: large datagrams */
            EXPECT_LE(devs[i].mtu, 65000u);
        }
    }
    EXPECT_TRUE(found);
}

TEST(UdpOps, OpenUnknownDeviceFails)
{
    doorbell_pd_t *pd;
    ASSERT_EQ(DOORBELL_OK, doorbell_pd_create(&pd));
    doorbell_iface_params_t p = lo_params();
    p.device                  = "no-such-netdev0";
    doorbell_iface_t *iface;
    EXPECT_EQ(DOORBELL_ERR_NO_DEVICE, doorbell_iface_open(pd, &p, &iface));
    EXPECT_NE(std::string(doorbell_last_error()).find("no-such-netdev0"), std::string::npos);
    doorbell_pd_destroy(pd);
}

TEST(UdpOps, Addresses)
{
    LoopbackPair pair;
    ASSERT_EQ(4u, doorbell_iface_device_address_length(pair.a));
    /* the port, then the iface's random token: the secret of a CONNECT */
    ASSERT_EQ(10u, doorbell_iface_address_length(pair.a));
    uint8_t dev[4];
    doorbell_iface_get_device_address(pair.a, dev);
    EXPECT_EQ(127, dev[0]);
    uint8_t other[4] = {192, 0, 2, 1};
    uint8_t port[10] = {0, 1};
    EXPECT_FALSE(doorbell_iface_is_reachable(pair.a, other, port));
    auto ta = iface_address(pair.a), tb = iface_address(pair.b);
    EXPECT_NE(0u, ta.token);
    EXPECT_NE(ta.token, tb.token);
    /* an address without a token (a stale format) is refused */
    doorbell::udp::IfaceAddress none{tb.port, 0};
    doorbell_qp_t              *qp = nullptr;
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_qp_create(pair.a, dev, &none, &qp));
    EXPECT_NE(std::string(doorbell_last_error()).find("no token"), std::string::npos)
        << doorbell_last_error();
}

TEST(UdpOps, SmallMtuSegmentsEverything)
{
    doorbell_iface_params_t p = lo_params();
    p.mtu                     = 1000;
    LoopbackPair pair(p, p);
    AmLog        log;
    doorbell_iface_set_am_handler(pair.b, log_am, &log);
    auto    big = pattern(8000, 9);
    PackArg arg{big.data(), big.size()};
    ASSERT_EQ(8000, doorbell_qp_am_bcopy(pair.qa, 1, pack, &arg));
    Region     target(pair.pd, 100000, DOORBELL_ACCESS_REMOTE_WRITE | DOORBELL_ACCESS_REMOTE_READ);
    auto       data = pattern(100000, 10);
    Completion c;
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, target, c));
    ASSERT_TRUE(pair.wait([&] { return c.count == 1 && log.msgs.size() == 1; }));
    EXPECT_EQ(big, log.msgs[0].second);
    EXPECT_EQ(data, target.bytes);
    std::vector<uint8_t> back(100000);
    iovec                biov{back.data(), back.size()};
    Completion           g;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_get_zcopy(pair.qb, &biov, 1, target.addr(), target.rkey, &g));
    ASSERT_TRUE(pair.wait([&] { return g.count == 1; }));
    EXPECT_EQ(data, back);
    EXPECT_GE(pair.counters(pair.a).tx_packets, 100u);
}

TEST(UdpOps, RttSamplesAndEct)
{
    LoopbackPair pair;
    Region       target(pair.pd, 64, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t     v = 1;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    auto c = pair.counters(pair.a);
    EXPECT_GE(c.rtt_samples, 1u);
    EXPECT_GE(c.tx_packets, 1u);
    EXPECT_EQ(0u, c.ce_marks); /* lo never marks */
}
