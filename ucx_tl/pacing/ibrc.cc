// IBRC law; see ibrc.h and docs/pacing.md for the derivation.
#include "ibrc.h"

#include <algorithm>
#include <cmath>

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

Ibrc::Ibrc(const IbrcParams &params) :
    params_(params),
    design_(ibrc_design(kIbrcCrossover, kIbrcPhaseMarginDeg)),
    base_(kIbrcBaseWindowNs),
    rate_(params.init_rate_Bps)
{
}

double Ibrc::gain() const
{
    if (!base_.valid())
        return 0;
    if (params_.gain > 0)
        return params_.gain;
    return ibrc_derived_gain(base_.get() + params_.target_ns);
}

void Ibrc::on_ack(uint64_t now_ns, uint64_t acked_bytes, uint64_t ce_bytes, uint64_t rtt_ns)
{
    win_acked_ += acked_bytes;
    win_ce_ += ce_bytes;
    if (rtt_ns) {
        base_.update(now_ns, rtt_ns);
        sum_delay_ns_ += rtt_ns - base_.get();
        n_delay_++;
    }
    if (!base_.valid())
        return;
    if (last_update_ns_ == 0) {
        last_update_ns_ = now_ns;
        return;
    }
    uint64_t loop_ns = base_.get() + params_.target_ns;
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
    uint64_t loop_ns    = (base_.valid() ? base_.get() : 0) + params_.target_ns;
    double   spacing_ns = bytes / rate_ * 1e9;
    if (sent_ && now_ns - last_send_ns_ > kIbrcIdleLoops * (loop_ns + spacing_ns)) {
        rate_      = std::min(rate_, params_.init_rate_Bps);
        have_prev_ = false;
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
    uint64_t loop_ns = (base_.valid() ? base_.get() : 0) + params_.target_ns;
    if (have_cut_ && now_ns - last_cut_ns_ < loop_ns)
        return;
    have_cut_    = true;
    last_cut_ns_ = now_ns;
    rate_ *= factor;
    have_prev_ = false; // the error jump after a cut is not a trend
    clamp();
}

void Ibrc::update(uint64_t now_ns)
{
    double T        = (base_.get() + params_.target_ns) * 1e-9;
    double dt       = std::min((now_ns - last_update_ns_) * 1e-9, 4 * T);
    last_update_ns_ = now_ns;

    double ce_frac = win_acked_ ? double(win_ce_) / win_acked_ : (win_ce_ ? 1 : 0);
    // DCTCP's estimator (with ce_gain 1: this loop time's fraction alone). On
    // a slow flow a loop time holds a handful of packets, so one burst marks
    // all of them; the estimate keeps a burst from reading as a full window.
    alpha_            = (1 - params_.ce_gain) * alpha_ + params_.ce_gain * std::min(1.0, ce_frac);
    bool   have_delay = n_delay_ > 0;
    double delay      = have_delay ? sum_delay_ns_ / n_delay_ : 0;
    sum_delay_ns_     = 0;
    n_delay_          = 0;
    win_acked_ = win_ce_ = 0;

    if (ce_frac > 0) {
        cut(now_ns, 1 - params_.ce_beta * alpha_);
        return;
    }
    if (!have_delay)
        return;

    // Gains: a = gain * T, p in the designed ratio to a (a user gain scales
    // the whole controller).
    double a = gain() * T;
    double p = design_.p * a / design_.a;
    // The flow's own target falls as its share of the line rate grows: at an
    // equilibrium every flow sees the same delay, so only equal rates null
    // every flow's error at once. Logarithmic in the rate so that small
    // shares (many flows) converge as fast as large ones; bounded between the
    // target (at the ceiling) and (1 + kIbrcFairness) target (at the floor).
    double own_target = params_.target_ns *
                        (1 + kIbrcFairness * std::log(params_.max_rate_Bps / rate_) /
                                 std::log(params_.max_rate_Bps / params_.min_rate_Bps));
    double err = (delay - own_target) / (T * 1e9);
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

void Ibrc::clamp()
{
    rate_ = std::clamp(rate_, params_.min_rate_Bps, params_.max_rate_Bps);
}

} // namespace doorbell::pacing
