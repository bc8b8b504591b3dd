// TIMELY: Mittal et al., "TIMELY: RTT-based Congestion Control for the
// Datacenter", SIGCOMM 2015 (Algorithm 1; parameters Sec. 5).
//
// Once per completed segment (kTimelySegmentBytes acked) with the latest RTT:
//   rtt_diff = (1 - alpha) rtt_diff + alpha (rtt - prev_rtt)
//   g = rtt_diff / min_rtt
//   rtt < T_low:  r += delta                     (additive increase)
//   rtt > T_high: r *= 1 - beta (1 - T_high/rtt)  (multiplicative decrease)
//   g <= 0:       r += N delta, N = 5 after 5 such completions (HAI)
//   else:         r *= 1 - beta g
// The paper's thresholds (50 us / 500 us) and delta (10 Mb/s) are for 10 Gb/s
// and tens of us of RTT; here T_low = min RTT + target, T_high = min RTT + 8
// target and delta is the same fraction of the line rate. min RTT is the
// windowed minimum of the samples.
//
// Units: ns, bytes, bytes/s.
#pragma once

#include <cstdint>

#include "windowed_min.h"

namespace doorbell::pacing {

static constexpr double   kTimelyAlpha          = 0.875; ///< EWMA weight of the new RTT difference
static constexpr double   kTimelyBeta           = 0.8;   ///< multiplicative decrease factor
static constexpr double   kTimelyDeltaFraction  = 1e-3;  ///< delta = 10 Mb/s at 10 Gb/s
static constexpr int      kTimelyHaiThreshold   = 5;     ///< completions before hyper increase
static constexpr uint32_t kTimelySegmentBytes   = 16384; ///< a "completion"
static constexpr uint32_t kTimelyHighTargets    = 8;     ///< T_high = min RTT + 8 targets
static constexpr uint64_t kTimelyMinRttWindowNs = 1000000000; ///< 1 s

struct TimelyParams {
    double   line_rate_Bps;
    double   min_rate_Bps;
    double   max_rate_Bps;
    double   init_rate_Bps;
    uint64_t target_ns; ///< T_low - min RTT
};

class Timely {
public:
    explicit Timely(const TimelyParams &params);

    void     on_ack(uint64_t now_ns, uint64_t acked_bytes, uint64_t ce_bytes, uint64_t rtt_ns);
    void     on_loss(uint64_t) {} // TIMELY is RTT-only
    void     on_send(uint64_t, uint64_t) {}
    double   rate() const { return rate_; }
    uint64_t min_rtt_ns() const { return min_rtt_.valid() ? min_rtt_.get() : 0; }

private:
    void update(uint64_t rtt_ns);

    TimelyParams params_;
    WindowedMin  min_rtt_;
    double       rate_;
    double       rtt_diff_      = 0; ///< ns
    uint64_t     prev_rtt_      = 0; ///< ns
    uint64_t     last_rtt_      = 0; ///< latest sample, ns
    uint64_t     acked_         = 0; ///< bytes toward the next completion
    int          neg_gradients_ = 0; ///< consecutive completions with g <= 0
};

} // namespace doorbell::pacing
