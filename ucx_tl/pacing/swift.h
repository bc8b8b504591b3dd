// Swift: Kumar et al., "Swift: Delay is Simple and Effective for Congestion
// Control in the Datacenter", SIGCOMM 2020 (Sec. 3, Algorithm 1).
//
// Two congestion windows (in packets), one against the fabric delay (RTT
// less the receiver's hold) and one against the endpoint delay; the flow
// sends min(fcwnd, ecwnd). Per ACK with an RTT sample:
//   delay < target:  cwnd += ai / cwnd * acked   (cwnd >= 1; else ai * acked)
//   otherwise, at most once per RTT:
//                    cwnd *= max(1 - beta (delay - target) / delay, 1 - max_mdf)
// a loss cuts cwnd *= 1 - max_mdf once per RTT; cwnd stays in [min, max];
// below one packet the flow paces one packet per rtt / cwnd.
// Fabric target = base target + hops x h + flow scaling, where flow scaling
// = clamp(alpha / sqrt(fcwnd) + beta', 0, fs_range) grows as the window
// shrinks (more flows share the bottleneck), alpha = fs_range / (1/sqrt(
// fs_min_cwnd) - 1/sqrt(fs_max_cwnd)), beta' = -alpha / sqrt(fs_max_cwnd).
// Constants: the paper gives Algorithm 1 and the target's form, not a table
// of values that could be read here; the values below are the ones public
// reimplementations carry, and those say themselves that they are not the
// paper's. htsim's Swift (htsim/sim/swift.cpp, SwiftSrc's constructor, as in
// github.com/the-sure/htsim and Dipsingh/uet-htsim2) sets ai = 1 packet per
// RTT, beta = 0.8 and max_mdf = 0.5, each marked "a guess", fs_min_cwnd = 0.1
// and fs_max_cwnd = 100 packets, and for the delays a base target of 20 us
// ("to be confirmed by experiment"), per-hop h = base / 6.55 ("a guess") and
// fs_range = 5 x base. ai, beta, max_mdf, fs_min_cwnd and fs_max_cwnd are
// used here as they are. The delays are **assumed**, scaled to this fabric:
// htsim's 20 us base and 100 us fs_range exceed this fabric's whole buffer
// (10 us at 400 Gb/s), where Swift would never cut. Here base target + hops x
// h is the path's base RTT plus the queue allowance `target_ns`
// (kBaselineAllowanceSegments segment times, 655 ns at 400 Gb/s), so the hop
// scaling follows the measured (or configured) base RTT of the path, and
// fs_range = kSwiftFsRangeTargets x target_ns. A flow starts at init rate x
// base RTT (the ceiling: a line-rate start, as the other RDMA controllers
// here).
//
// Units: ns, bytes, bytes/s; windows in packets of mtu_bytes.
#pragma once

#include <algorithm>
#include <cstdint>

#include "feedback.h"
#include "windowed_min.h"

namespace doorbell::pacing {

static constexpr double   kSwiftAi             = 1;   ///< additive increase, packets per RTT
static constexpr double   kSwiftBeta           = 0.8; ///< multiplicative decrease factor
static constexpr double   kSwiftMaxMdf         = 0.5; ///< largest cut per RTT
static constexpr double   kSwiftFsMinCwnd      = 0.1; ///< flow scaling full below this, packets
static constexpr double   kSwiftFsMaxCwnd      = 100; ///< flow scaling zero above this, packets
static constexpr double   kSwiftFsRangeTargets = 4;   ///< fs_range, in queue allowances
static constexpr double   kSwiftMaxCwndBdp     = 2;   ///< window ceiling, in BDPs at the ceiling
static constexpr uint64_t kSwiftMinRttWindowNs = 1000000000; ///< base RTT window, 1 s

struct SwiftParams {
    double   min_rate_Bps;
    double   max_rate_Bps;
    double   init_rate_Bps;
    uint32_t mtu_bytes;
    uint64_t base_rtt_ns;        ///< the path's base RTT; 0 = the windowed minimum
    uint64_t target_ns;          ///< queue allowance above the base RTT
    uint64_t endpoint_target_ns; ///< endpoint-delay target
};

class Swift {
public:
    explicit Swift(const SwiftParams &params);

    void on_feedback(const Feedback &f);
    void on_loss(uint64_t now_ns);
    void on_send(uint64_t, uint64_t) {}
    /// The pacing rate: cwnd / rtt below one packet, else the ceiling (the
    /// window clocks the flow).
    double rate() const;
    /// min(fcwnd, ecwnd) in bytes; 0 (no window) before the first RTT.
    double window_bytes() const;
    double cwnd() const { return started_ ? std::min(fcwnd_, ecwnd_) : 0; }
    /// The fabric target (ns) for the current window.
    double fabric_target_ns() const;

private:
    double base_ns() const;
    double max_cwnd() const;
    void   adjust(double *cwnd, double delay, double target, double acked_pkts, bool cut);
    void   start(uint64_t rtt_ns);

    SwiftParams params_;
    WindowedMin min_rtt_;
    double      fcwnd_            = 0;
    double      ecwnd_            = 0;
    double      rtt_ns_           = 0; ///< latest sample
    uint64_t    last_decrease_ns_ = 0;
    bool        decreased_        = false;
    bool        started_          = false;
    double      fs_alpha_, fs_beta_;
};

} // namespace doorbell::pacing
