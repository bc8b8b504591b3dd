// Series analysis: queue statistics, oscillation (dips) and fairness.
#include "metrics.h"

#include <algorithm>

#include "sim.h"

namespace doorbell::sim {

double jain_index(const std::vector<double> &x)
{
    double s = 0, s2 = 0;
    for (double v : x) {
        s += v;
        s2 += v * v;
    }
    return s2 > 0 ? s * s / (x.size() * s2) : 0;
}

void analyze_series(SimResult &r, uint64_t warmup_ns, double, uint64_t smooth)
{
    std::vector<double> util;
    double              qsum = 0, qmax = 0;
    for (const Sample &s : r.series) {
        if (s.t_ns <= warmup_ns)
            continue;
        util.push_back(s.util);
        qsum += s.queue_bytes;
        qmax = std::max<double>(qmax, s.queue_bytes);
    }
    if (util.empty())
        return;
    r.queue_mean_kib = qsum / util.size() / 1024;
    r.queue_max_kib  = qmax / 1024;

    // Moving average over `smooth` samples (about two RTTs): one step holds
    // only a few segments, too few to call a dip.
    std::vector<double> sm(util.size());
    double              acc = 0;
    for (size_t i = 0; i < util.size(); i++) {
        acc += util[i];
        if (i >= smooth)
            acc -= util[i - smooth];
        sm[i] = acc / std::min<size_t>(i + 1, smooth);
    }
    Welford w;
    for (double v : sm)
        w.add(v);
    r.util_cv = w.mean() > 0 ? w.stddev() / w.mean() : 0;

    bool                in_dip = false;
    double              low = 1, depth_sum = 0;
    std::vector<size_t> starts;
    for (size_t i = smooth; i < sm.size(); i++) {
        if (!in_dip && sm[i] < kDipEnter) {
            in_dip = true;
            low    = sm[i];
            starts.push_back(i);
        } else if (in_dip) {
            low = std::min(low, sm[i]);
            if (sm[i] > kDipLeave) {
                in_dip = false;
                depth_sum += 1 - low;
            }
        }
    }
    if (in_dip)
        depth_sum += 1 - low;
    r.dips      = uint32_t(starts.size());
    r.dip_depth = starts.empty() ? 0 : depth_sum / starts.size();
    if (starts.size() >= 2) {
        double step_us  = r.series.size() > 1 ? (r.series[1].t_ns - r.series[0].t_ns) * 1e-3 : 1;
        r.dip_period_us = double(starts.back() - starts.front()) / (starts.size() - 1) * step_us;
    }
}

} // namespace doorbell::sim
