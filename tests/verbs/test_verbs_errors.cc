/* Error completions, handshake loss, and a usable iface afterwards. */
#include "verbs_pair.h"

#include <cstring>

using namespace doorbell;
using namespace doorbell::test;

TEST(VerbsErrors, RemoteAccessErrorNamesDevicePeerAndStatus)
{
    VerbsPair pair;
    pair.connect();
    std::vector<uint8_t> target(4096, 0);
    uint32_t rkey = pair.expose(target.data(), target.size(), DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t v    = 1;
    ASSERT_EQ(DOORBELL_OK,
              doorbell_qp_put_short(pair.qa, &v, 8, uintptr_t(target.data()), rkey ^ 0x5a5a00));
    ASSERT_TRUE(pair.wait([&] { return pair.error_a.count == 1; }));
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, pair.error_a.status);
    const std::string &m = pair.error_a.message;
    EXPECT_NE(std::string::npos, m.find("mlx5_0:1")) << m;
    EXPECT_NE(std::string::npos, m.find("gid fe80::2")) << m;
    EXPECT_NE(std::string::npos, m.find(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR))) << m;
    EXPECT_NE(std::string::npos, m.find("put")) << m;
    doorbell_counters_t c;
    doorbell_iface_get_counters(pair.a, &c);
    EXPECT_EQ(1u, c.remote_access_errors);
    /* the QP is in error: later operations are canceled */
    EXPECT_EQ(DOORBELL_ERR_CANCELED,
              doorbell_qp_put_short(pair.qa, &v, 8, uintptr_t(target.data()), rkey));

    /* the iface serves other connections */
    doorbell_qp_t *q2 = pair.create(pair.a, pair.b);
    pair.extra.push_back(q2);
    Completion f;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(q2, &v, 8, uintptr_t(target.data()), rkey));
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_flush(q2, &f));
    ASSERT_TRUE(pair.wait([&] { return f.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, f.status);
    EXPECT_EQ(1, target[0]);
}

TEST(VerbsErrors, PeerGoneIsRetryExceededAndTimesOut)
{
    VerbsPair pair;
    pair.connect();
    std::vector<uint8_t> target(64, 0);
    uint32_t rkey = pair.expose(target.data(), target.size(), DOORBELL_ACCESS_REMOTE_WRITE);
    doorbell_iface_close(pair.b);
    pair.b = nullptr;
    std::vector<uint8_t> src(1000, 1);
    iovec                iov{src.data(), src.size()};
    Completion           c;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair.qa, &iov, 1, uintptr_t(target.data()), rkey, &c));
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (c.count == 0 && std::chrono::steady_clock::now() < end) {
        doorbell_iface_progress(pair.a);
    }
    ASSERT_EQ(1, c.count);
    EXPECT_EQ(DOORBELL_ERR_TIMED_OUT, c.status);
    ASSERT_EQ(1, pair.error_a.count);
    EXPECT_EQ(DOORBELL_ERR_TIMED_OUT, pair.error_a.status);
    EXPECT_NE(std::string::npos, pair.error_a.message.find(ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR)))
        << pair.error_a.message;
}

TEST(VerbsErrors, LostHandshakeIsRetried)
{
    VerbsPair pair;
    pair.fabric.drop_ud = 1; /* the first REQ */
    pair.qa             = pair.create(pair.a, pair.b);
    ASSERT_TRUE(pair.wait(
        [&] { return VerbsPair::vqp(pair.qa).state == verbs::VerbsQp::State::kConnected; }));
    EXPECT_GE(VerbsPair::vqp(pair.qa).hello_retries, 1u);
    EXPECT_EQ(1u, device(pair.b).passive_count());
}

TEST(VerbsErrors, LostReplyIsAnsweredAgainWithoutASecondPassiveQp)
{
    VerbsPair pair;
    pair.qa             = pair.create(pair.a, pair.b); /* REQ delivered */
    pair.fabric.drop_ud = 1;                           /* the REP is lost */
    ASSERT_TRUE(pair.wait(
        [&] { return VerbsPair::vqp(pair.qa).state == verbs::VerbsQp::State::kConnected; }));
    EXPECT_EQ(1u, device(pair.b).passive_count());
}

TEST(VerbsErrors, UnansweredHandshakeTimesOutWithTheQpError)
{
    VerbsPair pair;
    pair.fabric.drop_ud = 1000;
    pair.qa             = pair.create(pair.a, pair.b);
    ASSERT_TRUE(pair.wait([&] { return pair.error_a.count == 1; }));
    EXPECT_EQ(DOORBELL_ERR_TIMED_OUT, pair.error_a.status);
    EXPECT_NE(std::string::npos, pair.error_a.message.find("handshake"));
    EXPECT_NE(std::string::npos, pair.error_a.message.find("mlx5_0:1"));
}

TEST(VerbsErrors, BadPeerAddressesAreRejected)
{
    VerbsPair      pair;
    uint8_t        dev[18] = {};
    uint32_t       qpn     = 5;
    doorbell_qp_t *q;
    EXPECT_EQ(DOORBELL_ERR_UNREACHABLE, doorbell_qp_create(pair.a, dev, &qpn, &q));
    std::vector<uint8_t> good(18);
    doorbell_iface_get_device_address(pair.b, good.data());
    qpn = 0x1000000; /* not a 24-bit QP number */
    EXPECT_EQ(DOORBELL_ERR_UNREACHABLE, doorbell_qp_create(pair.a, good.data(), &qpn, &q));
    EXPECT_NE(nullptr, strstr(doorbell_last_error(), "mlx5_0:1"));
}
