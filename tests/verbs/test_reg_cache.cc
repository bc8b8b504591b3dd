/* The registration cache alone, with counting register functions. */
#include "devices/verbs/reg_cache.h"

#include <gtest/gtest.h>

#include <map>

using namespace doorbell;
using namespace doorbell::verbs;

namespace {

struct Counting {
    int                            regs = 0, deregs = 0;
    std::map<uintptr_t, uintptr_t> live; /* start -> end */
    uint32_t                       next_key = 1;

    RegCache make(size_t capacity)
    {
        return RegCache(
            [this](CachedRegion &r) {
                ++regs;
                live[r.start] = r.end;
                r.lkey        = next_key++;
                return DOORBELL_OK;
            },
            [this](CachedRegion &r) {
                ++deregs;
                live.erase(r.start);
            },
            capacity);
    }
};

const void *at(uintptr_t a)
{
    return reinterpret_cast<const void *>(a);
}

} // namespace

TEST(RegCache, SecondUseOfABufferHitsWithoutRegistering)
{
    Counting      c;
    RegCache      rc = c.make(16);
    CachedRegion *r1, *r2;
    ASSERT_EQ(DOORBELL_OK, rc.acquire(at(0x10010), 100, &r1));
    rc.release(r1);
    ASSERT_EQ(DOORBELL_OK, rc.acquire(at(0x10020), 50, &r2));
    EXPECT_EQ(r1, r2);
    EXPECT_EQ(1, c.regs);
    EXPECT_EQ(1u, rc.stats().hits);
    EXPECT_EQ(0x10000u, r2->start); /* page-aligned */
    EXPECT_EQ(0x11000u, r2->end);
    rc.release(r2);
}

TEST(RegCache, OverlappingMissMergesUnheldRegions)
{
    Counting      c;
    RegCache      rc = c.make(16);
    CachedRegion *a, *b, *m;
    ASSERT_EQ(DOORBELL_OK, rc.acquire(at(0x10000), 0x1000, &a));
    rc.release(a);
    ASSERT_EQ(DOORBELL_OK, rc.acquire(at(0x13000), 0x1000, &b));
    rc.release(b);
    /* spans both and the gap: one region replaces them */
    ASSERT_EQ(DOORBELL_OK, rc.acquire(at(0x10800), 0x3000, &m));
    EXPECT_EQ(0x10000u, m->start);
    EXPECT_EQ(0x14000u, m->end);
    EXPECT_EQ(1u, rc.size());
    EXPECT_EQ(2, c.deregs);
    EXPECT_EQ(2u, rc.stats().merges);
    rc.release(m);
}

TEST(RegCache, HeldRegionsAreNeitherMergedNorDeregistered)
{
    Counting      c;
    RegCache      rc = c.make(16);
    CachedRegion *a, *m;
    ASSERT_EQ(DOORBELL_OK, rc.acquire(at(0x10000), 0x1000, &a));
    ASSERT_EQ(DOORBELL_OK, rc.acquire(at(0x10800), 0x2000, &m));
    EXPECT_NE(a, m);
    EXPECT_EQ(0, c.deregs);
    rc.invalidate(at(0x10000), 0x100);
    EXPECT_EQ(0, c.deregs); /* both held: deregistered on release */
    rc.release(a);
    EXPECT_EQ(1, c.deregs);
    rc.release(m);
    EXPECT_EQ(2, c.deregs);
    CachedRegion *again;
    ASSERT_EQ(DOORBELL_OK, rc.acquire(at(0x10000), 0x10, &again));
    EXPECT_EQ(3, c.regs); /* invalidated: registered anew */
    rc.release(again);
}

TEST(RegCache, InvalidateDropsOnlyOverlappingRegions)
{
    Counting      c;
    RegCache      rc = c.make(16);
    CachedRegion *a, *b;
    ASSERT_EQ(DOORBELL_OK, rc.acquire(at(0x10000), 0x1000, &a));
    rc.release(a);
    ASSERT_EQ(DOORBELL_OK, rc.acquire(at(0x20000), 0x1000, &b));
    rc.release(b);
    rc.invalidate(at(0x20100), 8);
    EXPECT_EQ(1u, rc.size());
    EXPECT_EQ(1, c.deregs);
    EXPECT_EQ(0u, c.live.count(0x20000));
    EXPECT_EQ(1u, c.live.count(0x10000));
}

TEST(RegCache, LeastRecentlyUsedUnheldRegionIsEvicted)
{
    Counting c;
    RegCache rc = c.make(2);
    for (uintptr_t a : {0x10000u, 0x20000u, 0x30000u}) {
        CachedRegion *r;
        ASSERT_EQ(DOORBELL_OK, rc.acquire(at(a), 10, &r));
        rc.release(r);
    }
    EXPECT_EQ(2u, rc.size());
    EXPECT_EQ(1u, rc.stats().evictions);
    EXPECT_EQ(0u, c.live.count(0x10000));
}

TEST(RegCache, CapacityZeroRegistersEveryTime)
{
    Counting c;
    RegCache rc = c.make(0);
    for (int i = 0; i < 3; ++i) {
        CachedRegion *r;
        ASSERT_EQ(DOORBELL_OK, rc.acquire(at(0x10000), 10, &r));
        rc.release(r);
    }
    EXPECT_EQ(3, c.regs);
    EXPECT_EQ(3, c.deregs);
    EXPECT_EQ(0u, rc.size());
}

TEST(RegCache, RegistrationFailureIsReturned)
{
    RegCache      rc([](CachedRegion &) { return DOORBELL_ERR_IO; },
                [](CachedRegion &) { FAIL() << "nothing to deregister"; }, 4);
    CachedRegion *r = nullptr;
    EXPECT_EQ(DOORBELL_ERR_IO, rc.acquire(at(0x10000), 10, &r));
    EXPECT_EQ(0u, rc.size());
}
