// What one ACK tells a sender: the bytes it acknowledges, how many of them
// arrived CE-marked, an RTT sample, and where a path carries them, the
// in-band telemetry (INT) that the switches stamped on the data packet
// (HPCC: queue length, transmitted bytes, timestamp and line rate per hop).
//
// Units: ns, bytes, bytes/s.
#pragma once

#include <cstdint>

namespace doorbell::pacing {

static constexpr uint32_t kMaxIntHops = 5; ///< INT records a packet carries at most
/// A send time echoed in a stamp may read this much early: a device may keep
/// other bits below it (the UDP device names a packet's port there), ns.
static constexpr uint64_t kSentSlackNs = 16;

// One switch egress port's record, stamped as the data packet left it.
struct IntHop {
    uint64_t ts_ns      = 0; ///< when the packet left the port
    uint64_t tx_bytes   = 0; ///< bytes the port had sent by then, cumulative
    uint32_t qlen_bytes = 0; ///< bytes queued at the port as the packet left
    double   rate_Bps   = 0; ///< the port's line rate
};

struct Telemetry {
    uint32_t hops = 0; ///< records in hop[], path order
    IntHop   hop[kMaxIntHops];
};

struct Feedback {
    uint64_t now_ns      = 0;
    uint64_t acked_bytes = 0;
    uint64_t ce_bytes    = 0; ///< of acked_bytes, arrived CE-marked
    uint64_t rtt_ns      = 0; ///< 0 = no sample in this ACK
    /// when the packet whose round trip rtt_ns is left the sender (its echoed
    /// stamp, which may read up to kSentSlackNs early); 0 = unknown
    uint64_t sent_ns = 0;
    /// when the newest packet this ACK acknowledges left the sender (a read
    /// response: its request), with or without a sample; 0 = unknown. A
    /// mark dated before the controller's last cut is the queue that cut
    /// answered (TCP's CWR).
    uint64_t acked_sent_ns = 0;
    /// of rtt_ns, the time the receiving host held the packet before it
    /// answered (Swift's endpoint delay); 0 = none or unknown
    uint64_t         endpoint_delay_ns = 0;
    const Telemetry *telemetry         = nullptr; ///< INT of the data packet, or none
};

} // namespace doorbell::pacing
