#include "sweep.h"

#include <algorithm>
#include <cmath>

#include "metrics.h"
#include "sim.h"

namespace doorbell::sim {

double power(const SimResult &r)
{
    return r.utilization / (r.base_rtt_ns * 1e-3 + r.qdelay_p99_us);
}

bool PairedDiff::tie() const
{
    return std::fabs(mean_pct) <= kSweepTieStdErrors * se_pct;
}

PairedDiff paired_diff(const std::vector<double> &a, const std::vector<double> &b)
{
    Welford d;
    for (size_t i = 0; i < a.size() && i < b.size(); i++)
        d.add(b[i] > 0 ? 100 * (a[i] - b[i]) / b[i] : 0);
    PairedDiff p;
    p.mean_pct = d.mean();
    p.se_pct   = d.count() > 1 ? d.stddev() / std::sqrt(double(d.count())) : 0;
    return p;
}

SeedSpread seed_spread(const std::vector<SimResult> &runs, const std::vector<double> &derived)
{
    SeedSpread          s;
    Welford             p;
    std::vector<double> powers;
    s.seeds    = uint32_t(runs.size());
    s.util_min = s.util_max = runs.empty() ? 0 : runs[0].utilization;
    s.qd99_min_us = s.qd99_max_us = runs.empty() ? 0 : runs[0].qdelay_p99_us;
    for (const SimResult &r : runs) {
        powers.push_back(power(r));
        p.add(powers.back());
        s.util_min    = std::min(s.util_min, r.utilization);
        s.util_max    = std::max(s.util_max, r.utilization);
        s.qd99_min_us = std::min(s.qd99_min_us, r.qdelay_p99_us);
        s.qd99_max_us = std::max(s.qd99_max_us, r.qdelay_p99_us);
    }
    s.power        = p.mean();
    s.power_sd_pct = p.mean() > 0 ? 100 * p.stddev() / p.mean() : 0;
    s.vs_derived   = paired_diff(powers, derived);
    return s;
}

} // namespace doorbell::sim
