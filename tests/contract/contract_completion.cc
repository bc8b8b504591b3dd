/* The contract, completion and flow control: flush covers what came before
 * it, fence orders after earlier reads, a full ring or no credits say
 * NO_RESOURCE until progress frees them, destroy cancels. */
#include "device_pair.h"

#include <cstring>

using namespace doorbell::test;

TEST_P(DeviceContract, IfaceFlushCoversEveryQpAndEverythingEarlier)
{
    auto           pair = make_pair();
    Region         target(pair->target_pd, 1 << 20, DOORBELL_ACCESS_REMOTE_WRITE);
    doorbell_qp_t *second = pair->another_qp();
    EXPECT_EQ(DOORBELL_OK, doorbell_iface_flush(pair->a, nullptr)); /* nothing yet */
    auto  data = pattern((1 << 20) - 64, 11);
    iovec iov{data.data(), data.size()};
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair->qa, &iov, 1, target.addr(), target.rkey, nullptr));
    for (int i = 0; i < 10; ++i) {
        uint8_t v = uint8_t(i + 1);
        ASSERT_EQ(DOORBELL_OK,
                  doorbell_qp_put_short(second, &v, 1, target.addr(data.size() + i), target.rkey));
    }
    Completion f;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_iface_flush(pair->a, &f));
    ASSERT_TRUE(pair->wait([&] { return f.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, f.status);
    EXPECT_TRUE(std::equal(data.begin(), data.end(), target.bytes.begin()));
    for (int i = 0; i < 10; ++i) {
        EXPECT_EQ(i + 1, target.bytes[data.size() + size_t(i)]);
    }
    EXPECT_EQ(DOORBELL_OK, doorbell_iface_flush(pair->a, &f));
}

TEST_P(DeviceContract, FencedWriteAfterAReadLeavesTheReadItsOldData)
{
    auto   pair = make_pair();
    Region target(pair->target_pd, 4096, DOORBELL_ACCESS_REMOTE_READ | DOORBELL_ACCESS_REMOTE_WRITE,
                  0xaa);
    std::vector<uint8_t> dest(64, 0);
    iovec                iov{dest.data(), dest.size()};
    Completion           got;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_get_zcopy(pair->qa, &iov, 1, target.addr(), target.rkey, &got));
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_fence(pair->qa));
    std::vector<uint8_t> later(64, 0x55);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair->qa, later.data(), later.size(),
                                                 target.addr(), target.rkey));
    ASSERT_EQ(DOORBELL_OK, pair->flush(pair->qa));
    ASSERT_EQ(1, got.count);
    EXPECT_EQ(DOORBELL_OK, got.status);
    EXPECT_EQ(std::vector<uint8_t>(64, 0xaa), dest); /* read before the write */
    EXPECT_EQ(0, std::memcmp(target.bytes.data(), later.data(), later.size()));
    /* a fence with nothing outstanding orders nothing and costs nothing */
    EXPECT_EQ(DOORBELL_OK, doorbell_qp_fence(pair->qa));
    EXPECT_EQ(DOORBELL_OK, doorbell_qp_flush(pair->qa, nullptr));
}

TEST_P(DeviceContract, FullSendRingSaysNoResourceUntilProgressFreesIt)
{
    doorbell_iface_params_t p = be().params();
    p.tx_queue_len            = 16;
    auto     pair             = be().make(p);
    Region   target(pair->target_pd, 4096, DOORBELL_ACCESS_REMOTE_WRITE);
    unsigned posted = 0;
    uint8_t  v      = 1;
    /* without progress nothing completes: the ring fills */
    while (doorbell_qp_put_short(pair->qa, &v, 1, target.addr(posted), target.rkey) ==
           DOORBELL_OK) {
        ASSERT_LT(++posted, 4096u);
        v = uint8_t(posted + 1);
    }
    EXPECT_EQ(16u, posted);
    EXPECT_EQ(DOORBELL_ERR_NO_RESOURCE,
              doorbell_qp_put_short(pair->qa, &v, 1, target.addr(posted), target.rkey));
    EXPECT_FALSE(doorbell_qp_can_send(pair->qa));
    ASSERT_TRUE(pair->wait([&] { return doorbell_qp_can_send(pair->qa) != 0; }));
    ASSERT_EQ(DOORBELL_OK,
              doorbell_qp_put_short(pair->qa, &v, 1, target.addr(posted), target.rkey));
    ASSERT_EQ(DOORBELL_OK, pair->flush(pair->qa));
    for (unsigned i = 0; i <= posted; ++i) {
        EXPECT_EQ(uint8_t(i + 1), target.bytes[i]) << i;
    }
}

TEST_P(DeviceContract, CreditsBoundActiveMessagesInFlight)
{
    doorbell_iface_params_t p = be().params();
    p.am_credits              = 3;
    auto pair                 = be().make(p);
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(DOORBELL_OK, doorbell_qp_am_short(pair->qa, 1, i, nullptr, 0));
    }
    EXPECT_EQ(DOORBELL_ERR_NO_RESOURCE, doorbell_qp_am_short(pair->qa, 1, 3, nullptr, 0));
    EXPECT_FALSE(doorbell_qp_can_send(pair->qa));
    ASSERT_TRUE(pair->wait([&] { return doorbell_qp_can_send(pair->qa) != 0; }));
    EXPECT_EQ(DOORBELL_OK, doorbell_qp_am_short(pair->qa, 1, 3, nullptr, 0));
    ASSERT_TRUE(pair->wait([&] { return pair->ams_b.size() == 4; }));
    for (uint64_t i = 0; i < 4; ++i) {
        uint64_t h;
        std::memcpy(&h, pair->ams_b[i].data.data(), 8);
        EXPECT_EQ(i, h);
    }
}

TEST_P(DeviceContract, DestroyCancelsWhatIsOutstanding)
{
    auto       pair = make_pair();
    Region     target(pair->target_pd, 1 << 20, DOORBELL_ACCESS_REMOTE_WRITE);
    auto       data = pattern(1 << 20, 1);
    Completion c;
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair->qa, data, target, c));
    pair->destroy_qa();
    EXPECT_EQ(1, c.count);
    EXPECT_EQ(DOORBELL_ERR_CANCELED, c.status);
    for (int i = 0; i < 10; ++i) {
        pair->progress(); /* late answers for the gone QP are dropped */
    }
    EXPECT_EQ(1, c.count);
}

TEST_P(DeviceContract, OversizedRequestsAreRefusedNamingTheDevice)
{
    auto                    pair = make_pair();
    doorbell_iface_limits_t l    = pair->limits();
    Region                  target(pair->target_pd, 4096, DOORBELL_ACCESS_REMOTE_WRITE);
    std::vector<uint8_t>    big(l.max_bcopy + 1);
    auto                    names_device = [&] {
        return std::string(doorbell_last_error()).find(pair->device_a) != std::string::npos;
    };
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM,
              doorbell_qp_put_short(pair->qa, big.data(), l.max_short + 1, target.addr(),
                                    target.rkey));
    EXPECT_TRUE(names_device()) << doorbell_last_error();
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM,
              doorbell_qp_am_short(pair->qa, 1, 0, big.data(), l.max_short));
    EXPECT_TRUE(names_device()) << doorbell_last_error();
    Completion c;
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM,
              doorbell_qp_get_bcopy(pair->qa, nullptr, nullptr, l.max_bcopy + 1, target.addr(),
                                    target.rkey, &c));
    EXPECT_TRUE(names_device()) << doorbell_last_error();
    std::vector<iovec> iov(l.max_iov + 1, iovec{big.data(), 1});
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_qp_put_zcopy(pair->qa, iov.data(), iov.size(),
                                                                target.addr(), target.rkey, &c));
    EXPECT_TRUE(names_device()) << doorbell_last_error();
    EXPECT_EQ(0, c.count);
    /* the QP is unharmed */
    uint8_t v = 9;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair->qa, &v, 1, target.addr(), target.rkey));
    ASSERT_EQ(DOORBELL_OK, pair->flush(pair->qa));
    EXPECT_EQ(9, target.bytes[0]);
}

TEST_P(DeviceContract, PutSignalWithAnUnknownSignalOpIsRefusedAtPost)
{
    auto           pair = make_pair();
    Region         target(pair->target_pd, 16, DOORBELL_ACCESS_REMOTE_WRITE);
    doorbell_wqe_t w{};
    w.opcode       = DOORBELL_OP_PUT_SIGNAL;
    w.am_id        = 7; /* neither SET nor ADD */
    w.rkey         = target.rkey;
    w.remote_addr  = target.addr();
    w.signal_rkey  = target.rkey;
    w.signal_addr  = target.addr(8);
    w.signal_value = 1;
    EXPECT_EQ(DOORBELL_ERR_UNSUPPORTED, doorbell_qp_post(pair->qa, &w, 1));
    EXPECT_NE(nullptr, std::strstr(doorbell_last_error(), "not supported"));
    EXPECT_EQ(DOORBELL_OK, pair->flush(pair->qa)); /* nothing was posted */
}
