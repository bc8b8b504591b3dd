// The disturbance an IBRC loop measures (churn.h) and the crossover it sets
// (ibrc_variance(), ibrc_churn_scale()), each step computed by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "churn.h"
#include "ibrc.h"

using namespace doorbell::pacing;

// The closed loop's queue variance at the design point and at twice its
// gain, against the integrals computed apart (midpoint rule to 200 rad per
// loop time, 400 000 points): the disturbance's falls with the gain, the
// noise's rises.
TEST(IbrcChurnScale, VarianceIntegralsMatchTheirValues)
{
    IbrcVariance v1 = ibrc_variance(1), v2 = ibrc_variance(2);
    EXPECT_NEAR(v1.disturbance, 23.954, 0.05);
    EXPECT_NEAR(v1.noise, 0.5176, 0.002);
    EXPECT_NEAR(v2.disturbance, 6.656, 0.02);
    EXPECT_NEAR(v2.noise, 1.977, 0.01);
}

// rho^2 disturbance + noise is least at the design point on a still path and
// at a higher crossover as the disturbance grows (the minima of the same
// integrals computed apart on the same 0.05 grid: 1.0 at rho 0.1, 1.5 at 0.3,
// 2.15 at 1, 2.5 at 3), never past kIbrcMaxScale, never below 1.
TEST(IbrcChurnScale, OneOnAStillPathHigherWithTheDisturbance)
{
    EXPECT_EQ(ibrc_churn_scale(0), 1);
    EXPECT_NEAR(ibrc_churn_scale(0.1), 1.0, 1e-9);
    EXPECT_NEAR(ibrc_churn_scale(0.3), 1.5, 0.051);
    EXPECT_NEAR(ibrc_churn_scale(1), 2.15, 0.051);
    EXPECT_NEAR(ibrc_churn_scale(3), 2.5, 0.051);
    double prev = 1;
    for (double rho = 0; rho < 100; rho = rho * 1.5 + 0.01) {
        double m = ibrc_churn_scale(rho);
        EXPECT_GE(m, prev);
        EXPECT_LE(m, kIbrcMaxScale);
        prev = m;
    }
}

namespace {

constexpr double kLoop  = 8000; // loop time, ns
constexpr double kSigma = 80;   // one sample's noise, ns: 0.01 loop times

} // namespace

// Three updates one loop time apart, one sample each, the flow's rate
// unchanged: slopes 0.01 and 0.02, so ln n moves by ln(1.02 / 1.01) = 0.00985
// loop times, u = 0.985 noise units: below the tracker's median (1), which
// falls by exp(-1/32); sd = 0.969 / 0.6745 = 1.44 and sd^2 - 6 < 0: rho 0.
TEST(IbrcChurn, OneStepByHand)
{
    IbrcChurn c;
    double    lr = std::log(1e9);
    EXPECT_EQ(c.add(0, 100, 1, 1, lr, 0, kSigma, kLoop), 0);
    EXPECT_EQ(c.add(8000, 180, 1, 1, lr, 0, kSigma, kLoop), 0);
    EXPECT_EQ(c.add(16000, 340, 1, 1, lr, 0, kSigma, kLoop), 0);
    EXPECT_NEAR(c.median(), std::exp(-kChurnWeight), 1e-12);
    EXPECT_NEAR(c.dt_mean(), 1, 1e-12);
    EXPECT_EQ(c.rho(), 0);
}

// The queue's slope jumping between +0.1 and -0.1 every loop time, the flow's
// rate unchanged: others arrive and leave. ln n moves by ln(1.1 / 0.9) =
// 0.2007 per update, u = 20.07 each time, above the median, which rises by
// exp(1/32) per update from 1: after 65 changes it is e^(65/32) = 7.62,
// sd = 11.30, rho = sqrt(sd^2 - 6) = 11.03 (dt 1, no own steps).
TEST(IbrcChurn, OthersArrivingAndLeavingRaiseRho)
{
    IbrcChurn c;
    double    lr = std::log(1e9), d = 1000;
    c.add(0, d, 1, 1, lr, 0, kSigma, kLoop);
    d += 0.1 * kLoop;
    c.add(8000, d, 1, 1, lr, 0, kSigma, kLoop); // slope +0.1: the first ln n
    for (int k = 2; k <= 66; k++) {
        d += (k % 2 ? 0.1 : -0.1) * kLoop;
        c.add(uint64_t(k * 8000), d, 1, 1, lr, 0, kSigma, kLoop);
    }
    double median = std::exp(65 * kChurnWeight);
    EXPECT_NEAR(c.median(), median, 1e-9 * median);
    double sd = median / kChurnNormalMedian;
    EXPECT_NEAR(c.rho(), std::sqrt(sd * sd - 6), 1e-9 * sd);
    EXPECT_GT(ibrc_churn_scale(c.rho()), 2.4);
}

// The same queue rising ever faster, but exactly as fast as this flow's own
// rate (ln(1 + x_k) = k c, the flow's ln rate k c + c/2 at the kth update, so
// the mean of two updates' is k c): every flow rose alike, no one arrived;
// ln n stays 0 and the median only falls.
TEST(IbrcChurn, TheLoopsOwnStepsCancel)
{
    IbrcChurn c;
    double    cst = 0.05, d = 1000;
    c.add(0, d, 1, 1, cst / 2 + 20, 0, kSigma, kLoop);
    for (int k = 1; k <= 40; k++) {
        double x = std::exp(k * cst) - 1;
        d += x * kLoop;
        c.add(uint64_t(k * 8000), d, 1, 1, k * cst + cst / 2 + 20, cst, kSigma, kLoop);
    }
    EXPECT_EQ(c.rho(), 0);
    EXPECT_NEAR(c.median(), std::max(kChurnMedianMin, std::exp(-39 * kChurnWeight)), 1e-9);
}

// The desynchronization allowance: an own step of one noise unit per update
// (v = 1) raises E[v^2] toward 1 by kChurnWeight per update, and takes
// kChurnDesync of it from the residual's variance: with the slopes jumping as
// above, rho^2 = sd^2 - 6 - (2/3) E[v^2].
TEST(IbrcChurn, OwnStepsAreAllowedForInTheResidual)
{
    IbrcChurn c;
    double    lr = std::log(1e9), d = 1000, step = kSigma / kLoop; // v = 1
    c.add(0, d, 1, 1, lr, step, kSigma, kLoop);
    d += 0.1 * kLoop;
    c.add(8000, d, 1, 1, lr, step, kSigma, kLoop);
    for (int k = 2; k <= 10; k++) {
        d += (k % 2 ? 0.1 : -0.1) * kLoop;
        c.add(uint64_t(k * 8000), d, 1, 1, lr, step, kSigma, kLoop);
    }
    double var    = 1 - std::pow(1 - kChurnWeight, 9);
    double median = std::exp(9 * kChurnWeight);
    double sd     = median / kChurnNormalMedian;
    EXPECT_NEAR(c.step_var(), var, 1e-12);
    EXPECT_NEAR(c.rho(), std::sqrt(std::max(0.0, sd * sd - 6 - kChurnDesync * var)), 1e-9);
}
