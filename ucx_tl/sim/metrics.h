// Statistics of a run: histogram quantiles, running mean/variance, Jain's
// fairness index, and the analysis of the throughput time series
// (oscillation: dips below kDipEnter of capacity, left above kDipLeave).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace doorbell::sim {

struct SimResult;

static constexpr double kDipEnter = 0.80; ///< a dip starts below 80 % of capacity
static constexpr double kDipLeave = 0.90; ///< and ends above 90 % (hysteresis)

// splitmix64: deterministic, seedable, fast.
class Rng {
public:
    explicit Rng(uint64_t seed) : s_(seed) {}
    uint64_t next()
    {
        uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
        z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }

private:
    uint64_t s_;
};

// Fixed-width bins; values past the last bin land in it.
class Histogram {
public:
    Histogram(uint64_t bin, uint32_t bins) : bin_(bin), counts_(bins, 0) {}
    void add(uint64_t v)
    {
        uint64_t i = v / bin_;
        counts_[i < counts_.size() ? i : counts_.size() - 1]++;
        n_++;
    }
    // Upper edge of the bin holding quantile q; 0 when empty.
    double quantile(double q) const
    {
        if (n_ == 0)
            return 0;
        uint64_t want = uint64_t(std::ceil(q * n_)), seen = 0;
        for (size_t i = 0; i < counts_.size(); i++) {
            seen += counts_[i];
            if (seen >= want)
                return double((i + 1) * bin_);
        }
        return double(counts_.size() * bin_);
    }
    uint64_t count() const { return n_; }

private:
    uint64_t              bin_;
    std::vector<uint64_t> counts_;
    uint64_t              n_ = 0;
};

class Welford {
public:
    void add(double x)
    {
        n_++;
        double d = x - mean_;
        mean_ += d / n_;
        m2_ += d * (x - mean_);
    }
    double   mean() const { return mean_; }
    double   stddev() const { return n_ > 1 ? std::sqrt(m2_ / (n_ - 1)) : 0; }
    uint64_t count() const { return n_; }

private:
    uint64_t n_    = 0;
    double   mean_ = 0, m2_ = 0;
};

double jain_index(const std::vector<double> &x);
// Fills queue, dip and util_cv fields of r from r.series (window from warmup),
// smoothing utilization over `smooth` samples.
void analyze_series(SimResult &r, uint64_t warmup_ns, double line_Bps, uint64_t smooth);

} // namespace doorbell::sim
