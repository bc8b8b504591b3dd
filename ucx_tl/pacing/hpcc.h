// HPCC: Li et al., "HPCC: High Precision Congestion Control", SIGCOMM 2019
// (Sec. 3.2-3.3, Algorithm 1).
//
// Every switch egress port stamps an INT record on the data packet (queue
// length, bytes sent, timestamp, line rate) and the ACK carries the records
// back. Per ACK, for each hop i against the records of the previous ACK:
//   txRate = dtxBytes / dts
//   u_i    = min(qlen, qlen_prev) / (B_i T) + txRate / B_i
// and the most loaded hop's u (over its interval tau, at most T) updates the
// estimate U = (1 - tau/T) U + (tau/T) u. The window follows
//   U >= eta or incStage >= maxStage:  W = Wc / (U / eta) + W_AI
//   otherwise:                         W = Wc + W_AI
// where the reference window Wc (and incStage) moves once per RTT (the first
// ACK of data sent after the last update) and every other ACK computes W
// from the same Wc. The sender paces at R = W / T and keeps at most W bytes
// in flight (a window below one segment still lets one out, paced). T is the fabric's base RTT (the paper configures it; 0 here =
// the first RTT sample), W_init = B_NIC T: a flow starts at line rate.
// Parameters: eta = 0.95 and maxStage = 5 as in the paper; W_AI = W_init x
// 4e-4, the authors' simulator setting (R_AI = 10 Mb/s per 25 Gb/s of line
// rate, run.py of their ns-3 artifact). Loss does not move the window: HPCC
// relies on a lossless (PFC) fabric, its window bounds what a lossy one drops.
//
// Units: ns, bytes, bytes/s.
#pragma once

#include <cstdint>

#include "feedback.h"

namespace doorbell::pacing {

static constexpr double   kHpccEta        = 0.95; ///< target utilization of the bottleneck
static constexpr uint32_t kHpccMaxStage   = 5;    ///< additive steps before a multiplicative one
static constexpr double   kHpccAiFraction = 10e6 / 25e9; ///< W_AI / W_init (R_AI / line rate)

struct HpccParams {
    double   min_rate_Bps;
    double   max_rate_Bps; ///< B_NIC
    uint64_t base_rtt_ns;  ///< T; 0 = the first RTT sample
};

class Hpcc {
public:
    explicit Hpcc(const HpccParams &params);

    void on_feedback(const Feedback &f);
    void on_loss(uint64_t) {}
    void on_send(uint64_t, uint64_t bytes) { sent_ += bytes; }
    /// R = W / T, bytes/s; the ceiling until T is known.
    double rate() const;
    /// W, bytes; 0 (no window) until T is known.
    double window_bytes() const { return t_ns_ ? w_ : 0; }
    double utilization() const { return u_; }

private:
    void set_base(uint64_t t_ns);

    HpccParams params_;
    uint64_t   t_ns_            = 0; ///< T
    double     w_               = 0; ///< W, bytes
    double     wc_              = 0; ///< reference window Wc, bytes
    double     w_ai_            = 0; ///< W_AI, bytes
    double     u_               = 0; ///< U, the estimated normalized inflight
    uint32_t   inc_stage_       = 0;
    uint64_t   sent_            = 0; ///< bytes sent (snd_nxt)
    uint64_t   acked_           = 0; ///< bytes acknowledged (the ACK's seq)
    uint64_t   last_update_seq_ = 0; ///< snd_nxt when Wc last moved
    bool       have_last_       = false;
    Telemetry  last_; ///< the previous ACK's records (L)
};

} // namespace doorbell::pacing
