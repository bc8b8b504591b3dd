/* UDP device, multipath: requests that arrive ahead of a gap.
 *
 * A connection whose requester sends from several ports (udp_device.h,
 * Multipath) has its packets carried along several paths of the fabric, and
 * a packet on a path with a shorter queue overtakes those sent before it on
 * a longer one. The responder still executes requests strictly in PSN
 * order (a WRITE's later segments name neither target nor offset, and every
 * completion the requester sees means "everything before it too"), so a
 * request ahead of the PSN expected is copied aside and executed when the
 * gap before it fills, instead of being dropped and NAKed as a single-path
 * connection does: there a gap is a loss, here it is mostly a late packet.
 * A gap the receive path still finds open kReorderWaitNs after it opened,
 * with the socket empty, is a loss after all, and is NAKed (go-back-N from
 * the PSN expected, as before; what is held then executes as the resends
 * fill the gap, and their copies are duplicates).
 * Held requests are bounded per connection (kReorderMaxPackets) and per
 * iface (kReorderMaxBytes): beyond that, a request ahead of a gap is
 * dropped and the gap NAKed at once.
 */
#include "udp_device.h"

#include <algorithm>
#include <cstring>

namespace doorbell::udp {

/// The gap before r's expected PSN is watched from now if it is a new one.
void UdpIface::watch_gap(Responder &r)
{
    if (r.gap_since_ns == 0 || r.gap_psn != r.expected) {
        r.gap_psn      = r.expected;
        r.gap_since_ns = now_;
        r.gap_probed   = false;
    }
    if (std::find(gapped_.begin(), gapped_.end(), r.id) == gapped_.end()) {
        gapped_.push_back(r.id);
    }
}

/// Keeps a copy of a request ahead of the PSN expected (authenticated, in
/// the connection's window) for its turn; false when the gap has been open
/// too long or the bounds are reached (the caller NAKs it as a loss).
bool UdpIface::hold_request(Responder &r, const WireHeader &h, const uint8_t *payload, bool ce)
{
    watch_gap(r);
    if (gap_expired(r) || r.held.size() >= kReorderMaxPackets ||
        held_bytes_ + h.length > kReorderMaxBytes) {
        return false;
    }
    r.last_seen         = now_;
    auto [it, is_first] = r.held.try_emplace(h.psn);
    if (!is_first) {
        ++counters.rx_duplicates; /* a copy waits already */
        return true;
    }
    HeldRequest &held = it->second;
    held.h            = h;
    held.ce           = ce;
    uint64_t could    = std::max(rx_ts_, rx_prev_look_); /* as handle_request times it */
    held.rx_ns        = rx_timestamps_ && could < now_ ? could : now_;
    held.payload.reset(new uint8_t[std::max<uint32_t>(h.length, 1)]);
    if (h.length != 0) {
        std::memcpy(held.payload.get(), payload, h.length);
    }
    held_bytes_ += h.length;
    ++counters.rx_held;
    return true;
}

/// Executes, in PSN order, the held requests of responder `id` whose turn
/// has come (after a datagram moved its expected PSN). The responder is
/// found again before each: a request's handler may post, and a post may
/// change the responder table.
void UdpIface::replay_held(uint32_t id)
{
    for (;;) {
        auto it = responders_.find(id);
        if (it == responders_.end()) {
            return;
        }
        Responder &r    = it->second;
        auto       next = r.held.find(r.expected);
        if (next == r.held.end()) {
            /* requests the expected PSN has passed (their resends were
             * executed) are gone; a gap still before the rest is watched */
            for (auto h = r.held.begin(); h != r.held.end();) {
                if (psn_diff(h->first, r.expected) < 0) {
                    held_bytes_ -= h->second.h.length;
                    h = r.held.erase(h);
                } else {
                    ++h;
                }
            }
            if (!r.held.empty()) {
                watch_gap(r);
            }
            return;
        }
        HeldRequest req = std::move(next->second);
        r.held.erase(next);
        held_bytes_ -= req.h.length;
        /* the copy has no headroom of a receive buffer: delivered as a copy */
        handle_request(r, req.h, req.payload.get(), req.payload.get(), req.ce, kNoSlot);
        /* its echo's hold counts from its arrival: the wait for the gap is
         * the responder's, not the path's (counted in, a gap's recovery
         * read as round trips of its length, and the timers grew with it) */
        if (auto again = responders_.find(id); again != responders_.end() && req.h.ts_send != 0 &&
                                               again->second.ts_echo == req.h.ts_send) {
            again->second.ts_echo_rx = req.rx_ns;
        }
    }
}

void UdpIface::release_held(Responder &r)
{
    for (const auto &[psn, held] : r.held) {
        held_bytes_ -= held.h.length;
    }
    r.held.clear();
}

/// The gaps held requests, or a probe from beyond, showed: one that
/// expired (gap_expired) is a loss, NAKed once (a probe or a later request
/// NAKs it again).
void UdpIface::check_gaps()
{
    size_t keep = 0;
    for (uint32_t id : gapped_) {
        auto it = responders_.find(id);
        if (it == responders_.end()) {
            continue;
        }
        Responder &r = it->second;
        if (r.gap_psn != r.expected) {
            if (r.held.empty()) {
                r.gap_since_ns = 0; /* filled, nothing beyond it */
                continue;
            }
            r.gap_psn      = r.expected;
            r.gap_since_ns = now_;
            r.gap_probed   = false;
        } else if (r.held.empty() && !r.gap_probed) {
            r.gap_since_ns = 0;
            continue;
        } else if (!r.nak_sent && !r.failed && gap_expired(r)) {
            r.nak_sent = true;
            send_control(r, Opcode::kNak, NakCode::kSequence, r.expected);
        }
        gapped_[keep++] = id;
    }
    gapped_.resize(keep);
}

} // namespace doorbell::udp
