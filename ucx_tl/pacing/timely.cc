// TIMELY rate law; see timely.h.
#include "timely.h"

#include <algorithm>

namespace doorbell::pacing {

Timely::Timely(const TimelyParams &params) :
    params_(params), min_rtt_(kTimelyMinRttWindowNs), rate_(params.init_rate_Bps)
{
}

void Timely::on_ack(uint64_t now_ns, uint64_t acked_bytes, uint64_t, uint64_t rtt_ns)
{
    if (rtt_ns) {
        min_rtt_.update(now_ns, rtt_ns);
        last_rtt_ = rtt_ns;
    }
    acked_ += acked_bytes;
    if (acked_ < kTimelySegmentBytes || last_rtt_ == 0)
        return;
    acked_ = 0;
    update(last_rtt_);
}

void Timely::update(uint64_t rtt)
{
    double delta   = kTimelyDeltaFraction * params_.line_rate_Bps;
    double min_rtt = double(min_rtt_.get());
    double t_low   = min_rtt + params_.target_ns;
    double t_high  = min_rtt + kTimelyHighTargets * params_.target_ns;
    if (prev_rtt_ == 0) {
        prev_rtt_ = rtt;
        return;
    }
    double new_diff = double(rtt) - double(prev_rtt_);
    prev_rtt_       = rtt;
    rtt_diff_       = (1 - kTimelyAlpha) * rtt_diff_ + kTimelyAlpha * new_diff;
    double gradient = rtt_diff_ / min_rtt;

    if (rtt < t_low) {
        rate_ += delta; // additive increase
        neg_gradients_ = 0;
    } else if (rtt > t_high) {
        rate_ *= 1 - kTimelyBeta * (1 - t_high / rtt); // multiplicative decrease
        neg_gradients_ = 0;
    } else if (gradient <= 0) {
        neg_gradients_++;
        int n = neg_gradients_ >= kTimelyHaiThreshold ? 5 : 1;
        rate_ += n * delta; // additive (hyper) increase
    } else {
        rate_ *= 1 - kTimelyBeta * std::min(1.0, gradient); // gradient decrease
        neg_gradients_ = 0;
    }
    rate_ = std::clamp(rate_, params_.min_rate_Bps, params_.max_rate_Bps);
}

} // namespace doorbell::pacing
