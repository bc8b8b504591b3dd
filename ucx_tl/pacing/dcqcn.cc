// DCQCN reaction point; see dcqcn.h.
#include "dcqcn.h"

#include <algorithm>

namespace doorbell::pacing {

Dcqcn::Dcqcn(const DcqcnParams &params) :
    params_(params), rc_(params.init_rate_Bps), rt_(params.init_rate_Bps)
{
}

void Dcqcn::on_ack(uint64_t now_ns, uint64_t, uint64_t ce_bytes, uint64_t)
{
    run_timers(now_ns);
    if (ce_bytes && (!have_cnp_ || now_ns - last_cnp_ns_ >= kDcqcnCnpIntervalNs))
        on_cnp(now_ns);
}

// RoCE NICs react to loss only through the transport's retransmission; the
// rate law is driven by CNPs alone.
void Dcqcn::on_loss(uint64_t now_ns)
{
    run_timers(now_ns);
}

void Dcqcn::on_send(uint64_t now_ns, uint64_t bytes)
{
    run_timers(now_ns);
    bytes_since_ += bytes;
    while (bytes_since_ >= kDcqcnByteCounter) {
        bytes_since_ -= kDcqcnByteCounter;
        byte_steps_++;
        increase();
    }
}

void Dcqcn::on_cnp(uint64_t now_ns)
{
    have_cnp_    = true;
    last_cnp_ns_ = now_ns;
    rt_          = rc_;
    rc_          = std::max(params_.min_rate_Bps, rc_ * (1 - alpha_ / 2));
    alpha_       = (1 - kDcqcnG) * alpha_ + kDcqcnG;
    // A CNP restarts the alpha timer, the increase timer and the byte counter.
    alpha_timer_ns_    = now_ns + kDcqcnAlphaTimerNs;
    increase_timer_ns_ = now_ns + kDcqcnIncreaseTimerNs;
    bytes_since_       = 0;
    timer_steps_ = byte_steps_ = 0;
}

void Dcqcn::run_timers(uint64_t now_ns)
{
    if (alpha_timer_ns_ == 0) {
        alpha_timer_ns_    = now_ns + kDcqcnAlphaTimerNs;
        increase_timer_ns_ = now_ns + kDcqcnIncreaseTimerNs;
    }
    while (now_ns >= alpha_timer_ns_) {
        alpha_ *= 1 - kDcqcnG;
        alpha_timer_ns_ += kDcqcnAlphaTimerNs;
    }
    while (now_ns >= increase_timer_ns_) {
        timer_steps_++;
        increase();
        increase_timer_ns_ += kDcqcnIncreaseTimerNs;
    }
}

void Dcqcn::increase()
{
    int f = kDcqcnFastRecoverySteps;
    if (std::max(timer_steps_, byte_steps_) < f) {
        // Fast recovery: halve the distance to the target.
    } else if (std::min(timer_steps_, byte_steps_) < f) {
        rt_ += kDcqcnAiFraction * params_.line_rate_Bps;
    } else {
        rt_ += kDcqcnHaiFraction * params_.line_rate_Bps;
    }
    rt_ = std::min(rt_, params_.max_rate_Bps);
    rc_ = std::clamp((rt_ + rc_) / 2, params_.min_rate_Bps, params_.max_rate_Bps);
}

} // namespace doorbell::pacing
