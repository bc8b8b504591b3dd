// IBRC: integral control of the measured queueing delay toward a target, with
// a multiplicative cut on ECN marks (by an estimate of the marked fraction)
// and loss. docs/pacing.md derives the gain.
//
// Plant: the bottleneck queue integrates the excess rate, q' = sum(r_i) - C,
// and is observed one RTT later through the RTT samples (queueing delay
// d = RTT - base RTT, base = windowed minimum). Law, once per RTT T (T = base
// RTT + target delay), with e = (d - target) / T in RTTs:
//     r <- r * (1 - a * e * dt/T - p * (e - e_prev))
// where the target of a flow rises a little as its rate falls (fairness).
// The rate is the integrator state (a: integral action); the p term on the
// change of the error is the lead that a loop of two integrators (rate ->
// queue) needs to be stable at all. Multiplicative form: every flow scales by
// the same factor, so the aggregate loop gain does not depend on the number of
// flows N. a and p come from the loop design (crossover kIbrcCrossover rad per
// RTT, phase margin kIbrcPhaseMarginDeg); the gain (1/s) is a / T, so it
// follows the measured base RTT and, through the target, the line rate.
//
// Units: ns, bytes, bytes/s; gain in 1/s.
#pragma once

#include <cstdint>

#include "windowed_min.h"

namespace doorbell::pacing {

static constexpr double   kIbrcCrossover      = 0.25; ///< loop crossover, rad per RTT (1/(4T))
static constexpr double   kIbrcPhaseMarginDeg = 55;   ///< well damped: overshoot ~15 %
static constexpr uint32_t kIbrcTargetSegments = 8;    ///< auto target = 8 segment times
static constexpr double   kIbrcProbeError     = 4;    ///< empty queue counts as 4 RTTs below target
static constexpr double   kIbrcEmptyFraction  = 0.25; ///< queue "empty" below 1/4 of the target
static constexpr double kIbrcFairness = 2; ///< own target = target (1 + f log(max/r) / log(max/min))
static constexpr double   kIbrcInitFraction = 1.0 / 16; ///< first rate, of the ceiling
static constexpr double   kIbrcLossBeta     = 0.5;      ///< cut on loss, once per RTT
static constexpr double   kIbrcMaxStep      = 0.5; ///< one update changes the rate by at most 50 %
static constexpr uint32_t kIbrcIdleLoops    = 4;   ///< idle this many loop times: restart low
static constexpr uint64_t kIbrcBaseWindowNs = 1000000000; ///< base RTT window, 1 s

// The normalized loop coefficients (a, p) for a crossover w_c (rad per RTT)
// and a phase margin: open loop L(s) = (a + p s) e^{-s} / s^2 in RTT-normalized
// time; |L(j w_c)| = 1 and arg L(j w_c) = -180 deg + margin.
struct IbrcLoop {
    double a; ///< integral coefficient, per RTT per RTT of error
    double p; ///< lead coefficient, per RTT of error change
};
IbrcLoop ibrc_design(double crossover, double phase_margin_deg);

// The derived gain (1/s) for a loop time T = base RTT + target delay (ns).
double ibrc_derived_gain(uint64_t loop_ns);
// The auto target (ns): kIbrcTargetSegments serialization times of a segment.
uint64_t ibrc_auto_target_ns(uint32_t mtu_bytes, double line_rate_Bps);

struct IbrcParams {
    double   line_rate_Bps;
    double   min_rate_Bps;
    double   max_rate_Bps;
    double   init_rate_Bps;
    uint64_t target_ns;
    double   gain;             ///< 1/s, 0 = derived
    double   ce_gain    = 1;   ///< alpha <- (1 - g) alpha + g * (CE fraction of a loop time)
    double   ce_beta    = 0.5; ///< a marked loop time cuts r *= 1 - ce_beta * alpha
    double   probe_step = 0;   ///< empty-queue probe: at least this of the ceiling per loop time
};

class Ibrc {
public:
    explicit Ibrc(const IbrcParams &params);

    void   on_ack(uint64_t now_ns, uint64_t acked_bytes, uint64_t ce_bytes, uint64_t rtt_ns);
    void   on_loss(uint64_t now_ns);
    void   on_send(uint64_t now_ns, uint64_t bytes);
    double rate() const { return rate_; }
    // The gain in use (1/s); 0 until the base RTT is known.
    double   gain() const;
    uint64_t base_rtt_ns() const { return base_.valid() ? base_.get() : 0; }

private:
    void update(uint64_t now_ns);
    void cut(uint64_t now_ns, double factor);
    void clamp();

    IbrcParams  params_;
    IbrcLoop    design_;
    WindowedMin base_;
    double      rate_;
    uint64_t    last_update_ns_ = 0; ///< time of the last law update
    uint64_t    last_cut_ns_    = 0; ///< time of the last multiplicative cut
    bool        have_cut_       = false;
    double      sum_delay_ns_   = 0; ///< queueing delay samples since the update
    uint32_t    n_delay_        = 0;
    uint64_t    win_acked_      = 0; ///< bytes acked since the update
    uint64_t    win_ce_         = 0; ///< of which CE-marked
    double      alpha_          = 1; ///< estimated CE fraction (DCTCP's alpha)
    double      prev_err_       = 0; ///< e of the previous update, RTTs
    bool        have_prev_      = false;
    uint64_t    last_send_ns_   = 0; ///< time of the last send
    bool        sent_           = false;
};

} // namespace doorbell::pacing
