// The disturbance an IBRC loop rejects, measured by the endpoint: how fast
// the aggregate's demand moves (flows arriving and leaving), against the
// noise of the delay samples it is read from. IBRC sets its crossover from
// the ratio (ibrc_churn_scale(), docs/pacing.md *Deriving a and p*).
//
// Every flow that hears one queue takes the same multiplicative step, so the
// aggregate's rate is n times this flow's, and the queue's slope between two
// loop times' mean delays is x = sum(r)/C - 1. Then
//     ln n = ln(1 + x) - ln r
// (r the flow's own rate when the sampled packets were sent) changes only when
// others arrive or leave: the loop's own steps, which move every flow alike,
// cancel. Its change per update, w, is the disturbance's random walk plus the
// noise of three mean delays (a second difference: 6 of their variances) and
// the part of this flow's own last step that others took at other times of
// the loop time (kChurnDesync of its square). With u = |w| dt / sigma (dt
// the update interval in loop times, sigma the noise of one update's mean
// delay in loop times), E[u^2] = q dt^3 / sigma^2 + 6 + kChurnDesync v^2 for
// a random walk of q per loop time and v = step dt / sigma, and the ratio of
// the disturbance's spectral density to the noise's (sigma^2 dt) is
//     rho^2 = (E[u^2] - 6 - kChurnDesync E[v^2]) / dt^4.
// E[u^2] comes from the median of u (0.6745 standard deviations of a normal
// u): dense small steps (many flows coming and going) move it, rare large
// ones (a few flows leaving at once, a flow's start) do not; those are the
// probe's, the burst brake's and the marks' part of the law.
//
// Units: ns; delays and noise in ns, the rest in loop times.
#pragma once

#include <cstdint>

namespace doorbell::pacing {

// clang-format off
static constexpr double kChurnWeight  = 1.0 / 32; ///< log step of the median tracker per update,
                                                  ///< weight of the means
static constexpr double kChurnDesync  = 2.0 / 3;  ///< variance of ln n's change per own step^2
static constexpr double kChurnMinLoad = 1.0 / 16; ///< sum(r)/C read from a draining queue: at least
static constexpr double kChurnMedianMin = 0.1;    ///< the median tracker's range
static constexpr double kChurnMedianMax = 100;
static constexpr double kChurnNormalMedian = 0.6745; ///< median of |N(0, 1)|
// clang-format on

class IbrcChurn {
public:
    // Forget the last delays (after a cut, a pause, a start: the change they
    // span is not a disturbance); the estimate stays.
    void reset() { chain_ = 0; }
    // One update's measurement: its time, the mean queueing delay of its
    // samples and their number, its interval in loop times, the mean ln of the
    // flow's rate when those samples' packets were sent, and the multiplicative
    // step of the previous update; sigma_ns is the noise of one delay sample,
    // loop_ns the loop time. Returns rho (0 until two changes were seen).
    double add(uint64_t now_ns, double delay_ns, uint32_t samples, double dt_loops, double log_rate,
               double last_step, double sigma_ns, double loop_ns);
    double rho() const { return rho_; }
    double median() const { return median_; } ///< of u
    double dt_mean() const { return dt_mean_; }
    double step_var() const { return step_var_; } ///< mean of v^2

private:
    uint32_t chain_    = 0; ///< 0 none, 1 a delay, 2 a delay and ln n
    double   delay_ns_ = 0;
    uint64_t t_ns_     = 0;
    double   log_rate_ = 0;
    double   log_n_    = 0;
    double   median_   = 1; ///< below the noise's own 1.65: a still path until measured
    double   dt_mean_  = 1;
    double   step_var_ = 0;
    double   rho_      = 0;
};

} // namespace doorbell::pacing
