/* Atomics on verbs: the standard ones of an RC QP (FETCH_AND_ADD and
 * CMP_AND_SWP, 8 bytes), their old value handed back in host order, and a
 * clear refusal on an HCA without atomics. */
#include "verbs_pair.h"

#include <endian.h>

#include <cstring>

using namespace doorbell;
using namespace doorbell::test;
using verbs::fake::PostedWr;

namespace {

verbs::fake::HcaConfig with_atomics(bool on)
{
    verbs::fake::HcaConfig c;
    c.atomics = on;
    return c;
}

std::vector<PostedWr> all_posts(VerbsPair &pair)
{
    std::vector<PostedWr> all;
    for (const auto &chain : pair.fabric.posts("mlx5_0")) {
        all.insert(all.end(), chain.begin(), chain.end());
    }
    return all;
}

} // namespace

TEST(VerbsAtomic, FetchAddAndCompareSwapAreTheHcaAtomics)
{
    VerbsPair pair;
    pair.connect();
    alignas(8) uint8_t target[16] = {};
    uint64_t           start      = htobe64(40); /* the HCA's word is big-endian */
    std::memcpy(target, &start, 8);
    uint32_t   rkey    = pair.expose(target, sizeof(target), DOORBELL_ACCESS_REMOTE_ATOMIC);
    uint64_t   add_old = 0, cas_old = 0;
    Completion c1, c2;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_atomic(pair.qa, DOORBELL_ATOMIC_ADD, 8, 2, 0,
                                                      uintptr_t(target), rkey, &add_old, &c1))
        << doorbell_last_error();
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_atomic(pair.qa, DOORBELL_ATOMIC_CSWAP, 8, 7, 42,
                                                      uintptr_t(target), rkey, &cas_old, &c2));
    ASSERT_TRUE(pair.wait([&] { return c2.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, c1.status);
    EXPECT_EQ(DOORBELL_OK, c2.status);
    EXPECT_EQ(40u, add_old); /* host order for the caller */
    EXPECT_EQ(42u, cas_old);
    uint64_t now;
    std::memcpy(&now, target, 8);
    EXPECT_EQ(7u, be64toh(now));

    std::vector<PostedWr> wrs = all_posts(pair);
    ASSERT_EQ(2u, wrs.size());
    EXPECT_EQ(IBV_WR_ATOMIC_FETCH_AND_ADD, wrs[0].opcode);
    EXPECT_EQ(2u, wrs[0].compare_add);
    EXPECT_EQ(IBV_WR_ATOMIC_CMP_AND_SWP, wrs[1].opcode);
    EXPECT_EQ(42u, wrs[1].compare_add);
    EXPECT_EQ(7u, wrs[1].swap);
    for (const PostedWr &w : wrs) {
        EXPECT_EQ(uintptr_t(target), w.remote_addr);
        EXPECT_EQ(rkey, w.rkey);
        EXPECT_EQ(std::vector<uint32_t>{8}, w.sge_lengths); /* the 8-byte landing slot */
        EXPECT_TRUE(w.send_flags & IBV_SEND_SIGNALED);
    }
}

TEST(VerbsAtomic, AnHcaWithoutAtomicsRefusesThemClearly)
{
    VerbsPair pair(with_atomics(false));
    pair.connect();
    doorbell_iface_limits_t l;
    doorbell_iface_query_limits(pair.a, &l);
    EXPECT_EQ(0u, l.atomic_ops);
    alignas(8) uint8_t target[8] = {};
    uint32_t           rkey      = pair.expose(target, 8, DOORBELL_ACCESS_REMOTE_ATOMIC);
    uint64_t           old;
    Completion         c;
    EXPECT_EQ(DOORBELL_ERR_UNSUPPORTED, doorbell_qp_atomic(pair.qa, DOORBELL_ATOMIC_ADD, 8, 1, 0,
                                                           uintptr_t(target), rkey, &old, &c));
    std::string why = doorbell_last_error();
    EXPECT_NE(why.find("mlx5_0:1"), std::string::npos) << why;
    EXPECT_NE(why.find("none"), std::string::npos) << why;
    EXPECT_TRUE(all_posts(pair).empty());
    EXPECT_EQ(0, c.count);
}
