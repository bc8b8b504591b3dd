// Flow-size distributions; see workload.h.
#include "workload.h"

#include <algorithm>

namespace doorbell::sim {

double FlowSizeCdf::quantile(double u) const
{
    u = std::clamp(u, 0.0, 1.0);
    for (size_t i = 1; i < pts_.size(); i++) {
        const Point &a = pts_[i - 1], &b = pts_[i];
        if (u <= b.cdf && b.cdf > a.cdf)
            return a.bytes + (u - a.cdf) / (b.cdf - a.cdf) * (b.bytes - a.bytes);
    }
    return pts_.back().bytes;
}

double FlowSizeCdf::mean_bytes() const
{
    double m = 0;
    for (size_t i = 1; i < pts_.size(); i++)
        m += (pts_[i].cdf - pts_[i - 1].cdf) * (pts_[i].bytes + pts_[i - 1].bytes) / 2;
    return m;
}

const FlowSizeCdf &web_search_cdf()
{
    // clang-format off
    static const FlowSizeCdf cdf({
        {0,        0},    {10000,    0.15}, {20000,    0.20}, {30000,   0.30},
        {50000,    0.40}, {80000,    0.53}, {200000,   0.60}, {1000000, 0.70},
        {2000000,  0.80}, {5000000,  0.90}, {10000000, 0.97}, {30000000, 1.0},
    });
    // clang-format on
    return cdf;
}

} // namespace doorbell::sim
