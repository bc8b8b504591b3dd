/*
 * Which spine each of a connection's ports reaches, learned as CLOVE learns
 * it (Katta et al., CoNEXT 2017): a probe sent from the port with a TTL
 * that expires at the hop where a leaf-spine fabric's paths part (host ->
 * leaf -> spine: the second) comes back as an ICMP Time Exceeded whose
 * sender is that spine. Ports whose probes name different spines are
 * different paths, known rather than guessed.
 *
 * Why: a connection on one port shares its spine with another connection
 * by the ECMP hash's lottery, and an exchange of a few packets ends before
 * any round trip shows it (4 hosts x 1 rank, 16 KiB allreduce: 380-420 us
 * on separate spines, 690-720 us on one, per job). With a port on each
 * spine, a connection sends its packets on the spines in turn: every
 * connection then puts half its bytes on each spine, the spines carry the
 * same load whatever the hash, and the queues they build are alike (so
 * packets seldom overtake each other). Until two spines are known (no
 * answers: ICMP filtered or rate-limited, a peer under the same leaf, one
 * spine) the connection keeps to one port that moves (udp_paths.h).
 *
 * With 8 ports (7 probed) every probed port hashes onto one of two spines
 * for 1 connection in 64, and such a connection kept that spine: its job
 * ran 1.2-1.5x slower at every size (docs/fabric.md). So an iface binds as
 * many spare ports again after its steered ones (spare_ports(),
 * udp_device.h), which the steering never uses: they are probed only once
 * every steered port answered for one spine, and 15 probed ports all on
 * one of two spines is 1 connection in 16384.
 *
 * Routers rate-limit the ICMP they send (Linux: 6 at once, then 1 a
 * second per destination host): a try probes kClassPortsPerTry ports not
 * answered yet; one that was answered is followed by the next at once, one
 * that was not by another kClassRetryNs later, up to kClassTries of those. Pure, so that it is tested alone
 * (tests/udp/test_udp_path_classes.cc); the device sends the probes and
 * reads the answers (udp_path_probe.cc).
 */
#pragma once

#include "core/doorbell_defaults.h"

#include <array>
#include <cstdint>

namespace doorbell::udp {

/// The probe's TTL: it expires at the spine of a two-tier leaf-spine
/// fabric (the first hop is the host's leaf).
static constexpr int kClassTtl = 2;
/// Ports a try probes. Each answer spends one of its spine's ICMP tokens
/// for this host: two ports find two spines half the time, and a try that
/// was answered is followed at once by the next.
static constexpr uint32_t kClassPortsPerTry = 2;
/// How long a try's answers are waited for (ns): a round trip and more.
static constexpr uint64_t kClassAnswerNs = 20000000ull;
/// After a try nobody answered (ns): a router's ICMP budget refills at one
/// a second.
static constexpr uint64_t kClassRetryNs = 1100000000ull;
/// Tries nobody answered before the connection stops asking (no ICMP on
/// this fabric, or the peer is under the same leaf).
static constexpr uint32_t kClassTries = 4;
/// Spines told apart; more are used as these many.
static constexpr uint32_t kClassMax = 4;

/// The payload of each segment (bytes) that cuts a message of `total`
/// bytes, `most` at most per segment, into a multiple of `spines` segments
/// of one size (the last may be shorter, and rounding may leave one fewer):
/// sent on the spines in turn, each spine then carries as many bytes.
inline uint32_t even_segment(uint32_t total, uint32_t most, uint32_t spines)
{
    if (most == 0 || spines <= 1) {
        return most;
    }
    uint64_t n = (uint64_t(total) + most - 1) / most;
    n          = (n + spines - 1) / spines * spines;
    return uint32_t((total + n - 1) / n);
}

class PathClasses {
public:
    /// The ports to probe now, a bit each, of the iface's `ports` (port 0,
    /// the iface's receiving socket, is never probed: its answers would
    /// interrupt its receives); 0 when no try is due. The steered ports
    /// come first, so the spare ones are probed only when those all reach
    /// one spine.
    uint32_t due(uint64_t now_ns, uint32_t ports)
    {
        if (ready() || ports <= 1 || failed_ >= kClassTries) {
            return 0;
        }
        if (waiting_) {
            if (now_ns - sent_at_ns_ < kClassAnswerNs) {
                return 0;
            }
            waiting_ = false;
            if (!heard_) {
                ++failed_;
                next_at_ns_ = sent_at_ns_ + kClassRetryNs;
            }
        }
        if (failed_ >= kClassTries || now_ns < next_at_ns_) {
            return 0;
        }
        uint32_t mask = 0, n = 0;
        for (uint32_t p = 1; p < ports && p < DOORBELL_MAX_PATHS && n < kClassPortsPerTry; ++p) {
            if (hop_[p] == 0) {
                mask |= 1u << p;
                ++n;
            }
        }
        if (mask == 0) {
            failed_ = kClassTries; /* every port answered, all on one spine */
            return 0;
        }
        waiting_    = true;
        heard_      = false;
        sent_at_ns_ = now_ns;
        return mask;
    }

    /// A probe from `port` expired at the router `hop` (its IPv4 address,
    /// network order; 0 is no answer).
    void answered(uint8_t port, uint32_t hop)
    {
        if (port == 0 || port >= DOORBELL_MAX_PATHS || hop == 0 || hop_[port] != 0) {
            return;
        }
        hop_[port] = hop;
        heard_     = true;
        for (uint32_t c = 0; c < count_; ++c) {
            if (class_hop_[c] == hop) {
                return;
            }
        }
        if (count_ < kClassMax) {
            class_hop_[count_] = hop;
            port_[count_]      = port;
            ++count_;
        }
    }

    /// Two spines known: packets take them in turn.
    bool ready() const { return count_ >= 2; }

    /// The port of the next packet (ready() only): a port per spine, in turn.
    uint8_t next() { return port_[turn_++ % count_]; }

    uint32_t classes() const { return count_; }
    /// The port that reaches spine `c` (< classes()).
    uint8_t port(uint32_t c) const { return c < count_ ? port_[c] : 0; }
    /// Tries nobody answered.
    uint32_t failed() const { return failed_; }
    /// The router a port's probe named (0: none yet).
    uint32_t hop(uint8_t port) const { return port < hop_.size() ? hop_[port] : 0; }

private:
    std::array<uint32_t, DOORBELL_MAX_PATHS> hop_{};
    std::array<uint32_t, kClassMax>          class_hop_{};
    std::array<uint8_t, kClassMax>           port_{};
    uint32_t                                 count_      = 0;
    uint32_t                                 failed_     = 0;
    uint32_t                                 turn_       = 0;
    uint64_t                                 sent_at_ns_ = 0;
    uint64_t                                 next_at_ns_ = 0;
    bool                                     waiting_    = false; ///< a try is out
    bool                                     heard_      = false; ///< it was answered
};

} // namespace doorbell::udp
