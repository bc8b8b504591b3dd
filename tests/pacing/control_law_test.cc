// The IBRC control law on a fluid bottleneck: N paced flows share a link of
// rate C; the queue integrates the excess; a flow's rate reaches the queue
// half a base RTT after it is set and the queue is seen half a base RTT later
// in the RTT samples and CE marks of its ACKs (one ACK per flow per us).
// Deterministic: no randomness, virtual time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <vector>

#include "pacer.h"

using namespace doorbell::pacing;

namespace {

constexpr double   kC        = 50e9; // 400 Gb/s in bytes/s
constexpr uint64_t kBase     = 5000; // base RTT, ns
constexpr uint64_t kStep     = 100;  // fluid step, ns
constexpr uint64_t kAckEvery = 1000; // ACK period per flow, ns

struct Fluid {
    std::vector<std::unique_ptr<Pacer>> flows;
    std::vector<std::deque<double>>     sent_rate;     ///< per flow, last half RTT of rates
    std::deque<double>                  queue_hist;    ///< queue, last half RTT
    double                              q         = 0; ///< bytes
    double                              ecn_bytes = 384 * 1024;
    uint64_t                            now       = 0;
    std::vector<double>                 acked;            ///< bytes delivered per flow
    bool                                ce_burst = false; ///< mark every ACK regardless of queue
    double                              extra_rtt_ns = 0; ///< added to every RTT sample
    std::vector<double>                 path_ns;          ///< added to flow i's samples (its path)

    Pacer &add(const Config &c)
    {
        std::string err;
        flows.push_back(make_pacer(c, &err));
        EXPECT_TRUE(flows.back()) << err;
        sent_rate.emplace_back(kBase / 2 / kStep, flows.back()->rate());
        acked.push_back(0);
        return *flows.back();
    }

    void run(uint64_t for_ns)
    {
        size_t half = kBase / 2 / kStep;
        if (queue_hist.empty())
            queue_hist.assign(half, 0);
        for (uint64_t end = now + for_ns; now < end; now += kStep) {
            double in = 0;
            for (size_t i = 0; i < flows.size(); i++) {
                sent_rate[i].push_back(flows[i]->rate());
                in += sent_rate[i].front(); // what was sent half an RTT ago arrives now
                sent_rate[i].pop_front();
            }
            double served = std::min(q / (kStep * 1e-9) + in, kC);
            double share  = in > 0 ? served / in : 0;
            q             = std::max(0.0, q + (in - kC) * kStep * 1e-9);
            queue_hist.push_back(q);
            double q_seen = queue_hist.front();
            queue_hist.pop_front();
            for (size_t i = 0; i < flows.size(); i++)
                acked[i] += sent_rate[i].front() * share * kStep * 1e-9;
            if (now % kAckEvery == 0) {
                for (size_t i = 0; i < flows.size(); i++) {
                    auto     bytes = uint64_t(std::max(1.0, flows[i]->rate() * kAckEvery * 1e-9));
                    bool     ce    = ce_burst || q_seen > ecn_bytes;
                    double   path  = i < path_ns.size() ? path_ns[i] : 0;
                    uint64_t rtt   = kBase + uint64_t(q_seen / kC * 1e9 + extra_rtt_ns + path);
                    flows[i]->on_ack(now + 1, bytes, ce ? bytes : 0, rtt);
                }
            }
        }
    }
    double total_rate() const
    {
        double s = 0;
        for (auto &f : flows)
            s += f->rate();
        return s;
    }
    double delay_ns() const { return q / kC * 1e9; }
};

Config ibrc(double gain = 0)
{
    Config c;
    c.policy        = Policy::kIbrc;
    c.line_rate_Bps = kC;
    c.gain          = gain;
    return c;
}

double jain(const std::vector<double> &x)
{
    double s = 0, s2 = 0;
    for (double v : x)
        s += v, s2 += v * v;
    return s * s / (x.size() * s2);
}

} // namespace

TEST(IbrcLaw, StepResponseReachesLineRateAndSettlesAtTarget)
{
    Fluid    f;
    Pacer   &p      = f.add(ibrc());
    uint64_t target = p.config().target_delay_ns;
    EXPECT_DOUBLE_EQ(p.rate(), kC * kIbrcInitFraction);
    // Probe up from 1/16 of line rate: within 60 RTTs near line rate, and a
    // single flow at line rate builds no queue beyond the target.
    double worst = 0;
    for (int i = 0; i < 300; i++) {
        f.run(1000);
        worst = std::max(worst, f.delay_ns());
    }
    EXPECT_GT(p.rate(), 0.95 * kC);
    EXPECT_LE(worst, double(target)) << "target " << target << " ns";
    EXPECT_NEAR(p.ibrc_gain(), ibrc_derived_gain(kBase + target), 1e-6);
}

TEST(IbrcLaw, ManyFlowsConvergeToTheLinkRate)
{
    Fluid f;
    for (int i = 0; i < 16; i++)
        f.add(ibrc());
    f.run(1000000);
    double sum = 0, qsum = 0;
    for (int i = 0; i < 200; i++) {
        f.run(1000);
        sum += f.total_rate();
        qsum += f.delay_ns();
    }
    EXPECT_NEAR(sum / 200 / kC, 1.0, 0.03);
    // The queue settles where every flow's delay excess over the target is
    // the additive step's share of its own packet spacing: 16 flows at C/16
    // hold the target plus 16 x kIbrcAdditive segment times, whatever the
    // loop gain.
    const Config &r  = f.flows[0]->config();
    double        eq = r.target_delay_ns + 16 * kIbrcAdditive * 4096 / kC * 1e9;
    EXPECT_NEAR(qsum / 200, eq, 0.05 * eq);
}

TEST(IbrcLaw, TwoFlowsConvergeToFairShares)
{
    Fluid  f;
    Config a = ibrc(), b = ibrc();
    a.init_rate_Bps = 0.8 * kC;
    b.init_rate_Bps = 0.05 * kC;
    f.add(a);
    f.add(b);
    f.run(2000000);
    double j0 = jain({f.flows[0]->rate(), f.flows[1]->rate()});
    f.run(30000000);
    std::vector<double> r = {f.flows[0]->rate(), f.flows[1]->rate()};
    EXPECT_GT(jain(r), 0.98) << r[0] << " vs " << r[1] << ", after 2 ms Jain " << j0;
    EXPECT_NEAR((r[0] + r[1]) / kC, 1.0, 0.05);
}

TEST(IbrcLaw, NoStarvationUnderNoiseAndRecoveryAfter)
{
    Fluid  f;
    Pacer &p = f.add(ibrc());
    f.run(300000);
    // A noisy path: every ACK marked, RTT samples inflated by 50 us.
    f.ce_burst     = true;
    f.extra_rtt_ns = 50000;
    f.run(2000000);
    EXPECT_GE(p.rate(), p.config().min_rate_Bps);
    EXPECT_GT(p.rate(), 0);
    EXPECT_LT(p.rate(), 0.01 * kC);
    // The noise ends: the path climbs back to line rate (no stuck floor).
    f.ce_burst     = false;
    f.extra_rtt_ns = 0;
    f.run(2000000);
    EXPECT_GT(p.rate(), 0.9 * kC);
}

TEST(IbrcLaw, QuietPathKeepsItsRate)
{
    // No ACKs at all (idle path): nothing pushes the rate down.
    std::string err;
    auto        p = make_pacer(ibrc(), &err);
    ASSERT_TRUE(p);
    double r0 = p->rate();
    EXPECT_LE(p->next_send_ns(1000000, 4096), 1000000u);
    p->on_send(1000000, 4096);
    EXPECT_EQ(p->rate(), r0);
}

TEST(IbrcLaw, CeBurstCutsOncePerRtt)
{
    Fluid  f;
    Pacer &p = f.add(ibrc());
    f.run(400000);
    double before = p.rate();
    // Three RTTs of marks, one ACK per us: at most one cut per loop time
    // (~6 us), each by the default ce_beta, not one per ACK.
    f.ce_burst = true;
    f.run(15000);
    f.ce_burst   = false;
    double after = p.rate();
    EXPECT_LT(after, before * 0.6);
    EXPECT_GT(after, before * std::pow(1 - Config{}.ce_beta, 4) * 0.99);
    // And it recovers.
    f.run(1000000);
    EXPECT_GT(p.rate(), 0.9 * kC);
}

// A host path's settings (the UDP device's): a short burst of marks after a
// long clean stretch moves the smoothed estimate little, so it cuts a little;
// marks that persist raise it toward 1 and the rate falls far; it recovers.
TEST(IbrcLaw, SmoothedMarksCutLittleForABurstAndFarWhenTheyPersist)
{
    Fluid  f;
    Config c  = ibrc();
    c.ce_gain = 1.0 / 16;
    c.ce_beta = 0.25;
    Pacer &p  = f.add(c);
    f.run(400000);
    double before = p.rate();
    f.ce_burst    = true;
    f.run(15000); // three RTTs
    f.ce_burst = false;
    EXPECT_LT(p.rate(), before);
    EXPECT_GT(p.rate(), before * 0.8) << "the default law cuts this burst to below 0.6";
    f.run(400000);
    before     = p.rate();
    f.ce_burst = true;
    f.run(300000);
    f.ce_burst = false;
    EXPECT_LT(p.rate(), before * 0.1);
    f.run(1000000);
    EXPECT_GT(p.rate(), 0.9 * kC);
}

// The probe's additive floor: from the bottom of its range a flow on an
// empty queue gains at least probe_step of the ceiling per loop time, where
// the multiplicative probe alone gains a few per cent of its own rate.
TEST(IbrcLaw, ProbeFloorAddsTheSameStepToEveryFlow)
{
    auto climb = [](double probe_step) {
        Config c        = ibrc();
        c.init_rate_Bps = kC / 1000;
        c.probe_step    = probe_step;
        auto p          = make_pacer(c, nullptr);
        p->on_ack(0, 4096, 0, kBase);
        p->on_loss(1); // past the start (which would double): the law's probe alone
        uint64_t t = 1000;
        for (; t < 60000; t += 1000) // empty queue: every sample at the base RTT
            p->on_ack(t, 4096, 0, kBase);
        return p->rate();
    };
    double plain = climb(0), floored = climb(1.0 / 512);
    EXPECT_GT(floored, plain * 2);
    EXPECT_GT(floored, kC / 1000 + 8 * kC / 512) << "at least one step per empty loop time";
}

TEST(IbrcLaw, LossCutsOncePerRtt)
{
    Fluid  f;
    Pacer &p = f.add(ibrc());
    f.run(400000);
    double before = p.rate();
    for (int i = 0; i < 10; i++)
        p.on_loss(f.now + i);
    EXPECT_NEAR(p.rate(), before * (1 - kIbrcLossBeta), before * 0.01);
    EXPECT_EQ(p.counters().losses, 10u);
}

TEST(IbrcLaw, TooHighGainOscillatesDerivedDoesNot)
{
    // The same loop at 10x the derived gain swings the queue; at the derived
    // gain it stays within the target band.
    auto swing = [](double scale) {
        Fluid       f;
        Config      c = ibrc();
        Config      r;
        std::string err;
        resolve_config(c, &r, &err);
        c.gain = scale * ibrc_derived_gain(kBase + r.target_delay_ns);
        for (int i = 0; i < 4; i++)
            f.add(c);
        f.run(1000000);
        double lo = 1e18, hi = 0;
        for (int i = 0; i < 500; i++) {
            f.run(1000);
            lo = std::min(lo, f.total_rate());
            hi = std::max(hi, f.total_rate());
        }
        return (hi - lo) / kC;
    };
    double derived = swing(1), high = swing(10);
    EXPECT_LT(derived, 0.1);
    EXPECT_GT(high, 0.5);
}

TEST(IbrcLaw, SlowPathIsPacedNotIdle)
{
    // A path pushed to the floor sends one segment per ~170 us; those gaps are
    // its pacing, not idleness, so ACKs showing an empty queue must raise it.
    std::string err;
    Config      c   = ibrc();
    c.init_rate_Bps = c.line_rate_Bps / 2048;
    auto p          = make_pacer(c, &err);
    ASSERT_TRUE(p) << err;
    double   floor = p->rate();
    uint64_t now   = 1000;
    for (int i = 0; i < 200 && p->rate() < 100 * floor; i++) {
        now = std::max(now, p->next_send_ns(now, 4096));
        p->on_send(now, 4096);
        now += kBase;
        p->on_ack(now, 4096, 0, kBase);
    }
    EXPECT_GT(p->rate(), 100 * floor);
}

// The start, on a path whose base RTT is known before data (5 us, target
// 163 ns: loop time T = 5163 ns). Hand-computed: the first window is one
// segment; the first sample sets one segment per two loop times; each loop
// time whose samples stay near the queue the flow found doubles the rate.
TEST(IbrcStart, OneSegmentThenHalfASegmentPerLoopTimeThenDoubling)
{
    Config c      = ibrc();
    c.base_rtt_ns = kBase;
    auto p        = make_pacer(c, nullptr);
    ASSERT_TRUE(p);
    double T  = (kBase + p->config().target_delay_ns) * 1e-9;
    double r1 = 4096 / (kIbrcStartLoops * T);
    EXPECT_DOUBLE_EQ(p->window_bytes(), 4096) << "one segment until the first sample";
    EXPECT_LE(p->next_send_ns(0, 4096), 0u);
    p->on_send(0, 4096);
    EXPECT_GT(p->next_send_ns(0, 4096), 0u) << "the bucket held one segment";
    p->on_ack(5000, 4096, 0, kBase);
    EXPECT_EQ(p->window_bytes(), 0) << "the window opens with the first sample";
    EXPECT_NEAR(p->rate(), r1, 1);
    // Samples at the base RTT (an empty path) every microsecond: the first
    // update one loop time after the first sample doubles, and so on.
    uint64_t t    = 5000;
    uint64_t loop = uint64_t(T * 1e9);
    while (t < 5000 + loop)
        p->on_ack(t += 1000, 4096, 0, kBase);
    EXPECT_NEAR(p->rate(), 2 * r1, 1);
    uint64_t doubled = t;
    while (t < doubled + loop)
        p->on_ack(t += 1000, 4096, 0, kBase);
    EXPECT_NEAR(p->rate(), 4 * r1, 1);
    // A sample of a packet sent before the last doubling shows a queue above
    // the start's limit (kIbrcStartSegments segment times above the queue
    // the flow found): the start ends at half the rate that sent it.
    p->on_ack(t + 10, 4096, 0, kBase + 5000);
    EXPECT_NEAR(p->rate(), r1, 1);
    // Over: the next empty-queue loop times probe, they do not double.
    for (uint64_t end = t + 20000; t < end;)
        p->on_ack(t += 1000, 4096, 0, kBase);
    EXPECT_GT(p->rate(), r1);
    EXPECT_LT(p->rate(), 2 * r1);
}

// A flow that starts into a standing queue is a newcomer: instead of the law's
// slow drift it reads the share the queue tells (the rate whose delay excess
// is the additive step's share of its packet spacing) from its first
// kIbrcShareSamples samples and takes it: within 10 % of the fair share of
// one more flow, on the fluid bottleneck with 63 settled flows (their queue
// stands 63 x kIbrcAdditive segment times above the target, 486 ns in all).
TEST(IbrcStart, NewcomerFindsItsShareFromTheStandingQueue)
{
    Fluid f;
    for (int i = 0; i < 63; i++) {
        Config c      = ibrc();
        c.base_rtt_ns = kBase;
        f.add(c);
    }
    f.run(3000000);
    Config c      = ibrc();
    c.base_rtt_ns = kBase;
    Pacer &late   = f.add(c);
    f.run(100000);
    EXPECT_NEAR(late.rate() / (kC / 64), 1.0, 0.1) << late.rate() / 1e9 << " GB/s";
    f.run(400000);
    EXPECT_NEAR(late.rate() / (kC / 64), 1.0, 0.1) << late.rate() / 1e9 << " GB/s";
    EXPECT_NEAR(f.total_rate() / kC, 1.0, 0.05);
}

// 128 flows that start in the same instant (the base RTT known, an incast's
// worst case) neither fill the buffer past the ECN threshold nor diverge:
// their first rates sum to 1.02 C, the doubling ends together, and within a
// millisecond the link is full.
TEST(IbrcStart, SynchronizedIncastStartStaysBelowTheMarkingThreshold)
{
    Fluid f;
    for (int i = 0; i < 128; i++) {
        Config c      = ibrc();
        c.base_rtt_ns = kBase;
        f.add(c);
    }
    double worst = 0;
    for (int i = 0; i < 1000; i++) {
        f.run(1000);
        worst = std::max(worst, f.q);
    }
    EXPECT_LT(worst, f.ecn_bytes);
    std::vector<double> r;
    for (auto &p : f.flows)
        r.push_back(p->rate());
    EXPECT_GT(jain(r), 0.999);
    double sum = 0;
    for (int i = 0; i < 100; i++) {
        f.run(1000);
        sum += f.total_rate();
    }
    EXPECT_NEAR(sum / 100 / kC, 1.0, 0.02);
}

// A path that pauses (a ring step waiting on its neighbour) resumes near its
// old rate, halved per kIbrcIdleHalving idle loop times; if its first sample
// after the pause shows a standing queue, others took the capacity and it
// drops to kIbrcInitFraction of the ceiling.
TEST(IbrcLaw, PausedPathResumesNearItsRateUnlessAQueueShows)
{
    for (bool queue : {false, true}) {
        Fluid  f;
        Pacer &p = f.add(ibrc());
        f.run(400000);
        ASSERT_GT(p.rate(), 0.95 * kC);
        double   before = p.rate();
        uint64_t loop   = kBase + p.config().target_delay_ns;
        p.on_send(f.now, 4096); // the last send before the pause
        uint64_t t = f.now + 20 * loop;
        p.on_send(t, 4096);
        EXPECT_NEAR(p.rate(), before * std::exp2(-20 / kIbrcIdleHalving), before * 1e-9);
        double   resumed = p.rate();
        uint64_t delay   = queue ? uint64_t(kIbrcStartSegments * 4096 / kC * 1e9) : 0;
        p.on_ack(t + kBase, 4096, 0, kBase + delay); // (the law's update follows)
        if (queue)
            EXPECT_NEAR(p.rate(), kC * kIbrcInitFraction, 0.1 * kC * kIbrcInitFraction);
        else
            EXPECT_GE(p.rate(), resumed);
    }
}

namespace {

// An IBRC controller past its start, on a path of base RTT kBase (known
// before data) with the fabric's defaults: its first sample at 500 ns sets
// the first rate, half a segment per loop time, and a loss at 1000 ns ends
// the start at half of that. loop() then feeds one loop time of samples (one
// per us) at one queueing delay and ends on the sample that runs the update,
// exactly one loop time after the last.
struct Settled {
    IbrcParams params;
    IbrcLoop   design = ibrc_design(kIbrcCrossover, kIbrcPhaseMarginDeg);
    double     T_ns;
    Ibrc       ibrc;
    uint64_t   last = 500; ///< time of the last update

    explicit Settled(IbrcParams p = make()) :
        params(p), T_ns(double(kBase + params.target_ns)), ibrc(params)
    {
        ibrc.on_ack(500, 4096, 0, kBase);
        ibrc.on_loss(1000);
    }
    static IbrcParams make()
    {
        IbrcParams p{};
        p.line_rate_Bps = kC;
        p.min_rate_Bps  = kC / 2048;
        p.max_rate_Bps  = kC;
        p.init_rate_Bps = kC;
        p.target_ns     = ibrc_auto_target_ns(4096, kC);
        p.gain          = 0;
        p.mtu_bytes     = 4096;
        p.base_rtt_ns   = kBase;
        return p;
    }
    void loop(double delay_ns)
    {
        uint64_t next = last + uint64_t(T_ns);
        for (uint64_t t = last + 1000; t < next; t += 1000)
            ibrc.on_ack(t, 4096, 0, kBase + uint64_t(delay_ns));
        ibrc.on_ack(next, 4096, 0, kBase + uint64_t(delay_ns));
        last = next;
    }
    double add() const { return kIbrcAdditive * design.a * 4096 / (T_ns * 1e-9); }
    double eq(double rate) const { return params.target_ns + kIbrcAdditive * 4096 / rate * 1e9; }
    // The law's update at an unchanged error (no p term), below the pivot.
    double next(double rate, double delay_ns) const
    {
        return rate * (1 - design.a * (delay_ns - params.target_ns) / T_ns) + add();
    }
};

} // namespace

// One update of the law, computed by hand: r <- r (1 - a e dt/T - p (e -
// e_prev)) + kIbrcAdditive a segment / T per loop time, with e the mean
// delay's distance to the target in loop times and e_prev, on the first
// update, the empty queue's (the bumpless start of the PI).
TEST(IbrcLaw, OneUpdateIsTheMultiplicativeStepPlusTheAdditiveOne)
{
    Settled s;
    ASSERT_FALSE(s.ibrc.starting());
    double r0 = s.ibrc.rate();
    EXPECT_NEAR(r0, 4096 / (2 * s.T_ns * 1e-9) / 2, 1e-6 * r0);
    double d = 400; // ns of queue in every sample
    s.loop(d);
    double a = s.design.a, p = s.design.p;
    double e  = (d - s.params.target_ns) / s.T_ns;
    double e0 = -double(s.params.target_ns) / s.T_ns;
    double r1 = r0 * (1 - a * e - p * (e - e0)) + s.add();
    EXPECT_NEAR(s.ibrc.rate(), r1, 1e-9 * r1);
    // The next at the same delay: no change of the error, the integral and
    // the additive step alone.
    s.loop(d);
    double r2 = r1 * (1 - a * e) + s.add();
    EXPECT_NEAR(s.ibrc.rate(), r2, 1e-9 * r2);
    EXPECT_NEAR(s.ibrc.gain(), a / (s.T_ns * 1e-9), 1e-9 * a / (s.T_ns * 1e-9));
}

// At the delay where a flow's excess over the target is kIbrcAdditive of
// its own packet spacing, the multiplicative cut and the additive step cancel:
// the rate holds; a queue 500 ns longer slows it, 500 ns shorter speeds it
// up (by a x 500 ns / T, about half a per cent per loop time).
TEST(IbrcLaw, TheAdditiveStepBalancesAtTheFlowsShareOfTheQueue)
{
    Settled s;
    s.loop(s.eq(s.ibrc.rate())); // the first update carries the bumpless step
    for (double off : {0.0, 500.0, -500.0}) {
        double r = s.ibrc.rate();
        s.loop(s.eq(r) + off); // the error moves: the p term acts once
        s.loop(s.eq(r) + off); // then the integral and the additive step
        double before = s.ibrc.rate();
        s.loop(s.eq(r) + off);
        double ratio = s.ibrc.rate() / before;
        if (off == 0)
            EXPECT_NEAR(ratio, 1.0, 2e-3);
        else if (off > 0)
            EXPECT_LT(ratio, 0.997);
        else
            EXPECT_GT(ratio, 1.003);
    }
}

// An empty queue raises the rate by the linear law for one loop time; the
// probe (the error taken as kIbrcProbeError loop times below the target)
// waits for kIbrcEmptyLoops loop times in a row.
TEST(IbrcLaw, TheProbeWaitsForTwoEmptyLoopTimes)
{
    Settled s;
    s.loop(s.params.target_ns); // at the target: e = 0
    double r1 = s.ibrc.rate();
    double a = s.design.a, p = s.design.p;
    s.loop(0); // empty, the first time: the linear law
    double e  = -double(s.params.target_ns) / s.T_ns;
    double r2 = r1 * (1 - a * e - p * e) + s.add();
    EXPECT_NEAR(s.ibrc.rate(), r2, 1e-9 * r2);
    s.loop(0); // empty again: the probe
    double r3 = r2 * (1 + a * kIbrcProbeError) + s.add();
    EXPECT_NEAR(s.ibrc.rate(), r3, 1e-9 * r3);
}

// For kIbrcBurstLoops loop times after its start a flow brakes on a burst: a
// loop time whose delay stands more than kIbrcBurstScales start scales above
// the flow's equilibrium delay cuts r *= 1 - kIbrcBurstBeta excess / delay
// (at most by half), once per loop time. A flow settled longer leaves the
// burst to the linear law.
TEST(IbrcLaw, AYoungFlowBrakesOnABurstAnOldOneDoesNot)
{
    double scale = kIbrcStartSegments * 4096 / kC * 1e9; // 655 ns
    for (bool young : {true, false}) {
        Settled s;
        for (int i = 0; i < (young ? 1 : int(kIbrcBurstLoops)); i++)
            s.loop(s.eq(s.ibrc.rate()));
        double r      = s.ibrc.rate();
        double excess = 3 * scale;
        double delay  = std::floor(s.eq(r) + excess); // the samples are whole ns
        s.loop(delay);
        double braked = r * (1 - kIbrcBurstBeta * (delay - s.eq(r)) / delay);
        if (young)
            EXPECT_NEAR(s.ibrc.rate(), braked, 1e-9 * r);
        else
            EXPECT_GT(s.ibrc.rate(), braked + 0.05 * r);
        EXPECT_LT(s.ibrc.rate(), r);
    }
}

// A start that doubles up to the ceiling goes on without doubling for
// kIbrcStartHold loop times: a queue its last doubling built still ends it
// with the halving; a path that stays empty ends it at the ceiling.
TEST(IbrcStart, AtTheCeilingTheStartWaitsBeforeItEnds)
{
    for (bool queue : {false, true}) {
        Config c      = ibrc();
        c.base_rtt_ns = kBase;
        auto p        = make_pacer(c, nullptr);
        p->on_ack(1000, 4096, 0, kBase); // first rate: half a segment per loop time
        uint64_t t = 1000;
        while (p->rate() < kC)
            p->on_ack(t += 1000, 4096, 0, kBase);
        // A sample of a packet sent before the last doubling (the one to the
        // ceiling, from half of it), showing a queue above the start's limit
        // or none.
        p->on_ack(t += 1000, 4096, 0, kBase + (queue ? 2000 : 0));
        if (queue) {
            EXPECT_NEAR(p->rate(), kC / 4, kC * 0.02) << "half of the rate that sent it";
            continue;
        }
        for (uint64_t end = t + 20000; t < end;)
            p->on_ack(t += 1000, 4096, 0, kBase);
        EXPECT_DOUBLE_EQ(p->rate(), kC);
        p->on_ack(t += 1000, 4096, 0, kBase + 2000); // a queue now is the law's
        EXPECT_GT(p->rate(), kC / 2);
    }
}

// On a still queue the churn estimate stays at the design point: the gain in
// use is the derived one, loop after loop.
TEST(IbrcChurnLaw, AStillQueueKeepsTheDesignPoint)
{
    Settled s;
    for (int k = 0; k < 200; k++)
        s.loop(s.eq(s.ibrc.rate()));
    EXPECT_EQ(s.ibrc.churn_scale(), 1);
    EXPECT_EQ(s.ibrc.churn_rho(), 0);
    EXPECT_NEAR(s.ibrc.gain(), ibrc_derived_gain(uint64_t(s.T_ns)), 1e-9 * s.ibrc.gain());
}

// A queue whose slope jumps every loop time (others arriving and leaving, 5 %
// of the link either way) raises the crossover; the update then
// scales a, p and the additive step together by churn_scale(): at an
// unchanged delay r <- r (1 - m a e) + m A, computed by hand.
TEST(IbrcChurnLaw, AQueueMovedByOthersRaisesTheCrossover)
{
    Settled s;
    for (int k = 0; k < 70; k++) // past the young flow's kIbrcBurstLoops
        s.loop(s.eq(s.ibrc.rate()));
    // The queue's slope between +0.05 and -0.05 of the link, in turn.
    for (int k = 0; k < 200; k++) {
        s.loop(k % 2 ? 600 + 0.05 * s.T_ns : 600);
    }
    double m = s.ibrc.churn_scale();
    EXPECT_GT(s.ibrc.churn_rho(), 0.5);
    EXPECT_GT(m, 1.5);
    EXPECT_NEAR(s.ibrc.gain(), m * ibrc_derived_gain(uint64_t(s.T_ns)), 1e-9 * s.ibrc.gain());
    // Two loop times at one delay: the second has no change of the error.
    s.loop(800);
    double r1 = s.ibrc.rate();
    s.loop(800);
    m         = s.ibrc.churn_scale();
    double e  = (800 - s.params.target_ns) / s.T_ns;
    double r2 = r1 * (1 - m * s.design.a * e) + m * s.add();
    EXPECT_NEAR(s.ibrc.rate(), r2, 1e-9 * r2);
    // A user gain is the user's: no churn scale.
    IbrcParams p = Settled::make();
    p.gain       = 5000;
    Ibrc fixed(p);
    EXPECT_EQ(fixed.churn_scale(), 1);
}

// Above the pivot (a few flows' shares) a fabric's own target falls below the
// target: d*_i = d* (1 + f ln(pivot C / r) / ln(C / floor)), never below
// kIbrcOwnTargetMin d*. With the pivot moved below this flow's rate, one
// update computed by hand: the error is measured from the own target at the
// rate the update starts from.
TEST(IbrcLaw, AboveThePivotTheOwnTargetFalls)
{
    IbrcParams p = Settled::make();
    p.pivot      = 1.0 / 500; // the flow's C/250 is twice that
    Settled s(p);
    double  r0  = s.ibrc.rate();
    auto    own = [&](double r) {
        double f = 1 + kIbrcFairness * std::log(p.pivot * kC / r) / std::log(2048.0);
        return p.target_ns * std::max(f, kIbrcOwnTargetMin);
    };
    EXPECT_LT(own(r0), 0.8 * p.target_ns);
    EXPECT_GT(own(r0), 0.7 * p.target_ns);
    double d = 400;
    s.loop(d); // the bumpless first update
    double a = s.design.a, pp = s.design.p;
    double e = (d - own(r0)) / s.T_ns, e0 = -own(r0) / s.T_ns;
    double r1 = r0 * (1 - a * e - pp * (e - e0)) + s.add();
    EXPECT_NEAR(s.ibrc.rate(), r1, 1e-9 * r1);
    // The next at the same delay: the own target moved with the rate, and
    // the p term acts on that change of the error.
    s.loop(d);
    double e1 = (d - own(r1)) / s.T_ns;
    double r2 = r1 * (1 - a * e1 - pp * (e1 - e)) + s.add();
    EXPECT_NEAR(s.ibrc.rate(), r2, 1e-9 * r2);
    // Below the pivot (the fabric's default, 1/8 of the ceiling) the own
    // target is the target: the same delays give the additive step's law.
    Settled b;
    b.loop(d);
    double eb = (d - p.target_ns) / b.T_ns, eb0 = -double(p.target_ns) / b.T_ns;
    EXPECT_NEAR(b.ibrc.rate(), r0 * (1 - a * eb - pp * (eb - eb0)) + b.add(), 1e-9 * r0);
}

// Reading the share, by hand. A settled flow whose queue tells a share four
// times its rate follows the law for kIbrcReadLoops loop times of wait and
// kIbrcReadLoops of reading; the reading (the mean of those loop times'
// delays, no spread: no standard error) finds the share more than
// kIbrcReadBand above the rate, and over the next kIbrcReadLoops loop times
// the rate gains kIbrcReadMax - 1 of what it had, in equal steps, on top of
// the law's own.
TEST(IbrcLaw, AFlowFarBelowTheShareTheQueueTellsRampsTowardIt)
{
    Settled s;
    s.loop(s.eq(s.ibrc.rate())); // the bumpless first update
    double r     = s.ibrc.rate();
    double share = 4 * r;
    double d     = std::floor(s.eq(share)); // the samples are whole ns
    s.loop(d);                              // the error moves: the p term acts once
    r = s.ibrc.rate();
    for (uint32_t k = 2; k < 2 * kIbrcReadLoops; k++) {
        s.loop(d);
        r = s.next(r, d);
        ASSERT_NEAR(s.ibrc.rate(), r, 1e-9 * r) << "loop time " << k;
    }
    ASSERT_GT(std::log(share / r), kIbrcReadBand + 0.5);
    double ramp = r * (kIbrcReadMax - 1) / kIbrcReadLoops;
    for (uint32_t k = 0; k < kIbrcReadLoops; k++) {
        s.loop(d);
        r = s.next(r, d) + ramp;
        ASSERT_NEAR(s.ibrc.rate(), r, 1e-9 * r) << "ramp loop time " << k;
    }
    // Then the law alone again while the next reading waits.
    s.loop(d);
    r = s.next(r, d);
    EXPECT_NEAR(s.ibrc.rate(), r, 1e-9 * r);
}

// A reading moves only up, and only on what its samples resolve: a queue that
// tells a share below the rate leaves the law alone, and so does one whose
// loop times swing by 400 ns about the delay that tells four times the rate
// (the standard error of the reading, over the map's slope there, puts the
// share within the noise).
TEST(IbrcLaw, AReadingMovesNeitherDownNorOnNoise)
{
    {
        Settled s;
        s.loop(s.eq(s.ibrc.rate()));
        double r = s.ibrc.rate();
        double d = std::floor(s.eq(r / 1.2));
        s.loop(d);
        r = s.ibrc.rate();
        for (uint32_t k = 2; k < 5 * kIbrcReadLoops; k++) {
            s.loop(d);
            r = s.next(r, d);
            ASSERT_NEAR(s.ibrc.rate(), r, 1e-9 * r) << "loop time " << k;
        }
    }
    {
        Settled s;
        double  d1 = std::floor(s.eq(s.ibrc.rate()));
        s.loop(d1);
        double r = s.ibrc.rate(), a = s.design.a, p = s.design.p;
        double d0    = std::floor(s.eq(4 * r));
        double e_prv = (d1 - s.params.target_ns) / s.T_ns;
        // Through the first reading and the loop times a move would ramp
        // over (beyond them the swing reads as churn and raises the gain).
        for (uint32_t k = 0; k < 3 * kIbrcReadLoops; k++) {
            double d = d0 + (k % 2 ? 400 : -400);
            s.loop(d);
            double e = (d - s.params.target_ns) / s.T_ns;
            r        = r * (1 - a * e - p * (e - e_prv)) + s.add();
            e_prv    = e;
            ASSERT_NEAR(s.ibrc.rate(), r, 1e-9 * r) << "loop time " << k;
        }
    }
}

// Four flows on paths whose delays differ by 10 ns (two of them share a port
// the others do not, as two flows hashed to one spine do): the equilibria
// move apart by that difference over the map's slope at a quarter of the
// line rate, 20 ns per e-fold for the additive step alone (rates 1.65 : 1),
// 80 ns with the own target's fall above the pivot.
TEST(IbrcLaw, FourFlowsOnPathsThatDifferBy10nsShareEvenly)
{
    Fluid f;
    for (int i = 0; i < 4; i++) {
        Config c      = ibrc();
        c.base_rtt_ns = kBase;
        f.add(c);
    }
    f.path_ns = {10, 10, 0, 0};
    f.run(40000000);
    std::vector<double> r;
    for (auto &p : f.flows)
        r.push_back(p->rate());
    EXPECT_LT(r[2] / r[0], 1.25) << r[2] / 1e9 << " vs " << r[0] / 1e9 << " GB/s";
    EXPECT_GT(r[2] / r[0], 1.0);
    EXPECT_GT(jain(r), 0.99);
    EXPECT_NEAR(f.total_rate() / kC, 1.0, 0.02);
}

// A newcomer among three settled flows: their queue (120 ns, the own
// target's fall) is too short for the start to take as standing, so the
// newcomer's start ends far below its share on the queue its own doubling
// builds; the additive step alone would take it to its share over tens of
// milliseconds (a x the map's slope / T, 1e-3 per loop time). Reading the
// share the queue tells brings it within 10 % of C/4 within 800 loop times.
TEST(IbrcStart, ANewcomerAmongThreeSettledFlowsReadsItsShare)
{
    Fluid f;
    for (int i = 0; i < 3; i++) {
        Config c      = ibrc();
        c.base_rtt_ns = kBase;
        f.add(c);
    }
    f.run(5000000);
    Config c      = ibrc();
    c.base_rtt_ns = kBase;
    Pacer &late   = f.add(c);
    f.run(500000);
    EXPECT_LT(late.rate(), 0.5 * kC / 4) << "the start ends far below the share";
    f.run(3600000); // 4.1 ms after it joined: 800 loop times
    std::vector<double> r;
    for (auto &p : f.flows)
        r.push_back(p->rate());
    EXPECT_NEAR(late.rate() / (kC / 4), 1.0, 0.1) << late.rate() / 1e9 << " GB/s";
    EXPECT_GT(jain(r), 0.99);
    EXPECT_NEAR(f.total_rate() / kC, 1.0, 0.05);
}
