// DCQCN reaction point: Zhu et al., "Congestion Control for Large-Scale RDMA
// Deployments", SIGCOMM 2015 (Sec. 3.1, Fig. 5; parameters Table 1).
//
// The switch marks CE; the notification point (receiver NIC) sends at most one
// CNP per kDcqcnCnpIntervalNs per flow; here a CE echo in an ACK stands for the
// CNP and the same interval is applied at the sender. On a CNP:
//   Rt = Rc, Rc = Rc (1 - alpha/2), alpha = (1 - g) alpha + g.
// Without CNPs alpha decays every kDcqcnAlphaTimerNs, and the rate recovers
// through fast recovery (Rc = (Rt + Rc)/2, kDcqcnFastRecoverySteps steps),
// additive increase (Rt += R_AI) and hyper increase (Rt += R_HAI), stepped by
// a timer and a byte counter. The paper's rate steps are for 40 Gb/s; they are
// scaled to the line rate here. Timers are evaluated lazily from the `now`
// passed into each call.
//
// Units: ns, bytes, bytes/s.
#pragma once

#include <cstdint>

namespace doorbell::pacing {

static constexpr double   kDcqcnG               = 1.0 / 256; ///< alpha EWMA weight
static constexpr uint64_t kDcqcnCnpIntervalNs   = 50000;     ///< NP: one CNP per 50 us
static constexpr uint64_t kDcqcnAlphaTimerNs    = 55000;     ///< alpha decay period
static constexpr uint64_t kDcqcnIncreaseTimerNs = 55000;     ///< rate increase timer
static constexpr uint64_t kDcqcnByteCounter     = 10u << 20; ///< rate increase byte counter, 10 MB
static constexpr int      kDcqcnFastRecoverySteps = 5;       ///< F
static constexpr double   kDcqcnAiFraction        = 40e6 / 40e9;  ///< R_AI = 40 Mb/s at 40 Gb/s
static constexpr double   kDcqcnHaiFraction       = 400e6 / 40e9; ///< R_HAI = 10 R_AI

struct DcqcnParams {
    double line_rate_Bps;
    double min_rate_Bps;
    double max_rate_Bps;
    double init_rate_Bps;
};

class Dcqcn {
public:
    explicit Dcqcn(const DcqcnParams &params);

    void   on_ack(uint64_t now_ns, uint64_t acked_bytes, uint64_t ce_bytes, uint64_t rtt_ns);
    void   on_loss(uint64_t now_ns);
    void   on_send(uint64_t now_ns, uint64_t bytes);
    double rate() const { return rc_; }
    double alpha() const { return alpha_; }

private:
    void on_cnp(uint64_t now_ns);
    void run_timers(uint64_t now_ns);
    void increase();

    DcqcnParams params_;
    double      rc_; ///< current rate
    double      rt_; ///< target rate
    double      alpha_             = 1;
    uint64_t    last_cnp_ns_       = 0;
    bool        have_cnp_          = false;
    uint64_t    alpha_timer_ns_    = 0; ///< next alpha decay
    uint64_t    increase_timer_ns_ = 0; ///< next timer-driven increase
    uint64_t    bytes_since_       = 0; ///< byte counter
    int         timer_steps_       = 0; ///< T in the paper
    int         byte_steps_        = 0; ///< BC in the paper
};

} // namespace doorbell::pacing
