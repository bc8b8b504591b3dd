/* What only the verbs device does, on the fake: the handshake over UD,
 * posts that wait for it, receive buffers and passive QPs (every device's
 * operations are the device contract, tests/contract). */
#include "verbs_pair.h"

#include <cstring>

using namespace doorbell;
using namespace doorbell::test;

TEST(VerbsOps, HandshakeRunsOverUdAndCreatesThePassiveQp)
{
    VerbsPair pair;
    pair.qa = pair.create(pair.a, pair.b);
    auto &q = VerbsPair::vqp(pair.qa);
    EXPECT_EQ(verbs::VerbsQp::State::kConnecting, q.state);
    ASSERT_TRUE(pair.wait([&] { return q.state == verbs::VerbsQp::State::kConnected; }));
    EXPECT_EQ(1u, device(pair.b).passive_count());
    EXPECT_EQ(0u, device(pair.a).passive_count());
}

TEST(VerbsOps, PutBeforeTheHandshakeWaitsThenLands)
{
    VerbsPair            pair;
    std::vector<uint8_t> target(64, 0);
    uint32_t rkey = pair.expose(target.data(), target.size(), DOORBELL_ACCESS_REMOTE_WRITE);
    pair.qa       = pair.create(pair.a, pair.b);
    uint64_t v    = 0x1122334455667788ull;
    ASSERT_EQ(DOORBELL_OK,
              doorbell_qp_put_short(pair.qa, &v, sizeof(v), uintptr_t(target.data()), rkey));
    /* nothing reached the HCA: no connection yet */
    EXPECT_TRUE(pair.fabric.posts("mlx5_0").empty());
    Completion flush;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_flush(pair.qa, &flush));
    ASSERT_TRUE(pair.wait([&] { return flush.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, flush.status);
    EXPECT_EQ(0, std::memcmp(&v, target.data(), sizeof(v)));
}

namespace {
struct Holder {
    std::vector<void *> held;
};
doorbell_status_t hold_am(void *arg, uint8_t, void *data, size_t)
{
    static_cast<Holder *>(arg)->held.push_back(data);
    return DOORBELL_INPROGRESS;
}
} // namespace

TEST(VerbsOps, HeldActiveMessageBuffersAreReleasedAndReposted)
{
    VerbsPair pair;
    Holder    h;
    doorbell_iface_set_am_handler(pair.b, hold_am, &h);
    pair.connect();
    size_t free_before = device(pair.b).bounce_pool().available();
    for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(DOORBELL_OK, doorbell_qp_am_short(pair.qa, 1, i, nullptr, 0));
    }
    ASSERT_TRUE(pair.wait([&] { return h.held.size() == 4; }));
    /* held buffers are out of the pool and not yet reposted */
    EXPECT_EQ(free_before, device(pair.b).bounce_pool().available());
    for (void *d : h.held) {
        doorbell_iface_release_am(pair.b, d);
    }
    EXPECT_EQ(free_before, device(pair.b).bounce_pool().available());
}

TEST(VerbsOps, DestroyedQpTearsDownThePassiveQpAndItsBuffers)
{
    VerbsPair pair;
    size_t    free_before = device(pair.b).bounce_pool().available();
    pair.connect();
    EXPECT_EQ(1u, device(pair.b).passive_count());
    EXPECT_LT(device(pair.b).bounce_pool().available(), free_before);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_am_short(pair.qa, 1, 1, nullptr, 0));
    ASSERT_TRUE(pair.wait([&] { return pair.ams_b.size() == 1; }));
    doorbell_qp_destroy(pair.qa);
    pair.qa = nullptr;
    ASSERT_TRUE(pair.wait([&] { return device(pair.b).passive_count() == 0; }));
    EXPECT_EQ(free_before, device(pair.b).bounce_pool().available());
    /* and a new connection works */
    pair.connect();
    EXPECT_EQ(1u, device(pair.b).passive_count());
}
