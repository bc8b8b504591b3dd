/* Hostile or mistaken input: bad keys, bounds and access flags on the
 * initiator side; malformed, truncated, foreign and stale datagrams on the
 * receiver side. */
#include "loopback_pair.h"
#include "raw_peer.h"

#include "devices/udp/wire.h"

using namespace doorbell::test;
using doorbell::udp::Opcode;
using doorbell::udp::WireHeader;

namespace {

struct BadAccess {
    const char *what;
    unsigned    access;    ///< of the registered region
    int         key_delta; ///< added to the real key
    size_t      offset;    ///< into the region
    size_t      length;
};

// clang-format off
const BadAccess kBadAccesses[] = {
    {"wrong key", DOORBELL_ACCESS_REMOTE_WRITE | DOORBELL_ACCESS_REMOTE_READ, 1, 0, 64},
    {"past the end", DOORBELL_ACCESS_REMOTE_WRITE | DOORBELL_ACCESS_REMOTE_READ, 0, 4000, 200},
    {"no access", 0, 0, 0, 64},
};
// clang-format on

} // namespace

class UdpBadAccess : public ::testing::TestWithParam<BadAccess> {};

TEST_P(UdpBadAccess, PutZcopyFailsAndLeavesTargetUntouched)
{
    const BadAccess &bad = GetParam();
    LoopbackPair     pair;
    Region           target(pair.pd, 4096, bad.access, 0x5a);
    auto             data = pattern(bad.length, 1);
    iovec            iov{data.data(), data.size()};
    Completion       c;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_put_zcopy(pair.qa, &iov, 1, target.addr(bad.offset),
                                                         target.rkey + bad.key_delta, &c));
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, c.status) << bad.what;
    EXPECT_EQ(std::vector<uint8_t>(4096, 0x5a), target.bytes);
    EXPECT_EQ(0, pair.error_a.count); /* reported through the cookie */
    EXPECT_EQ(1u, pair.counters(pair.b).remote_access_errors);
    /* the QP is in error now */
    EXPECT_EQ(DOORBELL_ERR_CANCELED,
              doorbell_qp_put_zcopy(pair.qa, &iov, 1, target.addr(), target.rkey, &c));
}

TEST_P(UdpBadAccess, PutShortReportsThroughErrorHandlerAndFlush)
{
    const BadAccess &bad = GetParam();
    LoopbackPair     pair;
    Region           target(pair.pd, 4096, bad.access, 0x5a);
    auto             data = pattern(bad.length, 2);
    ASSERT_EQ(DOORBELL_OK,
              doorbell_qp_put_short(pair.qa, data.data(), data.size(), target.addr(bad.offset),
                                    target.rkey + bad.key_delta));
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, pair.flush(pair.qa)) << bad.what;
    EXPECT_EQ(1, pair.error_a.count);
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, pair.error_a.status);
    EXPECT_NE(pair.error_a.message.find("127.0.0.1"), std::string::npos);
    EXPECT_EQ(std::vector<uint8_t>(4096, 0x5a), target.bytes);
}

TEST_P(UdpBadAccess, GetFailsAndLeavesBothSidesUntouched)
{
    const BadAccess &bad = GetParam();
    LoopbackPair     pair;
    Region source(pair.pd, 4096, bad.access & ~unsigned(DOORBELL_ACCESS_REMOTE_READ), 0x5a);
    if (bad.key_delta != 0 || bad.offset != 0) {
        /* readable region, bad key or bounds */
        doorbell_mr_deregister(pair.pd, source.mr);
        ASSERT_EQ(DOORBELL_OK,
                  doorbell_mr_register(pair.pd, source.bytes.data(), 4096,
                                       DOORBELL_ACCESS_REMOTE_READ, &source.mr, &source.rkey));
    }
    std::vector<uint8_t> dest(bad.length, 0x11);
    iovec                iov{dest.data(), dest.size()};
    Completion           c;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_get_zcopy(pair.qa, &iov, 1, source.addr(bad.offset),
                                                         source.rkey + bad.key_delta, &c));
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, c.status) << bad.what;
    EXPECT_EQ(std::vector<uint8_t>(bad.length, 0x11), dest);
    EXPECT_EQ(std::vector<uint8_t>(4096, 0x5a), source.bytes);
}

INSTANTIATE_TEST_SUITE_P(Cases, UdpBadAccess, ::testing::ValuesIn(kBadAccesses),
                         [](const auto &info) {
                             std::string n = info.param.what;
                             for (auto &ch : n) {
                                 if (ch == ' ')
                                     ch = '_';
                             }
                             return n;
                         });

TEST(UdpBadAccessOrder, EarlierOpsCompleteLaterOnesAreCanceled)
{
    LoopbackPair pair;
    Region       target(pair.pd, 4096, DOORBELL_ACCESS_REMOTE_WRITE);
    auto         data = pattern(64, 3);
    iovec        iov{data.data(), data.size()};
    Completion   first, bad, later;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair.qa, &iov, 1, target.addr(), target.rkey, &first));
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair.qa, &iov, 1, target.addr(4090), target.rkey, &bad));
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair.qa, &iov, 1, target.addr(1000), target.rkey, &later));
    ASSERT_TRUE(pair.wait([&] { return later.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, first.status);
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, bad.status);
    EXPECT_EQ(DOORBELL_ERR_CANCELED, later.status);
    EXPECT_EQ(0, std::memcmp(target.bytes.data(), data.data(), 64));
    /* after the error nothing more was executed at the target */
    EXPECT_EQ(std::vector<uint8_t>(64, 0),
              std::vector<uint8_t>(target.bytes.begin() + 1000, target.bytes.begin() + 1064));
}

/* ------------------------------------------------------- raw datagrams */

namespace {

WireHeader valid_write(uint32_t len)
{
    WireHeader h{};
    h.magic      = doorbell::udp::kMagic;
    h.version    = doorbell::udp::kVersion;
    h.opcode     = uint8_t(Opcode::kWrite);
    h.flags      = doorbell::udp::kFlagFirst | doorbell::udp::kFlagLast;
    h.src_qp     = 77;
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
    auto full     = bytes_of(h, 16);
    bad.push_back({full.begin(), full.end() - 1}); /* truncated payload */
    h.magic = 0x12345678;
    bad.push_back(bytes_of(h, 16)); /* foreign magic */
    h         = valid_write(16);
    h.version = 9;
    bad.push_back(bytes_of(h, 16)); /* future version */
    h        = valid_write(16);
    h.opcode = 200;
    bad.push_back(bytes_of(h, 16)); /* unknown opcode */
    h            = valid_write(16);
    h.msg_offset = 0xfffffff8;
    bad.push_back(bytes_of(h, 16)); /* offset past message */
    h       = valid_write(16);
    h.flags = 0x80;
    bad.push_back(bytes_of(h, 16)); /* unknown flag */
    h        = valid_write(0);
    h.opcode = uint8_t(Opcode::kAck);
    h.dst_qp = 0xdeadbeef;
    bad.push_back(bytes_of(h, 0)); /* ACK for no QP: stale */
    h        = valid_write(0);
    h.opcode = uint8_t(Opcode::kNak);
    h.am_id  = 0;
    bad.push_back(bytes_of(h, 0)); /* NAK without a code */

    for (auto &d : bad) {
        raw.send_to(pair.b, d.data(), d.size());
    }
    ASSERT_TRUE(pair.wait([&] { return pair.counters(pair.b).rx_dropped >= bad.size(); }))
        << pair.counters(pair.b).rx_dropped;
    EXPECT_EQ(bad.size(), pair.counters(pair.b).rx_dropped);
    EXPECT_EQ(std::vector<uint8_t>(256, 0x33), target.bytes);

    /* the iface still works */
    uint64_t v = 7;
    Region   ok(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, ok.addr(), ok.rkey));
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    EXPECT_EQ(7, ok.bytes[0]);
}

TEST(UdpRawInput, ForgedWriteWithValidKeyButBadBoundsIsRejected)
{
    LoopbackPair pair;
    Region       target(pair.pd, 256, DOORBELL_ACCESS_REMOTE_WRITE, 0x33);
    RawPeer      raw;
    WireHeader   h = valid_write(64);
    h.remote_addr  = target.addr(250);
    h.rkey         = target.rkey;
    std::vector<uint8_t> d(sizeof(h) + 64, 0xcc);
    std::memcpy(d.data(), &h, sizeof(h));
    raw.send_to(pair.b, d.data(), d.size());
    ASSERT_TRUE(pair.wait([&] { return pair.counters(pair.b).remote_access_errors == 1; }));
    EXPECT_EQ(std::vector<uint8_t>(256, 0x33), target.bytes);
}
