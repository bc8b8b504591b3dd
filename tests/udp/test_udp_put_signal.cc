/* PUT_SIGNAL: data, then the 8-byte signal (SET or ADD) ordered after it,
 * executed exactly once whatever the wire does, remote access checked like
 * a put's. */
#include "loopback_pair.h"

#include "devices/udp/fault_injector.h"

using namespace doorbell::test;
using doorbell::udp::FaultConfig;
using doorbell::udp::set_fault_injection;

namespace {

doorbell_wqe_t put_signal(const void *src, uint32_t length, uint64_t raddr, uint32_t rkey,
                          uint64_t signal_addr, uint32_t signal_rkey, uint8_t op, uint64_t value)
{
    doorbell_wqe_t w{};
    w.opcode       = DOORBELL_OP_PUT_SIGNAL;
    w.am_id        = op;
    w.rkey         = rkey;
    w.remote_addr  = raddr;
    w.local_addr   = uintptr_t(src);
    w.length       = length;
    w.signal_rkey  = signal_rkey;
    w.signal_addr  = signal_addr;
    w.signal_value = value;
    return w;
}

doorbell_wqe_t with_cookie(doorbell_wqe_t w, Completion *c)
{
    w.flags |= DOORBELL_WQE_SIGNALED;
    w.wr_id = uintptr_t(c);
    return w;
}

uint64_t word(const Region &r, size_t off = 0)
{
    uint64_t v;
    std::memcpy(&v, r.bytes.data() + off, 8);
    return v;
}

/// Posts one WQE, progressing while the ring is full.
void post(LoopbackPair &pair, const doorbell_wqe_t &w)
{
    doorbell_status_t s;
    while ((s = doorbell_qp_post(pair.qa, &w, 1)) == DOORBELL_ERR_NO_RESOURCE) {
        pair.progress();
    }
    ASSERT_EQ(DOORBELL_OK, s) << doorbell_last_error();
}

} // namespace

TEST(UdpPutSignal, SetAfterMultiPacketDataThenAdds)
{
    doorbell_iface_params_t p = lo_params();
    p.mtu                     = 1000; /* the data is many packets */
    LoopbackPair pair(p, p);
    Region       target(pair.pd, 20000, DOORBELL_ACCESS_REMOTE_WRITE);
    Region       flag(pair.pd, 64, DOORBELL_ACCESS_REMOTE_WRITE);
    auto         data = pattern(20000, 7);
    Completion   c;
    post(pair, with_cookie(put_signal(data.data(), 20000, target.addr(), target.rkey, flag.addr(8),
                                      flag.rkey, DOORBELL_SIGNAL_SET, 41),
                           &c));
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, c.status);
    EXPECT_EQ(data, target.bytes);
    EXPECT_EQ(41u, word(flag, 8));
    EXPECT_EQ(0u, word(flag, 0)); /* exactly the 8 bytes */
    EXPECT_EQ(0u, word(flag, 16));

    /* ADD: no data (length 0), inline data, pointer data */
    post(pair, put_signal(nullptr, 0, 0, 0, flag.addr(8), flag.rkey, DOORBELL_SIGNAL_ADD, 1));
    doorbell_wqe_t in = put_signal(nullptr, 0, target.addr(100), target.rkey, flag.addr(8),
                                   flag.rkey, DOORBELL_SIGNAL_ADD, 1000);
    in.flags |= DOORBELL_WQE_INLINE;
    in.inline_len = 4;
    std::memcpy(in.inline_data, "WXYZ", 4);
    post(pair, in);
    post(pair, put_signal(data.data(), 8, target.addr(200), target.rkey, flag.addr(8), flag.rkey,
                          DOORBELL_SIGNAL_ADD, uint64_t(-42))); /* wraps like an unsigned add */
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    EXPECT_EQ(41u + 1 + 1000 - 42, word(flag, 8));
    EXPECT_EQ(0, std::memcmp(target.bytes.data() + 100, "WXYZ", 4));
    EXPECT_EQ(0, pair.error_a.count) << pair.error_a.message;
}

/* The signal lands after the data: every time the target is looked at,
 * a signal that says "round r" comes with round r's data complete. */
TEST(UdpPutSignal, SignalNeverOvertakesDataUnderFaults)
{
    doorbell_iface_params_t p = lo_params();
    p.mtu                     = 2000;
    LoopbackPair pair(p, p);
    FaultConfig  f{.tx_drop = 0.05, .rx_drop = 0.03, .duplicate = 0.1, .reorder = 0.2, .seed = 21};
    set_fault_injection(pair.a, &f);
    f.seed += 1;
    set_fault_injection(pair.b, &f);
    const size_t size = 30000;
    Region       target(pair.pd, size, DOORBELL_ACCESS_REMOTE_WRITE);
    Region       flag(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    for (uint64_t round = 1; round <= 5; ++round) {
        auto       data = pattern(size, uint32_t(round));
        Completion c;
        post(pair, with_cookie(put_signal(data.data(), uint32_t(size), target.addr(), target.rkey,
                                          flag.addr(), flag.rkey, DOORBELL_SIGNAL_SET, round),
                               &c));
        bool ordered = true;
        ASSERT_TRUE(pair.wait([&] {
            if (word(flag) == round && target.bytes != data) {
                ordered = false;
            }
            return c.count == 1;
        }));
        EXPECT_TRUE(ordered) << "round " << round;
        EXPECT_EQ(DOORBELL_OK, c.status);
        EXPECT_EQ(round, word(flag));
    }
}

/* Loss, duplication and reordering make the sender retransmit and the
 * receiver see copies: every ADD still counts exactly once. */
TEST(UdpPutSignal, AddAppliedExactlyOnceUnderLossAndDuplication)
{
    LoopbackPair pair;
    FaultConfig  f{.tx_drop = 0.05, .rx_drop = 0.03, .duplicate = 0.3, .reorder = 0.1, .seed = 31};
    set_fault_injection(pair.a, &f);
    f.seed += 1;
    set_fault_injection(pair.b, &f);
    Region         target(pair.pd, 4096, DOORBELL_ACCESS_REMOTE_WRITE);
    Region         flag(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    const unsigned n    = 200;
    uint64_t       sent = 0;
    for (unsigned i = 0; i < n; ++i) {
        uint64_t v = 1 + i % 3;
        post(pair, put_signal(&target, 8 * (i % 4), target.addr(8 * (i % 64)), target.rkey,
                              flag.addr(), flag.rkey, DOORBELL_SIGNAL_ADD, v));
        sent += v;
    }
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    EXPECT_EQ(sent, word(flag));
    auto a = pair.counters(pair.a), b = pair.counters(pair.b);
    EXPECT_GT(a.retransmits, 0u);
    EXPECT_GT(b.rx_duplicates, 0u);
    /* quiet wire afterwards: late copies change nothing */
    for (int i = 0; i < 50; ++i) {
        pair.progress();
    }
    EXPECT_EQ(sent, word(flag));
    EXPECT_EQ(0, pair.error_a.count) << pair.error_a.message;
}

struct BadSignal {
    const char *name;
    int         key_delta; ///< added to the signal key
    size_t      offset;    ///< signal offset in the 64-byte flag region
    bool        read_only; ///< flag region registered without write access
};

// clang-format off
const BadSignal kBadSignals[] = {
    {"WrongKey", 1, 0, false},
    {"OutOfBounds", 0, 60, false}, /* 4 of the 8 bytes past the end */
    {"PastTheEnd", 0, 64, false},
    {"ReadOnly", 0, 0, true},
    {"Misaligned", 0, 4, false},
};
// clang-format on

class UdpPutSignalBad : public ::testing::TestWithParam<BadSignal> {};

TEST_P(UdpPutSignalBad, FailsLikeAPutAndLeavesTheSignalUntouched)
{
    const BadSignal &bad = GetParam();
    LoopbackPair     pair;
    Region           target(pair.pd, 64, DOORBELL_ACCESS_REMOTE_WRITE);
    Region           flag(pair.pd, 64,
                bad.read_only ? DOORBELL_ACCESS_REMOTE_READ : DOORBELL_ACCESS_REMOTE_WRITE, 0x5a);
    uint64_t         v = 7;
    Completion       c;
    post(pair, with_cookie(put_signal(&v, 8, target.addr(), target.rkey, flag.addr(bad.offset),
                                      flag.rkey + bad.key_delta, DOORBELL_SIGNAL_ADD, 1),
                           &c));
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, c.status);
    EXPECT_EQ(std::vector<uint8_t>(64, 0x5a), flag.bytes);
    EXPECT_EQ(1u, pair.counters(pair.b).remote_access_errors);
    /* the QP is failed, as after a put's access error */
    EXPECT_EQ(DOORBELL_ERR_CANCELED,
              doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
}

INSTANTIATE_TEST_SUITE_P(Cases, UdpPutSignalBad, ::testing::ValuesIn(kBadSignals),
                         [](const auto &info) { return info.param.name; });
