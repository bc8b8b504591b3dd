// Text tables, JSON and CSV views of results.
#include <cstdio>
#include <sstream>

#include "sim.h"

namespace doorbell::sim {

namespace {

std::string fmt(const char *f, double v)
{
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}

const char *mode_name(const SimResult &r)
{
    return r.credit ? "credit" : "lossy";
}

std::string slowdown_json(const Slowdown &s)
{
    return "{\"flows\":" + std::to_string(s.flows) + ",\"p50\":" + fmt("%.4f", s.p50) +
           ",\"p99\":" + fmt("%.4f", s.p99) + ",\"mean\":" + fmt("%.4f", s.mean) + "}";
}

} // namespace

std::string format_table(const std::vector<SimResult> &rows)
{
    std::ostringstream o;
    char               line[512];
    std::snprintf(line, sizeof line,
                  "%-7s %-6s %9s %5s %7s %6s %6s %7s %7s %8s %8s %7s %7s %5s %7s %6s %6s %8s %6s\n",
                  "policy", "mode", "gain_1/s", "flows", "util%", "rtt_us", "std_us", "p99_us",
                  "qd99_us", "qmax_KiB", "drops", "retx%", "rtx_all", "dips", "per_us", "jain",
                  "jain_w", "conv_us", "Mev/s");
    o << line;
    for (const SimResult &r : rows) {
        std::string conv = r.join_us <= 0    ? "-" :
                           r.converge_us < 0 ? "never" :
                                               fmt("%.1f", r.converge_us);
        std::snprintf(line, sizeof line,
                      "%-7s %-6s %9.4g %5u %7.2f %6.2f %6.3f %7.2f %7.2f %8.1f %8llu %7.3f %7.3f "
                      "%5u %7.1f %6.3f %6.3f %8s %6.2f\n",
                      r.policy.c_str(), mode_name(r), r.gain, r.flows, 100 * r.utilization,
                      r.rtt_mean_us, r.rtt_std_us, r.rtt_p99_us, r.qdelay_p99_us, r.queue_max_kib,
                      (unsigned long long)r.drops, r.retx_pct, r.retx_all_pct, r.dips,
                      r.dip_period_us, r.jain, r.jain_window, conv.c_str(), r.events_per_s * 1e-6);
        o << line;
    }
    return o.str();
}

std::string format_fct_table(const std::vector<SimResult> &rows)
{
    std::ostringstream o;
    char               line[512];
    std::snprintf(line, sizeof line, "%-7s %-6s %6s %6s %8s %8s %6s %9s %9s %6s %8s %8s %7s %7s\n",
                  "policy", "mode", "done", "open", "all_p50", "all_p99", "short", "short_p50",
                  "short_p99", "long", "long_p50", "long_p99", "util%", "retx%");
    o << line;
    for (const SimResult &r : rows) {
        std::snprintf(line, sizeof line,
                      "%-7s %-6s %6u %6u %8.2f %8.2f %6u %9.2f %9.2f %6u %8.2f %8.2f %7.2f %7.3f\n",
                      r.policy.c_str(), mode_name(r), r.fct_all.flows, r.fct_unfinished,
                      r.fct_all.p50, r.fct_all.p99, r.fct_short.flows, r.fct_short.p50,
                      r.fct_short.p99, r.fct_long.flows, r.fct_long.p50, r.fct_long.p99,
                      100 * r.utilization, r.retx_all_pct);
        o << line;
    }
    return o.str();
}

std::string format_json(const std::vector<SimResult> &rows)
{
    std::ostringstream o;
    o << "[";
    for (size_t i = 0; i < rows.size(); i++) {
        const SimResult &r = rows[i];
        o << (i ? ",\n " : "\n ") << "{\"policy\":\"" << r.policy << "\""
          << ",\"mode\":\"" << mode_name(r) << "\""
          << ",\"gain\":" << fmt("%.6g", r.gain)
          << ",\"derived_gain\":" << fmt("%.6g", r.derived_gain)
          << ",\"base_rtt_ns\":" << r.base_rtt_ns << ",\"flows\":" << r.flows
          << ",\"utilization\":" << fmt("%.5f", r.utilization)
          << ",\"rtt_mean_us\":" << fmt("%.4f", r.rtt_mean_us)
          << ",\"rtt_std_us\":" << fmt("%.4f", r.rtt_std_us)
          << ",\"rtt_p99_us\":" << fmt("%.4f", r.rtt_p99_us)
          << ",\"qdelay_p99_us\":" << fmt("%.4f", r.qdelay_p99_us)
          << ",\"queue_mean_kib\":" << fmt("%.2f", r.queue_mean_kib)
          << ",\"queue_max_kib\":" << fmt("%.2f", r.queue_max_kib) << ",\"drops\":" << r.drops
          << ",\"sent_pkts\":" << r.sent_pkts << ",\"retx_pkts\":" << r.retx_pkts
          << ",\"retx_pct\":" << fmt("%.4f", r.retx_pct)
          << ",\"retx_all_pct\":" << fmt("%.4f", r.retx_all_pct) << ",\"ce_pkts\":" << r.ce_pkts
          << ",\"timeouts\":" << r.timeouts << ",\"credit_stalls\":" << r.credit_stalls
          << ",\"dips\":" << r.dips << ",\"dip_period_us\":" << fmt("%.2f", r.dip_period_us)
          << ",\"dip_depth\":" << fmt("%.4f", r.dip_depth)
          << ",\"util_cv\":" << fmt("%.4f", r.util_cv) << ",\"jain\":" << fmt("%.4f", r.jain)
          << ",\"jain_window\":" << fmt("%.4f", r.jain_window)
          << ",\"join_us\":" << fmt("%.3f", r.join_us)
          << ",\"converge_us\":" << fmt("%.3f", r.converge_us)
          << ",\"fct_all\":" << slowdown_json(r.fct_all)
          << ",\"fct_short\":" << slowdown_json(r.fct_short)
          << ",\"fct_long\":" << slowdown_json(r.fct_long)
          << ",\"fct_unfinished\":" << r.fct_unfinished
          << ",\"allreduce_us\":" << fmt("%.3f", r.allreduce_us) << ",\"events\":" << r.events
          << ",\"flow_tail_gbps\":[";
        for (size_t k = 0; k < r.tail_Bps.size(); k++)
            o << (k ? "," : "") << fmt("%.3f", r.tail_Bps[k] * 8e-9);
        o << "]";
        if (r.spread.seeds > 0) {
            const SeedSpread &d = r.spread;
            o << ",\"seeds\":{\"runs\":" << d.seeds << ",\"power_per_us\":" << fmt("%.5f", d.power)
              << ",\"power_sd_pct\":" << fmt("%.3f", d.power_sd_pct)
              << ",\"utilization_min\":" << fmt("%.5f", d.util_min)
              << ",\"utilization_max\":" << fmt("%.5f", d.util_max)
              << ",\"qdelay_p99_min_us\":" << fmt("%.4f", d.qd99_min_us)
              << ",\"qdelay_p99_max_us\":" << fmt("%.4f", d.qd99_max_us)
              << ",\"vs_derived_pct\":" << fmt("%.3f", d.vs_derived.mean_pct)
              << ",\"vs_derived_se_pct\":" << fmt("%.3f", d.vs_derived.se_pct) << "}";
        }
        o << ",\"wall_s\":" << fmt("%.3f", r.wall_s)
          << ",\"events_per_s\":" << fmt("%.0f", r.events_per_s) << "}";
    }
    o << "\n]\n";
    return o.str();
}

std::string format_csv(const SimResult &r)
{
    std::ostringstream o;
    o << "t_us,util,queue_kib,rate0_gbps,mean_rate_gbps,joiner_gbps\n";
    char line[200];
    for (const Sample &s : r.series) {
        std::snprintf(line, sizeof line, "%.3f,%.4f,%.2f,%.3f,%.3f,%.3f\n", s.t_ns * 1e-3, s.util,
                      s.queue_bytes / 1024.0, s.rate0_Bps * 8e-9, s.mean_rate_Bps * 8e-9,
                      s.joiner_Bps * 8e-9);
        o << line;
    }
    return o.str();
}

} // namespace doorbell::sim
