/* UDP device, requester: cuts the WQEs behind the doorbell into packets,
 * sends and resends them (window, pacer, timers, tail-loss probes) and
 * completes them from ACKs, NAKs and read data. */
#include "udp_device.h"

#include "core/clock.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

namespace doorbell::udp {

namespace {

/// Bytes of the message a WQE describes.
uint32_t message_length(const doorbell_wqe_t &w)
{
    return (w.flags & DOORBELL_WQE_INLINE) ? w.inline_len : w.length;
}

/// Message bytes from offset: inline data or the poster's buffer.
const uint8_t *message_data(const doorbell_wqe_t &w, uint32_t offset)
{
    if (w.flags & DOORBELL_WQE_INLINE) {
        return w.inline_data + offset;
    }
    return reinterpret_cast<const uint8_t *>(uintptr_t(w.local_addr)) + offset;
}

/// Offset of the first chunk of a read piece that has not arrived.
uint32_t first_missing(const ReadPiece &piece)
{
    for (size_t i = 0; i < piece.got.size(); ++i) {
        if (!piece.got[i]) {
            return uint32_t(i) * piece.chunk;
        }
    }
    return piece.length;
}

/// "127.0.0.1:4242 qp 0x1f" for error messages.
std::string peer_string(const sockaddr_in &a, uint32_t qpn)
{
    char ip[INET_ADDRSTRLEN], buf[96];
    inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip));
    snprintf(buf, sizeof(buf), "%s:%u (local qp 0x%x)", ip, ntohs(a.sin_port), qpn);
    return buf;
}

} // namespace

void UdpIface::ring(UdpQp &qp)
{
    if (qp.ring.unrung() == 0) {
        return;
    }
    qp.ring.ring();
    ++counters.doorbells;
    if (depth_ == 0) {
        now_ = now_ns();
    }
    transmit(qp);
    flush_tx();
}

/// Cuts the next packet of the WQEs behind the doorbell into qp.unacked.
/// Returns false when nothing can be cut now (ring empty, fence, window).
bool UdpIface::cut_packet(UdpQp &qp)
{
    while (qp.cursor < qp.ring.rung()) {
        const doorbell_wqe_t &w = qp.ring.wqe(qp.cursor);
        if (qp.cursor_offset == 0) {
            /* Fence, as IBV_SEND_FENCE: after the reads before it. The
             * responder executes requests strictly in PSN order, so a write,
             * send or read after a write needs nothing more; but a read's
             * data leaves the responder's memory when its response is sent,
             * and a later write must not change it first. (Waiting for every
             * earlier WQE's ACK cost a round trip per fence: UCP's fence
             * between a put and its flag, 4-9x on small allreduces.) */
            if ((w.flags & DOORBELL_WQE_FENCE) && !qp.reads.empty()) {
                return false;
            }
            if (qp.tracks.empty() || qp.tracks.back().wqe != qp.cursor) {
                WqeTrack t;
                t.wqe      = qp.cursor;
                t.last_psn = qp.next_psn - 1;
                t.is_send  = w.opcode == DOORBELL_OP_SEND;
                qp.tracks.push_back(t);
            }
        }
        WqeTrack &track = qp.tracks.back();
        uint32_t  total = message_length(w);
        TxPacket  pkt{};
        pkt.psn    = qp.next_psn;
        pkt.wqe    = qp.cursor;
        pkt.offset = qp.cursor_offset;

        switch (w.opcode) {
        case DOORBELL_OP_NOP:
            /* a flush: its completion waits on ACKs nobody asked for yet */
            track.packetized = true;
            qp.probe_due |= !qp.unacked.empty();
            ++qp.cursor;
            continue;
        case DOORBELL_OP_PUT_SIGNAL:
            if (qp.cursor_offset >= total) {
                /* the data is cut (or there is none): the signal word, one
                 * packet with its own PSN, so the responder executes it
                 * once, after the data */
                pkt.opcode = Opcode::kSignal;
                pkt.offset = total;
                pkt.length = sizeof(uint64_t);
                if (!qp.unacked.empty() &&
                    qp.inflight_bytes + pkt.length + sizeof(WireHeader) > window_) {
                    return false;
                }
                qp.inflight_bytes += pkt.length + sizeof(WireHeader);
                pkt.flags        = kFlagLast;
                track.packetized = true;
                track.last_psn   = pkt.psn;
                qp.cursor_offset = 0;
                ++qp.cursor;
                ++qp.next_psn;
                qp.unacked.push_back(pkt);
                return true;
            }
            [[fallthrough]];
        case DOORBELL_OP_PUT:
        case DOORBELL_OP_SEND: {
            pkt.opcode = w.opcode == DOORBELL_OP_SEND ? Opcode::kSend : Opcode::kWrite;
            /* a message of several packets travels in segments: their
             * shorter header leaves the payload more of the datagram (the
             * stamp is decided here, with the payload it leaves room for) */
            uint32_t seg   = mtu_;
            bool     stamp = false;
            if (total > mtu_) {
                stamp            = stamp_due(qp);
                pkt.header_bytes = seg_header_bytes(pkt.opcode, qp.cursor_offset == 0, stamp);
                seg              = segment_payload(pkt.opcode, qp.cursor_offset == 0, stamp);
                if (qp.classes.ready()) {
                    /* packets of one size, as many on every spine */
                    seg = std::min(seg, even_segment(total, segment_payload(pkt.opcode, true, true),
                                                     qp.classes.classes()));
                }
            }
            pkt.length = std::min(seg, total - qp.cursor_offset);
            if (!qp.unacked.empty() &&
                qp.inflight_bytes + pkt.length + sizeof(WireHeader) > window_) {
                return false;
            }
            qp.inflight_bytes += pkt.length + sizeof(WireHeader);
            if (total > mtu_) {
                pkt.stamped = stamp;
                note_stamp(qp, stamp);
            }
            break;
        }
        case DOORBELL_OP_GET: {
            /* pieces of at most half a window: responses must fit the
             * receive buffer, or a large read would lose data forever. A
             * paced QP also bounds the burst: the responder sends a piece
             * back to back, so a piece is what a switch buffer must absorb
             * at once; the pacer spaces the pieces (read_piece_max). */
            uint32_t piece_max = read_piece_max(qp);
            pkt.opcode         = Opcode::kReadReq;
            pkt.length         = std::min(piece_max, total - qp.cursor_offset);
            if (qp.read_bytes > 0 && qp.read_bytes + pkt.length > read_window(qp)) {
                return false;
            }
            if (pkt.length > 0) {
                ReadPiece piece;
                piece.psn         = pkt.psn;
                piece.wqe         = qp.cursor;
                piece.remote_addr = w.remote_addr + qp.cursor_offset;
                piece.rkey        = w.rkey;
                piece.length      = pkt.length;
                piece.chunk       = segment_payload(Opcode::kReadResp);
                piece.dest        = reinterpret_cast<uint8_t *>(uintptr_t(w.local_addr)) +
                             qp.cursor_offset;
                piece.missing = (pkt.length + piece.chunk - 1) / piece.chunk;
                piece.got.assign(piece.missing, false);
                qp.reads.push_back(std::move(piece));
                rx_place_ = mtu_ >= kPlaceMin && !faults_; /* see receive */
                ++track.reads_left;
                qp.read_bytes += pkt.length;
            }
            qp.inflight_bytes += sizeof(WireHeader);
            break;
        }
        case DOORBELL_OP_ATOMIC: {
            /* one request; the WQE completes with its answer (a piece of
             * one chunk, as a read's), which says where the word was */
            pkt.opcode = Opcode::kAtomicReq;
            pkt.length = sizeof(AtomicArgs);
            if (!qp.unacked.empty() &&
                qp.inflight_bytes + pkt.length + sizeof(WireHeader) > window_) {
                return false;
            }
            ReadPiece piece;
            piece.psn         = pkt.psn;
            piece.wqe         = qp.cursor;
            piece.remote_addr = w.remote_addr;
            piece.rkey        = w.rkey;
            piece.length      = w.length;
            piece.chunk       = w.length;
            piece.dest        = reinterpret_cast<uint8_t *>(uintptr_t(w.local_addr));
            piece.missing     = 1;
            piece.got.assign(1, false);
            piece.atomic = true;
            qp.reads.push_back(std::move(piece));
            ++track.reads_left;
            qp.inflight_bytes += pkt.length + sizeof(WireHeader);
            pkt.flags        = kFlagFirst | kFlagLast;
            track.packetized = true;
            track.last_psn   = pkt.psn;
            qp.cursor_offset = 0;
            ++qp.cursor;
            ++qp.next_psn;
            qp.unacked.push_back(pkt);
            return true;
        }
        default:
            /* rejected at post time; a raw WQE cannot get here */
            qp.fail(DOORBELL_ERR_UNSUPPORTED,
                    name + ": unsupported opcode " + std::to_string(w.opcode));
            return false;
        }
        pkt.flags = (qp.cursor_offset == 0 ? kFlagFirst : 0);
        qp.cursor_offset += pkt.length;
        if (qp.cursor_offset >= total && w.opcode != DOORBELL_OP_PUT_SIGNAL) {
            pkt.flags |= kFlagLast;
            track.packetized = true;
            qp.cursor_offset = 0;
            ++qp.cursor;
        }
        track.last_psn = pkt.psn;
        ++qp.next_psn;
        qp.unacked.push_back(pkt);
        return true;
    }
    return false;
}

void UdpIface::send_packet(UdpQp &qp, TxPacket &pkt)
{
    const doorbell_wqe_t &w      = qp.ring.wqe(pkt.wqe);
    bool                  resend = psn_diff(pkt.psn, qp.max_sent) < 0;
    WireHeader            h      = make_header(pkt.opcode);
    h.flags                      = pkt.flags;
    h.token                      = qp.token;
    h.dst_qp                     = qp.remote_qpn;
    h.src_qp                     = qp.qpn;
    h.psn                        = pkt.psn;
    /* a segment carries its stamp only if it was cut with one; a stamp
     * names the port (udp_paths.h) */
    bool    stamped     = pkt.header_bytes == sizeof(WireHeader) || pkt.stamped;
    uint8_t path        = data_path(qp, stamped);
    h.ts_send           = stamped ? path_stamp(now_, path) : 0;
    const void *payload = nullptr;
    switch (pkt.opcode) {
    case Opcode::kWrite:
    case Opcode::kSend:
        h.am_id       = pkt.opcode == Opcode::kSend ? w.am_id : 0;
        h.remote_addr = pkt.opcode == Opcode::kWrite ? w.remote_addr : 0;
        h.rkey        = pkt.opcode == Opcode::kWrite ? w.rkey : 0;
        h.msg_length  = message_length(w);
        h.msg_offset  = pkt.offset;
        h.length      = pkt.length;
        payload       = message_data(w, pkt.offset);
        break;
    case Opcode::kSignal:
        h.am_id       = w.am_id;
        h.remote_addr = w.signal_addr;
        h.rkey        = w.signal_rkey;
        h.msg_length  = sizeof(uint64_t);
        h.length      = sizeof(uint64_t);
        payload       = &w.signal_value; /* the ring slot lives until done */
        break;
    case Opcode::kAtomicReq:
        h.am_id       = w.am_id;
        h.remote_addr = w.remote_addr;
        h.rkey        = w.rkey;
        h.msg_length  = w.length;
        h.length      = sizeof(AtomicArgs);
        payload       = &w.atomic_compare; /* AtomicArgs; the slot lives until done */
        if (resend) {
            h.flags |= kFlagRetry;
        }
        break;
    case Opcode::kReadReq:
        h.remote_addr = w.remote_addr + pkt.offset;
        h.rkey        = w.rkey;
        h.am_id       = qp.peer_path.avoid_mask(qp.peer_paths); /* its ports to leave out */
        h.msg_length  = pkt.length;
        h.aux         = segment_payload(Opcode::kReadResp);
        /* the newest request last (cut_packet) */
        for (auto it = qp.reads.rbegin(); it != qp.reads.rend(); ++it) {
            if (it->psn != pkt.psn) {
                continue;
            }
            if (resend) {
                /* the data may have been lost too: ask from the first chunk
                 * missing (none missing: only the ACK is wanted) */
                h.flags |= kFlagRetry;
                h.msg_offset = first_missing(*it);
            } else {
                it->sent_ns = now_; /* dates its responses' marks (the first send) */
            }
            break;
        }
        break;
    default:
        return;
    }
    /* a read's responses are its pacer's feedback (they echo the request's
     * stamp and carry the path's CE marks): an ACK asked for on top of
     * them is one more datagram per piece on the loaded direction */
    if (wants_ack(qp, pkt, w, resend) ||
        (h.ts_send != 0 && pkt.opcode != Opcode::kReadReq && feedback_due(qp))) {
        h.flags |= kFlagAckReq;
        qp.ack_req_ns = now_;
    }
    stage(h, payload, h.length, nullptr, 0, qp.peer, path, pkt.header_bytes);
    if (pkt.header_bytes == sizeof(WireHeader)) {
        carry_ack(qp.peer);
    }
    qp.last_ack_req = (h.flags & kFlagAckReq) != 0;
    note_sent(qp, pkt, resend, path_bytes(pkt, h.msg_offset));
    qp.tlp_at_ns = now_ + tlp_timeout(qp);
}

/// Whether a packet asks for an immediate ACK: someone waits on it (a
/// signaled WQE ends), a retransmission, half the window or half the AM
/// credits used, or a read that has no data to answer with.
bool UdpIface::wants_ack(const UdpQp &qp, const TxPacket &pkt, const doorbell_wqe_t &w,
                         bool resend) const
{
    return resend || qp.inflight_bytes * 2 > window_ ||
           ((pkt.flags & kFlagLast) && (w.flags & DOORBELL_WQE_SIGNALED) &&
            pkt.opcode != Opcode::kAtomicReq) || /* its answer acknowledges it */
           (pkt.opcode == Opcode::kSend && qp.am_inflight * 2 >= params.am_credits) ||
           (pkt.opcode == Opcode::kReadReq && pkt.length == 0);
}

/// Whether a paced QP's next stamped packet asks for an ACK: its pacer
/// holds packets behind it, and none asked for half a round trip. The
/// pacer updates once per loop time, on what ACKs tell it, and an ACK nobody
/// asks for may be held for kAckEvery packets or the ACK delay (6.25 ms with
/// a 50 ms rto_min): a paced 32 KiB message, whose packets nobody waits on,
/// started at the first rate and was still there when its ACK came,
/// milliseconds later. A QP with nothing behind the packet needs no news
/// (asked for on every message of a ping-pong, the ACKs left as datagrams
/// of their own and doubled its latency across the emulated fabric).
bool UdpIface::feedback_due(const UdpQp &qp) const
{
    bool behind = psn_diff(qp.next_psn, qp.tx_psn) > 1 || qp.cursor < qp.ring.rung();
    return qp.gate && qp.paced && behind &&
           (qp.srtt_ns == 0 || now_ - qp.ack_req_ns >= qp.srtt_ns / 2);
}

/// What sending a packet changes, once it is staged: the retransmit count
/// or the highest PSN sent, the pacer's charge, the retransmit timer.
void UdpIface::note_sent(UdpQp &qp, TxPacket &pkt, bool resend, uint32_t bytes)
{
    if (resend) {
        ++counters.retransmits;
    } else {
        qp.max_sent = pkt.psn + 1;
        pkt.sent_ns = now_; /* a resend keeps its first time, as TCP's CWR its sequence */
    }
    if (qp.gate) {
        /* a read request is charged what it asks for: the responses come
         * back on this path's behalf (receiver-driven reads) */
        qp.gate->on_send(now_, bytes);
    }
    if (qp.window_open && !resend) {
        /* bounded: an open window has no ACK yet, so what it sent is in
         * flight, under the flow-control window */
        qp.window_sent += bytes;
    }
    qp.last_tx_ns = now_;
    if (qp.deadline_ns == 0) {
        qp.deadline_ns = now_ + qp.rto_ns;
    }
}

/// Whether the next segment or pack a QP sends carries its ts_send: one in
/// kStampEvery of a paced QP's (its pacer's samples), one per round trip of
/// another's (its timers'), every one until a first round trip is known.
bool UdpIface::stamp_due(const UdpQp &qp) const
{
    if (qp.srtt_ns == 0) {
        return true;
    }
    return qp.paced ? qp.unstamped + 1 >= kStampEvery : now_ - qp.stamp_ns >= qp.srtt_ns;
}

void UdpIface::note_stamp(UdpQp &qp, bool stamped) const
{
    if (stamped) {
        qp.stamp_ns  = now_;
        qp.unstamped = 0;
    } else {
        ++qp.unstamped;
    }
}

/// The most bytes of a pack's datagram: a full-header packet's datagram, at
/// most kPackMaxBytes.
uint32_t UdpIface::pack_limit() const
{
    return std::min<uint32_t>(kPackMaxBytes, mtu_ + uint32_t(sizeof(WireHeader)));
}

/// Whether a packet travels in a pack: an active message of one packet
/// that fits one with a stamp, a member header and a riding ACK.
bool UdpIface::packable(const TxPacket &pkt) const
{
    static constexpr uint32_t kOverhead = sizeof(PackHeader) + sizeof(uint64_t) +
                                          sizeof(PackMember) + sizeof(RideAck);
    return pkt.opcode == Opcode::kSend &&
           (pkt.flags & (kFlagFirst | kFlagLast)) == (kFlagFirst | kFlagLast) &&
           pkt.header_bytes == sizeof(WireHeader) && pkt.length + kOverhead <= pack_limit();
}

/// Sends the packet at tx_psn (packable, its pacer's wait already checked)
/// and the packable ones after it, cut from the ring as far as the pack, the
/// window and the pacer allow, as one pack. The messages are copied in
/// behind room for the header, which goes last, right before the first
/// message (a lone message has no member header): whether the pack is
/// stamped and asks for an ACK is known only then.
void UdpIface::send_pack(UdpQp &qp)
{
    static constexpr uint32_t kRoom = sizeof(PackHeader) + sizeof(uint64_t);
    uint8_t                  *buf;
    TxSlot                   &s     = stage_linear(qp.peer, 0, &buf); /* port: below */
    uint32_t                  limit = pack_limit() - uint32_t(sizeof(RideAck));
    uint32_t                  end   = kRoom;
    uint32_t                  count = 0;
    uint32_t                  psn   = qp.tx_psn;
    uint8_t                   am_id = 0;
    bool                      ack   = false;
    for (;;) {
        TxPacket &pkt = qp.unacked[qp.tx_psn - qp.una];
        if (count != 0) {
            if (!packable(pkt) || count == kPackMaxMessages ||
                end + sizeof(PackMember) + pkt.length > limit) {
                break;
            }
            if (qp.gate && qp.gate->next_send_ns(now_, pkt.length + sizeof(PackMember)) > now_) {
                ++counters.paced_waits;
                ++qp.paced_waits;
                mark_paced(qp);
                break;
            }
        }
        const doorbell_wqe_t &w      = qp.ring.wqe(pkt.wqe);
        bool                  resend = psn_diff(pkt.psn, qp.max_sent) < 0;
        PackMember            m{w.am_id, uint16_t(pkt.length)};
        std::memcpy(buf + end, &m, sizeof(m));
        std::memcpy(buf + end + sizeof(m), message_data(w, 0), pkt.length);
        end += uint32_t(sizeof(m)) + pkt.length;
        ack |= wants_ack(qp, pkt, w, resend);
        am_id = w.am_id;
        note_sent(qp, pkt, resend,
                  pkt.length + uint32_t(sizeof(m)) + (count == 0 ? uint32_t(kRoom) : 0));
        ++count;
        ++qp.tx_psn;
        if (qp.tx_psn == qp.next_psn && !cut_packet(qp)) {
            break;
        }
    }
    /* stamped when its answer is timed (stamp_due), and when it asks for
     * an ACK: answered at once, a clean sample */
    if (!ack && feedback_due(qp)) {
        ack = true;
    }
    if (ack) {
        qp.ack_req_ns = now_;
    }
    bool stamp = ack || stamp_due(qp);
    note_stamp(qp, stamp);
    s.path = data_path(qp, stamp);
    /* the header ends where the first member header would begin, or for a
     * lone message (which has none) where its payload begins */
    uint32_t first = count == 1 ? kRoom + uint32_t(sizeof(PackMember)) : kRoom;
    uint8_t  head[kRoom];
    uint32_t hlen  = encode_pack_header(head, ack ? kFlagAckReq : 0, count, am_id, qp.token,
                                        qp.remote_qpn, psn, stamp ? path_stamp(now_, s.path) : 0);
    uint32_t start = first - hlen;
    std::memcpy(buf + start, head, hlen);
    RideAck ride;
    if (owed_ack(qp.peer, ride)) {
        std::memcpy(buf + end, &ride, sizeof(ride));
        end += uint32_t(sizeof(ride));
        buf[start + offsetof(PackHeader, flags)] |= kFlagRide;
    }
    s.iov[0] = {buf + start, end - start};
    s.bytes  = end - start;
    ++counters.packs;
    counters.packed += count;
    qp.last_ack_req = ack;
    qp.tlp_at_ns    = now_ + tlp_timeout(qp);
}

/// The first packet of a WRITE or SEND of several packets.
static bool starts_long_message(const TxPacket &pkt)
{
    return (pkt.opcode == Opcode::kWrite || pkt.opcode == Opcode::kSend) &&
           (pkt.flags & (kFlagFirst | kFlagLast)) == kFlagFirst;
}

/// Idle windows. A window opens on a QP that sent everything it had (its
/// last transmit left nothing behind: no pacer or flow-control backlog) and
/// has at most a segment unacknowledged. Not on one that was merely silent
/// for a while: a streaming sender descheduled for a round trip resumed
/// into a congested queue with a burst, and an incast's retransmits went
/// from 0.1 % to 5 %. Its messages, posted one by one right after each
/// other (a window of MPI_Isend, a collective step's pieces), leave with the
/// pacer's tokens until it would hold one. If that happens before the
/// first ACK of new data came back, the window gets the rest of the idle
/// allowance (host_burst_bytes(), what a message of several packets on a
/// quiet QP gets whole) unpaced, once: on an idle path the bytes of one
/// round trip find empty queues, as TCP's initial window does after idle.
/// What the window has not spent when the first ACK of new data comes back
/// is taken back (end_idle_grant): left standing, it let a later message
/// burst into a queue the path had filled since.
/// osu_mbw_mr's 16-message windows across the emulated spine (4 x 1), 5
/// rounds: 256 B 46.2 -> 57.5 MB/s, 1 KiB 52.9 -> 55.6. Returns whether the
/// packet may go now.
bool UdpIface::grant_window(UdpQp &qp, const TxPacket &pkt)
{
    uint32_t allowance = host_burst_bytes();
    /* a read request is charged the bytes it asks for, and they come back
     * from the peer as one burst: reads stay paced */
    bool data = pkt.opcode == Opcode::kWrite || pkt.opcode == Opcode::kSend;
    if (!data || !qp.window_open || qp.window_given || !qp.reads.empty() ||
        qp.window_sent >= allowance) {
        return false;
    }
    qp.window_given = true;
    qp.window_left  = true;
    ++counters.idle_windows;
    qp.gate->on_idle_message(now_, allowance - qp.window_sent);
    return qp.gate->next_send_ns(now_, path_bytes(pkt, 0)) <= now_;
}

/// At most one segment's payload unacknowledged.
bool UdpIface::little_in_flight(const UdpQp &qp) const
{
    uint64_t in_flight = 0;
    for (uint32_t psn = qp.una; psn != qp.tx_psn && in_flight <= mtu_; ++psn) {
        in_flight += qp.unacked[psn - qp.una].length;
    }
    return in_flight <= mtu_;
}

/// Whether a paced QP has nothing in the network: nothing unacknowledged
/// but at most one segment's payload (a flag or a short message, whose ACK
/// the peer may hold: a collective's next step, posted right behind the
/// last one's flag, went paced at every release), or nothing sent for a
/// round trip and four of its rate's segment times (what is unacknowledged
/// then waits on the peer's ACK delay, as the tail of a ping-pong's last
/// message does; a paced stream's packets are never that far apart).
bool UdpIface::quiet(const UdpQp &qp) const
{
    if (little_in_flight(qp)) {
        return true;
    }
    double   rate    = qp.gate->rate();
    uint64_t spacing = rate > 0 ? uint64_t((mtu_ + sizeof(WireHeader)) / rate * 1e9) :
                                  UINT64_MAX / 8;
    return qp.last_tx_ns != 0 && qp.srtt_ns != 0 &&
           now_ - qp.last_tx_ns >= std::max<uint64_t>(qp.srtt_ns, 4 * spacing);
}

void UdpIface::transmit(UdpQp &qp)
{
    if (!qp.connected) {
        if (qp.connect_tries == 0 && !qp.in_error() && qp.cursor < qp.ring.rung()) {
            send_connect(qp); /* its first work: connect now */
        }
        return; /* (a QP still connecting keeps its WQEs in the ring) */
    }
    if (qp.in_error() || now_ < qp.hold_until_ns) {
        return;
    }
    for (;;) {
        if (qp.tx_psn == qp.next_psn && !cut_packet(qp)) {
            break;
        }
        if (qp.tx_psn == qp.next_psn) {
            continue; /* a NOP: nothing to send */
        }
        TxPacket &pkt   = qp.unacked[qp.tx_psn - qp.una];
        bool      fresh = psn_diff(pkt.psn, qp.max_sent) >= 0; /* not a resend */
        if (qp.gate && fresh && !qp.window_open && !qp.backlog && little_in_flight(qp)) {
            qp.window_open  = true; /* until an ACK of new data */
            qp.window_given = false;
            qp.window_sent  = 0;
        }
        if (qp.gate && qp.reads.empty() && starts_long_message(pkt) && fresh && !qp.backlog &&
            !(qp.window_open && qp.window_given) && !(qp.idle_told && qp.idle_psn == pkt.psn) &&
            quiet(qp)) {
            /* nothing in flight: the message may leave as one burst (told
             * once, though the pacer may hold it over several calls; an
             * open window's one grant). Not after a transmit that left work
             * behind: a paced stream that lost its core is quiet by time,
             * and its bursts doubled the incast's CE marks */
            qp.window_given           = qp.window_open;
            qp.idle_told              = true;
            qp.idle_psn               = pkt.psn;
            const doorbell_wqe_t &w   = qp.ring.wqe(pkt.wqe);
            uint32_t              len = message_length(w);
            uint32_t              seg = segment_payload(pkt.opcode);
            qp.gate->on_idle_message(now_,
                                     len + uint64_t(len + seg - 1) / seg * sizeof(WireHeader));
        }
        if (qp.gate && qp.gate->next_send_ns(now_, path_bytes(pkt, 0)) > now_ &&
            !grant_window(qp, pkt)) {
            ++counters.paced_waits;
            ++qp.paced_waits;
            mark_paced(qp);
            break; /* paced: progress sends it later */
        }
        if (packable(pkt)) {
            send_pack(qp); /* it, and what follows it into the pack */
            continue;
        }
        send_packet(qp, pkt);
        ++qp.tx_psn;
    }
    qp.backlog = qp.tx_psn != qp.next_psn || qp.cursor < qp.ring.rung();
    /* a flush asks for the ACK once everything before it has left: a
     * probe ahead of packets the pacer still holds would read as a gap.
     * When the last packet asked for an ACK at once (a signaled WQE ended
     * there), that cumulative ACK answers the flush: a probe would only
     * double the packets of every put and flush, both ways */
    if (qp.probe_due && qp.tx_psn == qp.next_psn) {
        qp.probe_due = false;
        if (qp.probed_psn != qp.next_psn && !qp.unacked.empty() && !qp.last_ack_req) {
            send_probe(qp, qp.next_psn);
            qp.probed_psn = qp.next_psn;
        }
    }
    retire(qp); /* NOPs and fences complete without packets */
}

/// Asks the peer to answer now for everything below psn: an ACK, or a NAK
/// naming the first packet it lacks.
void UdpIface::send_probe(UdpQp &qp, uint32_t psn)
{
    WireHeader h = make_header(Opcode::kAckReq);
    h.token      = qp.token;
    h.dst_qp     = qp.remote_qpn;
    h.src_qp     = qp.qpn;
    h.psn        = psn;
    uint8_t path = data_path(qp, true);
    h.ts_send    = path_stamp(now_, path);
    stage(h, nullptr, 0, nullptr, 0, qp.peer, path);
}

/// The tail-loss probe's timeout: two round trips, at least kTlpMinNs, plus
/// the peer's ACK delay when what is awaited is the ACK of a packet that did
/// not ask for one (that answer may be held so long on purpose; read data
/// is never held); at most the retransmit timeout.
uint64_t UdpIface::tlp_timeout(const UdpQp &qp) const
{
    if (qp.srtt_ns == 0) {
        return qp.rto_ns;
    }
    uint64_t t = std::max<uint64_t>(2 * qp.srtt_ns, kTlpMinNs);
    if (!qp.unacked.empty() && !qp.last_ack_req) {
        t += ack_delay_;
    }
    return std::min(t, qp.rto_ns);
}

/// Completes WQEs whose packets are all acknowledged and whose reads are in.
void UdpIface::retire(UdpQp &qp)
{
    while (!qp.tracks.empty()) {
        const WqeTrack &t = qp.tracks.front();
        if (!t.packetized || t.reads_left != 0 || psn_diff(t.last_psn, qp.una) >= 0) {
            break;
        }
        if (t.is_send && qp.am_inflight > 0) {
            --qp.am_inflight;
        }
        uint64_t end = t.wqe + 1;
        qp.tracks.pop_front();
        qp.complete_to(end);
    }
}

void UdpIface::check_timer(UdpQp &qp)
{
    if (qp.in_error()) {
        return;
    }
    if (!qp.connected) {
        check_connect(qp);
        return;
    }
    probe_classes(qp);
    if (!check_keepalive(qp) || qp.deadline_ns == 0) {
        return;
    }
    if (qp.unacked.empty() && qp.reads.empty()) {
        qp.deadline_ns = 0;
        return;
    }
    if (qp.tlp_at_ns != 0 && now_ >= qp.tlp_at_ns && now_ < qp.deadline_ns) {
        /* Tail-loss probe: nothing came back for two round trips. The
         * packets at the end of a burst have no successor whose arrival
         * shows the gap, so without a probe only the (long, backed-off)
         * retransmit timeout would find it; the probe's answer (a NAK for
         * the gap, or an ACK) costs one small packet, not a resend. */
        qp.tlp_at_ns = 0;
        if (!qp.unacked.empty() && psn_diff(qp.max_sent, qp.una) > 0) {
            ++qp.tail_probes;
            ++counters.tail_probes;
            send_probe(qp, qp.max_sent);
        }
        /* read data that stopped short: its request was answered, so no
         * probe can show the loss; ask for the rest now */
        if (rerequest_reads(qp) != 0 && qp.gate) {
            qp.gate->on_loss(now_);
            mark_paced(qp);
            note_rate(qp);
        }
        return;
    }
    if (now_ < qp.deadline_ns) {
        return;
    }
    if (qp.retries >= params.retry_count) {
        qp.deadline_ns = 0;
        qp.fail(DOORBELL_ERR_TIMED_OUT,
                name + ": peer " + peer_string(qp.peer, qp.qpn) + " did not answer " +
                    std::to_string(params.retry_count) + " retransmissions");
        return;
    }
    ++qp.retries;
    ++qp.timeouts;
    ++counters.timeouts;
    qp.rto_ns      = std::min(qp.rto_ns * 2, params.rto_max_ns);
    qp.deadline_ns = now_ + qp.rto_ns;
    if (qp.gate) {
        qp.gate->on_loss(now_);
        mark_paced(qp);
        note_rate(qp);
    }
    /* A timeout is as often a descheduled peer (or a descheduled us) as a
     * loss: resending the whole window then would only flood the peer's
     * receive buffer with duplicates. Resend the oldest packet alone, asking
     * for an ACK; its answer says where the peer stands, and only then does
     * go-back-N resend what is really missing (handle_ack). */
    if (!qp.unacked.empty() && psn_diff(qp.tx_psn, qp.una) > 0) {
        qp.recovering  = true;
        qp.recover_psn = qp.max_sent;
        qp.recover_ts  = path_stamp(now_, 0); /* the resend's stamp, whatever its port */
        qp.recover_one = qp.unacked.front().psn;
        send_packet(qp, qp.unacked.front());
    }
    /* read pieces acknowledged but short of data: ask again */
    rerequest_reads(qp);
}

/// The header of a request asked again for a read piece or an atomic (its
/// connection, PSN, target and length as first sent), marked a retry.
WireHeader UdpIface::retry_header(const UdpQp &qp, Opcode op, const ReadPiece &piece) const
{
    WireHeader h  = make_header(op);
    h.flags       = kFlagFirst | kFlagLast | kFlagRetry;
    h.token       = qp.token;
    h.dst_qp      = qp.remote_qpn;
    h.src_qp      = qp.qpn;
    h.psn         = piece.psn;
    h.remote_addr = piece.remote_addr;
    h.rkey        = piece.rkey;
    h.msg_length  = piece.length;
    h.ts_send     = now_;
    return h;
}

/// Asks again, from its first missing chunk, for every read piece whose
/// request was answered but whose data did not all arrive. Returns how many.
unsigned UdpIface::rerequest_reads(UdpQp &qp)
{
    unsigned count = 0;
    for (const ReadPiece &piece : qp.reads) {
        if (psn_diff(piece.psn, qp.una) >= 0) {
            break; /* the request itself is resent by go-back-N */
        }
        if (piece.atomic) {
            /* acknowledged, unanswered: the responder answers it again
             * from its cache (it never executes it twice) */
            const doorbell_wqe_t &w = qp.ring.wqe(piece.wqe);
            WireHeader            h = retry_header(qp, Opcode::kAtomicReq, piece);
            h.am_id                 = w.am_id;
            h.length                = sizeof(AtomicArgs);
            uint8_t path            = data_path(qp, true);
            h.ts_send               = path_stamp(now_, path);
            stage(h, &w.atomic_compare, sizeof(AtomicArgs), nullptr, 0, qp.peer, path);
            ++counters.retransmits;
            ++count;
            continue;
        }
        WireHeader h = retry_header(qp, Opcode::kReadReq, piece);
        h.msg_offset = first_missing(piece);
        h.aux        = piece.chunk;
        uint8_t path = data_path(qp, true);
        h.ts_send    = path_stamp(now_, path);
        stage(h, nullptr, 0, nullptr, 0, qp.peer, path);
        ++counters.retransmits;
        ++count;
    }
    return count;
}

/// A QP whose pacer limits it (it had to wait, or was told of marks or
/// loss) needs RTT samples free of this host's scheduling: from now on the
/// iface takes kernel arrival times. Until then it does not pay for them (a
/// timestamp and its control message cost 0.2-0.3 us per datagram, a fifth
/// of an 8-byte UCP round trip on lo). The peer's side of the sample is its
/// deliberate hold alone (see handle_request).
void UdpIface::mark_paced(UdpQp &qp)
{
    if (!qp.paced) {
        qp.paced = true;
        enable_rx_timestamps();
    }
}

/// The path's round trip for an answer to a packet sent at ts_echo, which the
/// peer held hold_ns before answering: from the kernel's arrival time, so
/// that neither side's scheduling delay reads as queueing. 0: no sample.
uint64_t UdpIface::path_rtt(uint64_t ts_echo, uint32_t hold_ns) const
{
    if (ts_echo == 0 || ts_echo > rx_ts_) {
        return 0;
    }
    uint64_t elapsed = rx_ts_ - ts_echo;
    return hold_ns < elapsed ? elapsed - hold_ns : 0;
}

/// A paced QP's round trip `rtt` less the queue its answer, sent at
/// `answer_sent` on the peer's clock, met on its way back beyond the
/// path's noise allowance, when the peer sent us data within the round
/// trip (udp_return_trip.h). As measured without kernel receive times.
uint64_t UdpIface::forward_rtt(UdpQp &qp, uint64_t rtt, uint64_t answer_sent)
{
    if (!rx_timestamps_) {
        return rtt;
    }
    uint64_t back = qp.back.queue_ns(now_, rx_ts_, stamp_time(answer_sent));
    if (back <= kHostPathDelayNs) {
        return rtt; /* within the allowance: no need to look for data coming back */
    }
    return forward_round_trip(rtt, back, qp.gate->base_rtt_ns(), kHostPathDelayNs,
                              data_from(qp, now_ - std::min(now_, rtt)));
}

/// Whether the peer of qp sent us a request with payload since `since_ns`,
/// on its QP to us (the responder found once, then by its id; looked for
/// again at most every kClassWatchNs).
bool UdpIface::data_from(UdpQp &qp, uint64_t since_ns)
{
    const Responder *r = nullptr;
    if (qp.reverse_id != 0) {
        auto it = responders_.find(qp.reverse_id);
        if (it != responders_.end() && same_peer(it->second.peer, qp.peer)) {
            r = &it->second;
        } else {
            qp.reverse_id = 0; /* gone, or its number taken by another */
        }
    }
    if (r == nullptr && now_ >= qp.reverse_look_ns) {
        qp.reverse_look_ns = now_ + kClassWatchNs;
        for (const auto &[id, x] : responders_) {
            if (same_peer(x.peer, qp.peer)) {
                r             = &x;
                qp.reverse_id = id;
                break;
            }
        }
    }
    return r != nullptr && r->data_ns >= since_ns && r->data_ns != 0;
}

/// Bytes a packet costs its path: its datagram, and for a read request the
/// data (with a header per chunk) it asks back from offset on.
uint32_t UdpIface::path_bytes(const TxPacket &pkt, uint32_t offset) const
{
    if (pkt.opcode != Opcode::kReadReq) {
        return pkt.length + pkt.header_bytes;
    }
    uint32_t len   = pkt.length - std::min(offset, pkt.length);
    uint32_t chunk = segment_payload(Opcode::kReadResp);
    return uint32_t(sizeof(WireHeader)) + len +
           (len + chunk - 1) / chunk * seg_header_bytes(Opcode::kReadResp, false, false);
}

/// Read bytes a QP may have outstanding: the window; on a paced QP at most
/// two bandwidth-delay products of its rate (and two pieces). A responder
/// answers every request it finds when it gets to run, back to back: what
/// is outstanding is the burst a descheduled peer sends at once.
uint64_t UdpIface::read_window(const UdpQp &qp) const
{
    if (!qp.gate || qp.srtt_ns == 0) {
        return window_;
    }
    double   bdp = qp.gate->rate() * double(std::max(qp.srtt_ns, kTlpMinNs)) * 1e-9;
    uint64_t cap = std::max<uint64_t>(uint64_t(2 * bdp), 2ull * read_piece_max(qp));
    return std::min(window_, cap);
}

/// Largest read piece: half a window; on a paced QP also kReadPieceSegments
/// chunks, the burst the responder sends back to back.
uint32_t UdpIface::read_piece_max(const UdpQp &qp) const
{
    uint64_t max = std::max<uint64_t>(window_ / 2, mtu_);
    if (qp.gate) {
        max = std::min<uint64_t>(max,
                                 uint64_t(kReadPieceSegments) * segment_payload(Opcode::kReadResp));
    }
    return uint32_t(max);
}

/// A response to qp (authenticated: its token, from its peer's address).
void UdpIface::handle_response(UdpQp &qp, const WireHeader &h, const uint8_t *payload, bool ce)
{
    heard(qp);
    if (!qp.connected) {
        if (Opcode(h.opcode) == Opcode::kAccept) {
            handle_accept(qp, h);
        } else if (Opcode(h.opcode) == Opcode::kNak && NakCode(h.am_id) == NakCode::kRefused) {
            qp.deadline_ns = 0;
            qp.fail(DOORBELL_ERR_REMOTE, name + ": peer " + peer_string(qp.peer, qp.qpn) +
                                             " refused the connection: its table of " +
                                             std::to_string(kMaxResponders) +
                                             " connections is full of live ones");
        } else {
            drop(&doorbell_counters_t::rx_drop_state); /* nothing was sent yet */
        }
        return;
    }
    if (qp.in_error()) {
        drop(&doorbell_counters_t::rx_drop_state);
        return;
    }
    switch (Opcode(h.opcode)) {
    case Opcode::kAck:
        handle_ack(qp, h);
        break;
    case Opcode::kNak:
        handle_nak(qp, h);
        break;
    case Opcode::kAtomicResp:
        handle_atomic_resp(qp, h);
        break;
    case Opcode::kAccept:
        handle_accept(qp, h);
        break;
    default:
        handle_read_resp(qp, h, payload, ce);
        break;
    }
}

void UdpIface::ack_psn(UdpQp &qp, uint32_t psn, uint64_t now)
{
    if (psn_diff(psn, qp.una) <= 0 || psn_diff(psn, qp.next_psn) > 0) {
        return; /* old news, or acknowledges what we never sent */
    }
    while (qp.una != psn) {
        const TxPacket &p = qp.unacked.front();
        qp.inflight_bytes -= (p.opcode == Opcode::kReadReq ? 0 : p.length) + sizeof(WireHeader);
        /* first sends go in PSN order: the last one acknowledged is the newest */
        qp.newest_acked = std::max(qp.newest_acked, p.sent_ns);
        qp.unacked.pop_front();
        ++qp.una;
    }
    if (psn_diff(qp.tx_psn, qp.una) < 0) {
        qp.tx_psn = qp.una;
    }
    qp.retries = 0;
    /* the timeout follows the measured round trip (four smoothed RTTs),
     * so a slow path or a busy peer is not mistaken for loss; after a
     * timeout the backed-off value holds until everything sent before it
     * is acknowledged (else every ACK of a resend would undo the backoff
     * and a peer that keeps being descheduled would see a resend per RTT) */
    if (qp.recovering && psn_diff(qp.una, qp.recover_psn) >= 0) {
        qp.recovering = false;
    }
    if (!qp.recovering) {
        qp.rto_ns = std::clamp(4 * qp.srtt_ns, params.rto_min_ns, params.rto_max_ns);
    }
    qp.deadline_ns = (qp.unacked.empty() && qp.reads.empty()) ? 0 : now + qp.rto_ns;
    qp.tlp_at_ns   = (qp.unacked.empty() && qp.reads.empty()) ? 0 : now + tlp_timeout(qp);
    retire(qp);
}

void UdpIface::handle_ack(UdpQp &qp, const WireHeader &h)
{
    uint64_t acked = 0;
    for (const TxPacket &p : qp.unacked) {
        if (psn_diff(p.psn, h.psn) >= 0) {
            break;
        }
        acked += p.opcode == Opcode::kReadReq ? 0 : p.length; /* reads: by
                                                                * their data */
    }
    ack_psn(qp, h.psn, now_);
    if (acked != 0) {
        /* the path has answered: the window closes, and what it has not
         * spent of its grant is paced (grant_window) */
        qp.window_open = false;
        if (qp.window_left) { /* (set by grant_window, on a gated QP) */
            qp.gate->end_idle_grant(now_);
        }
        qp.window_left = false;
    }
    if (qp.recovering && qp.recover_ts != UINT64_MAX &&
        (h.ts_echo >= qp.recover_ts || psn_diff(h.psn, qp.recover_one) > 0) &&
        psn_diff(qp.tx_psn, qp.una) > 0 && !qp.unacked.empty()) {
        /* the answer to the timeout's resend (the peer has seen it, and
         * everything sent before it): what it still lacks was lost. Known
         * by its echo, or by acknowledging the resend (a segment after its
         * message's FIRST carries no stamp to echo) */
        qp.tx_psn     = qp.una;
        qp.recover_ts = UINT64_MAX; /* once per timeout */
    }
    /* An ACK echoes the last stamped packet, and reports how long since that
     * one was processed (its hold): the round trip is the elapsed time less
     * the hold, for the timers (whose floors and the TLP's ACK-delay term
     * cover a held answer) and, from the kernel's arrival and less the
     * queue the answer met on its way back (forward_rtt), for the pacer.
     * An echo already sampled is no new sample. */
    uint64_t rtt = 0;
    if (h.ts_echo != 0 && h.ts_echo <= now_ && h.ts_echo != qp.last_echo) {
        qp.last_echo     = h.ts_echo;
        uint64_t elapsed = now_ - h.ts_echo;
        uint64_t round   = h.msg_offset < elapsed ? elapsed - h.msg_offset : elapsed;
        qp.srtt_ns       = qp.srtt_ns ? (7 * qp.srtt_ns + round) / 8 : round;
        qp.path.sample(stamp_path(h.ts_echo), round);
        ++counters.rtt_samples;
        rtt = path_rtt(h.ts_echo, h.msg_offset);
        if (rtt != 0 && h.ts_send != 0 && qp.gate) {
            rtt = forward_rtt(qp, rtt, h.ts_send);
        }
    }
    if (qp.gate && (acked != 0 || rtt != 0 || h.aux != 0)) {
        /* an echo already sampled still dates the marks (an ACK that
         * acknowledges nothing new: by packets acknowledged before) */
        feed_gate(qp, acked, h.aux, rtt, h.ts_echo, qp.newest_acked);
    }
}

/// What an ACK or a read response tells the pacer: `acked` bytes, `ce` of
/// them marked, a round trip `rtt` (0: none) of the packet stamped `echo`,
/// and `acked_sent`, the first send of the newest packet it answers, which
/// dates the marks.
void UdpIface::feed_gate(UdpQp &qp, uint64_t acked, uint64_t ce, uint64_t rtt, uint64_t echo,
                         uint64_t acked_sent)
{
    pacing::Feedback f;
    f.now_ns        = now_;
    f.acked_bytes   = acked;
    f.ce_bytes      = ce;
    f.rtt_ns        = rtt;
    f.sent_ns       = rtt != 0 ? stamp_time(echo) : 0;
    f.acked_sent_ns = acked_sent;
    qp.gate->on_feedback(f);
    if (ce != 0) {
        mark_paced(qp); /* marked: the controller is at work */
    }
    note_rate(qp);
}

void UdpIface::handle_nak(UdpQp &qp, const WireHeader &h)
{
    if (psn_diff(h.psn, qp.una) < 0 || psn_diff(h.psn, qp.next_psn) >= 0 ||
        NakCode(h.am_id) == NakCode::kRefused) {
        drop(&doorbell_counters_t::rx_drop_state); /* stale NAK */
        return;
    }
    ack_psn(qp, h.psn, now_); /* everything before it arrived */
    switch (NakCode(h.am_id)) {
    case NakCode::kSequence:
        if (psn_diff(qp.tx_psn, h.psn) > 0) {
            qp.tx_psn = h.psn;
        }
        qp.path.lost(paths_); /* the home's path overflowed: perhaps shared */
        if (qp.gate) {
            qp.gate->on_loss(now_);
            mark_paced(qp);
            note_rate(qp);
        }
        break;
    case NakCode::kReceiverBusy:
        /* the AM is kept and offered again after a pause; a busy receiver
         * is alive, so this is no retry */
        if (psn_diff(qp.tx_psn, h.psn) > 0) {
            qp.tx_psn = h.psn;
        }
        ++counters.busy_naks;
        ++qp.busy_naks;
        qp.hold_until_ns = now_ + params.rto_min_ns;
        qp.deadline_ns   = qp.hold_until_ns + qp.rto_ns;
        qp.retries       = 0;
        break;
    case NakCode::kAccess:
        ++counters.remote_access_errors;
        qp.fail(DOORBELL_ERR_REMOTE_ACCESS, name + ": peer " + peer_string(qp.peer, qp.qpn) +
                                                " rejected the remote access at PSN " +
                                                std::to_string(h.psn) + ": " +
                                                nak_cause_text(NakCause(h.rkey)));
        break;
    default:
        qp.fail(DOORBELL_ERR_REMOTE, name + ": peer " + peer_string(qp.peer, qp.qpn) +
                                         " rejected the request at PSN " + std::to_string(h.psn) +
                                         " as malformed: " + nak_cause_text(NakCause(h.rkey)));
        break;
    }
}

void UdpIface::handle_read_resp(UdpQp &qp, const WireHeader &h, const uint8_t *payload, bool ce)
{
    /* the responder executes in PSN order: data for a request means
     * everything up to it was accepted */
    ack_psn(qp, h.psn + 1, now_);
    auto it = std::find_if(qp.reads.begin(), qp.reads.end(),
                           [&](const ReadPiece &p) { return p.psn == h.psn; });
    if (it == qp.reads.end()) {
        ++counters.rx_duplicates; /* a piece that already completed */
        return;
    }
    ReadPiece &piece = *it;
    uint32_t   idx   = h.msg_offset / piece.chunk;
    /* a READ_RESP names its offset only: the piece it answers has the length */
    if (piece.atomic || h.msg_offset >= piece.length || h.msg_offset % piece.chunk != 0 ||
        h.length != std::min(piece.chunk, piece.length - h.msg_offset)) {
        drop(&doorbell_counters_t::rx_drop_state);
        return;
    }
    if (piece.got[idx]) {
        ++counters.rx_duplicates;
        return;
    }
    if (payload != piece.dest + h.msg_offset) { /* else received in place */
        std::memcpy(piece.dest + h.msg_offset, payload, h.length);
    }
    piece.got[idx] = true;
    if ((h.flags & kFlagFirst) && h.ts_echo != 0 && h.ts_echo <= now_) {
        /* a read-only QP gets few ACKs: its timers learn from the data */
        uint64_t elapsed = now_ - h.ts_echo;
        qp.srtt_ns       = qp.srtt_ns ? (7 * qp.srtt_ns + elapsed) / 8 : elapsed;
        /* and the round trip through the responder's port it came from:
         * the request's port adds the same on average to every one (a
         * spare port is a spine's, not one the answers are steered over) */
        if (rx_path_ < qp.peer_paths) {
            qp.peer_path.sample(rx_path_, elapsed);
        }
    }
    qp.tlp_at_ns = now_ + tlp_timeout(qp);
    if (qp.gate) {
        /* the requester paces its reads: the data's marks and delay are
         * its feedback (the first response of a request carries the RTT) */
        uint64_t rtt = (h.flags & kFlagFirst) ? path_rtt(h.ts_echo, 0) : 0; /* no hold */
        feed_gate(qp, h.length, ce ? h.length : 0, rtt, h.ts_echo, piece.sent_ns);
    }
    qp.retries     = 0;
    qp.deadline_ns = now_ + qp.rto_ns;
    if (--piece.missing != 0) {
        return;
    }
    uint64_t wqe = piece.wqe;
    qp.read_bytes -= piece.length;
    qp.reads.erase(it);
    qp.tracks[wqe - qp.tracks.front().wqe].reads_left--;
    if (qp.unacked.empty() && qp.reads.empty()) {
        qp.deadline_ns = 0;
    }
    retire(qp);
}

} // namespace doorbell::udp
