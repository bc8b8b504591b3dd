/* The WR chains the device hands to ibv_post_send. */
#include "verbs_pair.h"

#include <cstring>

using namespace doorbell;
using namespace doorbell::test;
using verbs::fake::PostedWr;

namespace {

size_t pack_n(void *dest, void *arg)
{
    size_t n = *static_cast<size_t *>(arg);
    std::memset(dest, 0xab, n);
    return n;
}

int signaled_count(const std::vector<PostedWr> &chain)
{
    int n = 0;
    for (const PostedWr &w : chain) {
        n += (w.send_flags & IBV_SEND_SIGNALED) != 0;
    }
    return n;
}

class VerbsChains : public ::testing::Test {
protected:
    void SetUp() override
    {
        pair.connect();
        target.assign(1 << 20, 0);
        rkey = pair.expose(target.data(), target.size(),
                           DOORBELL_ACCESS_REMOTE_WRITE | DOORBELL_ACCESS_REMOTE_READ);
        base = uintptr_t(target.data());
    }
    const std::vector<std::vector<PostedWr>> &posts() { return pair.fabric.posts("mlx5_0"); }

    VerbsPair            pair;
    std::vector<uint8_t> target;
    uint32_t             rkey = 0;
    uint64_t             base = 0;
};

} // namespace

TEST_F(VerbsChains, SinglePutOnAnIdleQueueIsPostedAtOnce)
{
    uint64_t v = 7;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, base, rkey));
    ASSERT_EQ(1u, posts().size()); /* no progress call needed */
    ASSERT_EQ(1u, posts()[0].size());
    const PostedWr &w = posts()[0][0];
    EXPECT_EQ(IBV_WR_RDMA_WRITE, w.opcode);
    EXPECT_TRUE(w.send_flags & IBV_SEND_INLINE);
    EXPECT_FALSE(w.send_flags & IBV_SEND_SIGNALED); /* moderation: 1 in 64 */
    EXPECT_EQ(std::vector<uint32_t>{8}, w.sge_lengths);
    EXPECT_EQ(base, w.remote_addr);
}

TEST_F(VerbsChains, SixtyFourPutsOnABusyQueueCostOneDoorbell)
{
    uint64_t v = 1;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, base, rkey));
    ASSERT_EQ(1u, posts().size());
    /* the first put has not completed (no signaled completion polled): the
     * queue is busy, so puts coalesce until a batch of 64 waits */
    for (int i = 0; i < 63; ++i) {
        ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, base + 8 * (i + 1), rkey));
        ASSERT_EQ(1u, posts().size()) << "put " << i;
    }
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, base + 512, rkey));
    ASSERT_EQ(2u, posts().size());
    const auto &chain = posts()[1];
    ASSERT_EQ(64u, chain.size());
    /* selective signaling: the 64th WQE of the QP is the signaled one */
    EXPECT_EQ(1, signaled_count(chain));
    EXPECT_TRUE(chain[62].send_flags & IBV_SEND_SIGNALED);
    for (const PostedWr &w : chain) {
        EXPECT_TRUE(w.send_flags & IBV_SEND_INLINE);
    }
    const auto &st = device(pair.a).post_stats();
    EXPECT_EQ(2u, st.post_calls);
    EXPECT_EQ(65u, st.wrs);
    EXPECT_EQ(1u, st.post_list[0]); /* 1 WR */
    EXPECT_EQ(1u, st.post_list[6]); /* 64..127 WRs */
    doorbell_counters_t c;
    doorbell_iface_get_counters(pair.a, &c);
    EXPECT_EQ(2u, c.doorbells);
    EXPECT_EQ(65u, c.wqes);
}

TEST_F(VerbsChains, ProgressRingsWhatTheBatcherHeldBack)
{
    uint64_t v = 1;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, base, rkey));
    for (int i = 0; i < 5; ++i) {
        ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, base, rkey));
    }
    ASSERT_EQ(1u, posts().size());
    doorbell_iface_progress(pair.a);
    ASSERT_EQ(2u, posts().size());
    EXPECT_EQ(5u, posts()[1].size());
}

TEST_F(VerbsChains, InlineUpToMaxInlineElseRegisteredSge)
{
    uint32_t max = device(pair.a).max_inline();
    ASSERT_GE(max, 64u);
    std::vector<uint8_t> small(max, 1), big(max + 1, 2);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, small.data(), small.size(), base, rkey));
    doorbell_iface_progress(pair.a);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, big.data(), big.size(), base, rkey));
    size_t n = 4096;
    ASSERT_EQ(ssize_t(n), doorbell_qp_put_bcopy(pair.qa, pack_n, &n, base, rkey));
    doorbell_iface_progress(pair.a);
    std::vector<PostedWr> all;
    for (auto &c : posts()) {
        all.insert(all.end(), c.begin(), c.end());
    }
    ASSERT_EQ(3u, all.size());
    EXPECT_TRUE(all[0].send_flags & IBV_SEND_INLINE);
    EXPECT_FALSE(all[1].send_flags & IBV_SEND_INLINE);
    EXPECT_FALSE(all[2].send_flags & IBV_SEND_INLINE);
    EXPECT_EQ(std::vector<uint32_t>{4096}, all[2].sge_lengths);
    /* the slot's bounce buffer was registered through the cache */
    EXPECT_GE(device(pair.a).reg_cache().stats().misses, 1u);
    Completion f;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_flush(pair.qa, &f));
    ASSERT_TRUE(pair.wait([&] { return f.count == 1; }));
    EXPECT_EQ(0xab, target[4095]);
}

TEST_F(VerbsChains, ZcopyIovBecomesOneWrWithAnSgeList)
{
    std::vector<uint8_t> src(3000, 9);
    iovec      iov[3] = {{src.data(), 1000}, {src.data() + 1000, 500}, {src.data() + 1500, 1500}};
    Completion c;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_put_zcopy(pair.qa, iov, 3, base + 64, rkey, &c));
    ASSERT_EQ(1u, posts().size());
    ASSERT_EQ(1u, posts()[0].size());
    const PostedWr &w = posts()[0][0];
    EXPECT_EQ(IBV_WR_RDMA_WRITE, w.opcode);
    EXPECT_EQ((std::vector<uint32_t>{1000, 500, 1500}), w.sge_lengths);
    EXPECT_TRUE(w.send_flags & IBV_SEND_SIGNALED); /* a cookie waits */
    EXPECT_FALSE(w.send_flags & IBV_SEND_INLINE);
    EXPECT_EQ(base + 64, w.remote_addr);
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, c.status);
    EXPECT_EQ(9, target[64 + 2999]);
    EXPECT_EQ(2u, device(pair.a).post_stats().merged_wqes);

    std::vector<uint8_t> dst(3000, 0);
    iovec                giov[2] = {{dst.data(), 2000}, {dst.data() + 2000, 1000}};
    Completion           g;
    pair.fabric.clear_posts();
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_get_zcopy(pair.qa, giov, 2, base + 64, rkey, &g));
    ASSERT_EQ(1u, posts().size());
    EXPECT_EQ(IBV_WR_RDMA_READ, posts()[0][0].opcode);
    EXPECT_EQ((std::vector<uint32_t>{2000, 1000}), posts()[0][0].sge_lengths);
    ASSERT_TRUE(pair.wait([&] { return g.count == 1; }));
    EXPECT_EQ(src, dst);
}

TEST_F(VerbsChains, ActiveMessagesAreSendsWithTheIdAsImmediate)
{
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_am_short(pair.qa, 9, 5, nullptr, 0));
    ASSERT_EQ(1u, posts().size());
    const PostedWr &w = posts()[0][0];
    EXPECT_EQ(IBV_WR_SEND_WITH_IMM, w.opcode);
    EXPECT_TRUE(w.send_flags & IBV_SEND_INLINE);
    EXPECT_EQ(std::vector<uint32_t>{8}, w.sge_lengths);
}

TEST_F(VerbsChains, FlushIsASignaledZeroLengthWrite)
{
    uint64_t v = 1;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, base, rkey));
    Completion f;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_flush(pair.qa, &f));
    ASSERT_EQ(2u, posts().size());
    const PostedWr &w = posts()[1][0];
    EXPECT_EQ(IBV_WR_RDMA_WRITE, w.opcode);
    EXPECT_TRUE(w.sge_lengths.empty());
    EXPECT_TRUE(w.send_flags & IBV_SEND_SIGNALED);
    ASSERT_TRUE(pair.wait([&] { return f.count == 1; }));
}

TEST(VerbsStats, CloseDumpsPostListSizes)
{
    testing::internal::CaptureStderr();
    {
        VerbsPair pair;
        pair.connect();
        doorbell_iface_set_stats(pair.a, 1);
        std::vector<uint8_t> t(64);
        uint32_t             rkey = pair.expose(t.data(), 64, DOORBELL_ACCESS_REMOTE_WRITE);
        uint64_t             v    = 1;
        ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, uintptr_t(t.data()), rkey));
    }
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(std::string::npos, err.find("mlx5_0:1 post_calls 1\n")) << err;
    EXPECT_NE(std::string::npos, err.find("mlx5_0:1 post_list_1 1\n")) << err;
    EXPECT_NE(std::string::npos, err.find("mlx5_0:1 doorbells 1\n")) << err;
}
