// Config validation, factory errors, token bucket, gain derivation, and the
// DCQCN / TIMELY / HPCC / Swift laws on hand-made signals, each step computed
// by hand from the paper's update.
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <utility>

#include "pacer.h"

using namespace doorbell::pacing;

namespace {

Config base_config(Policy p)
{
    Config c;
    c.policy        = p;
    c.line_rate_Bps = 50e9;
    return c;
}

// IBRC as the UDP device sets it up on the emulated fabric: 400 Mb/s,
// 1472-byte segments, a 200 us target floor, 24 segments of idle burst.
Config host_path_config()
{
    Config c           = base_config(Policy::kIbrc);
    c.line_rate_Bps    = 50e6;
    c.mtu_bytes        = 1472;
    c.target_floor_ns  = 200000;
    c.idle_burst_bytes = 24 * 1472;
    return c;
}

} // namespace

TEST(PacerConfig, ParsesPolicies)
{
    Policy      p;
    std::string err;
    EXPECT_TRUE(parse_policy("ibrc", &p, &err));
    EXPECT_EQ(p, Policy::kIbrc);
    EXPECT_TRUE(parse_policy("dcqcn", &p, &err));
    EXPECT_EQ(p, Policy::kDcqcn);
    EXPECT_TRUE(parse_policy("timely", &p, &err));
    EXPECT_TRUE(parse_policy("hpcc", &p, &err));
    EXPECT_EQ(p, Policy::kHpcc);
    EXPECT_TRUE(parse_policy("swift", &p, &err));
    EXPECT_EQ(p, Policy::kSwift);
    EXPECT_TRUE(parse_policy("none", &p, &err));
    EXPECT_EQ(p, Policy::kNone);
    EXPECT_FALSE(parse_policy("cubic", &p, &err));
    EXPECT_NE(err.find("cubic"), std::string::npos);
}

TEST(PacerConfig, ParsesGain)
{
    double      g = -1;
    std::string err;
    EXPECT_TRUE(parse_gain("auto", &g, &err));
    EXPECT_EQ(g, 0);
    EXPECT_TRUE(parse_gain("320000", &g, &err));
    EXPECT_EQ(g, 320000);
    EXPECT_TRUE(parse_gain("3.5e3", &g, &err));
    EXPECT_EQ(g, 3500);
    for (const char *bad : {"", "-1", "0", "12x", "nan", "inf"}) {
        EXPECT_FALSE(parse_gain(bad, &g, &err)) << bad;
        EXPECT_NE(err.find("gain"), std::string::npos);
    }
}

TEST(PacerConfig, FactoryRejectsBadValues)
{
    // Each bad value, and a word the message must hold.
    const std::pair<void (*)(Config &), const char *> bad[] = {
        {[](Config &c) { c.line_rate_Bps = 0; }, "line rate"},
        {[](Config &c) {
             c.min_rate_Bps = 10e9;
             c.max_rate_Bps = 1e9;
         },
         "min rate"},
        {[](Config &c) { c.gain = -5; }, "gain"},
        {[](Config &c) { c.mtu_bytes = 10; }, "segment"},
        {[](Config &c) { c.ce_gain = 0; }, "CE estimate"},
        {[](Config &c) { c.ce_beta = 1; }, "CE cut"},
        {[](Config &c) { c.probe_step = -0.1; }, "probe step"},
        {[](Config &c) { c.base_rtt_ns = 2000000000; }, "base RTT"},
        {[](Config &c) { c.min_window_segments = 65; }, "smallest window"},
        {[](Config &c) { c.policy = Policy::kHpcc; }, "telemetry"},
    };
    for (const auto &[spoil, word] : bad) {
        std::string err;
        Config      c = base_config(Policy::kIbrc);
        spoil(c);
        EXPECT_EQ(make_pacer(c, &err), nullptr) << word;
        EXPECT_NE(err.find(word), std::string::npos) << err;
    }
}

TEST(PacerConfig, ResolvesAutoValues)
{
    Config      c = base_config(Policy::kIbrc), r;
    std::string err;
    ASSERT_TRUE(resolve_config(c, &r, &err)) << err;
    EXPECT_EQ(r.max_rate_Bps, 50e9);
    EXPECT_EQ(r.min_rate_Bps, 50e9 / 2048);
    EXPECT_EQ(r.init_rate_Bps, 50e9 * kIbrcInitFraction);
    // kIbrcTargetSegments segments of 4 KiB at 50 GB/s.
    EXPECT_EQ(r.target_delay_ns, uint64_t(kIbrcTargetSegments * 4096 / 50e9 * 1e9));
    // With the base RTT known before data: a segment per two loop times.
    c.base_rtt_ns = 5000;
    ASSERT_TRUE(resolve_config(c, &r, &err)) << err;
    EXPECT_DOUBLE_EQ(r.init_rate_Bps, 4096 / (2 * (5000 + r.target_delay_ns) * 1e-9));
    c.policy = Policy::kDcqcn;
    ASSERT_TRUE(resolve_config(c, &r, &err));
    EXPECT_EQ(r.init_rate_Bps, 50e9);
    // The baselines' queue allowance is their own: TIMELY's thresholds and
    // Swift's target scale with kBaselineAllowanceSegments segment times.
    for (Policy p : {Policy::kTimely, Policy::kSwift}) {
        c.policy = p;
        ASSERT_TRUE(resolve_config(c, &r, &err));
        EXPECT_EQ(r.target_delay_ns, uint64_t(kBaselineAllowanceSegments * 4096 / 50e9 * 1e9));
    }
}

// A message the owner announces during IBRC's start goes at once, outside
// the rate and the window, when it fits the unscheduled budget (one BDP at
// the ceiling: 250 KB at 50 GB/s and 5 us) with what is still outstanding of
// earlier ones; a longer one, or one after the start, waits for the rate.
TEST(PacerUnscheduled, AShortMessageGoesAtOnceDuringTheStart)
{
    Config c      = base_config(Policy::kIbrc);
    c.base_rtt_ns = 5000;
    auto p        = make_pacer(c, nullptr);
    ASSERT_TRUE(p);
    p->on_message(0, 100000);
    EXPECT_EQ(p->unscheduled_left(), 100000u);
    EXPECT_EQ(p->window_bytes(), 0) << "not held to the first segment";
    uint64_t sent = 0;
    while (sent < 100000) {
        ASSERT_EQ(p->next_send_ns(0, 4096), 0u) << sent;
        p->on_send(0, 4096);
        sent += 4096;
    }
    EXPECT_EQ(p->unscheduled_left(), 0u);
    EXPECT_EQ(p->counters().unscheduled, 100000u);
    EXPECT_GT(p->next_send_ns(0, 4096), 0u) << "then the rate paces";
    EXPECT_EQ(p->window_bytes(), 4096) << "and the start's first window";
    // Outstanding 100 KB of 250 KB: a second message of 200 KB is paced, one
    // of 100 KB goes; acknowledged bytes return budget.
    p->on_message(0, 200000);
    EXPECT_EQ(p->unscheduled_left(), 0u);
    p->on_message(0, 100000);
    EXPECT_EQ(p->unscheduled_left(), 100000u);
    p->on_ack(5000, 200000, 0, 5000);
    p->on_message(5000, 150000);
    EXPECT_EQ(p->unscheduled_left(), 250000u);
}

// A message that begins on a path with nothing in flight (the owner says so:
// on_idle_message) goes unscheduled up to the idle allowance, as one burst;
// what is longer is paced after it. Grants do not add up, and without an
// allowance (the default) nothing changes.
TEST(PacerUnscheduled, AMessageOnAQuietPathGoesAsOneBurstUpToTheIdleAllowance)
{
    Config c           = base_config(Policy::kIbrc);
    c.idle_burst_bytes = 3 * 4096;
    auto p             = make_pacer(c, nullptr);
    ASSERT_TRUE(p);
    p->on_send(0, 4096); // the bucket's first segment
    ASSERT_GT(p->next_send_ns(0, 4096), 0u) << "paced";
    p->on_idle_message(0, 10 * 4096);
    EXPECT_EQ(p->unscheduled_left(), 3 * 4096u);
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(p->next_send_ns(0, 4096), 0u) << i;
        p->on_send(0, 4096);
    }
    EXPECT_GT(p->next_send_ns(0, 4096), 0u) << "the rest is paced";
    EXPECT_EQ(p->counters().unscheduled, 3 * 4096u);
    p->on_idle_message(0, 4096);
    p->on_idle_message(0, 4096);
    EXPECT_EQ(p->unscheduled_left(), 4096u);

    c.idle_burst_bytes = 0;
    p                  = make_pacer(c, nullptr);
    p->on_idle_message(0, 4096);
    EXPECT_EQ(p->unscheduled_left(), 0u);
}

// What is left of an idle grant is paced once the owner ends it (the path
// answered the window it was granted to); the part already sent stays in
// the burst. Ending it without a grant, or a second time, changes nothing.
TEST(PacerUnscheduled, AnEndedIdleGrantLeavesTheRestToTheRate)
{
    Config c           = base_config(Policy::kIbrc);
    c.idle_burst_bytes = 8 * 4096;
    auto p             = make_pacer(c, nullptr);
    ASSERT_TRUE(p);
    p->end_idle_grant(0);
    EXPECT_EQ(p->unscheduled_left(), 0u);
    p->on_send(0, 4096); // the bucket's first segment
    p->on_idle_message(0, 8 * 4096);
    p->on_send(0, 4096);
    p->on_send(0, 4096);
    EXPECT_EQ(p->unscheduled_left(), 6 * 4096u);
    ASSERT_EQ(p->next_send_ns(0, 4096), 0u);
    p->end_idle_grant(0);
    EXPECT_EQ(p->unscheduled_left(), 0u);
    EXPECT_GT(p->next_send_ns(0, 4096), 0u) << "the rest is paced";
    EXPECT_EQ(p->counters().unscheduled, 2 * 4096u);
    p->end_idle_grant(0);
    EXPECT_GT(p->next_send_ns(0, 4096), 0u);
}

// The round trips of an idle burst's own packets, and of those sent behind
// it until it is acknowledged, measure the queue the burst built: they do
// not reach the controller (its marks do). The same history with the send
// times unknown cuts the rate; a sample of a packet sent after the burst
// was acknowledged reaches the law again.
TEST(PacerUnscheduled, AnIdleBurstsOwnQueueDoesNotCutTheRate)
{
    Config c     = host_path_config();
    auto   told  = make_pacer(c, nullptr);
    auto   blind = make_pacer(c, nullptr);
    ASSERT_TRUE(told && blind);
    // A stream on an empty path (20 us round trips) past its start.
    uint64_t t = 0;
    for (int i = 0; i < 400; ++i, t += 100000) {
        for (auto *p : {told.get(), blind.get()}) {
            p->on_send(t, 1472);
            p->on_ack(t + 20000, 1472, 0, 20000, t);
        }
    }
    // Idle 2 ms, then a burst of 24 segments and 8 paced ones behind it.
    t += 2000000;
    uint64_t burst = t;
    for (auto *p : {told.get(), blind.get()}) {
        p->on_idle_message(t, 32 * 1472);
        for (int i = 0; i < 24; ++i)
            p->on_send(t, 1472);
    }
    double before = told->rate();
    // Its ACKs, 1-1.5 ms round trips, for the burst and the packets behind it.
    for (int i = 0; i < 32; ++i) {
        uint64_t sent = i < 24 ? burst : burst + uint64_t(i - 23) * 50000;
        uint64_t now  = sent + 1000000 + uint64_t(i) * 20000;
        if (i >= 24) {
            told->on_send(sent, 1472);
            blind->on_send(sent, 1472);
        }
        told->on_ack(now, 1472, 0, now - sent, sent);
        blind->on_ack(now, 1472, 0, now - sent, 0);
    }
    EXPECT_EQ(told->counters().burst_samples, 32u);
    EXPECT_EQ(blind->counters().burst_samples, 0u);
    EXPECT_LT(blind->rate(), 0.75 * before) << "the burst's queue read as congestion";
    EXPECT_GE(told->rate(), before);
    // A packet sent once the burst was acknowledged: its sample counts.
    uint64_t sent = t + 3000000;
    told->on_send(sent, 1472);
    told->on_ack(sent + 1500000, 1472, 0, 1500000, sent);
    EXPECT_EQ(told->counters().burst_samples, 32u);
    EXPECT_EQ(told->counters().rtt_samples, 401u);
}

// A path whose messages all leave as idle bursts: its start still ends on
// their round trips (and the rate leaves the first one), else a message
// behind a burst would be paced at the first rate for good.
TEST(PacerUnscheduled, AStartEndsOnTheRoundTripsOfBursts)
{
    Config c = host_path_config();
    auto   p = make_pacer(c, nullptr);
    ASSERT_TRUE(p);
    double   first = 0;
    uint64_t t     = 0;
    for (int i = 0; i < 200; ++i, t += 1000000) { // a 2-packet message per ms
        p->on_idle_message(t, 2 * 1472);
        p->on_send(t, 1472);
        p->on_send(t, 1472);
        p->on_ack(t + 30000, 2 * 1472, 0, 30000, t);
        if (i == 0)
            first = p->rate();
    }
    EXPECT_GT(p->rate(), 4 * first) << "still at the first rate";
    EXPECT_EQ(p->counters().unscheduled, 200 * 2 * 1472u);
}

// A path under one leaf whose messages all leave as idle bursts of 24
// segments, each acknowledged 0.4-0.86 ms after it left (the ends' turns on
// their cores): the start ends on those round trips, and without the floor
// the rate stays far below what every burst was delivered at (35 KB in
// 0.86 ms, 41 MB/s), so a longer message would crawl behind its burst. With
// the floor it is at least half of that; a CE mark drops the floor, and the
// cut it brings stands.
TEST(PacerUnscheduled, ANearPathKeepsHalfTheRateItsBurstsWereDeliveredAt)
{
    Config c        = host_path_config();
    c.line_rate_Bps = 1.25e9;
    auto floored    = make_pacer(c, nullptr);
    auto plain      = make_pacer(c, nullptr);
    ASSERT_TRUE(floored && plain);
    floored->set_delivery_floor(true);
    const double delivered = 24 * 1472 / 860e-6;
    uint64_t     t         = 0;
    for (int i = 0; i < 40; ++i, t += 5000000) {
        for (auto *p : {floored.get(), plain.get()}) {
            p->on_idle_message(t, 24 * 1472);
            for (int j = 0; j < 24; ++j)
                p->on_send(t, 1472);
            for (int j = 0; j < 24; ++j) {
                uint64_t now = t + 400000 + uint64_t(j) * 20000;
                p->on_ack(now, 1472, 0, now - t, t);
            }
        }
    }
    EXPECT_EQ(floored->counters().unscheduled, 40 * 24 * 1472u);
    EXPECT_GE(floored->rate(), 0.49 * delivered);
    EXPECT_LT(plain->rate(), 0.25 * delivered) << "the rate the bursts' start left";
    // A paced packet comes back marked a loop time later: the cut stands.
    double before = floored->rate();
    for (int i = 0; i < 4; ++i, t += 1000000) {
        floored->on_send(t, 1472);
        floored->on_ack(t + 50000, 1472, 1472, 50000, t);
    }
    EXPECT_LT(floored->rate(), before);
}

namespace {

// A stream on an empty host path past its start: a segment every 100 us,
// each answered 20 us later.
uint64_t settle(std::initializer_list<Pacer *> pacers)
{
    uint64_t t = 0;
    for (int i = 0; i < 400; ++i, t += 100000) {
        for (auto *p : pacers) {
            p->on_send(t, 1472);
            p->on_ack(t + 20000, 1472, 0, 20000, t);
        }
    }
    return t;
}

// A queue 2 ms deep on a host path, seen by two pacers with the device's
// reaction to marks (DCTCP's estimate with weight 1/16, quarter cuts),
// settled alike: 80 packets sent 25 us apart, all before the first answer,
// answered 50 us apart from 2 ms on (the queue grows), every one marked.
struct MarkedQueue {
    static constexpr int   kPackets = 80;
    std::unique_ptr<Pacer> a, b;
    uint64_t               t      = 0; ///< when the first packet left
    double                 before = 0; ///< the settled rate

    uint64_t sent(int i) const { return t + uint64_t(i) * 25000; }
    uint64_t answered(int i) const { return t + 2000000 + uint64_t(i) * 50000; }
};

// The pacers settled and the packets sent (ASSERT_NO_FATAL_FAILURE).
void fill_marked_queue(MarkedQueue *q)
{
    Config c  = host_path_config();
    c.ce_gain = 1.0 / 16;
    c.ce_beta = 0.25;
    q->a      = make_pacer(c, nullptr);
    q->b      = make_pacer(c, nullptr);
    ASSERT_TRUE(q->a && q->b);
    q->t      = settle({q->a.get(), q->b.get()});
    q->before = q->a->rate();
    ASSERT_EQ(q->b->rate(), q->before);
    for (int i = 0; i < MarkedQueue::kPackets; ++i) {
        for (auto *p : {q->a.get(), q->b.get()})
            p->on_send(q->sent(i), 1472);
    }
}

} // namespace

// A queue 2 ms deep marks every packet in it, and its marks come back over
// 4 ms, twenty of the host path's 200 us loop times. Those sent before the
// first cut are the queue that cut answered: a pacer that knows when each
// marked packet left cuts once, where one that does not cut once per loop
// time; the next packet marked after the cut cuts again. (The device's
// reaction to marks: DCTCP's estimate with weight 1/16, quarter cuts.)
TEST(PacerMarks, MarksOnPacketsSentBeforeTheCutCutOnce)
{
    MarkedQueue q;
    ASSERT_NO_FATAL_FAILURE(fill_marked_queue(&q));
    Pacer *told = q.a.get(), *blind = q.b.get();
    double before = q.before;
    for (int i = 0; i < MarkedQueue::kPackets; ++i) {
        uint64_t sent = q.sent(i), now = q.answered(i);
        told->on_ack(now, 1472, 1472, now - sent, sent);
        blind->on_ack(now, 1472, 1472, now - sent, 0);
    }
    double once = told->rate();
    EXPECT_LT(once, before) << "the first marks cut";
    EXPECT_GT(once, 0.9 * before) << "a quarter of the CE estimate, once";
    EXPECT_LT(blind->rate(), 0.5 * before) << "a cut per loop time";
    // A packet sent after the cut, marked: a new signal.
    uint64_t t = q.answered(MarkedQueue::kPackets);
    told->on_send(t, 1472);
    told->on_ack(t + 2000000, 1472, 1472, 2000000, t);
    EXPECT_LT(told->rate(), once);
}

// The same queue, answered by ACKs that carry no RTT sample (an echo already
// sampled, a read's later responses): their marks are dated by the newest
// packet each acknowledges (Feedback::acked_sent_ns) and cut once; undated,
// each counts as new and the rate falls below half.
TEST(PacerMarks, MarksWithoutASampleAreDatedByThePacketsTheyAcknowledge)
{
    MarkedQueue q;
    ASSERT_NO_FATAL_FAILURE(fill_marked_queue(&q));
    Pacer *dated = q.a.get(), *blind = q.b.get();
    double before = q.before;
    for (int i = 0; i < MarkedQueue::kPackets; ++i) {
        Feedback f;
        f.now_ns      = q.answered(i);
        f.acked_bytes = 1472;
        f.ce_bytes    = 1472;
        blind->on_feedback(f);
        f.acked_sent_ns = q.sent(i);
        dated->on_feedback(f);
    }
    double once = dated->rate();
    EXPECT_LT(once, before) << "the first marks cut";
    EXPECT_GT(once, 0.9 * before) << "once";
    EXPECT_LT(blind->rate(), 0.5 * before) << "a cut per loop time";
    // A packet sent after the cut, marked: a new signal.
    uint64_t t = q.answered(MarkedQueue::kPackets);
    dated->on_send(t, 1472);
    Feedback f;
    f.now_ns        = t + 2000000;
    f.acked_bytes   = 1472;
    f.ce_bytes      = 1472;
    f.acked_sent_ns = t;
    dated->on_feedback(f);
    EXPECT_LT(dated->rate(), once);
}

// Marks on every packet cut a host path's rate toward the ceiling / 2048;
// with a smallest window of one segment it stays at a segment per smoothed
// round trip, and that floor falls as the round trips grow with a queue.
TEST(PacerMarks, TheSmallestWindowKeepsASegmentPerRoundTrip)
{
    Config c              = host_path_config();
    auto   bare           = make_pacer(c, nullptr);
    c.min_window_segments = 1;
    auto windowed         = make_pacer(c, nullptr);
    ASSERT_TRUE(bare && windowed);
    uint64_t t = settle({bare.get(), windowed.get()});
    // Every packet marked, round trips of 100 us, for 200 ms.
    for (int i = 0; i < 2000; ++i, t += 100000) {
        for (auto *p : {bare.get(), windowed.get()}) {
            p->on_send(t, 1472);
            p->on_ack(t + 100000, 1472, 1472, 100000, t);
        }
    }
    const double segment_per_rtt = 1472 / 100e-6; // 14.7 MB/s
    EXPECT_LT(bare->rate(), 0.1 * segment_per_rtt);
    EXPECT_GE(windowed->rate(), 0.95 * segment_per_rtt);
    // The queue grows to 2 ms: the floor follows it down.
    for (int i = 0; i < 200; ++i, t += 100000) {
        windowed->on_send(t, 1472);
        windowed->on_ack(t + 2000000, 1472, 1472, 2000000, t);
    }
    EXPECT_LT(windowed->rate(), 1.1 * 1472 / 2e-3);
    EXPECT_GE(windowed->rate(), 0.95 * 1472 / 2e-3);
}

TEST(PacerUnscheduled, LongMessagesLaterMessagesAndOtherPoliciesArePaced)
{
    Config c      = base_config(Policy::kIbrc);
    c.base_rtt_ns = 5000;
    auto p        = make_pacer(c, nullptr);
    p->on_message(0, 250001); // above one BDP: the cautious start
    EXPECT_EQ(p->unscheduled_left(), 0u);
    p->on_ack(5000, 4096, 0, 5000);
    p->on_loss(5001); // the start ends
    p->on_message(6000, 4096);
    EXPECT_EQ(p->unscheduled_left(), 0u) << "past the start the rate rules";
    // Without a base RTT before data there is no BDP to bound the budget.
    c.base_rtt_ns = 0;
    p             = make_pacer(c, nullptr);
    p->on_message(0, 4096);
    EXPECT_EQ(p->unscheduled_left(), 0u);
    c.base_rtt_ns     = 5000;
    c.unscheduled_bdp = 0;
    p                 = make_pacer(c, nullptr);
    p->on_message(0, 4096);
    EXPECT_EQ(p->unscheduled_left(), 0u);
    Config d      = base_config(Policy::kDcqcn);
    d.base_rtt_ns = 5000;
    p             = make_pacer(d, nullptr);
    p->on_message(0, 4096);
    EXPECT_EQ(p->unscheduled_left(), 0u) << "DCQCN starts at the line rate anyway";
    c.unscheduled_bdp = 17;
    std::string err;
    EXPECT_EQ(make_pacer(c, &err), nullptr);
    EXPECT_NE(err.find("unscheduled"), std::string::npos) << err;
}

// A device whose path adds scheduling noise sets a floor under the automatic
// target; a target the user gave is kept as given.
TEST(PacerConfig, AutoTargetRespectsTheDevicesFloor)
{
    Config      c = base_config(Policy::kIbrc), r;
    std::string err;
    c.target_floor_ns = 500000;
    ASSERT_TRUE(resolve_config(c, &r, &err)) << err;
    EXPECT_EQ(r.target_delay_ns, 500000u);
    c.target_floor_ns = 1; // below the segment-time target: no effect
    ASSERT_TRUE(resolve_config(c, &r, &err)) << err;
    EXPECT_EQ(r.target_delay_ns, uint64_t(kIbrcTargetSegments * 4096 / 50e9 * 1e9));
    c.target_floor_ns = 500000;
    c.target_delay_ns = 2000;
    ASSERT_TRUE(resolve_config(c, &r, &err)) << err;
    EXPECT_EQ(r.target_delay_ns, 2000u);
}

TEST(TokenBucket, PacesAtTheRate)
{
    // 1 GB/s, 4 KiB segments: one per 4096 ns once the burst is spent.
    TokenBucket b(1e9, 8192);
    uint64_t    now    = 0;
    int         sent   = 0;
    uint64_t    t_last = 0;
    while (now < 1000000) {
        uint64_t t = b.next_send_ns(now, 4096);
        if (t > now) {
            now = t;
            continue;
        }
        b.consume(now, 4096);
        sent++;
        t_last = now;
    }
    // 1 ms at 1 GB/s = 244 segments, plus the initial 2-segment burst.
    EXPECT_GE(sent, 244);
    EXPECT_LE(sent, 247);
    EXPECT_GT(t_last, 990000u);
}

TEST(TokenBucket, RateChangeAppliesFromNow)
{
    TokenBucket b(1e9, 4096);
    b.consume(0, 4096);
    EXPECT_NEAR(double(b.next_send_ns(0, 4096)), 4096, 2);
    b.set_rate(0, 2e9);
    EXPECT_NEAR(double(b.next_send_ns(0, 4096)), 2048, 2);
}

TEST(IbrcGain, DesignMeetsCrossoverAndMargin)
{
    IbrcLoop d = ibrc_design(kIbrcCrossover, kIbrcPhaseMarginDeg);
    double   w = kIbrcCrossover;
    // |L(jw)| = |a + j p w| / w^2 = 1 at the crossover.
    EXPECT_NEAR(std::hypot(d.a, d.p * w) / (w * w), 1.0, 1e-9);
    // Phase margin: 180 + arg L = atan(p w / a) - w (rad).
    double pm = (std::atan2(d.p * w, d.a) - w) * 180 / M_PI;
    EXPECT_NEAR(pm, kIbrcPhaseMarginDeg, 1e-6);
}

// The design's numbers (docs/pacing.md): crossover half a radian per loop
// time, 50 degrees of margin, a gain margin above 3 with one loop time of
// delay: a = 0.0492, p = 0.490.
TEST(IbrcGain, TheDesignsCoefficients)
{
    IbrcLoop d = ibrc_design(kIbrcCrossover, kIbrcPhaseMarginDeg);
    EXPECT_NEAR(d.a, 0.0492, 5e-4);
    EXPECT_NEAR(d.p, 0.490, 5e-3);
    // Gain margin: where the phase a + j p w - w - pi crosses -pi, 1 / |L|.
    double w = 0.1, prev = 0;
    for (; w < 10; w += 1e-4) {
        double ph = std::atan2(d.p * w, d.a) - w;
        if (prev > 0 && ph <= 0)
            break;
        prev = ph;
    }
    double margin = w * w / std::hypot(d.a, d.p * w);
    EXPECT_GT(margin, 3);
    EXPECT_LT(margin, 3.5);
}

TEST(IbrcGain, FollowsTheRtt)
{
    double g5 = ibrc_derived_gain(5000);
    EXPECT_NEAR(ibrc_derived_gain(2500) / g5, 2.0, 1e-9);
    // The derived gain sits well below the seed's 1/(2 pi RTT) rule and far
    // below its quoted 320000 at 5.02 us (docs/pacing.md explains both).
    double seed_rule = 1 / (2 * M_PI * 5.02e-6);
    EXPECT_LT(ibrc_derived_gain(5020), seed_rule);
    EXPECT_LT(ibrc_derived_gain(5020) * 10, 320000);
}

TEST(Dcqcn, CutsOncePerCnpIntervalAndRecovers)
{
    Dcqcn d({50e9, 50e9 / 2048, 50e9, 50e9});
    d.on_ack(1000, 4096, 4096, 5000);
    EXPECT_DOUBLE_EQ(d.rate(), 25e9); // alpha = 1: Rc (1 - 1/2)
    d.on_ack(2000, 4096, 4096, 5000); // inside the 50 us CNP interval
    EXPECT_DOUBLE_EQ(d.rate(), 25e9);
    double a = d.alpha();
    EXPECT_NEAR(a, 1.0, 1e-12);
    d.on_ack(1000 + kDcqcnCnpIntervalNs, 4096, 4096, 5000);
    EXPECT_NEAR(d.rate(), 25e9 * (1 - a / 2), 1);
    // Quiet: fast recovery halves the gap to the target every 55 us.
    double before = d.rate();
    d.on_ack(1000 + kDcqcnCnpIntervalNs + 5 * kDcqcnIncreaseTimerNs, 4096, 0, 5000);
    EXPECT_GT(d.rate(), before);
    EXPECT_LT(d.alpha(), a);
}

// DCQCN's increase stages after a cut, one per 55 us timer: F = 5 fast
// recovery steps halve the distance to the target rate, then additive
// increase raises the target by R_AI per step (byte counter still below F).
TEST(Dcqcn, FastRecoveryThenAdditiveIncrease)
{
    Dcqcn d({50e9, 50e9 / 2048, 50e9, 50e9});
    d.on_ack(0, 4096, 4096, 5000); // timers start at the first call...
    d.on_ack(1, 4096, 4096, 5000); // ...and the CNP interval holds this one off
    EXPECT_DOUBLE_EQ(d.rate(), 25e9);
    double   rt = 50e9, rc = 25e9;
    uint64_t t0 = 0; // the cut restarted the increase timer at t = 0
    for (int k = 1; k <= kDcqcnFastRecoverySteps; k++) {
        d.on_ack(t0 + k * kDcqcnIncreaseTimerNs, 4096, 0, 5000);
        rc = (rt + rc) / 2;
        EXPECT_NEAR(d.rate(), rc, 1) << "fast recovery step " << k;
    }
    d.on_ack(t0 + (kDcqcnFastRecoverySteps + 1) * kDcqcnIncreaseTimerNs, 4096, 0, 5000);
    rt = std::min(50e9, rt + kDcqcnAiFraction * 50e9);
    rc = (rt + rc) / 2;
    EXPECT_NEAR(d.rate(), rc, 1) << "additive increase";
}

TEST(Timely, OneGradientStep)
{
    // min RTT 5 us, target 1 us: T_low 6 us, T_high 13 us. The second
    // completion's RTT rises 500 ns: rtt_diff = alpha * 500, gradient =
    // rtt_diff / min RTT, r *= 1 - beta * gradient.
    TimelyParams p{50e9, 50e9 / 2048, 50e9, 10e9, 1000};
    Timely       t(p);
    t.on_ack(1000, 16384, 0, 5000); // min RTT, first completion: reference only
    t.on_ack(2000, 16384, 0, 6500); // inside [T_low, T_high], rising
    double g = kTimelyAlpha * 1500 / 5000.0;
    EXPECT_NEAR(t.rate(), 10e9 * (1 - kTimelyBeta * g), 1);
    t.on_ack(3000, 16384, 0, 20000); // above T_high: r *= 1 - beta (1 - T_high / rtt)
    double r = 10e9 * (1 - kTimelyBeta * g) * (1 - kTimelyBeta * (1 - 13000.0 / 20000));
    EXPECT_NEAR(t.rate(), r, 1);
}

TEST(Timely, GradientAndThresholds)
{
    TimelyParams p{50e9, 50e9 / 2048, 50e9, 10e9, 1000};
    Timely       t(p);
    uint64_t     now = 0;
    // Flat RTT at the minimum: below T_low, additive increase.
    for (int i = 0; i < 20; i++)
        t.on_ack(now += 1000, 4096, 0, 5000);
    double flat = t.rate();
    EXPECT_GT(flat, 10e9);
    // Rising RTT inside [T_low, T_high]: positive gradient, decrease.
    uint64_t rtt = 6500;
    for (int i = 0; i < 20; i++)
        t.on_ack(now += 1000, 4096, 0, rtt += 100);
    EXPECT_LT(t.rate(), flat);
    // Far above T_high: multiplicative decrease toward the floor, never below.
    for (int i = 0; i < 400; i++)
        t.on_ack(now += 1000, 4096, 0, 200000);
    EXPECT_GE(t.rate(), p.min_rate_Bps);
    EXPECT_LT(t.rate(), 1e9);
}

TEST(Pacer, NonePolicyRunsAtTheCeiling)
{
    Config c       = base_config(Policy::kNone);
    c.max_rate_Bps = 10e9;
    std::string err;
    auto        p = make_pacer(c, &err);
    ASSERT_TRUE(p) << err;
    p->on_ack(1000, 4096, 4096, 100000);
    p->on_loss(2000);
    EXPECT_EQ(p->rate(), 10e9);
    EXPECT_EQ(p->counters().losses, 1u);
    EXPECT_EQ(p->counters().ce_bytes, 4096u);
}

namespace {

// An ACK whose data crossed one switch port: its INT record.
Feedback int_ack(uint64_t now, uint64_t ts, uint64_t tx_bytes, uint32_t qlen, Telemetry *tel)
{
    tel->hops   = 1;
    tel->hop[0] = {ts, tx_bytes, qlen, 50e9};
    Feedback f;
    f.now_ns      = now;
    f.acked_bytes = 4096;
    f.rtt_ns      = 5000;
    f.telemetry   = tel;
    return f;
}

} // namespace

// HPCC (Algorithm 1) on a 400 Gb/s path with T = 5 us: B T = 250 kB (the
// start window and the ceiling), W_AI = 4e-4 B T = 100 B. One hop; each
// step below is the paper's update computed by hand.
TEST(Hpcc, WindowFollowsTheMeasuredInflight)
{
    Hpcc      h({50e9 / 2048, 50e9, 5000});
    Telemetry tel;
    EXPECT_DOUBLE_EQ(h.window_bytes(), 250000);
    EXPECT_DOUBLE_EQ(h.rate(), 50e9); // W / T: a line-rate start
    h.on_send(0, 4096);
    h.on_feedback(int_ack(5000, 1000, 0, 25000, &tel)); // the reference records
    EXPECT_DOUBLE_EQ(h.window_bytes(), 250000);
    // 1 us later the port has sent 50 kB more (line rate) and holds
    // min(50, 25) kB: u = 25000 / (B T) + 1 = 1.1 over tau = 1 us, so
    // U = 0.2 * 1.1 = 0.22 < eta: W = Wc + W_AI, clamped to B T.
    h.on_feedback(int_ack(6000, 2000, 50000, 50000, &tel));
    EXPECT_NEAR(h.utilization(), 0.22, 1e-12);
    EXPECT_NEAR(h.window_bytes(), 250000, 1e-6);
    // A full T later: 275 kB sent (1.1 B) and min(50, 50) kB queued, u = 1.3
    // = U (tau = T) >= eta: W = Wc / (U / eta) + W_AI. New data went out
    // before this ACK, so it moves Wc (a new RTT)...
    for (int i = 0; i < 10; i++)
        h.on_send(6500, 4096);
    h.on_feedback(int_ack(7000, 7000, 325000, 50000, &tel));
    double wc = 250000 / (1.3 / kHpccEta) + 100;
    EXPECT_NEAR(h.utilization(), 1.3, 1e-12);
    EXPECT_NEAR(h.window_bytes(), wc, 1e-6);
    EXPECT_NEAR(h.rate(), wc / 5e-6, 1);
    // ...and the ACKs of that data, still inside the RTT, compute W from the
    // same Wc: U = 0.8 * 1.3 + 0.2 * 1.2 = 1.28.
    h.on_feedback(int_ack(8000, 8000, 375000, 50000, &tel));
    EXPECT_NEAR(h.utilization(), 1.28, 1e-12);
    EXPECT_NEAR(h.window_bytes(), wc / (1.28 / kHpccEta) + 100, 1e-6);
    h.on_feedback(int_ack(9000, 9000, 425000, 50000, &tel));
    double u = 0.8 * 1.28 + 0.2 * 1.2;
    EXPECT_NEAR(h.window_bytes(), wc / (u / kHpccEta) + 100, 1e-6) << "from Wc, not from W";
    // Loss does not move HPCC's window.
    double w = h.window_bytes();
    h.on_loss(9500);
    EXPECT_DOUBLE_EQ(h.window_bytes(), w);
}

TEST(Hpcc, AdditiveStepsUntilMaxStageThenMultiplicative)
{
    Hpcc      h({50e9 / 2048, 50e9, 5000});
    Telemetry tel;
    h.on_send(0, 4096);
    h.on_feedback(int_ack(5000, 1000, 0, 0, &tel));
    // A congested RTT (1.1 B sent over T, no queue): W = B T / (1.1 / eta) + W_AI.
    h.on_feedback(int_ack(6000, 6000, 275000, 0, &tel));
    double w = 250000 / (1.1 / kHpccEta) + 100;
    ASSERT_NEAR(h.window_bytes(), w, 1e-6);
    // Then an idle port (u = 0 over a full T each RTT): U = 0 < eta, and
    // each RTT adds W_AI until incStage reaches maxStage...
    uint64_t ts = 6000, now = 6000;
    for (uint32_t stage = 0; stage < kHpccMaxStage; stage++) {
        h.on_send(now, 4096); // new data: its ACK starts a new RTT
        ts += 5000, now += 5000;
        h.on_feedback(int_ack(now, ts, 275000, 0, &tel));
        w += 100;
        EXPECT_NEAR(h.window_bytes(), w, 1e-6) << "stage " << stage;
    }
    // ...then a multiplicative step: Wc / (U / eta) with U = 0, up to B T.
    h.on_send(now, 4096);
    ts += 5000, now += 5000;
    h.on_feedback(int_ack(now, ts, 275000, 0, &tel));
    EXPECT_NEAR(h.window_bytes(), 250000, 1e-6);
}

// Swift (Algorithm 1): 400 Gb/s, 4 KiB packets, base RTT 5 us, queue
// allowance 655 ns. The start window is a BDP: 61.035 packets.
TEST(Swift, AdditiveIncreaseAndOneCutPerRtt)
{
    SwiftParams p{50e9 / 2048, 50e9, 50e9, 4096, 5000, 655, 655};
    Swift       s(p);
    double      cwnd = 50e9 * 5e-6 / 4096;
    EXPECT_NEAR(s.cwnd(), cwnd, 1e-9);
    // Flow scaling at this window: alpha / sqrt(cwnd) + beta', with fs_range
    // = 4 x 655 ns, alpha = fs_range / (1/sqrt(0.1) - 1/sqrt(100)).
    double fs    = kSwiftFsRangeTargets * 655;
    double alpha = fs / (1 / std::sqrt(0.1) - 0.1);
    double beta  = -alpha / 10;
    double tgt   = 5000 + 655 + (alpha / std::sqrt(cwnd) + beta);
    EXPECT_NEAR(s.fabric_target_ns(), tgt, 1e-6);
    // Below the target: + ai / cwnd per packet acked.
    Feedback f;
    f.now_ns      = 1000;
    f.acked_bytes = 4096;
    f.rtt_ns      = 5200;
    s.on_feedback(f);
    cwnd += kSwiftAi / cwnd;
    EXPECT_NEAR(s.cwnd(), cwnd, 1e-9);
    // Above it: cwnd *= max(1 - beta (delay - target) / delay, 1 - max_mdf).
    tgt      = s.fabric_target_ns();
    f.now_ns = 2000;
    f.rtt_ns = 8000;
    s.on_feedback(f);
    cwnd *= std::max(1 - kSwiftBeta * (8000 - tgt) / 8000, 1 - kSwiftMaxMdf);
    EXPECT_NEAR(s.cwnd(), cwnd, 1e-9);
    // Within the same RTT no second cut (and no increase above the target).
    f.now_ns = 3000;
    s.on_feedback(f);
    EXPECT_NEAR(s.cwnd(), cwnd, 1e-9);
    // A loss one RTT later: cwnd *= 1 - max_mdf.
    s.on_loss(2000 + 8000);
    cwnd *= 1 - kSwiftMaxMdf;
    EXPECT_NEAR(s.cwnd(), cwnd, 1e-9);
    EXPECT_DOUBLE_EQ(s.rate(), 50e9) << "a window of packets clocks the flow";
}

TEST(Swift, PacesBelowOnePacket)
{
    // A window of 0.5 packets sends one packet per rtt / cwnd: rate = cwnd
    // x mtu / rtt. Reached from a start window of 1 by a cut at max_mdf.
    SwiftParams p{50e9 / 2048, 50e9, 4096 / 5e-6, 4096, 5000, 655, 655};
    Swift       s(p);
    ASSERT_NEAR(s.cwnd(), 1.0, 1e-9);
    s.on_loss(1000);
    EXPECT_NEAR(s.cwnd(), 0.5, 1e-9);
    // One RTT after the cut, far above the target: a cut by the excess.
    double   tgt = s.fabric_target_ns();
    Feedback f;
    f.now_ns      = 1000 + 10000;
    f.acked_bytes = 4096;
    f.rtt_ns      = 10000;
    s.on_feedback(f);
    double cwnd = 0.5 * std::max(1 - kSwiftBeta * (10000 - tgt) / 10000, 1 - kSwiftMaxMdf);
    EXPECT_NEAR(s.cwnd(), cwnd, 1e-9);
    EXPECT_NEAR(s.rate(), cwnd * 4096 / 10e-6, 1);
    EXPECT_NEAR(s.window_bytes(), cwnd * 4096, 1e-6);
}

TEST(Pacer, WindowPoliciesExposeTheirWindow)
{
    Config c      = base_config(Policy::kHpcc);
    c.telemetry   = true;
    c.base_rtt_ns = 5000;
    auto h        = make_pacer(c, nullptr);
    ASSERT_TRUE(h);
    EXPECT_DOUBLE_EQ(h->window_bytes(), 250000);
    c.policy = Policy::kSwift;
    auto s   = make_pacer(c, nullptr);
    ASSERT_TRUE(s);
    EXPECT_NEAR(s->window_bytes(), 250000, 1e-6);
    EXPECT_EQ(make_pacer(base_config(Policy::kDcqcn), nullptr)->window_bytes(), 0);
}

namespace {

// Segments a pacer lets out at one instant once its bucket is full.
int burst_at(Pacer &p, uint64_t now, uint32_t bytes)
{
    int n = 0;
    while (p.next_send_ns(now, bytes) <= now && n < 1000) {
        p.on_send(now, bytes);
        ++n;
    }
    return n;
}

} // namespace

// A path shown to cross no spine keeps burst_ns of its rate in the
// bucket, between two segments and the cap; the depth follows the rate
// down, so a path that congests is paced segment by segment again.
TEST(Pacer, ATimedBurstScalesTheBucketWithTheRate)
{
    constexpr uint32_t kSeg = 1472, kCap = 24 * 1520;
    Config             c = base_config(Policy::kNone);
    c.mtu_bytes          = kSeg;
    for (auto [rate, depth] : {std::pair{200e6, double(kCap)}, // 100 KB: the cap
                               std::pair{20e6, 10000.0},       // 500 us of the rate
                               std::pair{2e6, 2.0 * kSeg}}) {  // 1 KB: two segments
        c.line_rate_Bps = rate;
        auto p          = make_pacer(c, nullptr);
        ASSERT_TRUE(p);
        EXPECT_EQ(p->burst_depth(), 2.0 * kSeg);
        p->set_time_burst(500000, kCap);
        EXPECT_EQ(p->burst_depth(), depth) << rate;
        uint64_t t = 10000000; // long enough to fill any of these buckets
        EXPECT_EQ(burst_at(*p, t, kSeg), int(depth / kSeg)) << rate;
        p->set_time_burst(0, 0);
        EXPECT_EQ(p->burst_depth(), 2.0 * kSeg) << "off again";
    }
    // IBRC: every cut of the rate shrinks the bucket with it.
    Config h = host_path_config();
    auto   p = make_pacer(h, nullptr);
    ASSERT_TRUE(p);
    p->set_time_burst(500000, kCap);
    for (uint64_t t = 1000000; t < 20000000; t += 1000000) {
        p->on_loss(t);
        double want = std::max(2.0 * kSeg, std::min(p->rate() * 500e-6, double(kCap)));
        EXPECT_DOUBLE_EQ(p->burst_depth(), want) << "at " << p->rate() << " B/s";
    }
    EXPECT_EQ(p->burst_depth(), 2.0 * kSeg) << "cut to its floor: two segments";
}
