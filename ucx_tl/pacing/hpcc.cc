// HPCC window law; see hpcc.h.
#include "hpcc.h"

#include <algorithm>

namespace doorbell::pacing {

Hpcc::Hpcc(const HpccParams &params) : params_(params)
{
    if (params.base_rtt_ns)
        set_base(params.base_rtt_ns);
}

void Hpcc::set_base(uint64_t t_ns)
{
    t_ns_ = t_ns;
    w_ = wc_ = params_.max_rate_Bps * t_ns * 1e-9; // W_init = B_NIC T
    w_ai_    = kHpccAiFraction * w_;
}

double Hpcc::rate() const
{
    if (!t_ns_)
        return params_.max_rate_Bps;
    return std::clamp(w_ / (t_ns_ * 1e-9), params_.min_rate_Bps, params_.max_rate_Bps);
}

void Hpcc::on_feedback(const Feedback &f)
{
    acked_ += f.acked_bytes;
    if (!t_ns_) {
        if (!f.rtt_ns)
            return;
        set_base(f.rtt_ns);
    }
    const Telemetry *tel = f.telemetry;
    if (!tel || tel->hops == 0 || tel->hops > kMaxIntHops)
        return;
    if (!have_last_ || tel->hops != last_.hops) {
        // First records of this path (or a new path): the reference for the
        // next ACK; the first RTT of data is what the first update covers.
        last_            = *tel;
        have_last_       = true;
        last_update_seq_ = sent_;
        return;
    }

    // MeasureInflight: the most loaded hop since the previous ACK.
    double   T   = t_ns_ * 1e-9;
    double   u   = 0;
    uint64_t tau = 0;
    for (uint32_t i = 0; i < tel->hops; i++) {
        const IntHop &n = tel->hop[i], &o = last_.hop[i];
        if (n.ts_ns <= o.ts_ns || n.rate_Bps <= 0 || n.tx_bytes < o.tx_bytes)
            continue;
        uint64_t dt      = n.ts_ns - o.ts_ns;
        double   tx_rate = double(n.tx_bytes - o.tx_bytes) / (dt * 1e-9);
        double ui = std::min(n.qlen_bytes, o.qlen_bytes) / (n.rate_Bps * T) + tx_rate / n.rate_Bps;
        if (ui >= u) { // (>=: an idle path, u = 0 everywhere, still has an interval)
            u   = ui;
            tau = dt;
        }
    }
    last_ = *tel;
    if (tau == 0)
        return;
    tau = std::min(tau, t_ns_);
    u_  = (1 - double(tau) / t_ns_) * u_ + double(tau) / t_ns_ * u;

    // ComputeWind: Wc moves once per RTT, every ACK sets W from it.
    bool   update_wc = acked_ > last_update_seq_;
    double w;
    if (u_ >= kHpccEta || inc_stage_ >= kHpccMaxStage) {
        // (an idle path, U = 0, scales without bound: to the ceiling below)
        w = u_ > 0 ? wc_ / (u_ / kHpccEta) + w_ai_ : params_.max_rate_Bps * T;
        if (update_wc)
            inc_stage_ = 0;
    } else {
        w = wc_ + w_ai_;
        if (update_wc)
            inc_stage_++;
    }
    double w_min = params_.min_rate_Bps * T;
    double w_max = params_.max_rate_Bps * T;
    w_           = std::clamp(w, w_min, w_max);
    if (update_wc) {
        wc_              = w_;
        last_update_seq_ = sent_;
    }
}

} // namespace doorbell::pacing
