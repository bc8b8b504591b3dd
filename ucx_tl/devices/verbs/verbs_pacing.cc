/* Verbs device, pacing and clock: the HCA clock against the host's (RTT
 * from completion timestamps), the hardware rate limit, RoCE ECN/CNP
 * counters fed to the gates. */
#include "verbs_device.h"

#include "core/clock.h"
#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace doorbell::verbs {

void VerbsIface::calibrate_clock()
{
    if (hca_clock_khz_ == 0) {
        return;
    }
    ibv_values_ex v{};
    v.comp_mask     = IBV_VALUES_MASK_RAW_CLOCK;
    uint64_t before = now_ns();
    if (prov_.query_rt_values_ex(ctx_, &v) != 0) {
        debug("%s: ibv_query_rt_values_ex failed: no RTT from timestamps", name.c_str());
        hca_clock_khz_ = 0;
        return;
    }
    uint64_t after = now_ns();
    uint64_t ticks = uint64_t(v.raw_clock.tv_sec) * 1000000000ull + uint64_t(v.raw_clock.tv_nsec);
    /* ticks / (kHz) = ms; ns = ticks * 1e6 / kHz */
    uint64_t hca_ns    = uint64_t((unsigned __int128)ticks * 1000000u / hca_clock_khz_);
    clock_offset_ns_   = int64_t((before + after) / 2) - int64_t(hca_ns);
    next_calibrate_ns_ = after + 1000000000ull;
}

uint64_t VerbsIface::hca_to_host_ns(uint64_t ticks) const
{
    uint64_t ns = uint64_t((unsigned __int128)ticks * 1000000u / hca_clock_khz_);
    return uint64_t(int64_t(ns) + clock_offset_ns_);
}

void VerbsIface::apply_rate(VerbsQp &qp)
{
    if (!qp.gate || !hw_pacing_ || qp.state != VerbsQp::State::kConnected) {
        return;
    }
    double rate = qp.gate->rate();
    if (rate <= 0 ||
        (qp.applied_rate != 0 && std::abs(rate - qp.applied_rate) < 0.05 * qp.applied_rate)) {
        return; /* a modify per small change costs more than it paces */
    }
    const ibv_packet_pacing_caps &pp   = dev_attr_.packet_pacing_caps;
    uint64_t                      kbps = uint64_t(rate * 8 / 1000);
    kbps = std::clamp<uint64_t>(kbps, pp.qp_rate_limit_min, pp.qp_rate_limit_max);
    ibv_qp_rate_limit_attr a{};
    a.rate_limit     = uint32_t(kbps);
    a.typical_pkt_sz = uint16_t(mtu_bytes(port_.attr.active_mtu));
    int rc           = prov_.modify_qp_rate_limit(qp.qp, &a);
    if (rc != 0) {
        debug("%s: ibv_modify_qp_rate_limit(%llu kbps) failed: %s; pacing in "
              "software",
              name.c_str(), (unsigned long long)kbps, strerror(rc));
        hw_pacing_ = false;
        return;
    }
    qp.applied_rate = rate;
    ++post_stats_.hw_rate_updates;
}

void VerbsIface::sample_congestion()
{
    if (!port_.roce) {
        return;
    }
    CongestionCounters c = read_congestion_counters(prov_.sysfs_root, port_.hca, port_.port);
    if (!c.present) {
        return;
    }
    uint64_t marks = congestion_.present && c.cnp_handled >= congestion_.cnp_handled ?
                         c.cnp_handled - congestion_.cnp_handled :
                         0;
    uint64_t ce    = congestion_.present && c.ecn_marked >= congestion_.ecn_marked ?
                         c.ecn_marked - congestion_.ecn_marked :
                         0;
    congestion_    = c;
    counters.ce_marks += ce;
    if (marks == 0) {
        return;
    }
    /* a CNP reached this port: the port's senders are marked (the counter
     * is per port, so every paced QP hears it) */
    uint64_t now = now_ns();
    uint32_t mtu = mtu_bytes(port_.attr.active_mtu);
    for (QpCore *q : qps) {
        auto *qp = static_cast<VerbsQp *>(q);
        if (qp->gate) {
            qp->gate->on_ack(now, 0, marks * mtu, 0, 0);
            apply_rate(*qp);
        }
    }
}

} // namespace doorbell::verbs
