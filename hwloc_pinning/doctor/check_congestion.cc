// RoCE congestion counters (mlx5 hw_counters) and their rate over the
// sampling window. DCQCN works only when both ends play their part:
//  - the notification point turns each ECN-marked packet it receives
//    (np_ecn_marked_roce_packets) into a CNP to the sender (np_cnp_sent);
//  - the reaction point slows down for each CNP (rp_cnp_handled) and must
//    not ignore any (rp_cnp_ignored).
// Marks with no CNPs, or ignored CNPs, mean congestion control is off: a
// FAIL. A high marking rate during the window is live congestion: a WARN.
#include "doctor.h"

namespace doorbell::doctor {

static constexpr double kCongestedPerSec =
    1000.0; ///< ECN marks or CNPs per second that mean sustained congestion

static std::string rate_text(std::optional<double> r)
{
    if (!r)
        return "n/a";
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.0f/s", *r);
    return buf;
}

void check_congestion(Context &ctx, Report &out)
{
    if (warn_no_rdma_nic(ctx, out, "congestion", "no RoCE congestion counters"))
        return;
    for (const RdmaDevice &dev : ctx.inv.rdma) {
        for (const RdmaPort &p : dev.ports) {
            std::string subject  = dev.name + " port " + std::to_string(p.num);
            std::string key      = dev.name + "/" + std::to_string(p.num) + "/";
            std::string port_dir = "/sys/class/infiniband/" + dev.name + "/ports/" +
                                   std::to_string(p.num);
            std::string dir = port_dir + "/hw_counters";
            if (p.link_layer == "InfiniBand") {
                add_finding(
                    out, "congestion", subject, Status::kPass,
                    "InfiniBand port: credit-based flow control, RoCE ECN/CNP counters do not apply")
                    .evidence.push_back(port_dir + "/link_layer: InfiniBand");
                continue;
            }
            auto total = [&](const char *c) -> std::optional<uint64_t> {
                auto it = ctx.after.find(key + c);
                return it == ctx.after.end() ? std::nullopt : std::optional<uint64_t>(it->second);
            };
            auto marked = total("np_ecn_marked_roce_packets"), sent = total("np_cnp_sent");
            auto handled = total("rp_cnp_handled"), ignored = total("rp_cnp_ignored");
            if (!marked || !sent || !handled) {
                Finding &f = add_finding(
                    out, "congestion", subject, Status::kWarn, "RoCE congestion counters absent",
                    "use an mlx5 driver that exposes hw_counters (rdma statistic show link " +
                        dev.name + "/" + std::to_string(p.num) + ")");
                for (const char *c :
                     {"np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled"})
                    f.evidence.push_back(evidence_line(dir + "/" + c, ctx.fs.read(dir + "/" + c)));
                continue;
            }
            auto r_marked               = counter_rate(ctx, key + "np_ecn_marked_roce_packets");
            auto r_sent                 = counter_rate(ctx, key + "np_cnp_sent");
            auto r_handled              = counter_rate(ctx, key + "rp_cnp_handled");
            std::vector<std::string> ev = {
                dir + "/np_ecn_marked_roce_packets: " + std::to_string(*marked) + " (" +
                    rate_text(r_marked) + ")",
                dir + "/np_cnp_sent: " + std::to_string(*sent) + " (" + rate_text(r_sent) + ")",
                dir + "/rp_cnp_handled: " + std::to_string(*handled) + " (" + rate_text(r_handled) +
                    ")"};
            if (ignored)
                ev.push_back(dir + "/rp_cnp_ignored: " + std::to_string(*ignored));
            ev.push_back(ctx.window_ms > 0 ? "window: " + std::to_string(ctx.window_ms) + " ms" :
                                             "window: none (totals since the counters were reset)");
            Finding *f;
            if (*marked > 0 && *sent == 0) {
                f = &add_finding(
                    out, "congestion", subject, Status::kFail,
                    "ECN-marked packets arrive but no CNP was ever sent: DCQCN notification point is off",
                    "enable it for the RoCE priority: echo 1 > /sys/class/net/<netdev>/ecn/roce_np/enable/<prio>");
            } else if (ignored && *ignored > 0) {
                f = &add_finding(
                    out, "congestion", subject, Status::kFail,
                    "CNPs ignored: DCQCN reaction point is off, this NIC never slows down",
                    "enable it for the RoCE priority: echo 1 > /sys/class/net/<netdev>/ecn/roce_rp/enable/<prio>");
            } else if ((r_marked && *r_marked >= kCongestedPerSec) ||
                       (r_handled && *r_handled >= kCongestedPerSec)) {
                f = &add_finding(
                    out, "congestion", subject, Status::kWarn,
                    "congested now: " + rate_text(r_marked) + " ECN marks, " +
                        rate_text(r_handled) + " CNPs handled",
                    "look for incast or a hot spine link; pace the senders (doorbell's ibrc pacing policy); "
                    "check the switch ECN thresholds");
            } else {
                f = &add_finding(out, "congestion", subject, Status::kPass,
                                 ctx.window_ms > 0 ?
                                     "no sustained congestion in the window (" +
                                         rate_text(r_marked) + " ECN marks)" :
                                     "DCQCN counters consistent (" + std::to_string(*marked) +
                                         " ECN marks, " + std::to_string(*sent) +
                                         " CNPs sent in total)");
            }
            f->evidence = ev;
        }
    }
}

} // namespace doorbell::doctor
