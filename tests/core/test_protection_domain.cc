/* Memory regions: keys, bounds and access checks. */
#include "core/protection_domain.h"

#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <set>
#include <thread>
#include <vector>

using doorbell::AccessDenial;
using doorbell::ProtectionDomain;

namespace {

constexpr unsigned kRW = DOORBELL_ACCESS_REMOTE_READ | DOORBELL_ACCESS_REMOTE_WRITE;

uint64_t addr(const void *p)
{
    return uint64_t(uintptr_t(p));
}

} // namespace

TEST(ProtectionDomain, KeysAreNonzeroUniqueAndRandom)
{
    ProtectionDomain           pd;
    std::vector<uint8_t>       buf(64);
    std::set<uint32_t>         keys;
    std::vector<doorbell_mr *> mrs;
    int                        bit_counts[32] = {};
    const int                  n              = 2000;
    for (int i = 0; i < n; ++i) {
        doorbell_mr *mr;
        uint32_t     key;
        ASSERT_EQ(DOORBELL_OK, pd.register_region(buf.data(), 64, kRW, &mr, &key));
        EXPECT_NE(0u, key);
        keys.insert(key);
        mrs.push_back(mr);
        for (int b = 0; b < 32; ++b) {
            bit_counts[b] += (key >> b) & 1;
        }
    }
    EXPECT_EQ(size_t(n), keys.size());
    /* every bit is set about half the time (binomial, 2000 draws: mean
     * 1000, sd 22; a sequential or constant key fails this by far) */
    for (int b = 0; b < 32; ++b) {
        EXPECT_GT(bit_counts[b], 800) << b;
        EXPECT_LT(bit_counts[b], 1200) << b;
    }
    /* consecutive keys are not an arithmetic sequence */
    std::vector<uint32_t> seq;
    for (auto *mr : mrs) {
        seq.push_back(mr->rkey);
    }
    int same_step = 0;
    for (size_t i = 2; i < seq.size(); ++i) {
        same_step += (seq[i] - seq[i - 1]) == (seq[i - 1] - seq[i - 2]);
    }
    EXPECT_LT(same_step, 5);
    for (auto *mr : mrs) {
        EXPECT_EQ(DOORBELL_OK, pd.deregister_region(mr));
    }
    EXPECT_EQ(0u, pd.region_count());
}

TEST(ProtectionDomain, BoundsAreExact)
{
    ProtectionDomain     pd;
    std::vector<uint8_t> buf(4096);
    doorbell_mr         *mr;
    uint32_t             key;
    ASSERT_EQ(DOORBELL_OK, pd.register_region(buf.data(), 4096, kRW, &mr, &key));
    const uint64_t start = addr(buf.data());
    EXPECT_TRUE(pd.allows(key, start, 4096, DOORBELL_ACCESS_REMOTE_WRITE));
    EXPECT_TRUE(pd.allows(key, start + 4095, 1, DOORBELL_ACCESS_REMOTE_WRITE));
    EXPECT_TRUE(pd.allows(key, start + 4096, 0, DOORBELL_ACCESS_REMOTE_WRITE));
    EXPECT_FALSE(pd.allows(key, start + 4095, 2, DOORBELL_ACCESS_REMOTE_WRITE));
    EXPECT_FALSE(pd.allows(key, start - 1, 1, DOORBELL_ACCESS_REMOTE_WRITE));
    EXPECT_FALSE(pd.allows(key, start + 4097, 0, DOORBELL_ACCESS_REMOTE_WRITE));
    /* lengths that wrap the address space */
    EXPECT_FALSE(pd.allows(key, start + 8, ~uint64_t(0), DOORBELL_ACCESS_REMOTE_WRITE));
    EXPECT_FALSE(pd.allows(key, ~uint64_t(0), 2, DOORBELL_ACCESS_REMOTE_WRITE));
    EXPECT_FALSE(pd.allows(key + 1, start, 1, DOORBELL_ACCESS_REMOTE_WRITE));
    EXPECT_EQ(DOORBELL_OK, pd.deregister_region(mr));
    EXPECT_FALSE(pd.allows(key, start, 1, DOORBELL_ACCESS_REMOTE_WRITE));
}

/* A refusal says which check failed, in the order they are made: the key,
 * then the range, then the access. */
TEST(ProtectionDomain, ARefusalNamesTheCheckThatFailed)
{
    ProtectionDomain     pd;
    std::vector<uint8_t> buf(4096);
    doorbell_mr         *mr;
    uint32_t             key;
    ASSERT_EQ(DOORBELL_OK,
              pd.register_region(buf.data(), 4096, DOORBELL_ACCESS_REMOTE_READ, &mr, &key));
    const uint64_t start = addr(buf.data());
    const unsigned rd = DOORBELL_ACCESS_REMOTE_READ, wr = DOORBELL_ACCESS_REMOTE_WRITE;
    EXPECT_EQ(AccessDenial::kNone, pd.check(key, start, 4096, rd));
    EXPECT_EQ(AccessDenial::kUnknownKey, pd.check(key + 1, start, 8, rd));
    EXPECT_EQ(AccessDenial::kUnknownKey, pd.check(key + 1, start + 5000, 8, wr));
    EXPECT_EQ(AccessDenial::kOutOfRange, pd.check(key, start + 4090, 8, rd));
    EXPECT_EQ(AccessDenial::kOutOfRange, pd.check(key, start + 4090, 8, wr));
    EXPECT_EQ(AccessDenial::kNotGranted, pd.check(key, start, 8, wr));
    AccessDenial why   = AccessDenial::kNone;
    int          calls = 0;
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS,
              pd.access(
                  key, start, 8, wr, [&](uint8_t *) { ++calls; }, &why));
    EXPECT_EQ(AccessDenial::kNotGranted, why);
    EXPECT_EQ(DOORBELL_OK, pd.access(
                               key, start, 8, rd, [&](uint8_t *) { ++calls; }, &why));
    EXPECT_EQ(AccessDenial::kNone, why);
    EXPECT_EQ(1, calls);
    EXPECT_EQ(DOORBELL_OK, pd.deregister_region(mr));
    EXPECT_EQ(AccessDenial::kUnknownKey, pd.check(key, start, 8, rd));
}

TEST(ProtectionDomain, AccessFlagsAreChecked)
{
    ProtectionDomain     pd;
    std::vector<uint8_t> buf(64);
    doorbell_mr         *ro, *wo;
    uint32_t             kro, kwo;
    ASSERT_EQ(DOORBELL_OK,
              pd.register_region(buf.data(), 64, DOORBELL_ACCESS_REMOTE_READ, &ro, &kro));
    ASSERT_EQ(DOORBELL_OK,
              pd.register_region(buf.data(), 64, DOORBELL_ACCESS_REMOTE_WRITE, &wo, &kwo));
    const uint64_t a = addr(buf.data());
    EXPECT_TRUE(pd.allows(kro, a, 8, DOORBELL_ACCESS_REMOTE_READ));
    EXPECT_FALSE(pd.allows(kro, a, 8, DOORBELL_ACCESS_REMOTE_WRITE));
    EXPECT_TRUE(pd.allows(kwo, a, 8, DOORBELL_ACCESS_REMOTE_WRITE));
    EXPECT_FALSE(pd.allows(kwo, a, 8, DOORBELL_ACCESS_REMOTE_READ));
    int calls = 0;
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS,
              pd.access(kro, a, 8, DOORBELL_ACCESS_REMOTE_WRITE, [&](uint8_t *) { ++calls; }));
    EXPECT_EQ(0, calls);
    EXPECT_EQ(DOORBELL_OK, pd.access(kwo, a + 8, 8, DOORBELL_ACCESS_REMOTE_WRITE, [&](uint8_t *p) {
        ++calls;
        EXPECT_EQ(buf.data() + 8, p);
    }));
    EXPECT_EQ(1, calls);
    pd.deregister_region(ro);
    pd.deregister_region(wo);
}

TEST(ProtectionDomain, RejectsBadArguments)
{
    ProtectionDomain     pd;
    std::vector<uint8_t> buf(64);
    doorbell_mr         *mr;
    uint32_t             key;
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, pd.register_region(buf.data(), 64, 0x80, &mr, &key));
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, pd.register_region(nullptr, 64, kRW, &mr, &key));
    ASSERT_EQ(DOORBELL_OK, pd.register_region(buf.data(), 64, kRW, &mr, &key));
    EXPECT_EQ(DOORBELL_OK, pd.deregister_region(mr));
    doorbell_mr fake{};
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, pd.deregister_region(&fake));
}

/* Registration from several threads while others check accesses: the
 * domain is shared by the ifaces of a memory domain (TSan target). */
TEST(ProtectionDomainConcurrency, RegisterAndAccessFromThreads)
{
    ProtectionDomain     pd;
    std::vector<uint8_t> shared(4096);
    doorbell_mr         *stable;
    uint32_t             stable_key;
    ASSERT_EQ(DOORBELL_OK,
              pd.register_region(shared.data(), shared.size(), kRW, &stable, &stable_key));
    std::atomic<bool>        stop{false};
    std::atomic<uint64_t>    checks{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
        threads.emplace_back([&, t] {
            std::vector<uint8_t> own(256);
            for (int i = 0; i < 500; ++i) {
                doorbell_mr *mr;
                uint32_t     key;
                ASSERT_EQ(DOORBELL_OK, pd.register_region(own.data(), own.size(), kRW, &mr, &key));
                ASSERT_EQ(DOORBELL_OK,
                          pd.access(key, addr(own.data()), 8, DOORBELL_ACCESS_REMOTE_WRITE,
                                    [&](uint8_t *p) { p[0] = uint8_t(t); }));
                ASSERT_EQ(DOORBELL_OK, pd.deregister_region(mr));
            }
        });
    }
    threads.emplace_back([&] {
        do {
            pd.access(stable_key, addr(shared.data()), 8, DOORBELL_ACCESS_REMOTE_WRITE,
                      [&](uint8_t *p) { ++p[0]; });
            checks.fetch_add(1);
        } while (!stop.load());
    });
    threads[0].join();
    threads[1].join();
    stop = true;
    threads[2].join();
    EXPECT_GT(checks.load(), 0u);
    EXPECT_EQ(1u, pd.region_count());
    pd.deregister_region(stable);
}
