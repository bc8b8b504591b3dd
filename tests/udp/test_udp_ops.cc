/* Every operation over two UDP ifaces on lo, sizes from 0 B to MiB. */
#include "loopback_pair.h"

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

void unpack(void *arg, const void *data, size_t length)
{
    auto *out = static_cast<std::vector<uint8_t> *>(arg);
    auto *p   = static_cast<const uint8_t *>(data);
    out->assign(p, p + length);
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
    ASSERT_EQ(2u, doorbell_iface_address_length(pair.a));
    uint8_t dev[4];
    doorbell_iface_get_device_address(pair.a, dev);
    EXPECT_EQ(127, dev[0]);
    uint8_t other[4] = {192, 0, 2, 1};
    uint8_t port[2]  = {0, 1};
    EXPECT_FALSE(doorbell_iface_is_reachable(pair.a, other, port));
}

TEST(UdpOps, PutShortAndFlush)
{
    LoopbackPair pair;
    Region       target(pair.pd, 4096, DOORBELL_ACCESS_REMOTE_WRITE);
    auto         data = pattern(512, 1);
    ASSERT_EQ(DOORBELL_OK,
              doorbell_qp_put_short(pair.qa, data.data(), 512, target.addr(100), target.rkey));
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    EXPECT_EQ(0, std::memcmp(target.bytes.data() + 100, data.data(), 512));
    EXPECT_EQ(0, target.bytes[99]);
    EXPECT_EQ(0, target.bytes[612]);
    /* nothing outstanding: flush completes at once */
    EXPECT_EQ(DOORBELL_OK, doorbell_qp_flush(pair.qa, nullptr));
}

TEST(UdpOps, PutBcopyZeroAndFull)
{
    LoopbackPair            pair;
    doorbell_iface_limits_t l;
    doorbell_iface_query_limits(pair.a, &l);
    Region target(pair.pd, l.max_bcopy + 64, DOORBELL_ACCESS_REMOTE_WRITE);
    for (size_t len : {size_t(0), size_t(1), l.max_bcopy}) {
        auto    data = pattern(len, unsigned(len));
        PackArg arg{data.data(), len};
        ASSERT_EQ(ssize_t(len),
                  doorbell_qp_put_bcopy(pair.qa, pack, &arg, target.addr(), target.rkey));
        ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
        EXPECT_TRUE(std::equal(data.begin(), data.end(), target.bytes.begin()));
    }
}

TEST(UdpOps, PutZcopySizes)
{
    LoopbackPair pair;
    const size_t max = 6 << 20;
    Region       target(pair.pd, max, DOORBELL_ACCESS_REMOTE_WRITE);
    for (size_t len : {size_t(0), size_t(1), size_t(64999), size_t(65001), size_t(1) << 20, max}) {
        auto       data = pattern(len, unsigned(len) + 7);
        iovec      iov{data.data(), len};
        Completion c;
        ASSERT_EQ(DOORBELL_INPROGRESS,
                  doorbell_qp_put_zcopy(pair.qa, &iov, 1, target.addr(), target.rkey, &c));
        ASSERT_TRUE(pair.wait([&] { return c.count == 1; })) << len;
        EXPECT_EQ(DOORBELL_OK, c.status);
        EXPECT_TRUE(std::equal(data.begin(), data.end(), target.bytes.begin())) << len;
    }
}

TEST(UdpOps, PutZcopyIov)
{
    LoopbackPair pair;
    Region       target(pair.pd, 300000, DOORBELL_ACCESS_REMOTE_WRITE);
    auto         a = pattern(100000, 1), b = pattern(3, 2), c = pattern(150000, 3);
    iovec        iov[3] = {{a.data(), a.size()}, {b.data(), b.size()}, {c.data(), c.size()}};
    Completion   done;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair.qa, iov, 3, target.addr(), target.rkey, &done));
    ASSERT_TRUE(pair.wait([&] { return done.count == 1; }));
    EXPECT_EQ(0, std::memcmp(target.bytes.data(), a.data(), a.size()));
    EXPECT_EQ(0, std::memcmp(target.bytes.data() + 100000, b.data(), 3));
    EXPECT_EQ(0, std::memcmp(target.bytes.data() + 100003, c.data(), c.size()));
}

TEST(UdpOps, GetBcopyAndZcopy)
{
    LoopbackPair pair;
    const size_t max = 5 << 20;
    Region       source(pair.pd, max, DOORBELL_ACCESS_REMOTE_READ);
    auto         data = pattern(max, 42);
    std::memcpy(source.bytes.data(), data.data(), max);

    std::vector<uint8_t> got;
    Completion           c;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_get_bcopy(pair.qa, unpack, &got, 1000, source.addr(10), source.rkey, &c));
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    ASSERT_EQ(DOORBELL_OK, c.status);
    ASSERT_EQ(1000u, got.size());
    EXPECT_EQ(0, std::memcmp(got.data(), data.data() + 10, 1000));

    for (size_t len : {size_t(0), size_t(1), size_t(65000), size_t(1) << 20, max}) {
        std::vector<uint8_t> dest(len + 1, 0xee);
        iovec                iov{dest.data(), len};
        Completion           z;
        ASSERT_EQ(DOORBELL_INPROGRESS,
                  doorbell_qp_get_zcopy(pair.qa, &iov, 1, source.addr(), source.rkey, &z));
        ASSERT_TRUE(pair.wait([&] { return z.count == 1; })) << len;
        EXPECT_EQ(DOORBELL_OK, z.status) << len << " " << pair.error_a.message;
        EXPECT_EQ(0, std::memcmp(dest.data(), data.data(), len)) << len;
        EXPECT_EQ(0xee, dest[len]);
    }
}

TEST(UdpOps, ActiveMessagesInOrder)
{
    LoopbackPair pair;
    AmLog        log;
    doorbell_iface_set_am_handler(pair.b, log_am, &log);
    doorbell_iface_limits_t l;
    doorbell_iface_query_limits(pair.a, &l);

    auto payload = pattern(l.max_short - 8, 5);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_am_short(pair.qa, 3, 0x1122334455667788ull, payload.data(),
                                                payload.size()));
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_am_short(pair.qa, 4, 7, nullptr, 0));
    auto    big = pattern(l.max_am_bcopy, 6);
    PackArg arg{big.data(), big.size()};
    ASSERT_EQ(ssize_t(big.size()), doorbell_qp_am_bcopy(pair.qa, 5, pack, &arg));
    uint8_t    hdr[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    auto       zc     = pattern(l.max_am_zcopy - sizeof(hdr), 7);
    iovec      iov{zc.data(), zc.size()};
    Completion c;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_am_zcopy(pair.qa, 6, hdr, sizeof(hdr), &iov, 1, &c));
    ASSERT_TRUE(pair.wait([&] { return log.msgs.size() == 4 && c.count == 1; }));

    EXPECT_EQ(3, log.msgs[0].first);
    uint64_t h;
    std::memcpy(&h, log.msgs[0].second.data(), 8);
    EXPECT_EQ(0x1122334455667788ull, h);
    EXPECT_EQ(0, std::memcmp(log.msgs[0].second.data() + 8, payload.data(), payload.size()));
    EXPECT_EQ(4, log.msgs[1].first);
    EXPECT_EQ(8u, log.msgs[1].second.size());
    EXPECT_EQ(big, log.msgs[2].second);
    ASSERT_EQ(l.max_am_zcopy, log.msgs[3].second.size());
    EXPECT_EQ(0, std::memcmp(log.msgs[3].second.data(), hdr, 8));
    EXPECT_EQ(0, std::memcmp(log.msgs[3].second.data() + 8, zc.data(), zc.size()));
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

TEST(UdpOps, IfaceFlushCoversEveryQp)
{
    LoopbackPair   pair;
    Region         ta(pair.pd, 1 << 20, DOORBELL_ACCESS_REMOTE_WRITE);
    doorbell_qp_t *second = LoopbackPair::connect(pair.a, pair.b);
    auto           data   = pattern(1 << 20, 11);
    iovec          iov{data.data(), data.size()};
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair.qa, &iov, 1, ta.addr(), ta.rkey, nullptr));
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(second, data.data(), 8, ta.addr(), ta.rkey));
    Completion f;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_iface_flush(pair.a, &f));
    ASSERT_TRUE(pair.wait([&] { return f.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, f.status);
    EXPECT_EQ(DOORBELL_OK, doorbell_iface_flush(pair.a, &f));
    doorbell_qp_destroy(second);
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
