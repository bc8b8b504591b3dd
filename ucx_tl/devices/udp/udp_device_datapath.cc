/* UDP device: data path (packetizer, reliability, responder, sockets). */
#include "udp_device.h"

#include "core/clock.h"
#include "parser.h"

#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

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

WireHeader make_header(Opcode op)
{
    WireHeader h{};
    h.magic   = kMagic;
    h.version = kVersion;
    h.opcode  = uint8_t(op);
    return h;
}

/// "127.0.0.1:4242 qp 0x1f" for error messages.
std::string peer_string(const sockaddr_in &a, uint32_t qpn)
{
    char ip[INET_ADDRSTRLEN], buf[96];
    inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip));
    snprintf(buf, sizeof(buf), "%s:%u (local qp 0x%x)", ip, ntohs(a.sin_port), qpn);
    return buf;
}

bool same_peer(const sockaddr_in &a, const sockaddr_in &b)
{
    return a.sin_addr.s_addr == b.sin_addr.s_addr && a.sin_port == b.sin_port;
}

/// CLOCK_REALTIME - CLOCK_MONOTONIC now, ns: the kernel stamps arrivals on
/// the realtime scale, the wire and the timers use the monotonic one.
int64_t realtime_minus_monotonic_ns()
{
    timespec rt, mono;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    return (int64_t(rt.tv_sec) - int64_t(mono.tv_sec)) * 1000000000ll +
           (int64_t(rt.tv_nsec) - int64_t(mono.tv_nsec));
}

} // namespace

/* ------------------------------------------------------------- transmit */

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
            /* a message of several packets travels in data segments: their
             * shorter header leaves the payload more of the datagram */
            uint32_t seg = mtu_;
            if (total > mtu_) {
                pkt.header_bytes = data_header_bytes(pkt.opcode);
                seg              = segment_payload(pkt.opcode);
            }
            pkt.length = std::min(seg, total - qp.cursor_offset);
            if (!qp.unacked.empty() &&
                qp.inflight_bytes + pkt.length + sizeof(WireHeader) > window_) {
                return false;
            }
            qp.inflight_bytes += pkt.length + sizeof(WireHeader);
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

void UdpIface::send_packet(UdpQp &qp, const TxPacket &pkt)
{
    const doorbell_wqe_t &w      = qp.ring.wqe(pkt.wqe);
    bool                  resend = psn_diff(pkt.psn, qp.max_sent) < 0;
    WireHeader            h      = make_header(pkt.opcode);
    h.flags                      = pkt.flags;
    h.src_qp                     = qp.qpn;
    h.psn                        = pkt.psn;
    h.ts_send                    = now_;
    const void *payload          = nullptr;
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
    case Opcode::kReadReq:
        h.remote_addr = w.remote_addr + pkt.offset;
        h.rkey        = w.rkey;
        h.msg_length  = pkt.length;
        h.aux         = segment_payload(Opcode::kReadResp);
        if (resend) {
            /* the data may have been lost too: ask from the first chunk
             * missing (none missing: only the ACK is wanted) */
            for (const ReadPiece &piece : qp.reads) {
                if (piece.psn == pkt.psn) {
                    h.flags |= kFlagRetry;
                    h.msg_offset = first_missing(piece);
                    break;
                }
            }
        }
        break;
    default:
        return;
    }
    /* ask for an immediate ACK when someone waits on it: a signaled WQE
     * ends, a retransmission, half the window or half the AM credits used,
     * or a read that has no data to answer with */
    if (resend || qp.inflight_bytes * 2 > window_ ||
        ((pkt.flags & kFlagLast) && (w.flags & DOORBELL_WQE_SIGNALED)) ||
        (pkt.opcode == Opcode::kSend && qp.am_inflight * 2 >= params.am_credits) ||
        (pkt.opcode == Opcode::kReadReq && pkt.length == 0)) {
        h.flags |= kFlagAckReq;
    }
    stage(h, payload, h.length, nullptr, 0, qp.peer, pkt.header_bytes);
    qp.last_ack_req = (h.flags & kFlagAckReq) != 0;
    if (resend) {
        ++counters.retransmits;
    } else {
        qp.max_sent = pkt.psn + 1;
    }
    if (qp.gate) {
        /* a read request is charged what it asks for: the responses come
         * back on this path's behalf (receiver-driven reads) */
        qp.gate->on_send(now_, path_bytes(pkt, h.msg_offset));
    }
    if (qp.deadline_ns == 0) {
        qp.deadline_ns = now_ + qp.rto_ns;
    }
    qp.tlp_at_ns = now_ + tlp_timeout(qp);
}

void UdpIface::transmit(UdpQp &qp)
{
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
        const TxPacket &pkt = qp.unacked[qp.tx_psn - qp.una];
        if (qp.gate && qp.gate->next_send_ns(now_, path_bytes(pkt, 0)) > now_) {
            ++counters.paced_waits;
            ++qp.paced_waits;
            mark_paced(qp);
            break; /* paced: progress sends it later */
        }
        send_packet(qp, pkt);
        ++qp.tx_psn;
    }
    /* a flush asks for the ACK once everything before it has left: a
     * probe ahead of packets the pacer still holds would read as a gap */
    if (qp.probe_due && qp.tx_psn == qp.next_psn) {
        qp.probe_due = false;
        if (qp.probed_psn != qp.next_psn && !qp.unacked.empty()) {
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
    h.src_qp     = qp.qpn;
    h.psn        = psn;
    h.ts_send    = now_;
    stage(h, nullptr, 0, nullptr, 0, qp.peer);
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

/// Queues a packet for the next sendmmsg; a header_bytes other than the
/// full header's sends hdr as a DataHeader.
void UdpIface::stage(const WireHeader &hdr, const void *a, size_t alen, const void *b, size_t blen,
                     const sockaddr_in &to, uint32_t header_bytes)
{
    if (tx_count_ == kTxBatch) {
        flush_tx();
    }
    TxSlot &s = tx_[tx_count_++];
    if (header_bytes == sizeof(WireHeader)) {
        s.hdr = hdr;
    } else {
        header_bytes = encode_data_header(hdr, reinterpret_cast<uint8_t *>(&s.hdr));
    }
    s.to     = to;
    s.iov[0] = {&s.hdr, header_bytes};
    s.iov[1] = {const_cast<void *>(a), alen};
    s.iov[2] = {const_cast<void *>(b), blen};
    s.iovcnt = blen != 0 ? 3 : alen != 0 ? 2 : 1;
    s.bytes  = header_bytes + alen + blen;
}

/// Sends one small staged packet with sendto from a linear copy.
void UdpIface::send_linear(const TxSlot &s)
{
    uint8_t *p   = tx_linear_.data();
    size_t   len = 0;
    for (unsigned i = 0; i < s.iovcnt; ++i) {
        std::memcpy(p + len, s.iov[i].iov_base, s.iov[i].iov_len);
        len += s.iov[i].iov_len;
    }
    ssize_t rc;
    do {
        rc = sendto(fd_, p, len, 0, reinterpret_cast<const sockaddr *>(&s.to), sizeof(s.to));
    } while (rc < 0 && errno == EINTR);
    if (rc >= 0) { /* else lost; retransmission recovers it */
        counters.tx_bytes += uint64_t(rc);
        ++counters.tx_packets;
    }
}

void UdpIface::flush_tx()
{
    if (tx_count_ == 0) {
        return;
    }
    if (tx_count_ == 1 && !faults_ && tx_[0].bytes <= tx_linear_.size()) {
        send_linear(tx_[0]); /* a ping, an ACK: the common latency case */
        tx_count_ = 0;
        return;
    }
    unsigned n   = 0;
    auto     add = [&](unsigned i) {
        mmsghdr &m            = tx_msgs_[n++];
        m                     = {};
        m.msg_hdr.msg_name    = &tx_[i].to;
        m.msg_hdr.msg_namelen = sizeof(sockaddr_in);
        m.msg_hdr.msg_iov     = tx_[i].iov;
        m.msg_hdr.msg_iovlen  = tx_[i].iovcnt;
    };
    for (unsigned i = 0; i < tx_count_; ++i) {
        if (faults_) {
            if (faults_->tx_drop()) {
                continue;
            }
            if (i + 1 < tx_count_ && faults_->reorder()) {
                add(i + 1);
                add(i);
                ++i;
                continue;
            }
            if (faults_->duplicate()) {
                add(i);
            }
        }
        add(i);
    }
    unsigned sent = 0;
    while (sent < n) {
        int rc = sendmmsg(fd_, tx_msgs_.data() + sent, n - sent, 0);
        if (rc <= 0) {
            if (rc < 0 && errno == EINTR) {
                continue;
            }
            break; /* the rest is lost; retransmission recovers it */
        }
        sent += unsigned(rc);
    }
    for (unsigned i = 0; i < sent; ++i) {
        counters.tx_bytes += tx_msgs_[i].msg_len;
    }
    counters.tx_packets += sent;
    tx_count_ = 0;
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
    if (qp.deadline_ns == 0 || qp.in_error()) {
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
        qp.recover_ts  = now_;
        send_packet(qp, qp.unacked.front());
    }
    /* read pieces acknowledged but short of data: ask again */
    rerequest_reads(qp);
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
        WireHeader h  = make_header(Opcode::kReadReq);
        h.flags       = kFlagFirst | kFlagLast | kFlagRetry;
        h.src_qp      = qp.qpn;
        h.psn         = piece.psn;
        h.remote_addr = piece.remote_addr;
        h.rkey        = piece.rkey;
        h.msg_length  = piece.length;
        h.msg_offset  = first_missing(piece);
        h.aux         = piece.chunk;
        h.ts_send     = now_;
        stage(h, nullptr, 0, nullptr, 0, qp.peer);
        ++counters.retransmits;
        ++count;
    }
    return count;
}

/* -------------------------------------------------------------- receive */

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

void UdpIface::enable_rx_timestamps()
{
    if (rx_timestamps_) {
        return;
    }
    int on         = 1;
    rx_timestamps_ = setsockopt(fd_, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) == 0;
}

/// CE marks are read from here on. A mark says a queue on the path passed
/// its threshold, and queues are built by bulk traffic: a segment of at
/// least kCeBulkBytes, or a receive that finds kCeQueuedDatagrams waiting.
/// Until such traffic arrives, a latency-bound exchange of small
/// messages does not pay for the TOS control message, 0.2-0.25 us per
/// datagram on lo here (docs/transport.md). A receiver that reads no marks
/// echoes none, so a sender of small messages alone is paced by delay.
void UdpIface::enable_ce()
{
    int on = 1;
    /* tried once: IPv4 sockets on Linux always accept it (checked at open) */
    setsockopt(fd_, IPPROTO_IP, IP_RECVTOS, &on, sizeof(on));
    rx_ce_ = true;
}

/// The kernel's arrival time of a datagram (SCM_TIMESTAMPNS) on the
/// monotonic scale, at most now_: the time it waited in the socket for this
/// process to run is no part of the path.
uint64_t UdpIface::kernel_rx_time(const cmsghdr *c, int64_t rt_to_mono) const
{
    timespec ts;
    std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
    int64_t mono = int64_t(ts.tv_sec) * 1000000000ll + ts.tv_nsec - rt_to_mono;
    if (mono <= 0 || uint64_t(mono) > now_) {
        return now_;
    }
    return uint64_t(mono);
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
           (len + chunk - 1) / chunk * data_header_bytes(Opcode::kReadResp);
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

unsigned UdpIface::progress()
{
    if (fd_in_epoll_ && !background && ++polls_since_arm_ >= kEpollIdlePolls) {
        /* the application busy-polls, it does not wait: take the socket
         * out of the wake-up set until the next arm, so arrivals skip the
         * epoll callback */
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd_, nullptr);
        fd_in_epoll_ = false;
    }
    ++depth_;
    now_         = now_ns();
    bool reading = false;
    for (size_t i = 0; i < qps.size(); ++i) {
        auto *qp = static_cast<UdpQp *>(qps[i]);
        if (qp->ring.unrung() != 0) {
            qp->ring.ring(); /* what the batcher held back */
            ++counters.doorbells;
            transmit(*qp);
        }
        reading |= !qp->reads.empty();
    }
    flush_tx();
    rx_place_      = reading && mtu_ >= kPlaceMin && !faults_;
    size_t   bytes = 0;
    unsigned count = receive(bytes);
    if (count > 1 || bytes >= kLinearTx) {
        /* copying the data took time; an empty poll, or one small datagram
         * (a ping, an ACK), did not: the clock read above still holds */
        now_ = now_ns();
    }
    flush_deferred_acks(false);
    for (size_t i = 0; i < qps.size(); ++i) {
        auto *qp = static_cast<UdpQp *>(qps[i]);
        check_timer(*qp);
        transmit(*qp);
    }
    flush_tx();
    count += poll_completions();
    if (background && count != 0) {
        /* what this took from the socket (ACKs that free slots a pending
         * request waits for, completions to deliver) took the event fd's
         * readiness with it: fire the wake-up timer now, so a worker asleep
         * on the fd comes for it */
        itimerspec its{};
        its.it_value.tv_nsec = 1;
        timerfd_settime(timer_fd_, 0, &its, nullptr);
    }
    if (--depth_ == 0) {
        graveyard_.clear();
    }
    return count;
}

/// Takes what the socket holds (up to kRxRounds batches); returns the
/// datagrams and adds their bytes to bytes.
unsigned UdpIface::receive(size_t &bytes)
{
    unsigned total       = 0;
    int64_t  rt_to_mono  = 0; /* CLOCK_REALTIME - CLOCK_MONOTONIC, ns */
    bool     have_offset = false;
    for (unsigned round = 0; round < kRxRounds; ++round) {
        /* After a quiet poll ask for one datagram: a lone message (a ping)
         * then costs no second, failing receive attempt in the kernel. A
         * call that filled its request asks for a full batch next time. */
        unsigned want   = rx_want_;
        int      placed = rx_place_ ? place_read_response() : 0;
        if (placed < 0) {
            break; /* the peek found the socket empty */
        }
        if (rx_place_) {
            /* one datagram at a time while read data may arrive: a batch
             * behind a control packet would land in receive buffers */
            want = 1;
        }
        int n = receive_batch(want);
        /* a full batch, or a second datagram in a row asked for alone:
         * a stream, so ask for a batch; one datagram after a quiet poll
         * is a ping, and its answer is a round trip away */
        rx_singles_ = n == 1 && want == 1 ? rx_singles_ + 1 : 0;
        rx_want_    = (n >= 2 || rx_singles_ >= 2) ? kRxBatch : 1;
        if (n <= 0) {
            if (placed > 0) {
                rx_placed_ = nullptr;
                rearm_rx(1);
            }
            break;
        }
        for (int i = 0; i < n; ++i) {
            msghdr &m  = rx_msgs_[i].msg_hdr;
            bool    ce = false;
            rx_ts_     = now_;
            for (cmsghdr *c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
                if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS &&
                    c->cmsg_len >= CMSG_LEN(1)) {
                    ce = (*CMSG_DATA(c) & 0x3) == 0x3;
                } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS &&
                           c->cmsg_len >= CMSG_LEN(sizeof(timespec))) {
                    if (!have_offset) {
                        rt_to_mono  = realtime_minus_monotonic_ns();
                        have_offset = true;
                    }
                    rx_ts_ = kernel_rx_time(c, rt_to_mono);
                    ++counters.rx_timestamped;
                }
            }
            if (m.msg_flags & MSG_TRUNC) {
                ++counters.rx_packets;
                ++counters.rx_dropped;
                continue;
            }
            if (!rx_ce_ &&
                (unsigned(n) >= kCeQueuedDatagrams || rx_msgs_[i].msg_len >= kCeBulkBytes)) {
                enable_ce();
            }
            bytes += rx_msgs_[i].msg_len;
            handle_datagram(rx_slots_[i], rx_msgs_[i].msg_len, rx_addr_[i], ce, size_t(i));
        }
        rearm_rx(unsigned(n));
        for (Responder *r : ack_list_) {
            send_ack(*r);
        }
        ack_list_.clear();
        total += unsigned(n);
        if (!rx_place_ && n < int(kRxBatch)) {
            break; /* drained (or asked for one: the next poll drains) */
        }
    }
    return total;
}

/// A read's data lands where it belongs, not in a receive buffer copied
/// from: peeks at the header of the datagram at the head of the socket and,
/// when it is a READ_RESP chunk a piece still waits for (checked exactly as
/// handle_read_resp checks it), points receive entry 0 at the header slot
/// and the chunk's place in the destination. Returns 1 when set up, 0 when
/// the datagram takes the normal path, -1 when the socket is empty.
int UdpIface::place_read_response()
{
    uint8_t     head[sizeof(WireHeader)];
    sockaddr_in from{};
    iovec       iov{head, sizeof(head)};
    msghdr      m{};
    m.msg_name    = &from;
    m.msg_namelen = sizeof(from);
    m.msg_iov     = &iov;
    m.msg_iovlen  = 1;
    ssize_t len   = recvmsg(fd_, &m, MSG_PEEK | MSG_DONTWAIT | MSG_TRUNC);
    if (len < 0) {
        return errno == EINTR ? 0 : -1;
    }
    if (size_t(len) > kBufSize) {
        return 0;
    }
    ParseResult       pr = parse_header(head, std::min(sizeof(head), size_t(len)), size_t(len));
    const WireHeader &h  = pr.header;
    if (pr.status != ParseStatus::kOk || Opcode(h.opcode) != Opcode::kReadResp) {
        return 0;
    }
    auto it = qp_by_num_.find(h.dst_qp);
    if (it == qp_by_num_.end() || !same_peer(it->second->peer, from) || it->second->in_error()) {
        return 0;
    }
    for (const ReadPiece &piece : it->second->reads) {
        if (piece.psn != h.psn) {
            continue;
        }
        if (h.msg_length != piece.length || h.msg_offset % piece.chunk != 0 ||
            h.length != std::min(piece.chunk, piece.length - h.msg_offset) ||
            piece.got[h.msg_offset / piece.chunk]) {
            return 0;
        }
        rx_place_iov_[0]  = {rx_slots_[0], pr.header_bytes};
        rx_place_iov_[1]  = {piece.dest + h.msg_offset, h.length};
        msghdr &e         = rx_msgs_[0].msg_hdr;
        e.msg_iov         = rx_place_iov_.data();
        e.msg_iovlen      = rx_place_iov_.size();
        rx_placed_        = piece.dest + h.msg_offset;
        rx_placed_header_ = h;
        return 1;
    }
    return 0;
}

/// recvmmsg into the first want entries; for one entry recvmsg, which
/// costs the kernel less per call (about 0.15 us per hop on lo here), and
/// recvfrom when no control message is wanted and entry 0 is not placed: the
/// kernel then copies in no message header and no iovec (0.05-0.1 us).
int UdpIface::receive_batch(unsigned want)
{
    if (want > 1) {
        return recvmmsg(fd_, rx_msgs_.data(), want, MSG_DONTWAIT, nullptr);
    }
    msghdr &m = rx_msgs_[0].msg_hdr;
    ssize_t len;
    if (!rx_ce_ && !rx_timestamps_ && rx_placed_ == nullptr) {
        socklen_t alen = sizeof(sockaddr_in);
        /* MSG_TRUNC: the length of the datagram, even one that did not fit */
        len = recvfrom(fd_, rx_slots_[0], kBufSize, MSG_DONTWAIT | MSG_TRUNC,
                       reinterpret_cast<sockaddr *>(&rx_addr_[0]), &alen);
        if (len < 0) {
            return -1;
        }
        m.msg_controllen    = 0;
        m.msg_flags         = size_t(len) > kBufSize ? MSG_TRUNC : 0;
        rx_msgs_[0].msg_len = unsigned(std::min<size_t>(size_t(len), kBufSize));
        return 1;
    }
    len = recvmsg(fd_, &m, MSG_DONTWAIT);
    if (len < 0) {
        return -1;
    }
    rx_msgs_[0].msg_len = unsigned(len);
    return 1;
}

/// Resets the first count receive headers: recvmmsg wrote the address,
/// control and flag fields of those it filled (the others are intact), and
/// the AM handler may have lent a slot's buffer away.
void UdpIface::rearm_rx(unsigned count)
{
    for (unsigned i = 0; i < count; ++i) {
        rx_iov_[i]       = {rx_slots_[i], kBufSize};
        msghdr &m        = rx_msgs_[i].msg_hdr;
        m.msg_name       = &rx_addr_[i];
        m.msg_namelen    = sizeof(sockaddr_in);
        m.msg_iov        = &rx_iov_[i];
        m.msg_iovlen     = 1;
        m.msg_control    = rx_cmsg_[i].data();
        m.msg_controllen = rx_cmsg_[i].size();
        m.msg_flags      = 0;
    }
    rx_placed_ = nullptr; /* consumed, or its datagram was not delivered */
}

void UdpIface::handle_datagram(uint8_t *buf, size_t len, const sockaddr_in &from, bool ce,
                               size_t slot)
{
    /* entry 0 may have been received in place: its payload is in a read's
     * destination already (and its header must be the one peeked at) */
    const uint8_t *placed = slot == 0 ? std::exchange(rx_placed_, nullptr) : nullptr;
    ++counters.rx_packets;
    counters.rx_bytes += len;
    if (faults_ && faults_->rx_drop()) {
        return;
    }
    ParseResult r = parse(buf, len);
    if (r.status != ParseStatus::kOk ||
        (placed != nullptr &&
         std::memcmp(&r.header, &rx_placed_header_, sizeof(WireHeader)) != 0)) {
        ++counters.rx_dropped; /* (a changed header: not with one reader) */
        return;
    }
    if (placed != nullptr) {
        r.payload = placed;
    }
    if (faults_ && faults_->ce()) {
        ce = true;
    }
    if (ce) {
        ++counters.ce_marks;
    }
    switch (Opcode(r.header.opcode)) {
    case Opcode::kAck:
    case Opcode::kNak:
    case Opcode::kReadResp:
        handle_response(r.header, r.payload, from, ce);
        break;
    default:
        handle_request(r.header, buf, r.payload, from, ce, slot);
        break;
    }
}

void UdpIface::handle_response(const WireHeader &h, const uint8_t *payload, const sockaddr_in &from,
                               bool ce)
{
    auto it = qp_by_num_.find(h.dst_qp);
    if (it == qp_by_num_.end() || !same_peer(it->second->peer, from) || it->second->in_error()) {
        ++counters.rx_dropped; /* stale: QP gone, or not our peer */
        return;
    }
    UdpQp &qp = *it->second;
    switch (Opcode(h.opcode)) {
    case Opcode::kAck:
        handle_ack(qp, h);
        break;
    case Opcode::kNak:
        handle_nak(qp, h);
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
    if (qp.recovering && h.ts_echo >= qp.recover_ts && psn_diff(qp.tx_psn, qp.una) > 0 &&
        !qp.unacked.empty()) {
        /* the answer to the timeout's resend (the peer has seen it, and
         * everything sent before it): what it still lacks was lost */
        qp.tx_psn     = qp.una;
        qp.recover_ts = UINT64_MAX; /* once per timeout */
    }
    /* The retransmit timer must cover the peer's ACK delay (srtt from the
     * whole round trip); the pacer needs the network's delay, so the time
     * the peer held its answer comes out of the sample it is given. */
    uint64_t rtt = 0;
    if (h.ts_echo != 0 && h.ts_echo <= now_) {
        uint64_t elapsed = now_ - h.ts_echo;
        qp.srtt_ns       = qp.srtt_ns ? (7 * qp.srtt_ns + elapsed) / 8 : elapsed;
        ++counters.rtt_samples;
        rtt = path_rtt(h.ts_echo, h.msg_offset);
    }
    if (qp.gate && (acked != 0 || rtt != 0 || h.aux != 0)) {
        qp.gate->on_ack(now_, acked, h.aux, rtt);
        if (h.aux != 0) {
            mark_paced(qp); /* marked: the controller is at work */
        }
        note_rate(qp);
    }
}

void UdpIface::handle_nak(UdpQp &qp, const WireHeader &h)
{
    if (psn_diff(h.psn, qp.una) < 0 || psn_diff(h.psn, qp.next_psn) >= 0) {
        ++counters.rx_dropped; /* stale NAK */
        return;
    }
    ack_psn(qp, h.psn, now_); /* everything before it arrived */
    switch (NakCode(h.am_id)) {
    case NakCode::kSequence:
        if (psn_diff(qp.tx_psn, h.psn) > 0) {
            qp.tx_psn = h.psn;
        }
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
        qp.fail(DOORBELL_ERR_REMOTE_ACCESS,
                name + ": peer " + peer_string(qp.peer, qp.qpn) +
                    " rejected a remote access (key, bounds or access flags)");
        break;
    default:
        qp.fail(DOORBELL_ERR_REMOTE,
                name + ": peer " + peer_string(qp.peer, qp.qpn) + " rejected a malformed request");
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
    if (h.msg_length != piece.length || h.msg_offset % piece.chunk != 0 ||
        h.length != std::min(piece.chunk, piece.length - h.msg_offset)) {
        ++counters.rx_dropped;
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
    }
    qp.tlp_at_ns = now_ + tlp_timeout(qp);
    if (qp.gate) {
        /* the requester paces its reads: the data's marks and delay are
         * its feedback (the first response of a request carries the RTT) */
        uint64_t rtt = (h.flags & kFlagFirst) ? path_rtt(h.ts_echo, 0) : 0; /* no hold */
        qp.gate->on_ack(now_, h.length, ce ? h.length : 0, rtt);
        if (ce) {
            mark_paced(qp);
        }
        note_rate(qp);
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

/* ------------------------------------------------------------ responder */

void UdpIface::send_control(const Responder &r, Opcode op, NakCode code, uint32_t psn)
{
    WireHeader h = make_header(op);
    h.am_id      = uint8_t(code);
    h.dst_qp     = r.qpn;
    h.psn        = psn;
    h.aux        = op == Opcode::kAck ? r.ce_bytes : 0;
    h.ts_send    = now_;
    h.ts_echo    = r.ts_echo;
    h.msg_offset = uint32_t(std::min<uint64_t>(now_ - r.ts_echo_rx, UINT32_MAX));
    stage(h, nullptr, 0, nullptr, 0, r.peer);
    if (op == Opcode::kNak) {
        ++counters.naks;
    }
}

/// The table is full: forgets the peer QP heard from least recently (a QP
/// long gone, typically). Its peer, if alive, would see its packets NAKed
/// back to PSN 0 as stale and time out.
bool UdpIface::evict_oldest_responder()
{
    auto oldest = responders_.end();
    for (auto it = responders_.begin(); it != responders_.end(); ++it) {
        const Responder &r = it->second;
        if (r.ack_due || r.ack_deferred || r.am_buf != nullptr) {
            continue; /* referenced from the ACK lists, or mid-message */
        }
        if (oldest == responders_.end() || r.last_seen < oldest->second.last_seen) {
            oldest = it;
        }
    }
    if (oldest == responders_.end()) {
        return false;
    }
    responders_.erase(oldest);
    return true;
}

void UdpIface::send_ack(Responder &r)
{
    send_control(r, Opcode::kAck, NakCode(0), r.expected);
    r.ack_due      = false;
    r.ack_deferred = false;
    r.ce_bytes     = 0;
    r.unacked_pkts = 0;
}

void UdpIface::flush_deferred_acks(bool all)
{
    size_t keep = 0;
    for (Responder *r : deferred_acks_) {
        if (!r->ack_deferred) {
            continue; /* acknowledged meanwhile */
        }
        if (all || r->ack_deadline <= now_) {
            send_ack(*r);
            continue;
        }
        deferred_acks_[keep++] = r;
    }
    deferred_acks_.resize(keep);
}

void UdpIface::send_read_response(const WireHeader &req, const sockaddr_in &to)
{
    const uint8_t *src = reinterpret_cast<const uint8_t *>(uintptr_t(req.remote_addr));
    for (uint32_t off = req.msg_offset; off < req.msg_length; off += req.aux) {
        WireHeader h = make_header(Opcode::kReadResp);
        h.dst_qp     = req.src_qp;
        h.psn        = req.psn;
        h.msg_length = req.msg_length;
        h.msg_offset = off;
        h.length     = std::min(req.aux, req.msg_length - off);
        h.ts_send    = now_;
        h.flags      = off == req.msg_offset ? kFlagFirst : 0;
        h.ts_echo    = req.ts_send;
        stage(h, src + off, h.length, nullptr, 0, to, data_header_bytes(Opcode::kReadResp));
    }
}

void UdpIface::handle_request(const WireHeader &h, uint8_t *buf, const uint8_t *payload,
                              const sockaddr_in &from, bool ce, size_t slot)
{
    ResponderKey key{from.sin_addr.s_addr, from.sin_port, h.src_qp};
    auto         it = responders_.find(key);
    if (it == responders_.end()) {
        if (h.psn != 0) {
            /* the peer's first packets were lost (or the QP is long
             * forgotten): ask for PSN 0 */
            ++counters.rx_dropped;
            Responder tmp;
            tmp.peer = from;
            tmp.qpn  = h.src_qp;
            send_control(tmp, Opcode::kNak, NakCode::kSequence, 0);
            return;
        }
        if (responders_.size() >= kMaxResponders && !evict_oldest_responder()) {
            ++counters.rx_dropped;
            return;
        }
        Responder fresh;
        fresh.peer = from;
        fresh.qpn  = h.src_qp;
        it         = responders_.emplace(key, fresh).first;
    }
    Responder &r = it->second;
    /* The hold an ACK reports counts from here, when the packet is processed:
     * it is the delay kept on purpose (a deferred ACK). The time the packet
     * waited in this socket for this process is left in the requester's
     * sample: a receiving host that does not keep up is a queue on the path
     * (timed from the kernel's arrival, the incast's receivers hid theirs:
     * 5-7 % retransmits against 0.6-0.7 %). */
    r.ts_echo    = h.ts_send;
    r.ts_echo_rx = now_;
    r.last_seen  = now_;
    if (ce) {
        r.ce_bytes += h.length + uint32_t(sizeof(WireHeader));
    }
    auto ack_due = [&] {
        if (!r.ack_due) {
            r.ack_due = true;
            ack_list_.push_back(&r);
        }
    };
    auto reject = [&](NakCode code) {
        send_control(r, Opcode::kNak, code, h.psn);
        r.failed    = true;
        r.fail_code = code;
        ++r.expected;
        if (code == NakCode::kAccess) {
            ++counters.remote_access_errors;
        }
    };

    int32_t d = psn_diff(h.psn, r.expected);
    if (r.failed) {
        /* after an error nothing more is executed; repeat the verdict in
         * case the NAK was lost */
        if (d >= -1) {
            send_control(r, Opcode::kNak, r.fail_code, r.expected - 1);
        }
        ++counters.rx_dropped;
        return;
    }
    if (d < 0 && Opcode(h.opcode) == Opcode::kAckReq) {
        ack_due(); /* a probe is not a duplicate */
        return;
    }
    if (d < 0) {
        ++counters.rx_duplicates;
        if (Opcode(h.opcode) == Opcode::kReadReq && (h.flags & kFlagRetry) &&
            pd.allows(h.rkey, h.remote_addr, h.msg_length, DOORBELL_ACCESS_REMOTE_READ)) {
            send_read_response(h, from); /* the responses were lost */
        }
        ack_due();
        return;
    }
    if (d > 0) {
        /* a probe asks where we stand: answer even if this gap was NAKed
         * (that NAK, or the resends it caused, may have been lost too) */
        if (!r.nak_sent || Opcode(h.opcode) == Opcode::kAckReq) {
            r.nak_sent = true;
            send_control(r, Opcode::kNak, NakCode::kSequence, r.expected);
        }
        return;
    }
    if (Opcode(h.opcode) == Opcode::kAckReq) {
        ack_due(); /* d == 0: everything the prober sent arrived */
        return;
    }

    switch (Opcode(h.opcode)) {
    case Opcode::kWrite: {
        doorbell_status_t status = pd.access(h.rkey, h.remote_addr, h.msg_length,
                                             DOORBELL_ACCESS_REMOTE_WRITE, [&](uint8_t *base) {
                                                 std::memcpy(base + h.msg_offset, payload,
                                                             h.length);
                                             });
        if (status != DOORBELL_OK) {
            reject(NakCode::kAccess);
            return;
        }
        break;
    }
    case Opcode::kSignal: {
        /* executed once: only the packet at the expected PSN gets here, a
         * duplicate or a retransmission of it is re-ACKed above */
        uint64_t operand;
        std::memcpy(&operand, payload, sizeof(operand));
        doorbell_status_t status = DOORBELL_ERR_REMOTE_ACCESS;
        if (h.remote_addr % alignof(uint64_t) == 0) {
            status = pd.access(h.rkey, h.remote_addr, sizeof(uint64_t),
                               DOORBELL_ACCESS_REMOTE_WRITE, [&](uint8_t *base) {
                                   auto *word = reinterpret_cast<uint64_t *>(base);
                                   /* release: a reader that sees the signal sees the data
                     * written before it */
                                   if (h.am_id == DOORBELL_SIGNAL_ADD) {
                                       __atomic_fetch_add(word, operand, __ATOMIC_RELEASE);
                                   } else {
                                       __atomic_store_n(word, operand, __ATOMIC_RELEASE);
                                   }
                               });
        }
        if (status != DOORBELL_OK) {
            reject(NakCode::kAccess);
            return;
        }
        break;
    }
    case Opcode::kReadReq:
        if (!pd.allows(h.rkey, h.remote_addr, h.msg_length, DOORBELL_ACCESS_REMOTE_READ)) {
            reject(NakCode::kAccess);
            return;
        }
        send_read_response(h, from);
        break;
    case Opcode::kSend:
        if (!handle_send(r, h, buf, payload, slot)) {
            return;
        }
        break;
    default:
        ++counters.rx_dropped;
        return;
    }
    ++r.expected;
    r.nak_sent = false;
    /* a change of the CE state is news for the sender's pacer: ACK at once
     * (DCTCP's receiver), so marks are echoed within a round trip */
    bool ce_changed = ce != r.last_ce;
    r.last_ce       = ce;
    if ((h.flags & kFlagAckReq) || ++r.unacked_pkts >= kAckEvery || ce_changed) {
        ack_due();
    } else if (!r.ack_deferred) {
        r.ack_deferred = true;
        r.ack_deadline = now_ + ack_delay_;
        deferred_acks_.push_back(&r);
    }
}

/// Takes one SEND segment in order. Returns false if it was not accepted
/// (receiver busy: NAK sent, the peer keeps the AM; or a protocol error).
bool UdpIface::handle_send(Responder &r, const WireHeader &h, uint8_t *buf, const uint8_t *payload,
                           size_t slot)
{
    bool first = h.msg_offset == 0;
    /* in place: the message is one packet with the full header, the 64
     * bytes before its data that the callee gets as headroom */
    bool     in_place = first && h.length == h.msg_length && payload == buf + sizeof(WireHeader);
    uint8_t *base     = nullptr;
    if (h.msg_length > kBufSize - sizeof(WireHeader) || (first && r.am_buf != nullptr) ||
        (!first && (r.am_buf == nullptr || h.msg_offset != r.am_length))) {
        send_control(r, Opcode::kNak, NakCode::kInvalid, h.psn);
        r.failed    = true;
        r.fail_code = NakCode::kInvalid;
        ++r.expected;
        return false;
    }
    if (first) {
        if (held_.size() >= params.rx_queue_len) {
            send_control(r, Opcode::kNak, NakCode::kReceiverBusy, h.psn);
            return false;
        }
        if (in_place) {
            base = buf;
        } else {
            r.am_buf    = take_buffer();
            r.am_length = 0;
        }
    }
    if (!in_place) {
        std::memcpy(r.am_buf + sizeof(WireHeader) + h.msg_offset, payload, h.length);
        r.am_length += h.length;
        if (r.am_length < h.msg_length) {
            return true;
        }
        base     = r.am_buf;
        r.am_buf = nullptr;
    }
    /* accept before the callback: it may post, and must see a consistent
     * responder; expected is advanced by the caller right after */
    doorbell_status_t status = DOORBELL_OK;
    if (am_cb != nullptr) {
        status = am_cb(am_arg, h.am_id, base + sizeof(WireHeader), h.msg_length);
    }
    if (status == DOORBELL_INPROGRESS) {
        held_[base] = true;
        if (in_place) {
            rx_slots_[slot] = take_buffer(); /* the slot's buffer is lent */
        }
    } else if (!in_place) {
        give_buffer(base);
    }
    return true;
}

void UdpIface::release_am(void *data)
{
    uint8_t *base = static_cast<uint8_t *>(data) - sizeof(WireHeader);
    if (held_.erase(base) != 0) {
        give_buffer(base);
    }
}

} // namespace doorbell::udp
