/* UDP device: ACKs that ride on requests going the other way.
 *
 * Two ranks that talk both ways have a connection each way between the same
 * two sockets, and the ACK one of them owes for the other's requests (held
 * for the ACK delay, or due at the end of this receive batch) used to leave
 * as a datagram of its own, a moment before or after a request of its own to
 * the same socket: the reply of a ping-pong, the answer of a windowed
 * stream. Carried behind that request's payload (32 bytes, wire.h RideAck)
 * it costs no system call, no datagram through the kernels and switches and
 * no wake-up at the peer. The rules:
 *  - it rides on a request with the full header (a one-packet message or
 *    the first of a read or an atomic) or on a pack, never on a segment of
 *    several;
 *  - a due ACK rides at once; a deferred one (nobody waits on it) once it
 *    is old or holds many packets (ack_rides_now);
 *  - to the socket the ACK is owed to (the responder's peer);
 *  - it is the ACK as it would have left now: the next PSN expected, the
 *    echo, the hold so far, the CE bytes; the owed ACK is then settled;
 *  - the receiver checks it as an ACK datagram (the connection it names,
 *    that connection's token, the source address), apart from the request
 *    that carries it, and counts a failed check as a drop by its reason.
 */
#include "udp_device.h"

#include <algorithm>

namespace doorbell::udp {

/// The ACK owed to the socket `to` that rides now (ack_rides_now), settled.
bool UdpIface::owed_ack(const sockaddr_in &to, RideAck &ride)
{
    Responder *owed = nullptr;
    for (Responder *r : ack_list_) {
        if (r->ack_due && same_peer(r->peer, to)) {
            owed = r;
            break;
        }
    }
    for (size_t i = 0; owed == nullptr && i < deferred_acks_.size(); ++i) {
        Responder *r = deferred_acks_[i];
        if (same_peer(r->peer, to) && ack_rides_now(*r, now_, ack_delay_)) {
            owed = r;
        }
    }
    if (owed == nullptr) {
        return false;
    }
    ride          = {};
    ride.token    = owed->token;
    ride.qp       = owed->qpn;
    ride.psn      = owed->expected;
    ride.hold     = uint32_t(std::min<uint64_t>(now_ - owed->ts_echo_rx, UINT32_MAX));
    ride.ts_echo  = owed->ts_echo;
    ride.ce_bytes = owed->ce_bytes;
    ++counters.acks_carried;
    acked(*owed);
    return true;
}

/// The ACK owed to the socket `to`, if it should ride now (owed_ack), rides
/// on the full-header request just staged (the last slot).
void UdpIface::carry_ack(const sockaddr_in &to)
{
    TxSlot &s = tx_[tx_count_ - 1];
    if (!owed_ack(to, s.ride)) {
        return;
    }
    s.hdr.flags |= kFlagRide;
    /* behind the payload; a request without one (a READ_REQ) has no
     * payload entry, and its rider takes that place */
    s.iov[s.iovcnt] = {&s.ride, sizeof(RideAck)};
    ++s.iovcnt;
    s.bytes += sizeof(RideAck);
}

/// An ACK that rode on a request from `from` (the request authenticated
/// apart): checked as an ACK datagram is, then taken as one.
void UdpIface::take_ride(const RideAck &ride, const sockaddr_in &from)
{
    auto it = qp_by_num_.find(ride.qp);
    if (it == qp_by_num_.end()) {
        drop(&doorbell_counters_t::rx_drop_no_conn);
        return;
    }
    UdpQp &qp = *it->second;
    if (!tokens_equal(ride.token, qp.token)) {
        drop(&doorbell_counters_t::rx_drop_token);
        return;
    }
    if (!from_peer(qp.peer, qp.peer_ports, from)) {
        drop(&doorbell_counters_t::rx_drop_source);
        return;
    }
    WireHeader h = make_header(Opcode::kAck);
    h.token      = ride.token;
    h.dst_qp     = ride.qp;
    h.psn        = ride.psn;
    h.ts_echo    = ride.ts_echo;
    h.msg_offset = ride.hold;
    h.aux        = ride.ce_bytes;
    handle_response(qp, h, nullptr, false);
}

} // namespace doorbell::udp
