// Flow sizes of the mixed workload: a piecewise-linear CDF (bytes ->
// cumulative fraction), sampled by inverting it.
#pragma once

#include <vector>

namespace doorbell::sim {

class FlowSizeCdf {
public:
    struct Point {
        double bytes;
        double cdf; ///< fraction of flows of at most `bytes`
    };
    explicit FlowSizeCdf(std::vector<Point> points) : pts_(std::move(points)) {}

    // The size (bytes) at cumulative fraction u in [0, 1).
    double quantile(double u) const;
    double mean_bytes() const;

private:
    std::vector<Point> pts_;
};

// The web-search distribution of Alizadeh et al., "Data Center TCP
// (DCTCP)", SIGCOMM 2010 (Fig. 4), as tabulated by pFabric and HPCC:
// heavy-tailed, half the flows under 80 KB and 30 % of them above 1 MB,
// mean about 1.7 MB.
const FlowSizeCdf &web_search_cdf();

} // namespace doorbell::sim
