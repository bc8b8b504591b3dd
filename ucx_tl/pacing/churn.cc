// The disturbance estimate of an IBRC loop; see churn.h.
#include "churn.h"

#include <algorithm>
#include <cmath>

namespace doorbell::pacing {

double IbrcChurn::add(uint64_t now_ns, double delay_ns, uint32_t samples, double dt_loops,
                      double log_rate, double last_step, double sigma_ns, double loop_ns)
{
    if (chain_ >= 1 && now_ns > t_ns_ && samples > 0) {
        double slope = (delay_ns - delay_ns_) / double(now_ns - t_ns_);
        // The rate of the interval: the mean of its two ends' (in logs).
        double log_n = std::log(std::max(kChurnMinLoad, 1 + slope)) - (log_rate + log_rate_) / 2;
        if (chain_ >= 2) {
            double sigma = sigma_ns / std::sqrt(double(samples)) / loop_ns;
            double u     = std::abs(log_n - log_n_) * dt_loops / sigma;
            double v     = last_step * dt_loops / sigma;
            median_ *= std::exp(u > median_ ? kChurnWeight : -kChurnWeight);
            median_ = std::clamp(median_, kChurnMedianMin, kChurnMedianMax);
            dt_mean_ += kChurnWeight * (dt_loops - dt_mean_);
            step_var_ += kChurnWeight * (v * v - step_var_);
            double sd   = median_ / kChurnNormalMedian;
            double rho2 = (sd * sd - 6 - kChurnDesync * step_var_) / std::pow(dt_mean_, 4);
            rho_        = std::sqrt(std::max(0.0, rho2));
        }
        log_n_ = log_n;
        chain_ = 2;
    } else {
        chain_ = 1;
    }
    delay_ns_ = delay_ns;
    t_ns_     = now_ns;
    log_rate_ = log_rate;
    return rho_;
}

} // namespace doorbell::pacing
