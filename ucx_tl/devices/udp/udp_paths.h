/*
 * Multipath steering: which of an iface's ports a requester's next packet
 * leaves from (udp_device.h, Multipath).
 *
 * The fabric's ECMP hash maps each port to a path, and eight ports hash
 * onto two spines 4:4 only about a quarter of the time: with 6:2 a
 * connection that sends from each port in turn loads one spine three times
 * as much as the other, and the pacer holds the whole connection to what
 * the loaded spine takes. So a packet whose answer is timed (a stamp) takes
 * the next port in turn, and every port keeps being measured; the stamp's
 * low bits carry the port, the ACK's echo brings it back with the round
 * trip; any other packet skips ports whose smoothed round trip stands well
 * above the best port's (a queue the others do not have). Pure, so that it
 * is tested alone (tests/udp/test_udp_paths.cc).
 */
#pragma once

#include "core/doorbell_defaults.h"
#include "pacing/feedback.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace doorbell::udp {

static constexpr uint32_t kPathBits = 4; ///< low bits of a stamp that name its port
static_assert((1u << kPathBits) >= DOORBELL_MAX_PATHS);
static_assert((1u << kPathBits) <= pacing::kSentSlackNs, "a stamp's send time within the slack");
/// A port whose round trip exceeds the best one's by more than half of it
/// and this much is skipped: the emulated fabric's base round trip is
/// 10-15 us, its queues hundreds.
static constexpr uint64_t kPathSlackNs = 100000;

/// A stamp (ts_send) that names the port it left from, in its low bits.
inline uint64_t path_stamp(uint64_t now_ns, uint8_t path)
{
    return (now_ns & ~uint64_t((1u << kPathBits) - 1)) | path;
}

/// The send time a stamp carries, its port cleared: up to
/// pacing::kSentSlackNs early.
inline uint64_t stamp_time(uint64_t stamp)
{
    return stamp & ~uint64_t((1u << kPathBits) - 1);
}

/// The port a stamp names.
inline uint8_t stamp_path(uint64_t stamp)
{
    return uint8_t(stamp & ((1u << kPathBits) - 1));
}

class PathTable {
public:
    /// The port of the next packet, of `paths`; a stamped one takes the
    /// next in turn.
    uint8_t pick(uint32_t paths, bool stamped)
    {
        if (paths <= 1) {
            return 0;
        }
        if (stamped) {
            return uint8_t(next_stamp_++ % paths);
        }
        uint64_t limit = slow_above(paths);
        for (uint32_t tries = 0; tries < paths; ++tries) {
            uint8_t k = uint8_t(next_++ % paths);
            if (rtt_ns_[k] <= limit) {
                return k;
            }
        }
        return uint8_t(next_++ % paths); /* none measured well: in turn */
    }

    /// A round trip of a packet that left from `path` (ns).
    void sample(uint8_t path, uint64_t rtt_ns)
    {
        if (path >= rtt_ns_.size()) {
            return;
        }
        uint64_t &r = rtt_ns_[path];
        r           = r == 0 ? rtt_ns : (3 * r + rtt_ns) / 4;
    }

    uint64_t rtt(uint8_t path) const { return path < rtt_ns_.size() ? rtt_ns_[path] : 0; }

    /// The ports of the first 8 that pick() would skip now, a bit each: a
    /// read's requester measures the responder's ports and asks it, in the
    /// READ_REQ, to leave these out of its answer (read_response_path).
    uint8_t avoid_mask(uint32_t paths) const
    {
        uint64_t limit = slow_above(paths);
        uint8_t  mask  = 0;
        for (uint32_t k = 0; k < paths && k < 8; ++k) {
            if (rtt_ns_[k] > limit) {
                mask |= uint8_t(1u << k);
            }
        }
        return mask;
    }

private:
    /// The round trip above which a port counts as slow: the best measured
    /// one's plus max(half of it, kPathSlackNs); none while nothing is
    /// measured (an unmeasured port, 0, is never slow).
    uint64_t slow_above(uint32_t paths) const
    {
        uint64_t best = 0;
        for (uint32_t k = 0; k < paths; ++k) {
            if (rtt_ns_[k] != 0 && (best == 0 || rtt_ns_[k] < best)) {
                best = rtt_ns_[k];
            }
        }
        return best == 0 ? UINT64_MAX : best + std::max<uint64_t>(best / 2, kPathSlackNs);
    }

    std::array<uint64_t, DOORBELL_MAX_PATHS> rtt_ns_{}; ///< smoothed; 0: none yet
    uint32_t                                 next_       = 0;
    uint32_t                                 next_stamp_ = 0;
};

/// The port a read response leaves from: the first answer to a request (the
/// one that echoes its stamp: the requester's sample of that port) takes the
/// next in turn, the others the next one not in `avoid` (the requester's
/// READ_REQ am_id), all of them when it would leave none.
inline uint8_t read_response_path(uint32_t paths, uint8_t avoid, bool first, uint32_t &next,
                                  uint32_t &next_first)
{
    if (paths <= 1) {
        return 0;
    }
    if (first) {
        return uint8_t(next_first++ % paths);
    }
    for (uint32_t tries = 0; tries < paths; ++tries) {
        uint8_t k = uint8_t(next++ % paths);
        if (k >= 8 || !(avoid & (1u << k))) {
            return k;
        }
    }
    return uint8_t(next++ % paths);
}

} // namespace doorbell::udp
