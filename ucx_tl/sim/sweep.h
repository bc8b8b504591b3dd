// The gain sweep's statistics: Kleinrock's power of a run, and a sweep row's
// spread over the seeds it averages. Rows are compared seed by seed: runs
// with the same seed share ECMP, start jitter and on/off periods, so the
// difference of two gains' runs with one seed is the gains', and its spread
// over the seeds says whether a lead is larger than what the seed alone moves.
//
// Units: power in utilization per us of delay; differences in % of the other
// row's power.
#pragma once

#include <cstdint>
#include <vector>

namespace doorbell::sim {

struct SimResult;

/// A lead counts only beyond this many standard errors of the paired mean.
static constexpr double kSweepTieStdErrors = 2;

/// Kleinrock's power: utilization / (base RTT + p99 queueing delay), 1/us. A
/// gain that fills the link with a long queue, or keeps the queue short by
/// leaving the link idle, has less.
double power(const SimResult &r);

/// Per-seed power difference of one row against another, in % of the other's.
struct PairedDiff {
    double mean_pct = 0; ///< mean over the seeds
    double se_pct   = 0; ///< standard error of that mean (sd / sqrt(seeds)); 0 for one seed
    /// Whether this lead (or deficit) is within kSweepTieStdErrors standard errors of none.
    bool tie() const;
};

/// a and b: the runs' powers, one per seed, in the same seed order.
PairedDiff paired_diff(const std::vector<double> &a, const std::vector<double> &b);

/// A sweep row's spread over its seeds.
struct SeedSpread {
    uint32_t   seeds        = 0;           ///< runs in the row; 0 = not a sweep row
    double     power        = 0;           ///< mean of the runs' power, 1/us
    double     power_sd_pct = 0;           ///< standard deviation of the runs' power, % of the mean
    double     util_min = 0, util_max = 0; ///< utilization over the seeds
    double     qd99_min_us = 0, qd99_max_us = 0; ///< p99 queueing delay over the seeds
    PairedDiff vs_derived;                       ///< against the derived gain's row
};

/// runs: the row's runs, one per seed (at least one); derived: the derived
/// gain's powers for the same seeds, in the same order.
SeedSpread seed_spread(const std::vector<SimResult> &runs, const std::vector<double> &derived);

} // namespace doorbell::sim
