/*
 * The pacing seam of the devices: a per-QP gate in front of the wire. A
 * device (UDP: in front of sendmmsg; verbs: software pacing at post time and
 * the hardware rate limit) asks it when the next packet may leave and feeds
 * it what the wire tells: ACKed bytes, CE-marked bytes, RTT samples and
 * losses. A controller (IBRC, DCQCN, ...: pacer.h) implements it; a device
 * never decides a rate itself. Without a gate a QP sends as fast as its
 * window allows.
 *
 * Units: times in ns on the CLOCK_MONOTONIC scale, sizes in bytes,
 * rate() in bytes per second.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "feedback.h"

namespace doorbell::pacing {

class PacingGate {
public:
    virtual ~PacingGate() = default;

    /// Earliest time a packet of bytes may be sent (<= now_ns: send now).
    virtual uint64_t next_send_ns(uint64_t now_ns, uint32_t bytes) = 0;
    /// A packet of bytes was handed to the kernel at now_ns.
    virtual void on_send(uint64_t now_ns, uint32_t bytes) = 0;
    /// An ACK advanced: acked_bytes newly acknowledged, ce_bytes of them
    /// arrived CE-marked; rtt_ns is a fresh sample or 0 if the ACK had none,
    /// of a packet that left at sent_ns (0 = unknown; Feedback::sent_ns).
    virtual void on_ack(uint64_t now_ns, uint64_t acked_bytes, uint64_t ce_bytes, uint64_t rtt_ns,
                        uint64_t sent_ns) = 0;
    /// The same with all an ACK tells (Feedback::acked_sent_ns, INT); a gate
    /// that reads only on_ack()'s part need not override it.
    virtual void on_feedback(const Feedback &f)
    {
        on_ack(f.now_ns, f.acked_bytes, f.ce_bytes, f.rtt_ns, f.sent_ns);
    }
    /// A loss was detected (NAK for a gap, or a retransmit timeout).
    virtual void on_loss(uint64_t now_ns) = 0;
    /// Current rate, bytes/s (for counters and tests).
    virtual double rate() const = 0;
    /// Base (minimum) RTT the controller measured, ns; 0 if it keeps none.
    virtual uint64_t base_rtt_ns() const { return 0; }
    /// A message of bytes (on the wire) is about to begin on a path with
    /// nothing in flight (pacing::Pacer::on_idle_message()).
    virtual void on_idle_message(uint64_t /*now_ns*/, uint64_t /*bytes*/) {}
    /// What is left of the last idle grant is paced from now
    /// (pacing::Pacer::end_idle_grant()).
    virtual void end_idle_grant(uint64_t /*now_ns*/) {}
    /// The path crosses no spine: the bucket may hold burst_ns of the
    /// rate, up to max_bytes (pacing::Pacer::set_time_burst()).
    virtual void set_time_burst(uint64_t /*burst_ns*/, uint32_t /*max_bytes*/) {}
    /// The path crosses no spine: its rate stays at or above half of what
    /// its idle bursts were delivered at lately
    /// (pacing::Pacer::set_delivery_floor()).
    virtual void set_delivery_floor(bool /*on*/) {}
};

/// What a gate is created for.
struct PacingContext {
    std::string device;              ///< device name ("lo")
    std::string policy;              ///< doorbell_iface_params_t::cc
    double      gain;                ///< doorbell_iface_params_t::ibrc_gain (0: derive)
    double      line_rate;           ///< bytes/s estimate of the device
    uint32_t    mtu;                 ///< payload bytes per packet
    uint64_t    target_delay_ns = 0; ///< queueing-delay target; 0 = automatic
    /// the automatic target's floor, ns: delay the path adds without any
    /// queue (a kernel stack's scheduling noise)
    uint64_t target_floor_ns = 0;
    double   min_rate        = 0; ///< floor, bytes/s; 0 = policy default
    double   max_rate        = 0; ///< ceiling, bytes/s; 0 = line_rate
    /// IBRC around its law (pacing::Config): the CE estimate's weight, the
    /// cut per marked loop time, the empty-queue probe's additive floor
    double ce_gain    = 1;
    double ce_beta    = 0.5;
    double probe_step = 0;
    /// a message beginning with nothing in flight goes unscheduled up to
    /// this many bytes (pacing::Config::idle_burst_bytes; 0 = none)
    uint32_t idle_burst_bytes = 0;
    /// IBRC: the rate stays at or above this many segments per smoothed
    /// round trip (pacing::Config::min_window_segments; 0 = none)
    uint32_t min_window_segments = 0;
};

/// Creates the gate of a new QP, or nullptr for "unlimited".
using PacingFactory = std::function<std::unique_ptr<PacingGate>(const PacingContext &)>;

/// Registers the factory for a policy name ("ibrc", "dcqcn", ...); ifaces
/// opened afterwards whose params->cc names it give each QP a gate. Policy
/// "none" and names neither registered nor built in leave QPs unpaced (the
/// adapter validates user input). Thread-safe.
void register_pacing_policy(const std::string &policy, PacingFactory factory);

/// The factory registered for policy, else the built-in one (pacer.h:
/// "ibrc", "dcqcn", "timely"), or an empty function.
PacingFactory find_pacing_policy(const std::string &policy);
/// The policy a device runs for doorbell_iface_params_t::cc ("auto": ibrc,
/// or none on a loopback device; NULL: none).
std::string resolve_pacing_policy(const char *policy, bool loopback);

/// The built-in doorbell_pacing controller for a policy name; empty for
/// "none", unknown names and the simulator's policies (hpcc, swift:
/// policies.h says why no device runs them).
PacingFactory builtin_pacing_policy(const std::string &policy);

} // namespace doorbell::pacing
