// The pacing seam itself (pacing_gate.h), without a device: the built-in
// policy behind every name, the registry, what "auto" resolves to, and a
// built-in gate held inside the rate bounds of its context. How each device
// drives its gates is tested beside the device (tests/udp, tests/verbs).
#include <gtest/gtest.h>

#include "pacer.h"
#include "pacing_gate.h"

using namespace doorbell::pacing;

namespace {

PacingContext context(const char *policy)
{
    PacingContext c;
    c.device    = "test0";
    c.policy    = policy;
    c.gain      = 0;
    c.line_rate = 1.25e9; /* 10 Gb/s */
    c.mtu       = 1500;
    return c;
}

} // namespace

/* A device policy but none has a gate; the simulator's (hpcc, swift) have
 * none: a device cannot feed them (policies.h). */
TEST(PacingGate, EveryDevicePolicyButNoneHasABuiltinGate)
{
    for (Policy p : kPolicies) {
        PacingFactory f = find_pacing_policy(policy_name(p));
        EXPECT_EQ(p != Policy::kNone && device_policy(p), bool(f)) << policy_name(p);
        if (f) {
            EXPECT_NE(nullptr, f(context(policy_name(p)))) << policy_name(p);
        }
    }
    EXPECT_FALSE(device_policy(Policy::kHpcc));
    EXPECT_FALSE(device_policy(Policy::kSwift));
    EXPECT_FALSE(find_pacing_policy("hpcc"));
    EXPECT_FALSE(find_pacing_policy("cubic"));
    EXPECT_FALSE(find_pacing_policy(DOORBELL_PACING_AUTO)); /* resolved first */
}

TEST(PacingGate, ARegisteredPolicyIsFoundByItsName)
{
    int made = 0;
    register_pacing_policy("gate-test-registered", [&made](const PacingContext &ctx) {
        ++made;
        EXPECT_EQ("test0", ctx.device);
        PacingContext c = ctx;
        c.policy        = "timely"; /* the built-in gate runs its own name */
        return builtin_pacing_policy("timely")(c);
    });
    PacingFactory f = find_pacing_policy("gate-test-registered");
    ASSERT_TRUE(f);
    EXPECT_NE(nullptr, f(context("gate-test-registered")));
    EXPECT_EQ(1, made);
}

/* "auto" paces a network device with IBRC and leaves a loopback device
 * unpaced: there the window is the only thing between the peers. */
TEST(PacingGate, AutoIsIbrcOnANetworkDeviceAndNoneOnLoopback)
{
    EXPECT_EQ("ibrc", resolve_pacing_policy("auto", false));
    EXPECT_EQ("none", resolve_pacing_policy("auto", true));
    EXPECT_EQ("ibrc", resolve_pacing_policy("ibrc", true)); /* asked for */
    EXPECT_EQ("timely", resolve_pacing_policy("timely", false));
    EXPECT_EQ("none", resolve_pacing_policy(nullptr, false));
}

TEST(PacingGate, ABuiltinGateKeepsToItsContextsRateBounds)
{
    PacingContext c = context("ibrc");
    c.min_rate      = 1e6;
    c.max_rate      = 40e6;
    auto gate       = builtin_pacing_policy("ibrc")(c);
    ASSERT_NE(nullptr, gate);
    uint64_t now = 1000000;
    /* a clean path: the rate climbs, to the ceiling at most */
    for (int i = 0; i < 2000; ++i, now += 20000) {
        gate->on_send(now, 1500);
        gate->on_ack(now, 1500, 0, 20000, 0);
        EXPECT_LE(gate->rate(), 40e6);
    }
    EXPECT_GT(gate->base_rtt_ns(), 0u);
    /* every packet marked and lost: cut to the floor at least */
    for (int i = 0; i < 2000; ++i, now += 20000) {
        gate->on_ack(now, 1500, 1500, 400000, 0);
        gate->on_loss(now);
        EXPECT_GE(gate->rate(), 1e6);
    }
}

/* A built-in gate hands on all of an ACK (on_feedback): marks dated before
 * the last cut by the packets they acknowledge cut nothing more, where the
 * same marks told through on_ack() without a send time cut once per loop
 * time. */
TEST(PacingGate, ABuiltinGateHandsOnAnAcksDate)
{
    PacingContext c       = context("ibrc");
    auto          dated   = builtin_pacing_policy("ibrc")(c);
    auto          undated = builtin_pacing_policy("ibrc")(c);
    ASSERT_TRUE(dated && undated);
    uint64_t now = 1000000;
    for (int i = 0; i < 200; ++i, now += 100000) { /* a path settled at 100 us */
        for (auto *g : {dated.get(), undated.get()}) {
            g->on_send(now, 1500);
            g->on_ack(now + 100000, 1500, 0, 100000, now);
        }
    }
    ASSERT_EQ(dated->rate(), undated->rate());
    const double   before = dated->rate();
    const uint64_t sent   = now;
    for (int i = 0; i < 20; ++i) {
        for (auto *g : {dated.get(), undated.get()})
            g->on_send(sent + uint64_t(i) * 1000, 1500);
    }
    for (int i = 0; i < 20; ++i) { /* marked ACKs over 20 ms, all of it sent before */
        Feedback f;
        f.now_ns      = sent + 2000000 + uint64_t(i) * 1000000;
        f.acked_bytes = 1500;
        f.ce_bytes    = 1500;
        undated->on_ack(f.now_ns, f.acked_bytes, f.ce_bytes, 0, 0);
        f.acked_sent_ns = sent + uint64_t(i) * 1000;
        dated->on_feedback(f);
    }
    EXPECT_LT(dated->rate(), before);
    EXPECT_LT(undated->rate(), dated->rate() * 0.8);
}

/* The context's smallest window reaches the built-in IBRC gate: under marks
 * on every packet its rate holds a segment per round trip, where a gate
 * without one falls far below. */
TEST(PacingGate, ABuiltinGateKeepsItsContextsSmallestWindow)
{
    PacingContext c       = context("ibrc");
    auto          bare    = builtin_pacing_policy("ibrc")(c);
    c.min_window_segments = 1;
    auto windowed         = builtin_pacing_policy("ibrc")(c);
    ASSERT_TRUE(bare && windowed);
    uint64_t now = 1000000;
    for (int i = 0; i < 4000; ++i, now += 100000) {
        for (auto *g : {bare.get(), windowed.get()}) {
            g->on_send(now, 1500);
            g->on_ack(now + 100000, 1500, 1500, 100000, now);
        }
    }
    const double segment_per_rtt = 1500 / 100e-6; /* 15 MB/s */
    EXPECT_GE(windowed->rate(), 0.95 * segment_per_rtt);
    EXPECT_LT(bare->rate(), 0.5 * segment_per_rtt);
}
