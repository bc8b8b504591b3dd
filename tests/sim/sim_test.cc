// doorbell-sim on small scenarios (8 hosts, a few ms of virtual time). The
// assertions are on the model's deterministic output for a fixed seed, not on
// wall-clock time.
#include <gtest/gtest.h>

#include <cmath>

#include "sim.h"
#include "workload.h"

using namespace doorbell;
using namespace doorbell::sim;

namespace {

SimConfig incast8(pacing::Policy p = pacing::Policy::kIbrc)
{
    SimConfig c;
    apply_host_preset(8, &c);
    c.scenario    = Scenario::kIncast;
    c.duration_ns = 3000000;
    c.join        = false; // every sender from the start; the late joiner has its own tests
    c.cc.policy   = p;
    return c;
}

SimResult run(const SimConfig &c)
{
    SimResult   r;
    std::string err;
    EXPECT_TRUE(run_sim(c, &r, &err)) << err;
    return r;
}

SimResult run_scaled(double scale, uint64_t rtt_ns = 5000, bool on_off = false)
{
    SimConfig c = incast8();
    if (on_off)
        c.on_ns = 200000, c.off_ns = 50000;
    c.hop_delay_ns    = hop_delay_for_rtt(c, rtt_ns);
    pacing::Config pc = c.cc, res;
    pc.line_rate_Bps  = c.link_gbps * 1e9 / 8;
    std::string err;
    EXPECT_TRUE(pacing::resolve_config(pc, &res, &err));
    c.cc.gain = scale * pacing::ibrc_derived_gain(base_rtt_ns(c) + res.target_delay_ns);
    return run(c);
}

} // namespace

TEST(SimFabric, BaseRttNearFiveMicroseconds)
{
    SimConfig c = incast8();
    EXPECT_NEAR(double(base_rtt_ns(c)), 5000, 50);
    for (uint64_t rtt : {3200u, 5000u, 6800u}) {
        c.hop_delay_ns = hop_delay_for_rtt(c, rtt);
        EXPECT_NEAR(double(base_rtt_ns(c)), double(rtt), 10);
    }
}

TEST(SimFabric, RejectsBadConfigs)
{
    SimConfig   c = incast8();
    SimResult   r;
    std::string err;
    c.leaves = 1;
    EXPECT_FALSE(run_sim(c, &r, &err));
    EXPECT_NE(err.find("leaves"), std::string::npos);
    c           = incast8();
    c.ecn_bytes = c.buffer_bytes + 1;
    EXPECT_FALSE(run_sim(c, &r, &err));
    EXPECT_NE(err.find("ECN"), std::string::npos);
    c                 = incast8();
    c.cc.min_rate_Bps = 1e12;
    EXPECT_FALSE(run_sim(c, &r, &err));
    EXPECT_NE(err.find("pacer"), std::string::npos);
}

TEST(SimFabric, DeterministicForASeed)
{
    SimResult a = run(incast8()), b = run(incast8());
    EXPECT_EQ(a.events, b.events);
    EXPECT_EQ(a.drops, b.drops);
    EXPECT_EQ(a.utilization, b.utilization);
    EXPECT_EQ(a.rtt_std_us, b.rtt_std_us);
}

TEST(SimIncast, DerivedGainHoldsTheLinkWithSteadyRtt)
{
    SimResult r = run(incast8());
    EXPECT_EQ(r.flows, 4u);
    EXPECT_GE(r.utilization, 0.94);
    EXPECT_LE(r.rtt_std_us, 0.8);
    EXPECT_EQ(r.dips, 0u);
    // Four flows on paths that differ by a few ns of queue at shared spine
    // ports: the own target's fall above the pivot holds their equilibria
    // within about 10 % of each other (the additive step alone: 0.94-0.96).
    EXPECT_GE(r.jain, 0.95);
    EXPECT_NEAR(r.gain, r.derived_gain, r.derived_gain * 0.05);
}

// The 8-host incast as doorbell-sim runs it (10 ms, four senders, the last
// joining at 5 ms), over the seeds docs/pacing.md quotes: after convergence
// (the last fifth) Jain's index is at least 0.95 with and without the
// newcomer, and the newcomer, whose start ends far below its share (its
// doubling builds the queue it stops on), reads its way to most of it.
TEST(SimIncast, FourSendersAndALateJoinerConvergeToFairShares)
{
    for (uint64_t seed = 1; seed <= 4; seed++) {
        SimConfig c   = incast8();
        c.duration_ns = 10000000;
        c.seed        = seed;
        c.join        = true;
        SimResult r   = run(c);
        ASSERT_EQ(r.tail_Bps.size(), 4u);
        EXPECT_GE(r.jain, 0.95) << "seed " << seed;
        EXPECT_GT(r.tail_Bps.back() / r.fair_share_Bps, 0.6) << "seed " << seed;
        EXPECT_GE(r.utilization, 0.99) << "seed " << seed;
        c.join = false;
        r      = run(c);
        EXPECT_GE(r.jain, 0.95) << "seed " << seed << ", no newcomer";
    }
}

TEST(SimIncast, IbrcRetransmitsLessAndQueuesLessThanDcqcnAndTimely)
{
    SimResult ibrc   = run(incast8(pacing::Policy::kIbrc));
    SimResult dcqcn  = run(incast8(pacing::Policy::kDcqcn));
    SimResult timely = run(incast8(pacing::Policy::kTimely));
    EXPECT_LT(ibrc.retx_all_pct, dcqcn.retx_all_pct);
    EXPECT_LT(ibrc.retx_all_pct, timely.retx_all_pct);
    EXPECT_LT(ibrc.qdelay_p99_us, dcqcn.qdelay_p99_us);
    EXPECT_LT(ibrc.qdelay_p99_us, timely.qdelay_p99_us);
    EXPECT_GE(ibrc.utilization, std::max(dcqcn.utilization, timely.utilization) - 0.01);
}

TEST(SimIncast, GainTenTimesTooLowUnderUtilizes)
{
    // Static incast: the start ends at half the rate that built its first
    // queue, and from there a low gain climbs back too slowly.
    SimResult low = run_scaled(0.1), good = run_scaled(1);
    EXPECT_GE(good.utilization, 0.99);
    EXPECT_LT(low.utilization, good.utilization - 0.1);
    // Senders that come and go: it cannot refill the link in time.
    SimResult low_dyn = run_scaled(0.1, 5000, true), good_dyn = run_scaled(1, 5000, true);
    EXPECT_LT(low_dyn.utilization, 0.6);
    EXPECT_GT(good_dyn.utilization, low_dyn.utilization + 0.25);
}

TEST(SimIncast, GainTenTimesTooHighOscillates)
{
    SimResult high = run_scaled(10), good = run_scaled(1);
    EXPECT_GE(high.dips, 10u);
    EXPECT_EQ(good.dips, 0u);
    EXPECT_GT(high.util_cv, 5 * good.util_cv);
    EXPECT_LT(high.utilization, good.utilization - 0.1);
    EXPECT_GT(high.dip_period_us, 0);
}

TEST(SimIncast, DerivedGainWinsAtOtherRtts)
{
    for (uint64_t rtt : {3200u, 6800u}) {
        SimResult good = run_scaled(1, rtt), high = run_scaled(10, rtt);
        EXPECT_GE(good.utilization, 0.94) << rtt;
        EXPECT_LE(good.rtt_std_us, 0.8) << rtt;
        EXPECT_GT(high.dips, good.dips) << rtt;
    }
}

TEST(SimFabric, CreditFlowControlIsLossless)
{
    SimConfig c   = incast8(pacing::Policy::kNone);
    c.credit      = true;
    c.duration_ns = 500000;
    SimResult r   = run(c);
    EXPECT_EQ(r.drops, 0u);
    EXPECT_GT(r.credit_stalls, 0u);
    EXPECT_GT(r.utilization, 0.95);
    c.credit        = false;
    SimResult lossy = run(c);
    EXPECT_GT(lossy.drops, 0u);
}

TEST(SimFabric, IbrcHoldsTheLinkUnderCreditFlowControl)
{
    SimConfig c = incast8();
    c.credit    = true;
    SimResult r = run(c);
    EXPECT_EQ(r.drops, 0u);
    EXPECT_EQ(r.retx_pkts, 0u);
    EXPECT_GE(r.utilization, 0.94);
    EXPECT_LE(r.rtt_std_us, 0.8);
}

TEST(SimScenarios, AllreduceCompletesAndPermutationRuns)
{
    SimConfig c       = incast8();
    c.scenario        = Scenario::kAllreduce;
    c.allreduce_bytes = 1 << 20;
    SimResult ar      = run(c);
    EXPECT_GT(ar.allreduce_us, 0);
    EXPECT_LT(ar.allreduce_us, 3000);
    // 2 (n-1)/n of the data crosses each link at most at line rate.
    double floor_us = 2.0 * 7 / 8 * (1 << 20) / 8 / (400e9 / 8) * 1e6;
    EXPECT_GT(ar.allreduce_us, floor_us);

    c.scenario     = Scenario::kPermutation;
    c.duration_ns  = 1000000;
    SimResult perm = run(c);
    EXPECT_EQ(perm.flows, 8u);
    EXPECT_GT(perm.utilization, 0.5);
}

TEST(SimScenarios, Preset128Hosts)
{
    SimConfig c;
    ASSERT_TRUE(apply_host_preset(128, &c));
    c.duration_ns = 1000000;
    c.warmup_ns   = 500000; // past the start-up transient of 112 senders
    SimResult r   = run(c);
    EXPECT_EQ(r.flows, 112u); // every host off the receiver's leaf
    EXPECT_GT(r.utilization, 0.9);
    EXPECT_LT(r.qdelay_p99_us, 5);
}

// The 128-host incast (112 senders that start in the same instant, the last
// one late): the start overruns nothing, and after it the flows share the
// bottleneck evenly with a standing queue of about 0.7 us (the target plus
// 112 flows' additive shares); the newcomer reads its share from that queue
// and holds it from its first averaging window (20 base RTTs) on.
TEST(SimIncast, SynchronizedStartOf112SendersDropsNothingAndSharesEvenly)
{
    SimConfig c;
    ASSERT_TRUE(apply_host_preset(128, &c));
    c.duration_ns = 4000000;
    c.join_ns     = 1000000;
    SimResult r   = run(c);
    EXPECT_EQ(r.flows, 112u);
    EXPECT_EQ(r.drops, 0u);
    EXPECT_EQ(r.retx_all_pct, 0);
    EXPECT_GE(r.jain, 0.99);
    EXPECT_LT(r.qdelay_p99_us, 1.5);
    EXPECT_GE(r.utilization, 0.99);
    EXPECT_DOUBLE_EQ(r.join_us, 1000);
    EXPECT_GE(r.converge_us, 0) << "the newcomer within 10 % of its share";
    EXPECT_LE(r.converge_us, 500);
    ASSERT_EQ(r.tail_Bps.size(), 112u);
    EXPECT_NEAR(r.tail_Bps.back() / r.fair_share_Bps, 1.0, 0.1) << "the late joiner";
}

TEST(SimFabric, SwitchesStampIntForHpcc)
{
    // HPCC steers the bottleneck to eta = 95 % of its rate from the INT
    // records: high utilization, almost no queue, nothing lost.
    SimConfig c = incast8(pacing::Policy::kHpcc);
    c.credit    = true;
    SimResult r = run(c);
    EXPECT_EQ(r.drops, 0u);
    EXPECT_GT(r.utilization, 0.9);
    EXPECT_LT(r.utilization, 0.99);
    EXPECT_LT(r.qdelay_p99_us, 2);
}

TEST(SimFabric, WindowPoliciesRunLossyAndLossless)
{
    for (bool credit : {false, true}) {
        SimConfig c = incast8(pacing::Policy::kSwift);
        c.credit    = credit;
        SimResult r = run(c);
        EXPECT_GT(r.utilization, 0.9) << credit;
        if (credit) {
            EXPECT_EQ(r.drops, 0u);
        }
    }
}

TEST(SimFabric, RedMarksInProportionToTheQueue)
{
    // Unpaced senders on a lossless fabric hold the ports on their path near
    // full (about 480 KiB): the step at 384 KiB marks nearly every packet;
    // RED rising from 100 KiB to 5 % at 1000 KiB marks about 2 % per port,
    // three switch ports on the path.
    SimConfig c   = incast8(pacing::Policy::kNone);
    c.credit      = true;
    c.duration_ns = 500000;
    SimResult s   = run(c);
    EXPECT_GT(double(s.ce_pkts) / s.sent_pkts, 0.8);
    c.ecn_kmin_bytes = 100 << 10;
    c.ecn_kmax_bytes = 1000 << 10;
    c.ecn_pmax       = 0.05;
    SimResult red    = run(c);
    double    frac   = double(red.ce_pkts) / red.sent_pkts;
    EXPECT_GT(frac, 0.02);
    EXPECT_LT(frac, 0.1);
    c.ecn_kmax_bytes = c.ecn_kmin_bytes; // kmin must be below kmax
    std::string err;
    EXPECT_FALSE(run_sim(c, &s, &err));
    EXPECT_NE(err.find("RED"), std::string::npos);
}

TEST(SimMixed, WebSearchFlowsCompleteAndReportSlowdowns)
{
    const FlowSizeCdf &cdf = web_search_cdf();
    EXPECT_NEAR(cdf.mean_bytes(), 1.71e6, 0.02e6);
    EXPECT_NEAR(cdf.quantile(0.53), 80000, 1);
    EXPECT_NEAR(cdf.quantile(0.15), 10000, 1);
    SimConfig c   = incast8();
    c.scenario    = Scenario::kMixed;
    c.duration_ns = 1000000;
    SimResult r   = run(c);
    EXPECT_GT(r.fct_all.flows, 50u);
    EXPECT_EQ(r.fct_all.flows, r.fct_short.flows + r.fct_long.flows);
    EXPECT_GE(r.fct_all.p50, 1.0);
    EXPECT_GE(r.fct_all.p99, r.fct_all.p50);
    EXPECT_EQ(r.slowdowns.size(), r.fct_all.flows);
    for (double x : r.slowdowns)
        ASSERT_GE(x, 1.0 - 1e-9) << "no flow beats its time alone on the fabric";
    EXPECT_GT(r.flows, r.fct_all.flows) << "flows that arrived late are still open";
    // Short flows (one BDP or less) go unscheduled in IBRC's start: near
    // their time alone, not held to its first segment and ramp.
    EXPECT_LT(r.fct_short.p50, 1.3);
}

// The gain sweep's statistics, on hand-computed runs: power, the spread over
// seeds, and the seed-by-seed difference that decides a lead or a tie.
TEST(SimSweep, PowerAndPairedDifferenceOverSeeds)
{
    auto run_of = [](double util, double qd99_us) {
        SimResult r;
        r.utilization   = util;
        r.base_rtt_ns   = 3000;
        r.qdelay_p99_us = qd99_us;
        return r;
    };
    std::vector<SimResult> runs = {run_of(0.9, 1.5), run_of(0.99, 0.6)};
    EXPECT_DOUBLE_EQ(power(runs[0]), 0.2);   // 0.9 / (3 + 1.5) us
    EXPECT_DOUBLE_EQ(power(runs[1]), 0.275); // 0.99 / (3 + 0.6) us

    // Against a derived row of 0.25 in both seeds: -20 % and +10 %, a mean
    // of -5 % whose standard error (21.2 / sqrt 2) is 15 %: a tie.
    SeedSpread s = seed_spread(runs, {0.25, 0.25});
    EXPECT_EQ(s.seeds, 2u);
    EXPECT_DOUBLE_EQ(s.power, 0.2375);
    EXPECT_NEAR(s.power_sd_pct, 100 * 0.075 / std::sqrt(2.0) / 0.2375, 1e-9);
    EXPECT_DOUBLE_EQ(s.util_min, 0.9);
    EXPECT_DOUBLE_EQ(s.util_max, 0.99);
    EXPECT_DOUBLE_EQ(s.qd99_min_us, 0.6);
    EXPECT_DOUBLE_EQ(s.qd99_max_us, 1.5);
    EXPECT_NEAR(s.vs_derived.mean_pct, -5, 1e-9);
    EXPECT_NEAR(s.vs_derived.se_pct, 15, 1e-9);
    EXPECT_TRUE(s.vs_derived.tie());

    // +10, +10, +5 %: mean 8.33 %, sd 2.89, standard error 1.67: a lead of
    // five standard errors, no tie.
    PairedDiff lead = paired_diff({11, 9.9, 10.5}, {10, 9, 10});
    EXPECT_NEAR(lead.mean_pct, 25.0 / 3, 1e-9);
    EXPECT_NEAR(lead.se_pct, 5.0 / 3, 1e-9);
    EXPECT_FALSE(lead.tie());
    // The same mean of +1 % is a tie when the seeds disagree (+3, -1) and a
    // lead when they agree (+1, +1); one seed has no spread to judge by.
    EXPECT_TRUE(paired_diff({10.3, 9.9}, {10, 10}).tie());
    EXPECT_FALSE(paired_diff({10.1, 10.1}, {10, 10}).tie());
    EXPECT_FALSE(paired_diff({10.1}, {10}).tie());
    EXPECT_TRUE(paired_diff({10}, {10}).tie());
}
