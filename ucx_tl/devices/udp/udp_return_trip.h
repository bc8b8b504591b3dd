/* UDP device: the queue an answer met on its way back.
 *
 * A paced QP's round trip (path_rtt) is the request's way out, the peer's
 * hold taken out, and the answer's way back. Two ranks that exchange a
 * step's data both ways at once (recursive halving, a ring, a pairwise
 * exchange) queue each other's ACKs behind their own data on the reverse
 * link: on the emulated 4 x 1 fabric the round trips of an allreduce's
 * 64 KiB crossing steps read up to 1.9 ms, of which the way back was up to
 * 1.2 ms, and the pacer cut flows for a queue their packets never met.
 *
 * The answer carries the time it left on the peer's clock (ts_send); its
 * arrival is known on this host's (the kernel's receive time). Their
 * difference is the way back's propagation, its queue and the clocks'
 * offset, which is constant between two windows: less its windowed minimum
 * it is the queue alone, as a path's base RTT takes the propagation out of
 * a round trip. The way out is left as measured, ECN marks and losses too.
 *
 * Units: ns. */
#pragma once

#include "pacing/windowed_min.h"

#include <algorithm>
#include <cstdint>

namespace doorbell::udp {

/// The window of the minimum, ns: short beside the drift of two hosts'
/// clocks (NTP slews tens of us per second at worst), long beside the
/// pauses of a bulk transfer's reverse queue.
static constexpr uint64_t kReturnWindowNs = 250000000;

class ReturnTrip {
public:
    /// The queue (ns) an answer that left at `sent_ns` on the peer's clock
    /// and arrived at `arrived_ns` on this host's met on its way: the trip
    /// less the least of the window's trips (0 for the least itself).
    uint64_t queue_ns(uint64_t now_ns, uint64_t arrived_ns, uint64_t sent_ns)
    {
        /* the offset may have either sign: a trip in (-2^63, 2^63) ns,
         * biased into the unsigned order the minimum keeps */
        uint64_t trip = arrived_ns - sent_ns + (uint64_t(1) << 63);
        min_.update(now_ns, trip);
        return trip - min_.get();
    }

private:
    pacing::WindowedMin min_{kReturnWindowNs};
};

/// The round trip `rtt_ns` less the queue `back_ns` its answer met beyond
/// `allowance_ns`, when `reverse_data` (the peer sent us data within the
/// round trip): never below the path's base round trip `base_ns` (0:
/// unknown, no change), nor above the round trip itself.
///  - Only with data coming back: a way back without it has no queue of
///    the two ranks' making, and its delay is the kernels' and the
///    switches' (the emulated incast's senders, whose ACKs come through
///    the same busy kernels as the data, took 40-70 % more CE marks and
///    2-3x the retransmits with it taken out).
///  - Up to the allowance it stays in: the path's target (the kernels'
///    noise, kHostPathDelayNs on a host path) was set with it in the
///    samples.
///  - A way back that read longer than the round trip less the base (the
///    clocks' noise, a minimum the rotation lost) leaves the base: the way
///    out met no queue that the sample can show.
inline uint64_t forward_round_trip(uint64_t rtt_ns, uint64_t back_ns, uint64_t base_ns,
                                   uint64_t allowance_ns, bool reverse_data)
{
    if (!reverse_data || base_ns == 0 || back_ns <= allowance_ns) {
        return rtt_ns;
    }
    uint64_t queue = back_ns - allowance_ns;
    return rtt_ns > base_ns + queue ? rtt_ns - queue : std::min(rtt_ns, base_ns);
}

} // namespace doorbell::udp
