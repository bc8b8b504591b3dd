/* End to end on the fake: handshake, put, get, active messages, flush. */
#include "verbs_pair.h"

#include <cstring>
#include <numeric>

using namespace doorbell;
using namespace doorbell::test;

namespace {

size_t pack_pattern(void *dest, void *arg)
{
    auto *len = static_cast<size_t *>(arg);
    for (size_t i = 0; i < *len; ++i) {
        static_cast<uint8_t *>(dest)[i] = uint8_t(i * 7);
    }
    return *len;
}

struct Unpacked {
    std::vector<uint8_t> data;
};

void unpack_into(void *arg, const void *data, size_t length)
{
    auto *u = static_cast<Unpacked *>(arg);
    auto *p = static_cast<const uint8_t *>(data);
    u->data.assign(p, p + length);
}

} // namespace

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

TEST(VerbsOps, PutShortBcopyZcopyAndGetBcopyZcopy)
{
    VerbsPair pair;
    pair.connect();
    std::vector<uint8_t> target(1 << 16, 0);
    uint32_t             rkey = pair.expose(target.data(), target.size(),
                                            DOORBELL_ACCESS_REMOTE_WRITE | DOORBELL_ACCESS_REMOTE_READ);
    uint64_t             base = uintptr_t(target.data());

    const char msg[] = "short put";
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, msg, sizeof(msg), base, rkey));
    size_t blen = 3000;
    ASSERT_EQ(ssize_t(blen), doorbell_qp_put_bcopy(pair.qa, pack_pattern, &blen, base + 100, rkey));
    std::vector<uint8_t> src(20000);
    std::iota(src.begin(), src.end(), 0);
    iovec      iov[3] = {{src.data(), 5000}, {src.data() + 5000, 7000}, {src.data() + 12000, 8000}};
    Completion put;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair.qa, iov, 3, base + 30000, rkey, &put));
    ASSERT_TRUE(pair.wait([&] { return put.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, put.status);
    EXPECT_EQ(0, std::memcmp(target.data(), msg, sizeof(msg)));
    for (size_t i = 0; i < blen; ++i) {
        ASSERT_EQ(uint8_t(i * 7), target[100 + i]) << i;
    }
    EXPECT_EQ(0, std::memcmp(target.data() + 30000, src.data(), src.size()));

    Unpacked   u;
    Completion get;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_get_bcopy(pair.qa, unpack_into, &u, 2000, base + 30000, rkey, &get));
    ASSERT_TRUE(pair.wait([&] { return get.count == 1; }));
    ASSERT_EQ(2000u, u.data.size());
    EXPECT_EQ(0, std::memcmp(u.data.data(), src.data(), 2000));

    std::vector<uint8_t> dst(20000, 0xee);
    iovec                giov[2] = {{dst.data(), 9000}, {dst.data() + 9000, 11000}};
    Completion           getz;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_get_zcopy(pair.qa, giov, 2, base + 30000, rkey, &getz));
    ASSERT_TRUE(pair.wait([&] { return getz.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, getz.status);
    EXPECT_EQ(src, dst);
}

TEST(VerbsOps, ActiveMessagesShortBcopyZcopyInOrder)
{
    VerbsPair pair;
    pair.connect();
    uint64_t   hdr       = 42;
    const char payload[] = "payload";
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_am_short(pair.qa, 3, hdr, payload, sizeof(payload)));
    size_t blen = 5000; /* above max_inline: registered bounce */
    ASSERT_EQ(ssize_t(blen), doorbell_qp_am_bcopy(pair.qa, 4, pack_pattern, &blen));
    char                 zh[16] = "zcopy-header";
    std::vector<uint8_t> body(1000, 0x5a);
    iovec                iov{body.data(), body.size()};
    Completion           z;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_am_zcopy(pair.qa, 5, zh, sizeof(zh), &iov, 1, &z));
    ASSERT_TRUE(pair.wait([&] { return pair.ams_b.size() == 3 && z.count == 1; }));
    EXPECT_EQ(3, pair.ams_b[0].id);
    ASSERT_EQ(sizeof(hdr) + sizeof(payload), pair.ams_b[0].data.size());
    EXPECT_EQ(0, std::memcmp(pair.ams_b[0].data.data(), &hdr, sizeof(hdr)));
    EXPECT_STREQ(payload, reinterpret_cast<char *>(pair.ams_b[0].data.data() + 8));
    EXPECT_EQ(4, pair.ams_b[1].id);
    ASSERT_EQ(blen, pair.ams_b[1].data.size());
    EXPECT_EQ(uint8_t(4999 * 7), pair.ams_b[1].data[4999]);
    EXPECT_EQ(5, pair.ams_b[2].id);
    EXPECT_EQ(sizeof(zh) + body.size(), pair.ams_b[2].data.size());
}

TEST(VerbsOps, ManyActiveMessagesReuseReceiveBuffers)
{
    VerbsPair pair;
    pair.connect();
    /* more messages than receive buffers: reposting keeps them flowing */
    const int total = 200;
    int       sent  = 0;
    ASSERT_TRUE(pair.wait([&] {
        while (sent < total &&
               doorbell_qp_am_short(pair.qa, 1, uint64_t(sent), nullptr, 0) == DOORBELL_OK) {
            ++sent;
        }
        return pair.ams_b.size() == size_t(total);
    }));
    for (int i = 0; i < total; ++i) {
        uint64_t h;
        std::memcpy(&h, pair.ams_b[size_t(i)].data.data(), 8);
        ASSERT_EQ(uint64_t(i), h);
    }
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

TEST(VerbsOps, IfaceFlushCompletesAfterEverythingEarlier)
{
    VerbsPair pair;
    pair.connect();
    std::vector<uint8_t> target(4096, 0);
    uint32_t rkey = pair.expose(target.data(), target.size(), DOORBELL_ACCESS_REMOTE_WRITE);
    EXPECT_EQ(DOORBELL_OK, doorbell_iface_flush(pair.a, nullptr));
    for (int i = 0; i < 10; ++i) {
        uint8_t v = uint8_t(i + 1);
        ASSERT_EQ(DOORBELL_OK,
                  doorbell_qp_put_short(pair.qa, &v, 1, uintptr_t(target.data()) + i, rkey));
    }
    Completion f;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_iface_flush(pair.a, &f));
    ASSERT_TRUE(pair.wait([&] { return f.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, f.status);
    for (int i = 0; i < 10; ++i) {
        EXPECT_EQ(i + 1, target[size_t(i)]);
    }
    EXPECT_EQ(DOORBELL_OK, doorbell_iface_flush(pair.a, nullptr));
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

TEST(VerbsOps, PutSignalWithAnUnknownSignalOpIsRefusedNotPosted)
{
    VerbsPair             pair;
    std::vector<uint64_t> target(2, 0);
    uint32_t rkey = pair.expose(target.data(), sizeof(uint64_t) * 2, DOORBELL_ACCESS_REMOTE_WRITE);
    pair.qa       = pair.create(pair.a, pair.b);
    doorbell_wqe_t w{};
    w.opcode       = DOORBELL_OP_PUT_SIGNAL;
    w.am_id        = 7; /* neither SET nor ADD (see test_verbs_signal.cc) */
    w.rkey         = rkey;
    w.remote_addr  = uintptr_t(&target[0]);
    w.signal_rkey  = rkey;
    w.signal_addr  = uintptr_t(&target[1]);
    w.signal_value = 1;
    EXPECT_EQ(DOORBELL_ERR_UNSUPPORTED, doorbell_qp_post(pair.qa, &w, 1));
    EXPECT_NE(nullptr, std::strstr(doorbell_last_error(), "not supported"));
    EXPECT_TRUE(pair.fabric.posts("mlx5_0").empty());
}
