// Per-path pacer: a congestion controller (the rate) plus a token bucket
// (send permission at that rate).
//
// Units: time in ns (always passed in, so doorbell-sim can drive it with
// virtual time), sizes in bytes, rates in bytes/s, IBRC gain in 1/s.
// One Pacer per path (QP/peer); not thread-safe: the owner serializes calls.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "dcqcn.h"
#include "feedback.h"
#include "hpcc.h"
#include "ibrc.h"
#include "policies.h"
#include "swift.h"
#include "timely.h"
#include "token_bucket.h"

namespace doorbell::pacing {

// The policies of policies.h, in its order: a device's, then the
// simulator's.
enum class Policy {
#define DOORBELL_PACING_POLICY_ENUM(upper, camel, name) k##camel,
    DOORBELL_PACING_ALL_POLICIES(DOORBELL_PACING_POLICY_ENUM)
#undef DOORBELL_PACING_POLICY_ENUM
};

// Every policy, in the order of policies.h.
inline constexpr Policy kPolicies[] = {
#define DOORBELL_PACING_POLICY_VALUE(upper, camel, name) Policy::k##camel,
    DOORBELL_PACING_ALL_POLICIES(DOORBELL_PACING_POLICY_VALUE)
#undef DOORBELL_PACING_POLICY_VALUE
};

// Whether a device runs the policy behind its gate (DOORBELL_PACING_POLICIES;
// the others are the simulator's, policies.h says why).
constexpr bool device_policy(Policy policy)
{
    switch (policy) {
#define DOORBELL_PACING_POLICY_CASE(upper, camel, name) case Policy::k##camel:
        DOORBELL_PACING_POLICIES(DOORBELL_PACING_POLICY_CASE)
        return true;
#undef DOORBELL_PACING_POLICY_CASE
    default:
        return false;
    }
}

struct Config {
    Policy   policy          = Policy::kIbrc;
    double   gain            = 0;    ///< IBRC integral gain, 1/s; 0 = derived from base RTT
    double   line_rate_Bps   = 50e9; ///< link rate, bytes/s (400 Gb/s)
    uint64_t target_delay_ns = 0;    ///< queueing-delay target, ns; 0 = auto
    uint64_t target_floor_ns = 0;    ///< auto target never below this, ns: the
                                     ///< delay noise of the path's endpoints
    double   min_rate_Bps  = 0;      ///< floor, bytes/s; 0 = line rate / 2048
    double   max_rate_Bps  = 0;      ///< ceiling, bytes/s; 0 = line rate
    double   init_rate_Bps = 0;      ///< first rate, bytes/s; 0 = policy default
    uint32_t mtu_bytes     = 4096;   ///< segment size, sets auto target and bucket depth
    uint32_t burst_bytes   = 0;      ///< token bucket depth, bytes; 0 = 2 segments
    /// the path's unloaded RTT when it is known before data flows (the
    /// fabric's design value, or what connection set-up measured), ns;
    /// 0 = learnt from the samples. IBRC's first rate, HPCC's T and Swift's
    /// base target follow it.
    uint64_t base_rtt_ns = 0;
    bool     telemetry   = false; ///< ACKs carry the switches' INT records (HPCC needs them)
    // IBRC around its linear law (docs/pacing.md); the defaults are the
    // fabric's law, a noisy host path sets its own (the UDP device does).
    double ce_gain = 1;   ///< weight of one loop time's CE fraction in the
                          ///< estimate alpha (DCTCP's g); 1 = that alone
    double ce_beta = 0.5; ///< a marked loop time cuts r *= 1 - ce_beta * alpha
    /// spread of a flow's own target with its share, in targets (IBRC's
    /// fairness term); 0 = auto: kIbrcFairness, kIbrcHostFairness when the
    /// target has a floor (a host path, whose ECN threshold is closer)
    double fairness   = 0;
    double probe_step = 0; ///< an empty-queue probe adds at least this
                           ///< fraction of the ceiling per loop time; 0 = none
    /// IBRC: a message of up to this many BDPs (ceiling x the base RTT known
    /// before data) goes unscheduled during a path's start (on_message());
    /// 0 = none
    double unscheduled_bdp = kIbrcUnscheduledBdp;
    /// a message that begins on a path with nothing in flight goes
    /// unscheduled up to this many bytes (on_idle_message()); 0 = none
    uint32_t idle_burst_bytes = 0;
    /// IBRC: the rate never falls below this many segments per smoothed
    /// round trip of the samples the law takes (queueing included), as a
    /// window never shrinks below TCP's smallest; 0 = none (the fabric's
    /// law: only min_rate_Bps)
    uint32_t min_window_segments = 0;
};

// TIMELY's thresholds and Swift's fabric target are set in their papers for
// their fabrics' delays; here they scale with this queue allowance,
// kBaselineAllowanceSegments segment times at the line rate (655 ns at
// 400 Gb/s with 4 KiB), when Config::target_delay_ns is auto.
static constexpr uint32_t kBaselineAllowanceSegments = 8;

// An idle burst's delivery rate (its bytes over the time from its first send
// to its last acknowledgement) counts from this many segments: a shorter
// burst's time is mostly its round trip.
static constexpr uint32_t kDeliveredMinSegments = 8;

// Counters a device can expose; all monotonic.
struct Counters {
    uint64_t acks          = 0; ///< on_ack calls
    uint64_t acked_bytes   = 0; ///< bytes acknowledged
    uint64_t ce_bytes      = 0; ///< bytes acknowledged with a CE mark
    uint64_t rtt_samples   = 0; ///< on_ack calls whose RTT reached the controller
    uint64_t losses        = 0; ///< on_loss calls
    uint64_t sent_bytes    = 0; ///< bytes passed to on_send
    uint64_t unscheduled   = 0; ///< of them, sent unscheduled (on_message())
    uint64_t burst_samples = 0; ///< RTT samples kept from the controller: an
                                ///< idle burst's queue (on_idle_message())
};

// The controller of a policy that does not control: the rate is the ceiling.
class FixedRate {
public:
    explicit FixedRate(double rate_Bps) : rate_(rate_Bps) {}
    void   on_ack(uint64_t, uint64_t, uint64_t, uint64_t) {}
    void   on_loss(uint64_t) {}
    void   on_send(uint64_t, uint64_t) {}
    double rate() const { return rate_; }

private:
    double rate_;
};

class Pacer {
public:
    // Use make_pacer(), which validates the config.
    explicit Pacer(const Config &resolved);

    // An ACK for `acked_bytes`, of which `ce_bytes` carried a CE mark;
    // `rtt_ns` is the echoed round trip (0 = no sample in this ACK) of a
    // packet sent at `sent_ns` (0 = unknown).
    void on_ack(uint64_t now_ns, uint64_t acked_bytes, uint64_t ce_bytes, uint64_t rtt_ns,
                uint64_t sent_ns = 0);
    // The same with what else the ACK carried (endpoint delay, INT records).
    void on_feedback(const Feedback &f);
    // A loss was detected (NAK, retransmit timeout).
    void on_loss(uint64_t now_ns);
    // Earliest time `bytes` may be sent; <= now_ns means now.
    uint64_t next_send_ns(uint64_t now_ns, uint32_t bytes);
    // `bytes` left on this path: consumes tokens (or unscheduled credit).
    void on_send(uint64_t now_ns, uint32_t bytes);
    // The owner is about to send a message of `bytes` on this path (a work
    // request's length). During IBRC's start, a message of at most the
    // unscheduled budget (Config::unscheduled_bdp BDPs; what is outstanding
    // of earlier ones counts against it) goes unscheduled: at once, outside
    // the rate and the window, as Homa sends a message's first RTT of bytes.
    // A longer message, one past the start or of another policy is paced;
    // so is a stream whose owner announces nothing.
    void on_message(uint64_t now_ns, uint64_t bytes);
    // The owner is about to send a message of `bytes` (on the wire) on a
    // path with nothing in flight: up to Config::idle_burst_bytes of it go
    // unscheduled, as one burst. Pacing a ping-pong's message spreads it
    // over the rate's spacing, and every release then waits for the
    // sending process to run (docs/fabric.md: 3.9 ms for 32 KiB with 4
    // ranks on 2 cores, 1.1 ms unpaced); a stream always has data in
    // flight and is paced as before. The round trips of packets sent from
    // the burst's start until its bytes are acknowledged (Feedback::sent_ns)
    // do not reach the controller: they measure the queue the burst itself
    // built, which drains at the bottleneck's rate, and read as congestion
    // they cut what follows far below the path's share (a 4 x 1 allreduce's
    // 32 KiB cross-spine steps went at 2-5 MB/s of a 25 MB/s share,
    // docs/fabric.md). Its CE marks do reach it, and so does every sample
    // while IBRC is in its start (which ends on round trips).
    void on_idle_message(uint64_t now_ns, uint64_t bytes);
    // What is left of the last on_idle_message() grant is paced from now:
    // the owner granted it to a window of messages that the path has
    // answered since, so the queues are no longer known to be empty.
    void end_idle_grant(uint64_t now_ns);
    /// From now the bucket holds burst_ns of the current rate, never less
    /// than Config::burst_bytes and never more than max_bytes (a burst_ns
    /// of 0: burst_bytes alone, as configured). For a path shown to cross
    /// no spine (a device learns it; its only shared links are the two
    /// hosts' own, which the rate's cuts still see): two segments of depth at a
    /// rate of hundreds of MB/s make the sender wait on the pacer every two
    /// segments, and a process that shares its core sends only on its
    /// turns, so it keeps little of the rate; the depth scales down with
    /// the rate, so a path that congests still paces segment by segment.
    void set_time_burst(uint64_t burst_ns, uint32_t max_bytes);
    /// IBRC: from now the rate stays at or above half the best rate an
    /// idle burst of at least kDeliveredMinSegments segments was delivered
    /// at lately (Ibrc::set_delivery_floor()), for a path shown to cross no
    /// spine.
    void set_delivery_floor(bool on);
    /// The bucket's depth, bytes (for tests).
    double burst_depth() const { return bucket_.depth(); }
    /// Bytes this path may still send unscheduled.
    uint64_t unscheduled_left() const { return unsched_left_; }

    double rate() const { return bucket_.rate(); } ///< bytes/s
    /// In-flight limit of a window-based policy (HPCC, Swift), bytes; 0 =
    /// none (the rate alone paces). A sender keeps sending while its
    /// in-flight bytes are below it, so a window under one segment still
    /// lets one out.
    double          window_bytes() const;
    Policy          policy() const { return config_.policy; }
    const Config   &config() const { return config_; } ///< with auto values resolved
    const Counters &counters() const { return counters_; }
    // IBRC only: the gain in use (1/s); 0 before the first RTT sample or for
    // other policies. The base RTT (ns) the controller works with; 0 before
    // it is known or for policies that keep none.
    double   ibrc_gain() const;
    uint64_t base_rtt_ns() const;

private:
    void apply_rate(uint64_t now_ns);
    // The bucket's depth at a rate (Config::burst_bytes, set_time_burst()).
    double depth_at(double rate_Bps) const;
    bool   in_idle_burst(uint64_t sent_ns) const;
    // The last idle burst was acknowledged whole at now_ns: its delivery rate
    // goes to the controller.
    void note_delivered(uint64_t now_ns);
    // No round trip has reached the controller yet, or IBRC is in its start.
    bool starting() const;

    Config                                                    config_;
    std::variant<Ibrc, Dcqcn, Timely, Hpcc, Swift, FixedRate> ctrl_;
    TokenBucket                                               bucket_;
    Counters                                                  counters_;
    uint64_t unsched_budget_  = 0; ///< bytes a start may send unscheduled (0 = none)
    uint64_t burst_ns_        = 0; // set_time_burst()
    uint32_t burst_max_bytes_ = 0;
    uint64_t unsched_left_    = 0;     ///< granted and not yet sent
    uint64_t unsched_out_     = 0;     ///< granted and not yet acknowledged
    bool     idle_grant_      = false; ///< unsched_left_ is an idle burst's
    uint64_t burst_from_ns_   = 0;     ///< the last idle burst's first send
    uint64_t burst_left_      = 0;     ///< of its bytes (on_send's), not yet acknowledged
    uint64_t burst_clear_ns_  = 0;     ///< when the last of them was
    uint64_t burst_bytes_     = 0;     ///< its bytes (on_send's)
};

// Parses a policy's name (policies.h: "ibrc", "dcqcn", "timely", "none",
// and the simulator's "hpcc", "swift").
bool        parse_policy(std::string_view name, Policy *policy_p, std::string *error_p);
const char *policy_name(Policy policy);
// Parses "auto" (0) or a positive number (1/s).
bool parse_gain(std::string_view text, double *gain_p, std::string *error_p);
// Fills the auto (0) fields of a config; returns false with a message naming
// the field and value when a value is out of range.
bool resolve_config(const Config &in, Config *out_p, std::string *error_p);
// A pacer for a valid config, or nullptr and a message saying why.
std::unique_ptr<Pacer> make_pacer(const Config &config, std::string *error_p);

} // namespace doorbell::pacing
