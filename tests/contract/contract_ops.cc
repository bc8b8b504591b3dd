/* The contract, operations: puts, gets and active messages of every size
 * class land exactly, in order, on every device. */
#include "device_pair.h"

#include <cstring>

using namespace doorbell::test;

namespace {

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

TEST_P(DeviceContract, PutShortLandsExactlyAndFlushCompletes)
{
    auto   pair = make_pair();
    Region target(pair->target_pd, 4096, DOORBELL_ACCESS_REMOTE_WRITE);
    size_t len  = std::min<size_t>(512, pair->limits().max_short);
    auto   data = pattern(len, 1);
    ASSERT_EQ(DOORBELL_OK,
              doorbell_qp_put_short(pair->qa, data.data(), len, target.addr(100), target.rkey));
    ASSERT_EQ(DOORBELL_OK, pair->flush(pair->qa));
    EXPECT_EQ(0, std::memcmp(target.bytes.data() + 100, data.data(), len));
    EXPECT_EQ(0, target.bytes[99]);
    EXPECT_EQ(0, target.bytes[100 + len]);
    /* nothing outstanding: a flush completes at once */
    EXPECT_EQ(DOORBELL_OK, doorbell_qp_flush(pair->qa, nullptr));
    EXPECT_EQ(0, pair->error_a->count) << pair->error_a->message;
}

TEST_P(DeviceContract, PutBcopyOfZeroOneAndMaxBytes)
{
    auto                    pair = make_pair();
    doorbell_iface_limits_t l    = pair->limits();
    Region                  target(pair->target_pd, l.max_bcopy + 64, DOORBELL_ACCESS_REMOTE_WRITE);
    for (size_t len : {size_t(0), size_t(1), l.max_bcopy}) {
        auto    data = pattern(len, unsigned(len));
        PackArg arg{data.data(), len};
        ASSERT_EQ(ssize_t(len),
                  doorbell_qp_put_bcopy(pair->qa, pack, &arg, target.addr(), target.rkey));
        ASSERT_EQ(DOORBELL_OK, pair->flush(pair->qa));
        EXPECT_TRUE(std::equal(data.begin(), data.end(), target.bytes.begin())) << len;
    }
}

TEST_P(DeviceContract, PutZcopyOfEverySizeClass)
{
    auto         pair = make_pair();
    const size_t max  = 6 << 20;
    Region       target(pair->target_pd, max, DOORBELL_ACCESS_REMOTE_WRITE);
    /* empty, one byte, around a 64 KiB datagram, MiBs */
    for (size_t len : {size_t(0), size_t(1), size_t(64999), size_t(65001), size_t(1) << 20, max}) {
        auto       data = pattern(len, unsigned(len) + 7);
        iovec      iov{data.data(), len};
        Completion c;
        ASSERT_EQ(DOORBELL_INPROGRESS,
                  doorbell_qp_put_zcopy(pair->qa, &iov, 1, target.addr(), target.rkey, &c));
        ASSERT_TRUE(pair->wait([&] { return c.count == 1; })) << len;
        EXPECT_EQ(DOORBELL_OK, c.status) << len;
        EXPECT_TRUE(std::equal(data.begin(), data.end(), target.bytes.begin())) << len;
    }
}

TEST_P(DeviceContract, PutZcopyIovLandsAtConsecutiveAddresses)
{
    auto pair = make_pair();
    ASSERT_GE(pair->limits().max_iov, 3u);
    Region     target(pair->target_pd, 300000, DOORBELL_ACCESS_REMOTE_WRITE);
    auto       a = pattern(100000, 1), b = pattern(3, 2), c = pattern(150000, 3);
    iovec      iov[3] = {{a.data(), a.size()}, {b.data(), b.size()}, {c.data(), c.size()}};
    Completion done;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair->qa, iov, 3, target.addr(), target.rkey, &done));
    ASSERT_TRUE(pair->wait([&] { return done.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, done.status);
    EXPECT_EQ(0, std::memcmp(target.bytes.data(), a.data(), a.size()));
    EXPECT_EQ(0, std::memcmp(target.bytes.data() + 100000, b.data(), 3));
    EXPECT_EQ(0, std::memcmp(target.bytes.data() + 100003, c.data(), c.size()));
}

TEST_P(DeviceContract, GetBcopyAndZcopyOfEverySizeClass)
{
    auto         pair = make_pair();
    const size_t max  = 5 << 20;
    Region       source(pair->target_pd, max, DOORBELL_ACCESS_REMOTE_READ);
    auto         data = pattern(max, 42);
    std::memcpy(source.bytes.data(), data.data(), max);

    std::vector<uint8_t> got;
    Completion           c;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_get_bcopy(pair->qa, unpack, &got, 1000,
                                                         source.addr(10), source.rkey, &c));
    ASSERT_TRUE(pair->wait([&] { return c.count == 1; }));
    ASSERT_EQ(DOORBELL_OK, c.status);
    ASSERT_EQ(1000u, got.size());
    EXPECT_EQ(0, std::memcmp(got.data(), data.data() + 10, 1000));

    for (size_t len : {size_t(0), size_t(1), size_t(65000), size_t(1) << 20, max}) {
        std::vector<uint8_t> dest(len + 1, 0xee);
        iovec                iov{dest.data(), len};
        Completion           z;
        ASSERT_EQ(DOORBELL_INPROGRESS,
                  doorbell_qp_get_zcopy(pair->qa, &iov, 1, source.addr(), source.rkey, &z));
        ASSERT_TRUE(pair->wait([&] { return z.count == 1; })) << len;
        EXPECT_EQ(DOORBELL_OK, z.status) << len << " " << pair->error_a->message;
        EXPECT_EQ(0, std::memcmp(dest.data(), data.data(), len)) << len;
        EXPECT_EQ(0xee, dest[len]);
    }
}

TEST_P(DeviceContract, GetZcopyIovFillsEachEntry)
{
    auto                 pair = make_pair();
    Region               source(pair->target_pd, 20000, DOORBELL_ACCESS_REMOTE_READ);
    auto                 data = pattern(20000, 5);
    std::vector<uint8_t> dst(20000, 0xee);
    std::memcpy(source.bytes.data(), data.data(), data.size());
    iovec      iov[2] = {{dst.data(), 9000}, {dst.data() + 9000, 11000}};
    Completion c;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_get_zcopy(pair->qa, iov, 2, source.addr(), source.rkey, &c));
    ASSERT_TRUE(pair->wait([&] { return c.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, c.status);
    EXPECT_EQ(data, dst);
}

TEST_P(DeviceContract, ActiveMessagesOfEveryKindArriveInOrder)
{
    auto                    pair = make_pair();
    doorbell_iface_limits_t l    = pair->limits();

    auto payload = pattern(l.max_short - 8, 5);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_am_short(pair->qa, 3, 0x1122334455667788ull, payload.data(),
                                                payload.size()));
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_am_short(pair->qa, 4, 7, nullptr, 0));
    auto    big = pattern(l.max_am_bcopy, 6);
    PackArg arg{big.data(), big.size()};
    ASSERT_EQ(ssize_t(big.size()), doorbell_qp_am_bcopy(pair->qa, 5, pack, &arg));
    uint8_t    hdr[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    auto       zc     = pattern(l.max_am_zcopy - sizeof(hdr), 7);
    iovec      iov{zc.data(), zc.size()};
    Completion c;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_am_zcopy(pair->qa, 6, hdr, sizeof(hdr), &iov, 1, &c));
    ASSERT_TRUE(pair->wait([&] { return pair->ams_b.size() == 4 && c.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, c.status);

    const auto &m = pair->ams_b;
    EXPECT_EQ(3, m[0].id);
    uint64_t h;
    std::memcpy(&h, m[0].data.data(), 8);
    EXPECT_EQ(0x1122334455667788ull, h);
    EXPECT_EQ(0, std::memcmp(m[0].data.data() + 8, payload.data(), payload.size()));
    EXPECT_EQ(4, m[1].id);
    EXPECT_EQ(8u, m[1].data.size());
    EXPECT_EQ(5, m[2].id);
    EXPECT_EQ(big, m[2].data);
    EXPECT_EQ(6, m[3].id);
    ASSERT_EQ(l.max_am_zcopy, m[3].data.size());
    EXPECT_EQ(0, std::memcmp(m[3].data.data(), hdr, 8));
    EXPECT_EQ(0, std::memcmp(m[3].data.data() + 8, zc.data(), zc.size()));
}

TEST_P(DeviceContract, ActiveMessagesBeyondCreditsAndBuffersKeepFlowing)
{
    auto pair = make_pair();
    /* more than the credits and the receive buffers: what is refused for
     * lack of credits goes after progress, nothing is lost or reordered */
    const int total = 200;
    int       sent  = 0;
    ASSERT_TRUE(pair->wait([&] {
        while (sent < total &&
               doorbell_qp_am_short(pair->qa, 1, uint64_t(sent), nullptr, 0) == DOORBELL_OK) {
            ++sent;
        }
        return pair->ams_b.size() == size_t(total);
    }));
    for (int i = 0; i < total; ++i) {
        uint64_t h;
        std::memcpy(&h, pair->ams_b[size_t(i)].data.data(), 8);
        ASSERT_EQ(uint64_t(i), h);
    }
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceContract, ::testing::ValuesIn(backend_names()),
                         [](const auto &info) { return info.param; });
