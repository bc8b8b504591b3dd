/* PUT_SIGNAL on verbs: the data write, then the signal (an 8-byte write for
 * SET, a fetch-add for ADD) on the same RC QP, in one ibv_post_send. */
#include "verbs_pair.h"

#include <endian.h>

#include <cstring>

using namespace doorbell;
using namespace doorbell::test;
using verbs::fake::PostedWr;

namespace {

class VerbsSignal : public ::testing::Test {
protected:
    explicit VerbsSignal(verbs::fake::HcaConfig ca = {}) : pair(ca, {}) {}

    void SetUp() override
    {
        pair.connect();
        target.assign(4096, 0);
        rkey = pair.expose(target.data(), target.size(),
                           DOORBELL_ACCESS_REMOTE_WRITE | DOORBELL_ACCESS_REMOTE_READ);
        base = uintptr_t(target.data());
        src.assign(256, 0);
        for (size_t i = 0; i < src.size(); ++i) {
            src[i] = uint8_t(i * 7 + 1);
        }
    }
    doorbell_wqe_t put_signal(uint32_t len, uint64_t signal_addr, uint32_t op, uint64_t value)
    {
        doorbell_wqe_t w{};
        w.opcode       = DOORBELL_OP_PUT_SIGNAL;
        w.am_id        = uint8_t(op);
        w.rkey         = rkey;
        w.remote_addr  = base;
        w.local_addr   = uintptr_t(src.data());
        w.length       = len;
        w.signal_addr  = signal_addr;
        w.signal_rkey  = rkey;
        w.signal_value = value;
        return w;
    }
    uint64_t word_at(size_t off)
    {
        uint64_t v;
        std::memcpy(&v, target.data() + off, 8);
        return v;
    }
    const std::vector<std::vector<PostedWr>> &posts() { return pair.fabric.posts("mlx5_0"); }

    VerbsPair            pair;
    std::vector<uint8_t> target, src;
    uint32_t             rkey = 0;
    uint64_t             base = 0;
};

class VerbsSignalNoAtomics : public VerbsSignal {
protected:
    static verbs::fake::HcaConfig no_atomics()
    {
        verbs::fake::HcaConfig c;
        c.atomics = false;
        return c;
    }
    VerbsSignalNoAtomics() : VerbsSignal(no_atomics()) {}
};

} // namespace

TEST_F(VerbsSignal, SetIsTheDataWriteThenAnInlineWriteOfTheWord)
{
    Completion     c;
    doorbell_wqe_t w = put_signal(256, base + 1024, DOORBELL_SIGNAL_SET, 0x1122334455667788ull);
    w.flags          = DOORBELL_WQE_SIGNALED;
    w.wr_id          = uintptr_t(&c);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_post(pair.qa, &w, 1)) << doorbell_last_error();
    ASSERT_EQ(1u, posts().size());
    const auto &chain = posts()[0];
    ASSERT_EQ(2u, chain.size());
    EXPECT_EQ(IBV_WR_RDMA_WRITE, chain[0].opcode);
    EXPECT_EQ(base, chain[0].remote_addr);
    EXPECT_EQ(std::vector<uint32_t>{256}, chain[0].sge_lengths);
    EXPECT_FALSE(chain[0].send_flags & IBV_SEND_SIGNALED);
    EXPECT_EQ(IBV_WR_RDMA_WRITE, chain[1].opcode);
    EXPECT_EQ(base + 1024, chain[1].remote_addr);
    EXPECT_EQ(rkey, chain[1].rkey);
    EXPECT_TRUE(chain[1].send_flags & IBV_SEND_INLINE);
    EXPECT_TRUE(chain[1].send_flags & IBV_SEND_SIGNALED);
    uint64_t value = 0x1122334455667788ull;
    EXPECT_EQ(std::vector<uint8_t>((uint8_t *)&value, (uint8_t *)&value + 8), chain[1].inline_data);
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, c.status);
    EXPECT_EQ(0, std::memcmp(target.data(), src.data(), 256));
    EXPECT_EQ(0x1122334455667788ull, word_at(1024));
}

TEST_F(VerbsSignal, AddIsTheDataWriteThenAFetchAddOnABigEndianWord)
{
    Completion     c;
    doorbell_wqe_t w[2] = {put_signal(64, base + 2048, DOORBELL_SIGNAL_ADD, 3),
                           put_signal(64, base + 2048, DOORBELL_SIGNAL_ADD, 4)};
    w[1].flags          = DOORBELL_WQE_SIGNALED;
    w[1].wr_id          = uintptr_t(&c);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_post(pair.qa, w, 2)) << doorbell_last_error();
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, c.status);
    size_t                wrs = 0;
    std::vector<PostedWr> all;
    for (const auto &chain : posts()) {
        all.insert(all.end(), chain.begin(), chain.end());
        wrs += chain.size();
    }
    ASSERT_EQ(4u, wrs);
    for (int k : {0, 1}) {
        EXPECT_EQ(IBV_WR_RDMA_WRITE, all[2 * k].opcode);
        EXPECT_EQ(IBV_WR_ATOMIC_FETCH_AND_ADD, all[2 * k + 1].opcode);
        EXPECT_EQ(base + 2048, all[2 * k + 1].remote_addr);
        EXPECT_EQ(rkey, all[2 * k + 1].rkey);
        EXPECT_EQ(uint64_t(3 + k), all[2 * k + 1].compare_add);
        /* the old value lands in 8 registered bytes of the QP */
        EXPECT_EQ(std::vector<uint32_t>{8}, all[2 * k + 1].sge_lengths);
    }
    EXPECT_TRUE(all[3].send_flags & IBV_SEND_SIGNALED);
    EXPECT_FALSE(all[1].send_flags & IBV_SEND_SIGNALED);
    /* ConnectX adds on a big-endian word */
    EXPECT_EQ(7u, be64toh(word_at(2048)));
    EXPECT_EQ(0, std::memcmp(target.data(), src.data(), 64));
}

TEST_F(VerbsSignal, AddToAMisalignedWordIsRefusedBeforeTheHca)
{
    doorbell_wqe_t w = put_signal(8, base + 2052, DOORBELL_SIGNAL_ADD, 1);
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_qp_post(pair.qa, &w, 1));
    std::string m = doorbell_last_error();
    EXPECT_NE(std::string::npos, m.find("8-byte aligned")) << m;
    EXPECT_NE(std::string::npos, m.find("mlx5_0:1")) << m;
    EXPECT_TRUE(posts().empty());
    /* a SET signal has no alignment rule of its own */
    w.am_id = DOORBELL_SIGNAL_SET;
    EXPECT_EQ(DOORBELL_OK, doorbell_qp_post(pair.qa, &w, 1));
}

TEST_F(VerbsSignal, AddToAWordWithoutWriteAccessFailsWithRemoteAccess)
{
    std::vector<uint64_t> ro(8, 0);
    uint32_t              ro_key = pair.expose(ro.data(), 64, DOORBELL_ACCESS_REMOTE_READ);
    doorbell_wqe_t        w      = put_signal(8, uintptr_t(ro.data()), DOORBELL_SIGNAL_ADD, 1);
    w.signal_rkey                = ro_key;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_post(pair.qa, &w, 1));
    ASSERT_TRUE(pair.wait([&] { return pair.error_a.count == 1; }));
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, pair.error_a.status);
    const std::string &m = pair.error_a.message;
    EXPECT_NE(std::string::npos, m.find("put with signal")) << m;
    EXPECT_NE(std::string::npos, m.find("mlx5_0:1")) << m;
    EXPECT_EQ(0u, ro[0]);
}

TEST_F(VerbsSignalNoAtomics, AddIsUnsupportedWithoutHcaAtomics)
{
    doorbell_wqe_t w = put_signal(8, base + 8, DOORBELL_SIGNAL_ADD, 1);
    EXPECT_EQ(DOORBELL_ERR_UNSUPPORTED, doorbell_qp_post(pair.qa, &w, 1));
    std::string m = doorbell_last_error();
    EXPECT_NE(std::string::npos, m.find("no atomics")) << m;
    EXPECT_TRUE(posts().empty());
    /* SET needs no atomics */
    w.am_id = DOORBELL_SIGNAL_SET;
    w.flags = DOORBELL_WQE_SIGNALED;
    Completion c;
    w.wr_id = uintptr_t(&c);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_post(pair.qa, &w, 1));
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, c.status);
    EXPECT_EQ(1u, word_at(8));
}
