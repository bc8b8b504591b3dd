// IBRC: integral control of the measured queueing delay toward a target, with
// a multiplicative cut on ECN marks (by an estimate of the marked fraction)
// and loss. docs/pacing.md derives the gain.
//
// Plant: the bottleneck queue integrates the excess rate, q' = sum(r_i) - C,
// and is observed one RTT later through the RTT samples (queueing delay
// d = RTT - base RTT, base = windowed minimum). Law, once per loop time T
// (T = base RTT + target delay), with e = (d - target) / T in loop times:
//     r <- r * (1 - a * e * dt/T - p * (e - e_prev)) + A * dt/T
// The rate is the integrator state (a: integral action); the p term on the
// change of the error is the lead that a loop of two integrators (rate ->
// queue) needs to be stable at all. The multiplicative part scales every flow
// by the same factor, so the aggregate loop gain does not depend on the number
// of flows N; a and p come from the loop design (crossover kIbrcCrossover rad
// per loop time, phase margin kIbrcPhaseMarginDeg); the gain (1/s) is a / T,
// so it follows the measured base RTT and, through the target, the line rate.
// What pulls rates to one share is what the flows do not share: their own
// rates. Two terms do it, each balanced at equilibrium by the queue: the
// additive step A = kIbrcAdditive * a * segment / T, the same for every flow
// (additive increase, multiplicative decrease), and on a fabric an own
// target d*_i that falls below the target as the flow's rate rises above
// kIbrcFairnessPivot of the ceiling (logarithmically: kIbrcFairness targets
// from the ceiling to the floor). At equilibrium a flow's delay d satisfies
//     r (d - d*_i(r)) = kIbrcAdditive * segment,
// the same d for every flow only at equal rates, so N flows at their share
// hold about N * kIbrcAdditive segment times above the target and the queue
// tells a newcomer its share (rate_for_queue()). A difference of delay
// between two paths moves their equilibria by that difference over the slope
// of this map, ns per e-fold of rate: the additive step's N * kIbrcAdditive
// segment times (20 ns at four flows at 400 Gb/s, against several ns that
// two paths sharing a spine see apart) and the own target's 60 ns above the
// pivot, where only few flows are. That pull on rate ratios is a times the
// slope over T per loop time, over a thousand loop times per e-fold at four
// flows, so a flow that reads a share clearly above its own rate from the
// queue also moves toward it (read_share(): upward only, ramped, and only on
// what the samples resolve).
//
// Units: ns, bytes, bytes/s; gain in 1/s.
#pragma once

#include <algorithm>
#include <cstdint>

#include "churn.h"
#include "feedback.h"
#include "windowed_min.h"

namespace doorbell::pacing {

// clang-format off
// The loop (docs/pacing.md derives a and p from these).
static constexpr double   kIbrcCrossover      = 0.5;  ///< crossover, rad per loop time (1/(2T))
static constexpr double   kIbrcPhaseMarginDeg = 50;   ///< gain margin 3.1 at one loop time of delay
static constexpr uint32_t kIbrcTargetSegments = 2;    ///< auto target: 2 segment times
// The crossover under churn: the design above is the floor; a measured
// disturbance of the aggregate rate (flows arriving and leaving) raises the
// crossover to the one that minimizes the queue's variance (docs/pacing.md).
static constexpr double   kIbrcNoiseTargets   = 0.5;  ///< a delay sample's noise, in targets: the
                                                      ///< target stands two noise units above an
                                                      ///< empty queue (a segment time on a fabric)
static constexpr double   kIbrcMaxScale       = 3;    ///< the crossover scales searched, design
                                                      ///< point to near the gain margin (3.1)
// Fairness: the additive step is kIbrcAdditive x a segments per loop time per
// loop time; at equilibrium a flow's delay above its own target is
// kIbrcAdditive of its own packet spacing. Above the pivot, only reached by a
// few flows, the own target falls (at 112 flows the law and the queue are
// those of the additive step alone; docs/pacing.md *Fairness*).
static constexpr double   kIbrcAdditive       = 1.0 / 16;
static constexpr double   kIbrcFairness       = 2.8;  ///< own-target spread f on a fabric, in targets
                                                      ///< from the ceiling to the floor: 0.37
                                                      ///< targets (60 ns) per e-fold of rate
static constexpr double   kIbrcFairnessPivot  = 1.0 / 8; ///< on a fabric only above 1/8 of the
                                                         ///< ceiling, and only downward: four
                                                         ///< flows' slope 80 ns (20 without)
static constexpr double   kIbrcOwnTargetMin   = 0.5;  ///< never below half the target (a segment)
static constexpr double   kIbrcHostFairness   = 2;    ///< f on a path with a target floor (a host),
                                                      ///< rising below the ceiling (pivot 1)
// Reading the share (read_share()): a flow that settled reads the share the
// queue tells from kIbrcReadLoops loop times' mean delay and, if it is far
// enough above its own rate, ramps toward it over kIbrcReadLoops loop times.
static constexpr uint32_t kIbrcReadLoops      = 32;   ///< loop times a reading spans (and a ramp,
                                                      ///< and the wait before the first)
static constexpr double   kIbrcReadBand       = 0.15; ///< a share at least e^0.15 (16 %) above
static constexpr double   kIbrcReadErrors     = 6;    ///< plus 6 standard errors of the reading
                                                      ///< (of its loop means, which the queue's
                                                      ///< wander correlates: 2-3x below the
                                                      ///< spread of successive readings)
static constexpr double   kIbrcReadMax        = 1.5;  ///< a reading raises the rate by at most 50 %
// Around the linear law.
static constexpr double   kIbrcProbeError     = 2;    ///< an empty queue counts as 2 loop times
                                                      ///< below the target
static constexpr double   kIbrcEmptyFraction  = 0.25; ///< "empty": below 1/4 of the target
static constexpr uint32_t kIbrcEmptyLoops     = 2;    ///< probe after 2 empty loop times in a row
static constexpr double   kIbrcBurstScales    = 1.5;  ///< a burst: this many start scales above
                                                      ///< the flow's equilibrium delay
static constexpr double   kIbrcBurstBeta      = 0.5;  ///< burst cut r *= 1 - beta excess / delay
static constexpr double   kIbrcBurstLoops     = 64;   ///< loop times after its start a flow brakes
static constexpr double   kIbrcLossBeta       = 0.5;  ///< cut on loss, once per loop time
static constexpr double   kIbrcMaxStep        = 0.5;  ///< an update moves the rate by at most 50 %
static constexpr uint32_t kIbrcIdleLoops      = 4;    ///< idle this long: resume lower
static constexpr double   kIbrcIdleHalving    = 64;   ///< idle loop times per halving of the rate
static constexpr uint64_t kIbrcBaseWindowNs   = 1000000000; ///< base RTT window, 1 s
// The start.
static constexpr double   kIbrcInitFraction   = 1.0 / 16; ///< first rate, of the ceiling, without
                                                          ///< a base RTT before data; the cap
                                                          ///< on resuming into a queue
static constexpr double   kIbrcStartLoops     = 2;    ///< first rate: a segment per 2 loop times
static constexpr double   kIbrcStartGrowth    = 2;    ///< then x2 per loop time on an empty path
static constexpr uint32_t kIbrcStartSegments  = 8;    ///< the start's scale, segment times: a
                                                      ///< queue this much above the one the
                                                      ///< flow found ends the start
static constexpr uint32_t kIbrcStartHold      = 2;    ///< loop times held on a smaller queue (or
                                                      ///< at the ceiling) before the law
static constexpr double   kIbrcStandingFraction = 0.5; ///< a first sample above half the start's
                                                       ///< scale found a standing queue
static constexpr uint32_t kIbrcShareSamples   = 8;    ///< samples a newcomer reads its share from
static constexpr double   kIbrcUnscheduledBdp = 1;    ///< a message of up to 1 BDP goes
                                                      ///< unscheduled during a path's start
// A path with a delivery floor (note_delivered()).
static constexpr double   kIbrcDeliveredFraction = 0.5; ///< the floor: half the best delivery
static constexpr uint64_t kIbrcDeliveredWindowNs = 100000000; ///< a best this old gives way
// clang-format on

// The normalized loop coefficients (a, p) for a crossover w_c (rad per loop
// time) and a phase margin: open loop L(s) = (a + p s) e^{-s} / s^2 in
// loop-time-normalized time; |L(j w_c)| = 1 and arg L(j w_c) = -180 deg + margin.
struct IbrcLoop {
    double a; ///< integral coefficient, per loop time per loop time of error
    double p; ///< lead coefficient, per loop time of error change
};
IbrcLoop ibrc_design(double crossover, double phase_margin_deg);

// The loop's queue variance per unit of input, in loop times^2, with (a, p)
// scaled by m from the design point: `disturbance` for a white disturbance of
// the aggregate's excess rate (its random walk: flows arriving and leaving)
// of unit spectral density, `noise` for white delay-measurement noise of unit
// spectral density (the closed-loop integrals of |1/(s^2 + L)|^2 and
// |L/(s^2 + L)|^2 over frequency, L = m (a + p s) e^{-s}).
struct IbrcVariance {
    double disturbance;
    double noise;
};
IbrcVariance ibrc_variance(double m);
// The scale m of the design's (a, p), in [1, kIbrcMaxScale], that minimizes
// the queue's variance rho^2 disturbance + noise, rho the ratio of the
// disturbance's spectral density to the noise's (square roots). 1 for a
// still fabric: the design point is the floor (below it the loop would be
// slower to move shares and to fill what departing flows free).
double ibrc_churn_scale(double rho);

// The derived gain (1/s) for a loop time T = base RTT + target delay (ns).
double ibrc_derived_gain(uint64_t loop_ns);
// The auto target (ns): kIbrcTargetSegments serialization times of a segment.
uint64_t ibrc_auto_target_ns(uint32_t mtu_bytes, double line_rate_Bps);
// The first rate (bytes/s): one segment per kIbrcStartLoops loop times
// (base RTT + target, the target counted up to the base RTT) when the base
// RTT is known, else kIbrcInitFraction of the ceiling. N flows that start together then fill a bottleneck's line
// rate only once N exceeds 2 BDP / segment (138 flows at 400 Gb/s, 5 us, 4
// KiB): a 128-way incast neither drops nor marks at its start.
double ibrc_initial_rate(uint32_t mtu_bytes, double max_rate_Bps, uint64_t base_rtt_ns,
                         uint64_t target_ns);

struct IbrcParams {
    double   line_rate_Bps;
    double   min_rate_Bps;
    double   max_rate_Bps;
    double   init_rate_Bps;
    uint64_t target_ns;
    double   gain; ///< 1/s, 0 = derived
    uint32_t mtu_bytes   = 4096;
    uint64_t base_rtt_ns = 0;   ///< the path's unloaded RTT if known before data, else 0
    double   ce_gain     = 1;   ///< alpha <- (1 - g) alpha + g * (CE fraction of a loop time)
    double   ce_beta     = 0.5; ///< a marked loop time cuts r *= 1 - ce_beta * alpha
    double   probe_step  = 0;   ///< empty-queue probe: at least this of the ceiling per loop time
    double   fairness    = kIbrcFairness;      ///< own-target spread f, in targets
    double   pivot       = kIbrcFairnessPivot; ///< below 1: the own target falls below the
                                               ///< target above this share of the ceiling;
                                               ///< 1: it rises below the ceiling
    double additive = kIbrcAdditive;           ///< additive step, segments per loop time per
                                               ///< loop time, times a; 0 = none
    double min_window_bytes = 0;               ///< the rate stays at or above this many bytes per
                                               ///< smoothed RTT (window_floor()); 0 = none
};

class Ibrc {
public:
    explicit Ibrc(const IbrcParams &params);

    // `sent_ns`: when the newest packet the ACK answers left (0 = unknown).
    // Marks on packets sent before the last cut report the queue that cut
    // answered (TCP's CWR): they count in alpha and drop the delivery floor,
    // but cut nothing. on_feedback() dates them by the newest packet the ACK
    // acknowledges, or else by the sample's.
    void on_ack(uint64_t now_ns, uint64_t acked_bytes, uint64_t ce_bytes, uint64_t rtt_ns,
                uint64_t sent_ns = 0);
    void on_feedback(const Feedback &f)
    {
        on_ack(f.now_ns, f.acked_bytes, f.ce_bytes, f.rtt_ns, std::max(f.sent_ns, f.acked_sent_ns));
    }
    void   on_loss(uint64_t now_ns);
    void   on_send(uint64_t now_ns, uint64_t bytes);
    double rate() const { return rate_; }
    // One segment until the first RTT sample, then none: a path's first
    // window is one segment, and its first rate comes from what that segment
    // measured (an owner without windows, the UDP device, paces the start at
    // the initial rate instead).
    double window_bytes() const { return sampled_ ? 0 : params_.mtu_bytes; }
    // The gain in use (1/s); 0 until the base RTT is known.
    double gain() const;
    // The scale of the derived gain the measured churn sets (1 on a still
    // fabric or with a user gain; ibrc_churn_scale()) and the disturbance
    // ratio rho it comes from.
    double churn_scale() const { return params_.gain > 0 ? 1 : churn_scale_; }
    double churn_rho() const { return churn_.rho(); }
    // Whether the path is still in its start (no law update yet): a message
    // short enough may then go unscheduled (Pacer::on_message()).
    bool     starting() const { return starting_; }
    uint64_t base_rtt_ns() const { return have_base() ? base_ns() : 0; }
    // The path's only shared links are its two hosts' own (no spine): from
    // now its rate stays at or above kIbrcDeliveredFraction of the best rate
    // its recent idle bursts were delivered at (a best older than
    // kIbrcDeliveredWindowNs gives way to the next burst's), and so does the
    // end of its start. A CE mark or a loss drops that best.
    void set_delivery_floor(bool on) { delivery_floor_ = on; }
    // The owner sent a burst unscheduled, and all of it was acknowledged at
    // `rate_Bps`: its bytes over the time from its first send to its last
    // acknowledgement, a rate the path delivered.
    void note_delivered(uint64_t now_ns, double rate_Bps);

private:
    // The base RTT: the windowed minimum of the samples, and never above the
    // RTT measured before data flowed (a flow that starts into a standing
    // queue would take the queue for propagation and claim more than its
    // share).
    bool     have_base() const { return base_.valid() || params_.base_rtt_ns; }
    uint64_t base_ns() const
    {
        if (!base_.valid())
            return params_.base_rtt_ns;
        return params_.base_rtt_ns ? std::min(params_.base_rtt_ns, base_.get()) : base_.get();
    }
    void   update(uint64_t now_ns);
    void   end_start(uint64_t now_ns, double rate);
    double rate_before(uint64_t t_ns) const;
    double own_target_ns() const;
    double start_limit_ns() const;
    double start_scale_ns() const;
    double own_target_at(double rate, bool fall = true) const;
    double own_spread(double rate) const;
    double equilibrium_delay_ns() const;
    double equilibrium_delay_at(double rate) const;
    double equilibrium_slope_ns(double rate) const;
    double rate_for_queue(double delay_ns, bool fall = true) const;
    void   read_share(double delay_ns, bool probe, double dt_loops, double gain_scale);
    void   reset_reading();
    void   cut(uint64_t now_ns, double factor);
    void   note_rate(uint64_t now_ns);
    double rate_at(uint64_t t_ns) const;
    void   clamp();
    double delivered_floor(uint64_t now_ns) const;
    double window_floor() const;

    IbrcParams  params_;
    IbrcLoop    design_;
    WindowedMin base_;
    double      rate_;
    bool        delivery_floor_ = false; ///< set_delivery_floor()
    double      delivered_Bps_  = 0;     ///< the best delivery in the window
    uint64_t    delivered_ns_   = 0;     ///< when it was measured
    double      srtt_ns_        = 0;     ///< smoothed RTT of the samples taken, ns
    uint64_t    last_update_ns_ = 0;     ///< time of the last law update
    uint64_t    last_cut_ns_    = 0;     ///< time of the last multiplicative cut
    bool        have_cut_       = false;
    double      sum_delay_ns_   = 0; ///< queueing delay samples since the update
    uint32_t    n_delay_        = 0;
    uint64_t    win_acked_      = 0;     ///< bytes acked since the update
    uint64_t    win_ce_         = 0;     ///< of which CE-marked
    bool        win_fresh_mark_ = false; ///< one sent after the last cut (or at an unknown time)
    double      alpha_          = 1;     ///< estimated CE fraction (DCTCP's alpha)
    double      prev_err_       = 0;     ///< e of the previous update, RTTs
    bool        have_prev_      = false;
    bool        starting_       = true;  ///< start: doubling per loop time below target
    bool        fresh_          = true;  ///< no law update since the (re)start
    bool        sampled_        = false; ///< an RTT sample arrived
    bool        resumed_        = false; ///< resumed after idle, no sample since
    uint32_t    n_counted_      = 0;     ///< samples after the first
    double      found_ns_       = 0;     ///< the queue the first of them found
    bool        standing_       = false; ///< the queue was there when the flow began (a newcomer)
    double      start_rate_     = 0;     ///< the first rate (ibrc_initial_rate())
    double      ref_sum_ns_     = 0;     ///< start, newcomer: the queue it found (sum of delays)
    uint32_t    ref_n_          = 0;     ///< and their number
    double      max_delay_ns_   = 0;     ///< largest queueing delay of the loop time
    uint32_t    holds_          = 0;     ///< start: loop times held on a rising queue
    uint32_t    empties_        = 0;     ///< loop times in a row with an empty queue
    uint64_t    sample_sent_ns_ = 0;     ///< send time of the packet of the last sample
    uint64_t    started_ns_     = 0;     ///< when the start ended
    double      rate_before_double_ = 0; ///< start: the rate before the last doubling
    uint64_t    doubled_ns_         = 0; ///< start: when it doubled
    uint64_t    last_send_ns_       = 0; ///< time of the last send
    bool        sent_               = false;
    // The disturbance (churn.h): the rate's last changes (for the rate a
    // sampled packet was sent at), the samples' mean ln rate since the
    // update, the last update's multiplicative step.
    IbrcChurn                 churn_;
    double                    sum_log_rate_            = 0;
    double                    last_step_               = 0;
    static constexpr uint32_t kRateHistory             = 8;
    uint64_t                  hist_ns_[kRateHistory]   = {}; ///< since when
    double                    hist_rate_[kRateHistory] = {}; ///< the rate was this
    uint32_t                  hist_n_                  = 0;
    double                    churn_scale_             = 1;
    // Reading the share (read_share()): loop times since the last reading or
    // move, the mean delays of those past the wait (sum, sum of squares,
    // count), and a move's ramp (bytes/s per loop time, loop times left).
    uint32_t read_wait_   = kIbrcReadLoops; ///< loop times before a reading starts
    uint32_t read_loops_  = 0;
    double   read_sum_ns_ = 0;
    double   read_sum2_   = 0;
    uint32_t read_n_      = 0;
    double   ramp_Bps_    = 0;
    uint32_t ramp_left_   = 0;
};

} // namespace doorbell::pacing
