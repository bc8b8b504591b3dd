// IBRC law; see ibrc.h and docs/pacing.md for the derivation.
#include "ibrc.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <vector>

namespace doorbell::pacing {

IbrcLoop ibrc_design(double wc, double margin_deg)
{
    // PI zero w_z below the crossover supplies margin + the delay's lag w_c:
    // atan(w_c / w_z) = margin + w_c. Then |a + j p w_c| = w_c^2 fixes p.
    double lead = margin_deg * M_PI / 180 + wc;
    double wz   = wc / std::tan(lead);
    double p    = wc * wc / std::hypot(wz, wc);
    return {p * wz, p};
}

IbrcVariance ibrc_variance(double m)
{
    // Midpoint rule to kTop rad per loop time, then the integrands' tails:
    // 1/w^4 for the disturbance, |L|^2 -> (m p / w)^2 for the noise.
    static const IbrcLoop   d    = ibrc_design(kIbrcCrossover, kIbrcPhaseMarginDeg);
    static constexpr int    kN   = 4000;
    static constexpr double kTop = 20;
    double                  a = m * d.a, p = m * d.p, dw = kTop / kN, gd = 0, gn = 0;
    for (int i = 0; i < kN; i++) {
        double               w = (i + 0.5) * dw;
        std::complex<double> s(0, w);
        std::complex<double> L   = (a + p * s) * std::exp(-s);
        std::complex<double> den = s * s + L;
        gd += std::norm(1.0 / den) * dw;
        gn += std::norm(L / den) * dw;
    }
    gd += 1 / (3 * kTop * kTop * kTop);
    gn += p * p / kTop;
    return {gd / M_PI, gn / M_PI};
}

double ibrc_churn_scale(double rho)
{
    static constexpr double kStep = 0.05;
    static const auto       table = [] {
        std::vector<IbrcVariance> t;
        for (double m = 1; m <= kIbrcMaxScale + 1e-9; m += kStep)
            t.push_back(ibrc_variance(m));
        return t;
    }();
    size_t best = 0;
    double cost = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < table.size(); i++) {
        double c = rho * rho * table[i].disturbance + table[i].noise;
        if (c < cost)
            cost = c, best = i;
    }
    return 1 + best * kStep;
}

double ibrc_derived_gain(uint64_t loop_ns)
{
    static const IbrcLoop d = ibrc_design(kIbrcCrossover, kIbrcPhaseMarginDeg);
    return d.a / (loop_ns * 1e-9);
}

uint64_t ibrc_auto_target_ns(uint32_t mtu_bytes, double line_rate_Bps)
{
    return static_cast<uint64_t>(kIbrcTargetSegments * mtu_bytes / line_rate_Bps * 1e9);
}

double ibrc_initial_rate(uint32_t mtu_bytes, double max_rate_Bps, uint64_t base_rtt_ns,
                         uint64_t target_ns)
{
    if (base_rtt_ns == 0)
        return max_rate_Bps * kIbrcInitFraction;
    // A target above the base RTT is a host path's allowance for its
    // kernels' noise, not a queue the start should leave room for: counted
    // whole, it held a host path's first rate at a segment per 400 us (3.5 MB/s
    // on the emulated fabric, a 32 KiB message 10 ms).
    return mtu_bytes / (kIbrcStartLoops * (base_rtt_ns + std::min(target_ns, base_rtt_ns)) * 1e-9);
}

Ibrc::Ibrc(const IbrcParams &params) :
    params_(params),
    design_(ibrc_design(kIbrcCrossover, kIbrcPhaseMarginDeg)),
    base_(kIbrcBaseWindowNs),
    rate_(params.init_rate_Bps)
{
    // The crossover's table (ibrc_churn_scale) is built on its first use:
    // here, with the path, not 64 loop times into the flow's data, where
    // its 2-5 ms of integrals stalled a ping-pong across the emulated
    // fabric once per process.
    (void)ibrc_churn_scale(0);
}

double Ibrc::gain() const
{
    if (!have_base())
        return 0;
    if (params_.gain > 0)
        return params_.gain;
    return churn_scale_ * ibrc_derived_gain(base_ns() + params_.target_ns);
}

void Ibrc::on_ack(uint64_t now_ns, uint64_t acked_bytes, uint64_t ce_bytes, uint64_t rtt_ns,
                  uint64_t sent_ns)
{
    win_acked_ += acked_bytes;
    win_ce_ += ce_bytes;
    if (ce_bytes && (sent_ns == 0 || !have_cut_ || sent_ns + kSentSlackNs >= last_cut_ns_))
        win_fresh_mark_ = true;
    if (rtt_ns) {
        base_.update(now_ns, rtt_ns);
        srtt_ns_       = srtt_ns_ > 0 ? 0.875 * srtt_ns_ + 0.125 * double(rtt_ns) : double(rtt_ns);
        uint64_t delay = rtt_ns > base_ns() ? rtt_ns - base_ns() : 0;
        if (!sampled_) {
            // The first sample sets the first rate (ibrc_initial_rate() of
            // the base RTT, known before data or else this sample) and
            // nothing else: when many flows start together it measured the
            // burst of their first segments, a different part of it for each.
            // From the second segment on they see the same queue.
            sampled_    = true;
            start_rate_ = std::clamp(ibrc_initial_rate(params_.mtu_bytes, params_.max_rate_Bps,
                                                       base_ns(), params_.target_ns),
                                     params_.min_rate_Bps, params_.max_rate_Bps);
            rate_       = std::min(rate_, start_rate_);
        } else {
            if (resumed_) {
                resumed_ = false;
                if (double(delay) >= kIbrcEmptyFraction * start_scale_ns())
                    rate_ = std::min(rate_, params_.max_rate_Bps * kIbrcInitFraction);
            }
            if (n_counted_++ == 0) {
                // The queue the flow found: a queue above half the start's
                // scale is others' standing queue, and it tells a share.
                found_ns_ = double(delay);
                standing_ = found_ns_ >= kIbrcStandingFraction * start_scale_ns();
            }
            if (starting_ && standing_) {
                ref_sum_ns_ += double(delay);
                ref_n_++;
            }
            sum_delay_ns_ += double(delay);
            sum_log_rate_ += std::log(rate_at(now_ns - rtt_ns));
            max_delay_ns_ = std::max(max_delay_ns_, double(delay));
            n_delay_++;
            sample_sent_ns_ = now_ns - rtt_ns;
            // A queue above the start's limit ends the start at once, not at
            // the end of the loop time: the doubling must not run one more
            // round.
            if (starting_ && double(delay) > start_limit_ns())
                end_start(now_ns, rate_before(sample_sent_ns_) / 2);
        }
    }
    if (!have_base())
        return;
    if (last_update_ns_ == 0) {
        last_update_ns_ = now_ns;
        return;
    }
    uint64_t loop_ns = base_ns() + params_.target_ns;
    if (now_ns - last_update_ns_ >= loop_ns && (n_delay_ || win_ce_))
        update(now_ns);
    note_rate(now_ns);
}

// A path that was idle for a few loop times restarts from the initial rate
// and probes up: the rate it had describes a fabric that has since moved on
// (others took the capacity), as TCP restarts its window after idle.
void Ibrc::on_send(uint64_t now_ns, uint64_t bytes)
{
    // Idle = a gap far beyond both the loop time and this rate's own spacing
    // of `bytes`: a slow path is paced, not idle.
    uint64_t loop_ns    = (have_base() ? base_ns() : 0) + params_.target_ns;
    double   spacing_ns = bytes / rate_ * 1e9;
    if (sent_ && now_ns - last_send_ns_ > kIbrcIdleLoops * (loop_ns + spacing_ns)) {
        // Not a new start: flows that pause and resume (an on/off incast)
        // would all ramp at once after every lull and drive the queue into
        // a limit cycle. The law resumes from the old rate, halved per
        // kIbrcIdleHalving loop times of idle (a rate describes a fabric that
        // moves on), so a ring step that waited on its neighbour goes on near
        // the rate it had; but if the first sample after the pause shows a
        // standing queue, others share the path and took the capacity
        // meanwhile: the flow drops to the cap kIbrcInitFraction sets
        // (on_ack()), as it resumed before.
        double idle_loops = double(now_ns - last_send_ns_) / double(loop_ns);
        rate_             = std::max(rate_ * std::exp2(-idle_loops / kIbrcIdleHalving),
                                     std::min(rate_, params_.max_rate_Bps * kIbrcInitFraction));
        resumed_          = true;
        have_prev_        = false;
        churn_.reset();
        reset_reading();
        fresh_   = true;
        empties_ = 0;
        clamp();
    }
    sent_         = true;
    last_send_ns_ = now_ns;
    note_rate(now_ns);
}

void Ibrc::on_loss(uint64_t now_ns)
{
    delivered_Bps_ = 0; // what the path delivered before is no share now
    cut(now_ns, 1 - kIbrcLossBeta);
    note_rate(now_ns);
}

void Ibrc::cut(uint64_t now_ns, double factor)
{
    // At most one cut per loop time: the marks of one RTT are one signal.
    uint64_t loop_ns = (have_base() ? base_ns() : 0) + params_.target_ns;
    if (have_cut_ && now_ns - last_cut_ns_ < loop_ns)
        return;
    if (starting_) {
        // A mark or a loss during the start ends it, and that is its cut.
        end_start(now_ns, rate_ / 2);
        return;
    }
    have_cut_    = true;
    last_cut_ns_ = now_ns;
    rate_ *= factor;
    have_prev_ = false; // the error jump after a cut is not a trend
    churn_.reset();     // nor the slope's: it is no disturbance
    reset_reading();    // nor does the queue around it tell a share
    clamp();
}

void Ibrc::update(uint64_t now_ns)
{
    double T        = (base_ns() + params_.target_ns) * 1e-9;
    double dt       = std::min((now_ns - last_update_ns_) * 1e-9, 4 * T);
    last_update_ns_ = now_ns;

    double ce_frac = win_acked_ ? double(win_ce_) / win_acked_ : (win_ce_ ? 1 : 0);
    // DCTCP's estimator (with ce_gain 1: this loop time's fraction alone). On
    // a slow flow a loop time holds a handful of packets, so one burst marks
    // all of them; the estimate keeps a burst from reading as a full window.
    alpha_              = (1 - params_.ce_gain) * alpha_ + params_.ce_gain * std::min(1.0, ce_frac);
    bool     have_delay = n_delay_ > 0;
    double   delay      = have_delay ? sum_delay_ns_ / n_delay_ : 0;
    uint32_t samples    = n_delay_;
    double   log_rate   = have_delay ? sum_log_rate_ / n_delay_ : 0;
    sum_log_rate_       = 0;
    double max_delay    = max_delay_ns_;
    sum_delay_ns_       = 0;
    n_delay_            = 0;
    max_delay_ns_       = 0;
    bool fresh_mark     = win_fresh_mark_;
    win_acked_ = win_ce_ = 0;
    win_fresh_mark_      = false;

    if (ce_frac > 0) {
        delivered_Bps_ = 0;
        empties_       = 0;
        churn_.reset();
        // Marks only on packets that left before the last cut are the queue
        // that cut answered. The loop time is the base RTT plus the target,
        // but a queue's marks return over the queue's own delay: on a host
        // path (a 200 us loop time) a spine queue of a few ms cut a flow
        // once per loop time, 25 % each, to its floor (docs/fabric.md,
        // sixteenth round).
        if (fresh_mark)
            cut(now_ns, 1 - params_.ce_beta * alpha_);
        return;
    }
    if (!have_delay)
        return;

    // A young flow's queue is its start's (the burst brake's part below); a
    // ramp toward a share read is this flow's alone, no disturbance.
    if (!starting_ && now_ns - started_ns_ >= uint64_t(kIbrcBurstLoops * T * 1e9) &&
        ramp_left_ == 0)
        churn_scale_ = ibrc_churn_scale(churn_.add(now_ns, delay, samples, dt / T, log_rate,
                                                   last_step_,
                                                   kIbrcNoiseTargets * params_.target_ns, T * 1e9));
    // Gains: a = gain * T, p in the designed ratio to a (a user gain, and the
    // churn's scale, scale the whole controller, the additive step too).
    double a   = gain() * T;
    double p   = design_.p * a / design_.a;
    double err = (delay - own_target_ns()) / (T * 1e9);
    if (fresh_ && !have_prev_) {
        // A path starts (or restarts after idle) from an empty queue: the
        // error before the first update is the empty queue's, so the first
        // update already acts on the whole rise (a bumpless start of the PI).
        prev_err_  = -own_target_ns() / (T * 1e9);
        have_prev_ = true;
    }
    fresh_ = false;
    if (starting_) {
        if (standing_) {
            // A newcomer to a standing queue: at an equilibrium of the law
            // every flow's delay excess is the additive step's share of its
            // own packet spacing (and the own target's, if any), so the
            // queue tells the rate every flow there has. The newcomer reads
            // it from the mean of kIbrcShareSamples samples taken at its
            // first rate (a ramp would raise the queue it reads, and the
            // incumbents' answer to it), then doubles toward it and takes
            // it; the multiplicative law then scales every flow, the
            // newcomer too, to the share of one more. A standing queue (half
            // the start's scale) is one of flows below the pivot, so it
            // reads without the own target's fall: a mean that would map
            // above the pivot is a burst that drained (a synchronized start's
            // second segments), and the doubling toward the share the
            // additive step tells, ended by the start's limit, answers it.
            if (ref_n_ >= kIbrcShareSamples) {
                double share = std::max(rate_for_queue(ref_sum_ns_ / ref_n_, false),
                                        start_rate_ / 2);
                if (2 * rate_ >= share) {
                    end_start(now_ns, share);
                    prev_err_ = err;
                    return;
                }
                rate_before_double_ = rate_;
                doubled_ns_         = now_ns;
                rate_               = std::min(rate_ * kIbrcStartGrowth, share);
            }
            prev_err_  = err;
            have_prev_ = true;
            clamp();
            return;
        }
        if (max_delay >= found_ns_ + kIbrcEmptyFraction * start_scale_ns()) {
            // A queue built up above the one the flow found (below the
            // start's limit, or on_ack would have ended the start): hold, do
            // not double into it; the law takes over after kIbrcStartHold
            // such loop times, at the rate that sent the packet that saw it.
            if (++holds_ >= kIbrcStartHold)
                end_start(now_ns, rate_before(sample_sent_ns_));
            prev_err_  = err;
            have_prev_ = true;
            return;
        }
        // Every sample of this loop time was near the queue the flow found:
        // the path has room, double. At the ceiling the start goes on
        // without doubling for kIbrcStartHold loop times, so that a queue
        // the last doubling built still ends it with the halving (the
        // samples are a loop time old); a path that stays empty is the
        // flow's alone, and the start is over.
        if (rate_ < params_.max_rate_Bps) {
            rate_before_double_ = rate_;
            doubled_ns_         = now_ns;
            rate_ *= std::pow(kIbrcStartGrowth, std::min(1.0, dt / T));
        } else if (++holds_ >= kIbrcStartHold) {
            end_start(now_ns, rate_);
        }
        prev_err_  = err;
        have_prev_ = true;
        clamp();
        return;
    }
    // A burst: the queue stands far above where this flow's equilibrium
    // would hold it (its own target plus its additive share), more than the
    // linear law can drain in a few loop times without holding everyone
    // else's packets behind it. Cut in proportion to the excess, as Swift's
    // multiplicative decrease, at most once per loop time. A flow below its
    // share expects a longer queue, so the larger flows brake first.
    double over   = delay - equilibrium_delay_ns();
    bool   cut_ok = !have_cut_ || now_ns - last_cut_ns_ >= uint64_t(T * 1e9);
    bool   young  = now_ns - started_ns_ < uint64_t(kIbrcBurstLoops * T * 1e9);
    if (young && cut_ok && over > kIbrcBurstScales * start_scale_ns()) {
        empties_ = 0;
        cut(now_ns, std::max(1 - kIbrcBurstBeta * over / delay, 1 - kIbrcMaxStep));
        churn_.reset();
        prev_err_  = err;
        have_prev_ = true;
        return;
    }
    // An empty queue says only "below target": probe as if well below, once
    // it stayed empty for kIbrcEmptyLoops loop times (a single sample that
    // finds the queue empty is the queue's noise, and a probe on it would
    // kick a flow by several percent).
    bool empty   = delay < kIbrcEmptyFraction * params_.target_ns;
    empties_     = empty ? empties_ + 1 : 0;
    bool   probe = empties_ >= kIbrcEmptyLoops;
    double err_i = probe ? std::min(err, -kIbrcProbeError) : err;
    double step  = -a * err_i * dt / T;
    if (have_prev_)
        step -= p * (err - prev_err_);
    step          = std::clamp(step, -kIbrcMaxStep, kIbrcMaxStep);
    last_step_    = step;
    double before = rate_;
    // The additive step, the same for every flow (additive increase,
    // multiplicative decrease): the multiplicative law keeps rate ratios,
    // this pulls them to one.
    rate_ = rate_ * (1 + step) + params_.additive * a * params_.mtu_bytes / T * (dt / T);
    if (probe && params_.probe_step > 0) {
        // The host path's probe floor: a larger additive step while the
        // queue is empty, scaled with the gain, as a user gain scales the
        // whole controller.
        double add = params_.probe_step * params_.max_rate_Bps * (a / design_.a) * dt / T;
        rate_      = std::max(rate_, before + add);
    }
    prev_err_  = err;
    have_prev_ = true;
    clamp();
    read_share(delay, probe, dt / T, a / design_.a);
}

// Reading the share. The additive step and the own target pull rate ratios
// to one by a x the equilibrium's slope / T per loop time: 8e-4 at four
// flows, an e-fold per 7 ms, too slow for a newcomer the start left at a
// quarter of its share, or for the spread a synchronized start leaves.
// The queue tells the share directly (rate_for_queue()), so a flow reads it,
// from the mean of kIbrcReadLoops loop times' mean delays after a wait of as
// many (its own last move, its start), and ramps toward it when it stands
// clearly above its own rate: by kIbrcReadBand and kIbrcReadErrors standard
// errors of the reading (a host path's kernel noise, or a fabric's queue in
// the churn of a start, moves nothing), by at most kIbrcReadMax, over
// kIbrcReadLoops loop times (a step of the aggregate would raise the queue
// by its own size times the loop's response, as a newcomer's start does),
// longer in proportion below the design point's gain: a ramp raises the
// queue by its slope over a, and a user gain of a tenth of it swung the
// static 10-host incast's queue to 5 us on a 32-loop-time ramp.
// Only upward: a flow above its share has others below it that take theirs,
// and the common law then scales every flow down; a flow that read right
// after another's move would read a raised queue, a share too low, and a cut
// on it is a second answer to what the law answers already (both directions
// measured: the 8-host incast's utilization fell to 94-98 %).
void Ibrc::read_share(double delay_ns, bool probe, double dt_loops, double gain_scale)
{
    if (ramp_left_ > 0) {
        rate_ += ramp_Bps_ * std::min(1.0, dt_loops);
        ramp_left_--;
        clamp();
    }
    if (probe) { // an empty queue tells no share
        reset_reading();
        return;
    }
    if (++read_loops_ <= read_wait_)
        return;
    read_sum_ns_ += delay_ns;
    read_sum2_ += delay_ns * delay_ns;
    if (++read_n_ < kIbrcReadLoops)
        return;
    double n    = read_n_;
    double mean = read_sum_ns_ / n;
    double se   = std::sqrt(std::max(0.0, read_sum2_ / n - mean * mean) / (n - 1));
    reset_reading();
    double share = rate_for_queue(mean);
    if (share >= params_.max_rate_Bps)
        return; // below the ceiling's own equilibrium: no standing queue
    double gap  = std::log(share / rate_);
    double band = kIbrcReadBand + kIbrcReadErrors * se / equilibrium_slope_ns(share);
    if (gap <= band)
        return;
    ramp_left_ = uint32_t(std::ceil(kIbrcReadLoops / std::min(gain_scale, 1.0)));
    ramp_Bps_  = rate_ * (std::min(std::exp(gap), kIbrcReadMax) - 1) / ramp_left_;
    read_wait_ = std::max(kIbrcReadLoops, ramp_left_); // the next reading waits out the ramp
    churn_.reset();
}

void Ibrc::reset_reading()
{
    read_wait_   = kIbrcReadLoops;
    read_loops_  = 0;
    read_sum_ns_ = 0;
    read_sum2_   = 0;
    read_n_      = 0;
    ramp_left_   = 0;
}

// The rate's history, for the rate a sampled packet was sent at.
void Ibrc::note_rate(uint64_t now_ns)
{
    if (hist_n_ && hist_rate_[(hist_n_ - 1) % kRateHistory] == rate_)
        return;
    hist_ns_[hist_n_ % kRateHistory]   = now_ns;
    hist_rate_[hist_n_ % kRateHistory] = rate_;
    hist_n_++;
}

double Ibrc::rate_at(uint64_t t_ns) const
{
    uint32_t n = std::min(hist_n_, kRateHistory);
    for (uint32_t i = 1; i <= n; i++) {
        uint32_t k = (hist_n_ - i) % kRateHistory;
        if (hist_ns_[k] <= t_ns || i == n)
            return hist_rate_[k];
    }
    return rate_;
}

// The start ends at `rate`: on an empty path when the queue rises above the
// start's limit, at half the rate the flow had when it sent the packet that
// saw it (the samples are a loop time old, so the doubling may have run once
// more since); for a newcomer at the share the standing queue tells
// (update()).
void Ibrc::end_start(uint64_t now_ns, double rate)
{
    started_ns_ = now_ns;
    starting_   = false;
    rate_       = std::max(rate, delivered_floor(now_ns));
    clamp();
    // It counts as the loop time's cut: marks of the same queue that arrive
    // after it are not a second signal.
    have_cut_    = true;
    last_cut_ns_ = now_ns;
}

// A path under one leaf whose messages mostly leave as idle bursts: the
// start takes the bursts' round trips, which measure the queue each burst
// built (with more ranks than cores, milliseconds of both ends' turns), and
// ended at 1-5 MB/s; past the start the bursts' round trips are kept from the
// law, which then moves on the few paced packets between them. The next
// message longer than a burst was paced at that rate: on 4 x 1, 128 KiB
// allreduces after 32 KiB ones took 6-85 ms against 3.3-3.6 unpaced
// (docs/fabric.md, fifteenth round). What a burst was delivered at is what
// the path carries; the best of the window, halved, is the floor, and marks
// and losses, which a queue on the hosts' links would raise, drop it.
void Ibrc::note_delivered(uint64_t now_ns, double rate_Bps)
{
    if (!delivery_floor_)
        return;
    if (rate_Bps > delivered_Bps_ || now_ns - delivered_ns_ > kIbrcDeliveredWindowNs) {
        delivered_Bps_ = rate_Bps;
        delivered_ns_  = now_ns;
    }
    double floor = kIbrcDeliveredFraction * delivered_Bps_; // the best is within its window
    if (starting_ || rate_ >= floor)
        return;
    rate_ = floor;
    clamp();
    note_rate(now_ns);
}

double Ibrc::delivered_floor(uint64_t now_ns) const
{
    if (!delivery_floor_ || now_ns - delivered_ns_ > kIbrcDeliveredWindowNs)
        return 0;
    return kIbrcDeliveredFraction * delivered_Bps_;
}

// The rate the flow had at `t_ns` (during the start: before or after its
// last doubling).
double Ibrc::rate_before(uint64_t t_ns) const
{
    return t_ns < doubled_ns_ ? rate_before_double_ : rate_;
}

// The start's scale: kIbrcStartSegments segment times at the ceiling, or the
// target if that is longer. The start decides on queues of this size, not on
// the law's target: while many flows start together, their segments collide
// into queues of a few segments that say nothing about the path.
double Ibrc::start_scale_ns() const
{
    return std::max(double(params_.target_ns),
                    kIbrcStartSegments * params_.mtu_bytes / params_.max_rate_Bps * 1e9);
}

// The queueing delay that ends a start at once: the start's scale above the
// queue the flow found (or its own target, if higher); for a newcomer above
// the standing queue it read (its approach to its share adds to the queue by
// itself; a rise beyond that is others starting).
double Ibrc::start_limit_ns() const
{
    double found = standing_ && ref_n_ ? ref_sum_ns_ / ref_n_ : found_ns_;
    return std::max(own_target_ns(), found + start_scale_ns());
}

// The rate at which a flow is in equilibrium with a queueing delay q: its
// rate times its delay excess over its own target is the additive step's
// share of a segment, r (q - own(r)) = kIbrcAdditive x segment. The left side
// grows with r (the own target falls as r grows), so bisection on log r finds
// it; without an additive step, the rate whose own target is q. `fall`:
// with the own target's fall above the pivot (else the target there).
double Ibrc::rate_for_queue(double q_ns, bool fall) const
{
    double share = params_.additive * params_.mtu_bytes;
    auto   g     = [&](double log_r) {
        double r = std::exp(log_r);
        return r * (q_ns - own_target_at(r, fall)) * 1e-9 - share;
    };
    double lo = std::log(params_.min_rate_Bps), hi = std::log(params_.max_rate_Bps);
    if (g(hi) <= 0)
        return params_.max_rate_Bps;
    if (g(lo) >= 0)
        return params_.min_rate_Bps;
    for (int i = 0; i < 48; i++) {
        double mid             = (lo + hi) / 2;
        (g(mid) > 0 ? hi : lo) = mid;
    }
    return std::exp(lo);
}

// The own target at a rate: it falls as a flow's share of the line rate
// grows, so at an equilibrium, where every flow sees the same delay, only
// equal rates null every flow's error at once. Logarithmic in the rate:
// fairness / ln(ceiling / floor) targets per e-fold, the target itself at
// pivot x ceiling. A host path (pivot 1) rises above its target as the rate
// falls below the ceiling, the first round's spread (its target floor is the
// kernel's noise: it never aims below it). A fabric (pivot below 1) falls
// below the target as the rate rises above the pivot, where only a few flows
// are, and is the target below it: many flows keep the additive step's
// queue. Never below kIbrcOwnTargetMin of the target.
double Ibrc::own_target_at(double rate, bool fall) const
{
    double spread = own_spread(rate);
    if (params_.pivot < 1)
        spread = fall ? std::min(spread, 0.0) : 0;
    return params_.target_ns * std::max(1 + spread, kIbrcOwnTargetMin);
}

// The own target's distance from the target at a rate, in targets, before
// the sides and the minimum own_target_at() applies.
double Ibrc::own_spread(double rate) const
{
    return params_.fairness * std::log(params_.pivot * params_.max_rate_Bps / rate) /
           std::log(params_.max_rate_Bps / params_.min_rate_Bps);
}

double Ibrc::own_target_ns() const
{
    return own_target_at(rate_);
}

// The queueing delay at which this flow's rate is in equilibrium: its own
// target plus the additive step's share of its own packet spacing (the
// inverse of rate_for_queue()).
double Ibrc::equilibrium_delay_ns() const
{
    return equilibrium_delay_at(rate_);
}

double Ibrc::equilibrium_delay_at(double rate) const
{
    return own_target_at(rate) + params_.additive * params_.mtu_bytes / rate * 1e9;
}

// How much the equilibrium delay falls per e-fold of rate at `rate` (ns):
// the own target's slope where it moves (not at its minimum, not below a
// fabric's pivot) and the additive step's share of the packet spacing.
double Ibrc::equilibrium_slope_ns(double rate) const
{
    double spread = own_spread(rate);
    bool   moves  = (params_.pivot < 1 ? spread < 0 : spread > 0) && 1 + spread > kIbrcOwnTargetMin;
    double own    = moves ? params_.target_ns * params_.fairness /
                             std::log(params_.max_rate_Bps / params_.min_rate_Bps) :
                            0;
    return own + params_.additive * params_.mtu_bytes / rate * 1e9;
}

// The smallest window's rate: a window-based sender never sends less than
// one window per round trip, and the round trip it takes grows with the
// queue, so the floor falls as a queue builds and N flows at it hold about
// N windows queued. Without it a host path's rate fell to the floor of
// the ceiling / 2048 (0.6 MB/s) under others' idle bursts and stayed: a
// 64 KiB cross-spine step then took 100 ms (docs/fabric.md, sixteenth
// round), where TCP at its smallest window sends a segment per round trip.
double Ibrc::window_floor() const
{
    if (params_.min_window_bytes <= 0 || srtt_ns_ <= 0)
        return 0;
    return params_.min_window_bytes * 1e9 / srtt_ns_;
}

void Ibrc::clamp()
{
    rate_ = std::clamp(std::max(rate_, window_floor()), params_.min_rate_Bps, params_.max_rate_Bps);
}

} // namespace doorbell::pacing
