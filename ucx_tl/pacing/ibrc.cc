// IBRC law; see ibrc.h and docs/pacing.md for the derivation.
#include "ibrc.h"

#include <algorithm>
#include <cmath>
#include <limits>

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
    return mtu_bytes / (kIbrcStartLoops * (base_rtt_ns + target_ns) * 1e-9);
}

Ibrc::Ibrc(const IbrcParams &params) :
    params_(params),
    design_(ibrc_design(kIbrcCrossover, kIbrcPhaseMarginDeg)),
    base_(kIbrcBaseWindowNs),
    rate_(params.init_rate_Bps)
{
}

double Ibrc::gain() const
{
    if (!have_base())
        return 0;
    if (params_.gain > 0)
        return params_.gain;
    return ibrc_derived_gain(base_ns() + params_.target_ns);
}

void Ibrc::on_ack(uint64_t now_ns, uint64_t acked_bytes, uint64_t ce_bytes, uint64_t rtt_ns)
{
    win_acked_ += acked_bytes;
    win_ce_ += ce_bytes;
    if (rtt_ns) {
        base_.update(now_ns, rtt_ns);
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
                if (double(delay) >= kIbrcEmptyFraction * params_.target_ns)
                    rate_ = std::min(rate_, params_.max_rate_Bps * kIbrcInitFraction);
            }
            if (n_counted_++ == 0)
                standing_ = double(delay) >= kIbrcEmptyFraction * params_.target_ns;
            if (starting_ && standing_ && share_Bps_ == 0) {
                ref_sum_ns_ += double(delay); // the queue before this flow added to it
                ref_n_++;
            }
            sum_delay_ns_ += double(delay);
            max_delay_ns_ = std::max(max_delay_ns_, double(delay));
            n_delay_++;
            // On an empty path a queue above the target ends the start at
            // once, not at the end of the loop time: the doubling must not
            // run one more round. (A newcomer to a standing queue decides
            // on the loop time's mean, in update().)
            if (starting_ && double(delay) > start_limit_ns())
                end_start(now_ns, rate_before(now_ns - rtt_ns) / 2);
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
        fresh_            = true;
        clamp();
    }
    sent_         = true;
    last_send_ns_ = now_ns;
}

void Ibrc::on_loss(uint64_t now_ns)
{
    cut(now_ns, 1 - kIbrcLossBeta);
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
    alpha_            = (1 - params_.ce_gain) * alpha_ + params_.ce_gain * std::min(1.0, ce_frac);
    bool   have_delay = n_delay_ > 0;
    double delay      = have_delay ? sum_delay_ns_ / n_delay_ : 0;
    double max_delay  = max_delay_ns_;
    sum_delay_ns_     = 0;
    n_delay_          = 0;
    max_delay_ns_     = 0;
    win_acked_ = win_ce_ = 0;

    if (ce_frac > 0) {
        cut(now_ns, 1 - params_.ce_beta * alpha_);
        return;
    }
    if (!have_delay)
        return;

    // Gains: a = gain * T, p in the designed ratio to a (a user gain scales
    // the whole controller).
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
            // A newcomer to a standing queue: at an equilibrium the queue is
            // the own target of the flows' common rate, so the rate whose
            // own target it is, is their share. The newcomer reads it from
            // the queue as it found it (its samples up to its first update,
            // before its own ramp added to the queue), doubles toward it and
            // takes it; the multiplicative law then scales every flow, the
            // newcomer too, to the share of one more flow.
            if (share_Bps_ == 0)
                share_Bps_ = std::max(rate_for_target(ref_sum_ns_ / ref_n_), start_rate_ / 2);
            if (2 * rate_ >= share_Bps_) {
                end_start(now_ns, share_Bps_);
                prev_err_ = err;
                return;
            }
        } else if (max_delay >= kIbrcEmptyFraction * params_.target_ns) {
            // A queue built up (below the own target, or on_ack would have
            // ended the start): hold, do not double into it; the law takes
            // over after kIbrcStartHold such loop times.
            if (++holds_ >= kIbrcStartHold)
                end_start(now_ns, rate_);
            prev_err_  = err;
            have_prev_ = true;
            return;
        }
        // Every sample of this loop time was below the target (else on_ack
        // ended the start): the path has room, double.
        rate_before_double_ = rate_;
        doubled_ns_         = now_ns;
        rate_ *= std::pow(kIbrcStartGrowth, std::min(1.0, dt / T));
        prev_err_  = err;
        have_prev_ = true;
        clamp();
        if (rate_ >= params_.max_rate_Bps)
            starting_ = false; // nothing left to double toward
        return;
    }
    // An empty queue says only "below target": probe as if well below.
    double err_i = err;
    bool   empty = delay < kIbrcEmptyFraction * params_.target_ns;
    if (empty)
        err_i = std::min(err, -kIbrcProbeError);
    double step = -a * err_i * dt / T;
    if (have_prev_)
        step -= p * (err - prev_err_);
    step          = std::clamp(step, -kIbrcMaxStep, kIbrcMaxStep);
    double before = rate_;
    rate_ *= 1 + step;
    if (empty && params_.probe_step > 0) {
        // The multiplicative probe keeps rate ratios; an additive floor gives
        // every flow the same step, so a small flow catches up with a large one
        // (additive increase, multiplicative decrease). Scaled with the gain, as
        // a user gain scales the whole controller.
        double add = params_.probe_step * params_.max_rate_Bps * (a / design_.a) * dt / T;
        rate_      = std::max(rate_, before + add);
    }
    prev_err_  = err;
    have_prev_ = true;
    clamp();
}

// The start ends at `rate` (never above the current one): on an empty path
// when the queue rises above the own target, at half the rate the flow had
// when it sent the packet that saw it (the samples are a loop time old, so
// the doubling may have run once more since); for a newcomer at the share
// the standing queue tells (update()).
void Ibrc::end_start(uint64_t now_ns, double rate)
{
    starting_ = false;
    rate_     = rate;
    clamp();
    // It counts as the loop time's cut: marks of the same queue that arrive
    // after it are not a second signal.
    have_cut_    = true;
    last_cut_ns_ = now_ns;
}

// The rate the flow had at `t_ns` (during the start: before or after its
// last doubling).
double Ibrc::rate_before(uint64_t t_ns) const
{
    return t_ns < doubled_ns_ ? rate_before_double_ : rate_;
}

// The queueing delay that ends a start at once: the own target, and for a
// newcomer at least a target above the queue it found (its approach to its
// share adds to the queue by itself; a rise beyond that is others starting).
double Ibrc::start_limit_ns() const
{
    if (!standing_ || ref_n_ == 0)
        return own_target_ns();
    return std::max(own_target_ns(), ref_sum_ns_ / ref_n_ + params_.target_ns);
}

// The rate whose own target is `delay_ns` (the inverse of own_target_ns()).
double Ibrc::rate_for_target(double delay_ns) const
{
    double x = (delay_ns / params_.target_ns - 1) / params_.fairness;
    return params_.max_rate_Bps *
           std::exp(-std::max(0.0, x) * std::log(params_.max_rate_Bps / params_.min_rate_Bps));
}

// The flow's own target falls as its share of the line rate grows: at an
// equilibrium every flow sees the same delay, so only equal rates null every
// flow's error at once. Logarithmic in the rate so that small shares (many
// flows) converge as fast as large ones; bounded between the target (at the
// ceiling) and (1 + fairness) targets (at the floor).
double Ibrc::own_target_ns() const
{
    return params_.target_ns * (1 + params_.fairness * std::log(params_.max_rate_Bps / rate_) /
                                        std::log(params_.max_rate_Bps / params_.min_rate_Bps));
}

void Ibrc::clamp()
{
    rate_ = std::clamp(rate_, params_.min_rate_Bps, params_.max_rate_Bps);
}

} // namespace doorbell::pacing
