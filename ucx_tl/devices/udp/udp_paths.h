/*
 * Multipath steering: which of an iface's ports a requester's next packet
 * leaves from (udp_device.h, Multipath).
 *
 * The fabric's ECMP hash maps each port to a path. A connection keeps its
 * packets on one port, its home, so that they arrive in order: sprayed over
 * paths with queues of different depths they overtake each other, the
 * receiver holds them, and the pacer reads the deepest queue of all as the
 * connection's (a 2 x 2 allreduce of 1 MiB took 36-41 ms sprayed, 24-31 on
 * one path that moves). One stamped packet in kProbeEvery leaves from another port, in
 * turn, and measures it; the stamp's low bits carry the port and the ACK's
 * echo brings it back with the round trip.
 * A home that shares its path with another connection's traffic (the ECMP
 * lottery) shows it two ways, and either moves the connection, with
 * probability one half, so that two connections that collided do not both
 * move (PLB does the same with a flow label's hash):
 * - a probed port's round trip at most 1/kMoveRatio of the home's and
 *   kPathSlackNs below it: an empty path. The ratio is large because a
 *   connection alone on its path queues there too, and moving it onto a
 *   path that another connection fills costs both of them losses (a third:
 *   43-57 moves a run and hundreds of packets lost; an eighth: 0-8 moves);
 * - a loss on the home (a NAK for a gap): the two queues overflowed the
 *   switch's buffer; the connection moves to the other port measured best.
 * A move waits for kSettleSamples round trips of the new home.
 * Pure, so that it is tested alone (tests/udp/test_udp_paths.cc).
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
/// A probed port is better than the home when its round trip is at most
/// 1/kMoveRatio of the home's and at least this much below it: the emulated
/// fabric's base round trip is 10-15 us, its queues hundreds.
static constexpr uint64_t kPathSlackNs = 100000;
static constexpr uint64_t kMoveRatio   = 8;
/// One stamped packet in this many probes a port other than the home.
static constexpr uint32_t kProbeEvery = 4;
/// Round trips of a new home before the connection may move again.
static constexpr uint32_t kSettleSamples = 4;

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
    /// Decorrelates the coin of tables that see the same round trips.
    void seed(uint32_t seed)
    {
        coin_ = (seed * 0x9e3779b9u) ^ 0x85ebca6bu;
        coin_ = coin_ != 0 ? coin_ : 1; /* xorshift's one fixed point */
    }

    /// The port of the next packet, of `paths`: the home, or for one
    /// stamped packet in kProbeEvery another port, in turn.
    uint8_t pick(uint32_t paths, bool stamped)
    {
        if (paths <= 1) {
            return 0;
        }
        if (home_ >= paths) {
            home_ = 0; /* a peer's echo names 4 bits of port, any of 16 */
        }
        if (!stamped || ++stamps_ % kProbeEvery != 0) {
            return home_;
        }
        uint8_t k = uint8_t(1 + next_probe_++ % (paths - 1)); /* 1 .. paths-1 after home */
        return uint8_t((home_ + k) % paths);
    }

    /// A round trip of a packet that left from `path` (ns); a probe's may
    /// move the home there.
    void sample(uint8_t path, uint64_t rtt_ns)
    {
        if (path >= rtt_ns_.size()) {
            return;
        }
        uint64_t &r = rtt_ns_[path];
        r           = r == 0 ? rtt_ns : (3 * r + rtt_ns) / 4;
        if (path == home_) {
            ++home_samples_;
            return;
        }
        /* the probe's own sample and its smoothed figure both well below a
         * settled home: that path is emptier */
        uint64_t probe = std::max(r, rtt_ns);
        uint64_t home  = rtt_ns_[home_];
        if (home_samples_ < kSettleSamples || home == 0 || probe * kMoveRatio > home ||
            home - probe < kPathSlackNs || !flip()) {
            return;
        }
        move_to(path);
    }

    /// The home lost a packet: with probability one half, move to the
    /// other port with the least round trip (the next one if none measured).
    void lost(uint32_t paths)
    {
        if (paths <= 1 || home_samples_ < kSettleSamples || !flip()) {
            return;
        }
        uint8_t best = uint8_t((home_ + 1) % paths);
        for (uint8_t k = 0; k < paths; ++k) {
            if (k != home_ && rtt_ns_[k] != 0 &&
                (rtt_ns_[best] == 0 || rtt_ns_[k] < rtt_ns_[best])) {
                best = k;
            }
        }
        move_to(best);
    }

    uint64_t rtt(uint8_t path) const { return path < rtt_ns_.size() ? rtt_ns_[path] : 0; }
    uint8_t  home() const { return home_; }
    uint32_t moves() const { return moves_; }

    /// The ports of the first 8 other than the home, a bit each: a read's
    /// requester keeps the responder's answers on one port by naming the
    /// others in its READ_REQ (read_response_path); none with one path.
    uint8_t avoid_mask(uint32_t paths) const
    {
        if (paths <= 1 || home_ >= paths) {
            return 0;
        }
        uint32_t all = paths >= 8 ? 0xffu : (1u << paths) - 1;
        return uint8_t(all & ~(1u << home_));
    }

private:
    void move_to(uint8_t path)
    {
        home_         = path;
        home_samples_ = 0;
        ++moves_;
    }

    bool flip()
    {
        coin_ ^= coin_ << 13; /* xorshift32 */
        coin_ ^= coin_ >> 17;
        coin_ ^= coin_ << 5;
        return coin_ & 1;
    }

    std::array<uint64_t, DOORBELL_MAX_PATHS> rtt_ns_{}; ///< smoothed; 0: none yet
    uint8_t                                  home_         = 0;
    uint32_t                                 home_samples_ = 0; ///< since the last move
    uint32_t                                 stamps_       = 0;
    uint32_t                                 next_probe_   = 0;
    uint32_t                                 moves_        = 0;
    uint32_t                                 coin_         = 0x9e3779b9u;
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
