/* The contract, atomics: the old value comes back and the word changes once,
 * in order with the QP's other operations; what a device lacks is refused
 * before anything is posted; a bad key, bounds or access fails the atomic
 * and leaves the word untouched; at most DOORBELL_MAX_ATOMICS_INFLIGHT wait.
 * The word is in the device's order (limits.atomic_big_endian). */
#include "device_pair.h"

#include <endian.h>

#include <cstring>

using namespace doorbell::test;

namespace {

uint64_t to_device(const doorbell_iface_limits_t &l, uint64_t v)
{
    return l.atomic_big_endian ? htobe64(v) : v;
}

uint64_t word(const doorbell_iface_limits_t &l, const Region &r, size_t off = 0)
{
    uint64_t v;
    std::memcpy(&v, r.bytes.data() + off, 8);
    return l.atomic_big_endian ? be64toh(v) : v;
}

/// Skips the test unless the device executes 8-byte op.
#define REQUIRE_ATOMIC(_l, _op)                                               \
    do {                                                                      \
        if (!((_l).atomic_ops & (1u << (_op))) || !((_l).atomic_sizes & 8)) { \
            GTEST_SKIP() << "the device executes no 8-byte atomic " << (_op); \
        }                                                                     \
    } while (0)

} // namespace

TEST_P(DeviceContract, AtomicsReturnTheOldValueInOrderWithPuts)
{
    auto                    pair = make_pair();
    doorbell_iface_limits_t l    = pair->limits();
    REQUIRE_ATOMIC(l, DOORBELL_ATOMIC_ADD);
    REQUIRE_ATOMIC(l, DOORBELL_ATOMIC_CSWAP);
    Region target(pair->target_pd, 64, DOORBELL_ACCESS_REMOTE_ATOMIC | DOORBELL_ACCESS_REMOTE_WRITE,
                  0);
    /* a put, then atomics on the word it wrote: RC order */
    uint64_t ten = to_device(l, 10);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair->qa, &ten, 8, target.addr(8), target.rkey));
    uint64_t   r1 = ~0ull, r2 = ~0ull, r3 = ~0ull;
    Completion c1, c2, c3, c4;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_atomic(pair->qa, DOORBELL_ATOMIC_ADD, 8, 5, 0,
                                                      target.addr(8), target.rkey, &r1, &c1))
        << doorbell_last_error();
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_atomic(pair->qa, DOORBELL_ATOMIC_CSWAP, 8, 99, 15,
                                                      target.addr(8), target.rkey, &r2, &c2));
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_atomic(pair->qa, DOORBELL_ATOMIC_CSWAP, 8, 7, 1,
                                                      target.addr(8), target.rkey, &r3, &c3));
    /* not fetching: no result wanted */
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_atomic(pair->qa, DOORBELL_ATOMIC_ADD, 8, 1, 0,
                                                      target.addr(8), target.rkey, nullptr, &c4));
    ASSERT_TRUE(pair->wait([&] { return c4.count == 1; }));
    for (Completion *c : {&c1, &c2, &c3, &c4}) {
        EXPECT_EQ(1, c->count);
        EXPECT_EQ(DOORBELL_OK, c->status);
    }
    EXPECT_EQ(10u, r1);
    EXPECT_EQ(15u, r2); /* swapped: it was 15 */
    EXPECT_EQ(99u, r3); /* not swapped: it was not 1 */
    EXPECT_EQ(100u, word(l, target, 8));
    EXPECT_EQ(0u, word(l, target, 0)); /* its neighbours untouched */
    EXPECT_EQ(0u, word(l, target, 16));
    EXPECT_EQ(0, pair->error_a->count) << pair->error_a->message;
}

TEST_P(DeviceContract, AtomicsTheDeviceLacksAreRefusedBeforePosting)
{
    auto                    pair = make_pair();
    doorbell_iface_limits_t l    = pair->limits();
    Region                  target(pair->target_pd, 64, DOORBELL_ACCESS_REMOTE_ATOMIC, 0x5a);
    Completion              c;
    uint64_t                r;
    for (unsigned op = 0; op < DOORBELL_ATOMIC_LAST; ++op) {
        for (unsigned size : {4u, 8u}) {
            if ((l.atomic_ops & (1u << op)) && (l.atomic_sizes & size)) {
                continue;
            }
            EXPECT_EQ(DOORBELL_ERR_UNSUPPORTED,
                      doorbell_qp_atomic(pair->qa, doorbell_atomic_op_t(op), size, 1, 0,
                                         target.addr(8), target.rkey, &r, &c))
                << op << " on " << size;
            EXPECT_NE(std::string(doorbell_last_error()).find(pair->device_a), std::string::npos)
                << doorbell_last_error();
        }
    }
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_qp_atomic(pair->qa, DOORBELL_ATOMIC_ADD, 2, 1, 0,
                                                             target.addr(8), target.rkey, &r, &c));
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM,
              doorbell_qp_atomic(pair->qa, DOORBELL_ATOMIC_LAST, 8, 1, 0, target.addr(8),
                                 target.rkey, &r, &c));
    if (l.atomic_ops & (1u << DOORBELL_ATOMIC_ADD)) {
        EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM,
                  doorbell_qp_atomic(pair->qa, DOORBELL_ATOMIC_ADD, 8, 1, 0, target.addr(4),
                                     target.rkey, &r, &c))
            << "misaligned";
        EXPECT_NE(std::string(doorbell_last_error()).find("aligned"), std::string::npos);
    }
    EXPECT_EQ(DOORBELL_OK, pair->flush(pair->qa)); /* nothing was posted */
    EXPECT_EQ(0, c.count);
    EXPECT_EQ(std::vector<uint8_t>(64, 0x5a), target.bytes);
}

TEST_P(DeviceContract, AtomicWithABadKeyBoundsOrAccessLeavesTheWordUntouched)
{
    struct Case {
        const char *what;
        unsigned    access;
        int         key_delta;
        size_t      offset;
    };
    // clang-format off
    const Case cases[] = {
        {"wrong_key",    DOORBELL_ACCESS_REMOTE_ATOMIC, 1, 0},
        {"past_the_end", DOORBELL_ACCESS_REMOTE_ATOMIC, 0, 64},
        {"no_access",    DOORBELL_ACCESS_REMOTE_READ,   0, 0},
    };
    // clang-format on
    for (const Case &k : cases) {
        auto                    pair = make_pair();
        doorbell_iface_limits_t l    = pair->limits();
        REQUIRE_ATOMIC(l, DOORBELL_ATOMIC_ADD);
        Region     target(pair->target_pd, 64, k.access, 0x5a);
        uint64_t   r = 0x1234;
        Completion c;
        ASSERT_EQ(DOORBELL_INPROGRESS,
                  doorbell_qp_atomic(pair->qa, DOORBELL_ATOMIC_ADD, 8, 1, 0, target.addr(k.offset),
                                     target.rkey + k.key_delta, &r, &c))
            << k.what;
        ASSERT_TRUE(pair->wait([&] { return c.count == 1; })) << k.what;
        EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, c.status) << k.what;
        EXPECT_EQ(std::vector<uint8_t>(64, 0x5a), target.bytes) << k.what;
        EXPECT_EQ(0x1234u, r) << k.what; /* no value came back */
        EXPECT_EQ(DOORBELL_ERR_CANCELED, doorbell_qp_atomic(pair->qa, DOORBELL_ATOMIC_ADD, 8, 1, 0,
                                                            target.addr(), target.rkey, &r, &c))
            << k.what << ": the QP is in error";
    }
}

TEST_P(DeviceContract, AtomicsInFlightAreCapped)
{
    auto                    pair = make_pair();
    doorbell_iface_limits_t l    = pair->limits();
    REQUIRE_ATOMIC(l, DOORBELL_ATOMIC_ADD);
    Region                  target(pair->target_pd, 8, DOORBELL_ACCESS_REMOTE_ATOMIC, 0);
    std::vector<uint64_t>   r(DOORBELL_MAX_ATOMICS_INFLIGHT + 1);
    std::vector<Completion> c(DOORBELL_MAX_ATOMICS_INFLIGHT + 1);
    for (unsigned i = 0; i < DOORBELL_MAX_ATOMICS_INFLIGHT; ++i) {
        ASSERT_EQ(DOORBELL_INPROGRESS,
                  doorbell_qp_atomic(pair->qa, DOORBELL_ATOMIC_ADD, 8, 1, 0, target.addr(),
                                     target.rkey, &r[i], &c[i]));
    }
    const unsigned last = DOORBELL_MAX_ATOMICS_INFLIGHT;
    EXPECT_EQ(DOORBELL_ERR_NO_RESOURCE,
              doorbell_qp_atomic(pair->qa, DOORBELL_ATOMIC_ADD, 8, 1, 0, target.addr(), target.rkey,
                                 &r[last], &c[last]));
    ASSERT_TRUE(pair->wait([&] { return c[last - 1].count == 1; }));
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_atomic(pair->qa, DOORBELL_ATOMIC_ADD, 8, 1, 0, target.addr(), target.rkey,
                                 &r[last], &c[last]));
    ASSERT_TRUE(pair->wait([&] { return c[last].count == 1; }));
    for (unsigned i = 0; i <= last; ++i) {
        EXPECT_EQ(DOORBELL_OK, c[i].status);
        EXPECT_EQ(uint64_t(i), r[i]);
    }
    EXPECT_EQ(uint64_t(last + 1), word(l, target));
}
