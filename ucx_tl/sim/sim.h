// doorbell-sim: a packet-level discrete-event model of a two-hop leaf-spine
// fabric whose senders are paced by doorbell_pacing, the same controller code
// the transport runs.
//
// Model: hosts -> leaf -> spine -> leaf -> host; every egress port is a FIFO
// of `buffer_bytes` with ECN marking at enqueue (a step at `ecn_bytes`,
// DCTCP-style, or RED between kmin and kmax as DCQCN deploys it),
// serialization at the link rate and a fixed per-hop delay. Switch ports
// stamp HPCC's INT record (queue, bytes sent, time, rate) on packets of
// flows that need it. ECMP picks a spine per flow (hash with the seed). Every
// data packet is a full segment and is ACKed by the receiver; the ACK carries
// the send timestamp (RTT), the CE mark and the INT records back. ACKs are
// small and travel the reverse path with its propagation delay but do not
// queue (an approximation stated in docs/pacing.md). A host may have many
// flows (one pacer each); its NIC serves those that may send in turn. Loss:
// a path is FIFO, so an ACK for a later transmission proves the earlier
// unacked ones were dropped; a retransmit timer covers the tail. Optional
// credit-based (lossless) flow control: a port transmits only when the next
// queue has room, else it stalls (the lossless mode PFC provides).
//
// Units: ns, bytes, Gb/s for the link option, bytes/s inside.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pacer.h"
#include "sweep.h"

namespace doorbell::sim {

enum class Scenario {
    kIncast,
    kPermutation,
    kAllreduce,
    kMixed
};
const char *scenario_name(Scenario s);
bool        parse_scenario(const std::string &name, Scenario *s_p);

struct SimConfig {
    Scenario scenario       = Scenario::kIncast;
    uint32_t leaves         = 2;
    uint32_t spines         = 4;
    uint32_t hosts_per_leaf = 4;
    double   link_gbps      = 400;
    uint64_t hop_delay_ns   = 584; ///< per hop, one way (base RTT ~5.0 us with 4 KiB)
    uint32_t mtu_bytes      = 4096;
    uint32_t buffer_bytes   = 512 << 10; ///< per egress port
    uint32_t ecn_bytes      = 0;         ///< step marking threshold; 0 = 75 % of the buffer
    /// RED marking instead of the step when ecn_kmax_bytes > 0: probability
    /// 0 below kmin, rising linearly to ecn_pmax at kmax, 1 above
    uint32_t ecn_kmin_bytes  = 0;
    uint32_t ecn_kmax_bytes  = 0;
    double   ecn_pmax        = 0;
    bool     credit          = false; ///< lossless credit-based flow control
    uint64_t duration_ns     = 10000000;
    uint64_t warmup_ns       = 0;    ///< statistics start; 0 = 10 % of duration
    uint64_t sample_ns       = 1000; ///< time-series step
    uint64_t rto_ns          = 0;    ///< 0 = 20 base RTTs (1000 with credit)
    uint32_t window_bytes    = 0;    ///< in-flight cap per flow; 0 = 2 BDP
    uint64_t seed            = 1;
    uint64_t allreduce_bytes = 4 << 20;
    uint64_t on_ns = 0, off_ns = 0; ///< incast/permutation: mean ON/OFF periods
                                    ///< (exponential); 0 = always on
    /// incast: the last sender joins late (convergence of a new flow);
    /// join_ns 0 = at half the duration
    bool     join    = true;
    uint64_t join_ns = 0;
    /// mixed: Poisson flow arrivals per host at `load` of its link, sizes
    /// from the web-search distribution, random destinations; arrivals stop
    /// at 80 % of the duration
    double         load        = 0.5;
    uint64_t       short_bytes = 100000; ///< mixed: flows up to this size are short
    pacing::Config cc;                   ///< line rate, MTU are filled from the fabric
};

// Preset fabrics (non-blocking): 8 hosts = 2 leaves x 4 hosts, 4 spines;
// 128 = 8 leaves x 16 hosts, 16 spines; the seed's two settings: 10 = 2
// leaves x 5 hosts, 5 spines, base RTT 3.2 us; 100 = 10 leaves x 10 hosts,
// 10 spines, base RTT 6.8 us.
bool apply_host_preset(uint32_t hosts, SimConfig *c_p);
// The unloaded RTT of a cross-spine path (ns): 4 data hops, 4 ACK hops.
uint64_t base_rtt_ns(const SimConfig &c);
// The per-hop delay that gives a cross-spine base RTT of `rtt_ns`.
uint64_t hop_delay_for_rtt(const SimConfig &c, uint64_t rtt_ns);

struct Sample {
    uint64_t t_ns;
    double   util;          ///< goodput into the receivers / their capacity, this step
    uint32_t queue_bytes;   ///< monitored (bottleneck) port
    double   rate0_Bps;     ///< sending rate flow 0 is allowed (pacer, window / RTT)
    double   mean_rate_Bps; ///< mean of that over the active flows
    double   joiner_Bps;    ///< incast: the late joiner's allowed rate (0 before it joins)
};

// Flow completion time slowdown (FCT / FCT alone on the fabric) quantiles.
struct Slowdown {
    uint32_t flows = 0; ///< completed flows in the class
    double   p50 = 0, p99 = 0, mean = 0;
};

struct SimResult {
    std::string policy;
    bool        credit       = false;
    double      gain         = 0; ///< IBRC gain in use by flow 0, 1/s
    double      derived_gain = 0; ///< IBRC gain derived for this fabric, 1/s
    uint64_t    base_rtt_ns  = 0;
    uint32_t    flows        = 0;
    double      utilization  = 0; ///< window goodput / receiver capacity
    double      rtt_mean_us = 0, rtt_std_us = 0, rtt_p99_us = 0;
    double      qdelay_p99_us  = 0;                    ///< RTT minus the path's base RTT
    double      queue_mean_kib = 0, queue_max_kib = 0; ///< monitored port, window
    uint64_t    drops     = 0;
    uint64_t    sent_pkts = 0, retx_pkts = 0;
    double      retx_pct      = 0; ///< retransmitted / sent, statistics window
    double      retx_all_pct  = 0; ///< the same over the whole run (incl. start)
    uint64_t    ce_pkts       = 0;
    uint64_t    timeouts      = 0; ///< segments declared lost by the retransmit timer
    uint64_t    credit_stalls = 0;
    uint32_t    dips          = 0; ///< throughput dips in the window
    double      dip_period_us = 0; ///< mean time between dip starts
    double      dip_depth     = 0; ///< mean (1 - lowest utilization) of a dip
    double      util_cv       = 0; ///< stddev / mean of smoothed utilization
    double      jain          = 0; ///< fairness of per-flow goodput, last fifth of the run
    double      jain_window   = 0; ///< the same over the statistics window
                                   ///< (flows active through all of it)
    double join_us        = 0;     ///< incast: when the last sender joined; 0 = none
    double fair_share_Bps = 0;     ///< incast: its fair share, line rate / senders
    double converge_us    = 0;     ///< its time to stay within 10 % of its fair
                                   ///< share; -1 = never did
    Slowdown            fct_all, fct_short, fct_long; ///< mixed: short <= short_bytes < long
    uint32_t            fct_unfinished = 0;           ///< mixed: flows still running at the end
    double              allreduce_us   = 0; ///< allreduce completion; 0 if unfinished/not run
    uint64_t            events         = 0;
    double              wall_s         = 0;
    double              events_per_s   = 0;
    std::vector<Sample> series;
    std::vector<double> tail_Bps;  ///< per-flow goodput over the last fifth (Jain's input)
    std::vector<double> slowdowns; ///< mixed: every completed flow's, with its size
    std::vector<double> sizes;
    SeedSpread          spread; ///< sweep-gain: the row's spread over its seeds
};

// Runs one scenario; returns false with a message for a bad config.
bool run_sim(const SimConfig &config, SimResult *result_p, std::string *error_p);

// Reporting (report.cc) and plotting (plot.cc).
std::string format_table(const std::vector<SimResult> &rows);
std::string format_fct_table(const std::vector<SimResult> &rows);
std::string format_json(const std::vector<SimResult> &rows);
std::string format_csv(const SimResult &r);
// One PNG: the time series of every run (rate, goodput, queue; the joiner's
// rate for an incast) and, for the mixed workload, slowdown against size.
bool write_plot(const std::vector<SimResult> &rows, const std::string &png, std::string *error_p);

} // namespace doorbell::sim
