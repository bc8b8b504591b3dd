// Swift window law; see swift.h.
#include "swift.h"

#include <algorithm>
#include <cmath>

namespace doorbell::pacing {

Swift::Swift(const SwiftParams &params) : params_(params), min_rtt_(kSwiftMinRttWindowNs)
{
    double fs_range = kSwiftFsRangeTargets * params.target_ns;
    fs_alpha_       = fs_range / (1 / std::sqrt(kSwiftFsMinCwnd) - 1 / std::sqrt(kSwiftFsMaxCwnd));
    fs_beta_        = -fs_alpha_ / std::sqrt(kSwiftFsMaxCwnd);
    if (params.base_rtt_ns)
        start(params.base_rtt_ns);
}

void Swift::start(uint64_t rtt_ns)
{
    started_ = true;
    rtt_ns_  = double(rtt_ns);
    fcwnd_   = std::clamp(params_.init_rate_Bps * rtt_ns * 1e-9 / params_.mtu_bytes, 1e-3,
                          max_cwnd());
    ecwnd_   = fcwnd_;
}

double Swift::base_ns() const
{
    if (params_.base_rtt_ns)
        return double(params_.base_rtt_ns);
    return min_rtt_.valid() ? double(min_rtt_.get()) : rtt_ns_;
}

double Swift::max_cwnd() const
{
    double base = params_.base_rtt_ns ? double(params_.base_rtt_ns) : std::max(1000.0, base_ns());
    return std::max(1.0, kSwiftMaxCwndBdp * params_.max_rate_Bps * base * 1e-9 / params_.mtu_bytes);
}

double Swift::fabric_target_ns() const
{
    double fs = std::clamp(fs_alpha_ / std::sqrt(std::max(fcwnd_, 1e-6)) + fs_beta_, 0.0,
                           kSwiftFsRangeTargets * params_.target_ns);
    return base_ns() + params_.target_ns + fs;
}

double Swift::rate() const
{
    double c = cwnd();
    if (!started_ || c >= 1)
        return started_ ? params_.max_rate_Bps : params_.init_rate_Bps;
    double r = c * params_.mtu_bytes / (rtt_ns_ * 1e-9);
    return std::clamp(r, params_.min_rate_Bps, params_.max_rate_Bps);
}

double Swift::window_bytes() const
{
    return started_ ? cwnd() * params_.mtu_bytes : 0;
}

void Swift::adjust(double *cwnd, double delay, double target, double acked_pkts, bool cut)
{
    if (delay < target) {
        // Additive increase: ai packets per RTT.
        *cwnd += *cwnd >= 1 ? kSwiftAi / *cwnd * acked_pkts : kSwiftAi * acked_pkts;
    } else if (cut) {
        // Multiplicative decrease in proportion to the excess delay.
        *cwnd *= std::max(1 - kSwiftBeta * (delay - target) / delay, 1 - kSwiftMaxMdf);
    }
}

void Swift::on_feedback(const Feedback &f)
{
    if (!f.rtt_ns)
        return;
    min_rtt_.update(f.now_ns, f.rtt_ns);
    if (!started_)
        start(f.rtt_ns);
    rtt_ns_ = double(f.rtt_ns);

    double before   = cwnd();
    bool   can_cut  = !decreased_ || f.now_ns - last_decrease_ns_ >= f.rtt_ns;
    double acked    = double(f.acked_bytes) / params_.mtu_bytes;
    double endpoint = double(std::min(f.endpoint_delay_ns, f.rtt_ns));
    double fabric   = double(f.rtt_ns) - endpoint;
    double target   = fabric_target_ns();
    adjust(&fcwnd_, fabric, target, acked, can_cut);
    adjust(&ecwnd_, endpoint, double(params_.endpoint_target_ns), acked, can_cut);
    double lo = std::max(1e-3, params_.min_rate_Bps * rtt_ns_ * 1e-9 / params_.mtu_bytes);
    fcwnd_    = std::clamp(fcwnd_, lo, max_cwnd());
    ecwnd_    = std::clamp(ecwnd_, lo, max_cwnd());
    if (cwnd() < before) {
        decreased_        = true;
        last_decrease_ns_ = f.now_ns;
    }
}

// Fast recovery (a hole the FIFO path proves) or a retransmit timeout: the
// simulator and the UDP device report both as a loss.
void Swift::on_loss(uint64_t now_ns)
{
    if (!started_)
        return;
    bool can_cut = !decreased_ || now_ns - last_decrease_ns_ >= uint64_t(rtt_ns_);
    if (!can_cut)
        return;
    double lo         = std::max(1e-3, params_.min_rate_Bps * rtt_ns_ * 1e-9 / params_.mtu_bytes);
    fcwnd_            = std::max(lo, fcwnd_ * (1 - kSwiftMaxMdf));
    ecwnd_            = std::max(lo, ecwnd_ * (1 - kSwiftMaxMdf));
    decreased_        = true;
    last_decrease_ns_ = now_ns;
}

} // namespace doorbell::pacing
