// Transport retransmits. On RDMA ports (mlx5 hw_counters):
//  - local_ack_timeout_err: a QP timed out waiting for an ACK and
//    retransmitted; on a lossless fabric this means packets were dropped
//    (PFC/ECN misconfigured or a bad link);
//  - packet_seq_err, out_of_sequence, implied_nak_seq_err: packets arrived
//    out of order or missing; go-back-N retransmits follow.
// Timeouts during the sampling window are a FAIL, sequence errors a WARN;
// without a window, any non-zero total is a WARN (it may be old).
// For TCP (/proc/net/snmp), RetransSegs / OutSegs above 1 % is a WARN.
#include "doctor.h"

namespace doorbell::doctor {

static constexpr double kTcpRetransWarn = 0.01; ///< fraction of segments retransmitted

static const char *const kSeqCounters[] = {"packet_seq_err", "out_of_sequence",
                                           "implied_nak_seq_err"};

static void check_port(Context &ctx, const RdmaDevice &dev, const RdmaPort &p, Report &out)
{
    std::string subject = dev.name + " port " + std::to_string(p.num);
    std::string key     = dev.name + "/" + std::to_string(p.num) + "/";
    std::string dir     = "/sys/class/infiniband/" + dev.name + "/ports/" + std::to_string(p.num) +
                      "/hw_counters";
    auto total = [&](const std::string &c) -> std::optional<uint64_t> {
        auto it = ctx.after.find(key + c);
        return it == ctx.after.end() ? std::nullopt : std::optional<uint64_t>(it->second);
    };
    auto timeouts = total("local_ack_timeout_err");
    if (!timeouts) {
        Finding &f = add_finding(
            out, "retransmit", subject, Status::kWarn, "transport retransmit counters absent",
            "use an mlx5 driver that exposes hw_counters (rdma statistic show link " + dev.name +
                "/" + std::to_string(p.num) + ")");
        f.evidence.push_back(evidence_line(dir + "/local_ack_timeout_err",
                                           ctx.fs.read(dir + "/local_ack_timeout_err")));
        return;
    }
    std::vector<std::string> ev;
    uint64_t                 seq_total = 0, seq_delta = 0;
    auto                     note = [&](const std::string &c) {
        auto t = total(c);
        if (!t)
            return;
        auto d = counter_delta(ctx, key + c);
        ev.push_back(dir + "/" + c + ": " + std::to_string(*t) +
                                         (d ? " (+" + std::to_string(*d) + " in window)" : ""));
        if (c != "local_ack_timeout_err") {
            seq_total += *t;
            seq_delta += d.value_or(0);
        }
    };
    note("local_ack_timeout_err");
    for (const char *c : kSeqCounters)
        note(c);
    ev.push_back(ctx.window_ms > 0 ? "window: " + std::to_string(ctx.window_ms) + " ms" :
                                     "window: none (totals since the counters were reset)");
    auto                     timeout_delta = counter_delta(ctx, key + "local_ack_timeout_err");
    static const std::string kFixLoss =
        "find the drops: check PFC/ECN on the RoCE priority (mlnx_qos -i <netdev>), switch drop counters, "
        "and the link's symbol errors (counters/symbol_error)";
    Finding *f;
    if (ctx.window_ms > 0 && timeout_delta && *timeout_delta > 0) {
        f = &add_finding(out, "retransmit", subject, Status::kFail,
                         std::to_string(*timeout_delta) +
                             " transport timeouts in the window: packets are being lost",
                         kFixLoss);
    } else if (ctx.window_ms > 0 && seq_delta > 0) {
        f = &add_finding(out, "retransmit", subject, Status::kWarn,
                         std::to_string(seq_delta) +
                             " sequence errors in the window: drops or reordering",
                         kFixLoss);
    } else if (ctx.window_ms <= 0 && (*timeouts > 0 || seq_total > 0)) {
        f = &add_finding(
            out, "retransmit", subject, Status::kWarn,
            std::to_string(*timeouts) + " timeouts and " + std::to_string(seq_total) +
                " sequence errors since reset (no window: may be old)",
            "sample a window on the live node (doorbell-doctor --check retransmit --interval 1000); " +
                kFixLoss);
    } else {
        f = &add_finding(out, "retransmit", subject, Status::kPass,
                         ctx.window_ms > 0 ? "no retransmit events in the window" :
                                             "no retransmit events since reset");
    }
    f->evidence = ev;
}

static void check_tcp(Context &ctx, Report &out)
{
    auto it_r = ctx.after.find("tcp/RetransSegs"), it_o = ctx.after.find("tcp/OutSegs");
    if (it_r == ctx.after.end() || it_o == ctx.after.end()) {
        add_finding(out, "retransmit", "tcp", Status::kWarn, "TCP counters unreadable",
                    "check that /proc is mounted")
            .evidence.push_back(evidence_line("/proc/net/snmp", ctx.fs.read("/proc/net/snmp")));
        return;
    }
    auto     d_r = counter_delta(ctx, "tcp/RetransSegs"), d_o = counter_delta(ctx, "tcp/OutSegs");
    bool     windowed = d_r && d_o && *d_o > 0;
    uint64_t retrans = windowed ? *d_r : it_r->second, sent = windowed ? *d_o : it_o->second;
    double   ratio = sent ? double(retrans) / double(sent) : 0.0;
    char     summary[160];
    std::snprintf(summary, sizeof(summary), "%llu of %llu segments retransmitted (%.2f %%)%s",
                  (unsigned long long)retrans, (unsigned long long)sent, ratio * 100.0,
                  windowed ? " in the window" : " since boot");
    bool     bad = ratio >= kTcpRetransWarn;
    Finding &f = add_finding(out, "retransmit", "tcp", bad ? Status::kWarn : Status::kPass, summary,
                             bad ? "check the Ethernet path used by TCP (bootstrap, tcp fallback): "
                                   "ip -s link, ethtool -S <netdev> for drops" :
                                   "");
    f.evidence = {"/proc/net/snmp Tcp RetransSegs: " + std::to_string(it_r->second),
                  "/proc/net/snmp Tcp OutSegs: " + std::to_string(it_o->second)};
}

void check_retransmit(Context &ctx, Report &out)
{
    warn_no_rdma_nic(ctx, out, "retransmit", "no RDMA transport counters");
    for (const RdmaDevice &dev : ctx.inv.rdma)
        for (const RdmaPort &p : dev.ports)
            check_port(ctx, dev, p, out);
    check_tcp(ctx, out);
}

} // namespace doorbell::doctor
