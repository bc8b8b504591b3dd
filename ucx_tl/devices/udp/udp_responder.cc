/* UDP device, responder: executes a peer QP's requests in PSN order
 * (writes, sends, reads, signals, atomics) against the protection domain and
 * answers with ACKs, NAKs and read responses. */
#include "udp_device.h"

#include "core/clock.h"

#include <algorithm>
#include <cstring>

namespace doorbell::udp {

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
        it         = responders_.emplace(key, std::move(fresh)).first;
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
        if (Opcode(h.opcode) == Opcode::kAtomicReq) {
            answer_atomic_again(r, h); /* the answer was lost: never run twice */
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
    case Opcode::kAtomicReq:
        if (std::optional<NakCode> verdict = execute_atomic(r, h, payload)) {
            reject(*verdict);
            return;
        }
        break;
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
