/* The contract, hostile or mistaken remote accesses: a wrong key, bounds
 * past the region, a region without the access, a deregistered region. The
 * initiator gets REMOTE_ACCESS (through the cookie, else the QP's error
 * handler), the target's memory is untouched, and the QP is in error. */
#include "device_pair.h"

#include <cstring>
#include <tuple>

using namespace doorbell::test;

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
    {"wrong_key",    DOORBELL_ACCESS_REMOTE_WRITE | DOORBELL_ACCESS_REMOTE_READ, 1, 0,    64},
    {"past_the_end", DOORBELL_ACCESS_REMOTE_WRITE | DOORBELL_ACCESS_REMOTE_READ, 0, 4000, 200},
    {"no_access",    0,                                                          0, 0,    64},
};
// clang-format on

} // namespace

class DeviceBadAccess : public ::testing::TestWithParam<std::tuple<std::string, BadAccess>> {
protected:
    std::unique_ptr<DevicePair> make_pair() const
    {
        const Backend &be = backend(std::get<0>(GetParam()));
        return be.make(be.params());
    }
    const BadAccess &bad() const { return std::get<1>(GetParam()); }
};

TEST_P(DeviceBadAccess, PutZcopyFailsToTheCookieAndLeavesTheTargetUntouched)
{
    auto       pair = make_pair();
    Region     target(pair->target_pd, 4096, bad().access, 0x5a);
    auto       data = pattern(bad().length, 1);
    iovec      iov{data.data(), data.size()};
    Completion c;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair->qa, &iov, 1, target.addr(bad().offset),
                                    target.rkey + bad().key_delta, &c));
    ASSERT_TRUE(pair->wait([&] { return c.count == 1; }));
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, c.status);
    EXPECT_EQ(std::vector<uint8_t>(4096, 0x5a), target.bytes);
    EXPECT_EQ(0, pair->error_a->count); /* reported through the cookie */
    /* the QP is in error now */
    EXPECT_EQ(DOORBELL_ERR_CANCELED,
              doorbell_qp_put_zcopy(pair->qa, &iov, 1, target.addr(), target.rkey, &c));
}

TEST_P(DeviceBadAccess, PutShortFailsThroughTheErrorHandlerAndTheFlush)
{
    auto   pair = make_pair();
    Region target(pair->target_pd, 4096, bad().access, 0x5a);
    auto   data = pattern(bad().length, 2);
    ASSERT_EQ(DOORBELL_OK,
              doorbell_qp_put_short(pair->qa, data.data(), data.size(), target.addr(bad().offset),
                                    target.rkey + bad().key_delta));
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, pair->flush(pair->qa));
    EXPECT_EQ(1, pair->error_a->count);
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, pair->error_a->status);
    EXPECT_NE(pair->error_a->message.find(pair->device_a), std::string::npos)
        << pair->error_a->message;
    EXPECT_EQ(std::vector<uint8_t>(4096, 0x5a), target.bytes);
}

TEST_P(DeviceBadAccess, GetFailsAndLeavesBothSidesUntouched)
{
    auto pair = make_pair();
    /* the region is readable unless the case is the access itself */
    unsigned             access = bad().access == 0 ? 0u : unsigned(DOORBELL_ACCESS_REMOTE_READ);
    Region               source(pair->target_pd, 4096, access, 0x5a);
    std::vector<uint8_t> dest(bad().length, 0x11);
    iovec                iov{dest.data(), dest.size()};
    Completion           c;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_get_zcopy(pair->qa, &iov, 1, source.addr(bad().offset),
                                    source.rkey + bad().key_delta, &c));
    ASSERT_TRUE(pair->wait([&] { return c.count == 1; }));
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, c.status);
    EXPECT_EQ(std::vector<uint8_t>(bad().length, 0x11), dest);
    EXPECT_EQ(std::vector<uint8_t>(4096, 0x5a), source.bytes);
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceBadAccess,
                         ::testing::Combine(::testing::ValuesIn(backend_names()),
                                            ::testing::ValuesIn(kBadAccesses)),
                         [](const auto &info) {
                             return std::get<0>(info.param) + "_" + std::get<1>(info.param).what;
                         });

TEST_P(DeviceContract, EarlierOpsCompleteTheFailingOneFailsLaterOnesAreCanceled)
{
    auto       pair = make_pair();
    Region     target(pair->target_pd, 4096, DOORBELL_ACCESS_REMOTE_WRITE);
    auto       data = pattern(64, 3);
    iovec      iov{data.data(), data.size()};
    Completion first, bad, later;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair->qa, &iov, 1, target.addr(), target.rkey, &first));
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair->qa, &iov, 1, target.addr(4090), target.rkey, &bad));
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair->qa, &iov, 1, target.addr(1000), target.rkey, &later));
    ASSERT_TRUE(pair->wait([&] { return later.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, first.status);
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, bad.status);
    EXPECT_EQ(DOORBELL_ERR_CANCELED, later.status);
    EXPECT_EQ(0, std::memcmp(target.bytes.data(), data.data(), 64));
    /* after the error nothing more was executed at the target */
    EXPECT_EQ(std::vector<uint8_t>(64, 0),
              std::vector<uint8_t>(target.bytes.begin() + 1000, target.bytes.begin() + 1064));
}

TEST_P(DeviceContract, ADeregisteredRegionIsNoLongerWritable)
{
    auto                 pair = make_pair();
    std::vector<uint8_t> target(4096, 0);
    doorbell_mr_t       *mr;
    uint32_t             rkey;
    ASSERT_EQ(DOORBELL_OK, doorbell_mr_register(pair->target_pd, target.data(), target.size(),
                                                DOORBELL_ACCESS_REMOTE_WRITE, &mr, &rkey));
    ASSERT_EQ(DOORBELL_OK, doorbell_mr_deregister(pair->target_pd, mr));
    uint64_t v = 1;
    ASSERT_EQ(DOORBELL_OK,
              doorbell_qp_put_short(pair->qa, &v, sizeof(v), uintptr_t(target.data()), rkey));
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, pair->flush(pair->qa));
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, pair->error_a->status);
    EXPECT_EQ(std::vector<uint8_t>(4096, 0), target);
}

TEST_P(DeviceContract, AnErrorReachesAPendingFlush)
{
    auto                 pair = make_pair();
    uint64_t             v    = 1;
    std::vector<uint8_t> target(64, 0);
    /* a key nobody registered */
    ASSERT_EQ(DOORBELL_OK,
              doorbell_qp_put_short(pair->qa, &v, sizeof(v), uintptr_t(target.data()), 0x999));
    Completion f;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_flush(pair->qa, &f));
    ASSERT_TRUE(pair->wait([&] { return f.count == 1; }));
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, f.status);
    EXPECT_EQ(std::vector<uint8_t>(64, 0), target);
}
