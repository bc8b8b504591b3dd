/* UDP device, responder: executes a peer QP's requests in PSN order
 * (writes, sends, reads, signals, atomics) against the protection domain and
 * answers with ACKs, NAKs and read responses. */
#include "udp_device.h"

#include "core/clock.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace doorbell::udp {

void UdpIface::send_control(const Responder &r, Opcode op, NakCode code, uint32_t psn,
                            NakCause cause)
{
    WireHeader h = make_header(op);
    h.am_id      = uint8_t(code);
    h.rkey       = uint32_t(cause);
    h.token      = r.token;
    h.dst_qp     = r.qpn;
    h.src_qp     = r.id;
    h.psn        = psn;
    h.aux        = op == Opcode::kAck ? r.ce_bytes : 0;
    h.ts_echo    = r.ts_echo;
    h.msg_offset = uint32_t(std::min<uint64_t>(now_ - r.ts_echo_rx, UINT32_MAX));
    stage(h, nullptr, 0, nullptr, 0, r.peer, next_path(r.path_next));
    /* its ts_send is the clock when it leaves, the hold the clock now: the
     * requester takes the queue it meets on the way back out of its round
     * trip (udp_return_trip.h), and what this process does before the
     * send stays in, as a receiver that does not keep up is a queue */
    tx_stamp_at_send_ |= uint64_t(1) << (tx_count_ - 1);
    if (op == Opcode::kNak) {
        ++counters.naks;
    }
}

/// Rejects the request at psn: NAK with the cause and its code, and nothing
/// of the connection's after it is executed (the verdict is repeated).
void UdpIface::reject(Responder &r, uint32_t psn, NakCause cause)
{
    NakCode code = nak_code_of(cause);
    send_control(r, Opcode::kNak, code, psn, cause);
    r.failed     = true;
    r.fail_cause = cause;
    ++r.expected;
    if (code == NakCode::kAccess) {
        ++counters.remote_access_errors;
    }
}

void UdpIface::send_ack(Responder &r)
{
    send_control(r, Opcode::kAck, NakCode(0), r.expected);
    ++counters.acks_sent;
    acked(r);
}

/// r owes no ACK any more (one left, alone or on a request).
void UdpIface::acked(Responder &r)
{
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

void UdpIface::send_read_response(const Responder &r, const WireHeader &req)
{
    const uint8_t *src = reinterpret_cast<const uint8_t *>(uintptr_t(req.remote_addr));
    /* our connection to the requester's iface leaves from the same ports to
     * the same socket: where it learned the spines, the answers take them
     * in turn (a read's chunks are of one size) */
    UdpQp *spines = spines_to(r);
    for (uint32_t off = req.msg_offset; off < req.msg_length; off += req.aux) {
        WireHeader h = make_header(Opcode::kReadResp);
        h.token      = r.token;
        h.dst_qp     = r.qpn;
        h.psn        = req.psn;
        h.msg_length = req.msg_length;
        h.msg_offset = off;
        h.length     = std::min(req.aux, req.msg_length - off);
        h.ts_send    = now_;
        h.flags      = off == req.msg_offset ? kFlagFirst : 0;
        h.ts_echo    = req.ts_send;
        uint8_t path = spines != nullptr ?
                           spines->classes.next() :
                           read_response_path(paths_, req.am_id, h.flags & kFlagFirst, r.path_next,
                                              r.first_next);
        stage(h, src + off, h.length, nullptr, 0, r.peer, path,
              seg_header_bytes(Opcode::kReadResp, h.flags & kFlagFirst, false));
    }
}

/// A request of connection r (authenticated: its token, from its
/// requester's address), executed in PSN order.
void UdpIface::handle_request(Responder &r, const WireHeader &h, uint8_t *buf,
                              const uint8_t *payload, bool ce, size_t slot)
{
    if (Opcode(h.opcode) == Opcode::kDisconnect) {
        erase_responder(r.id); /* its requester's QP is gone */
        return;
    }
    if (Opcode(h.opcode) == Opcode::kAckReq) {
        near_path(r, h); /* a spine probe that reached us, if it is one */
    }
    int32_t d = psn_diff(h.psn, r.expected);
    if (d > kPsnWindow || d < -kPsnWindow) {
        /* no requester has a window this wide: not an answerable packet */
        drop(&doorbell_counters_t::rx_drop_psn);
        return;
    }
    if (d > 0 && r.peer_ports > 1 && !r.failed) {
        /* multipath: ahead of a gap, most likely overtaken on another path
         * (udp_reorder.cc); its bookkeeping is done when it executes */
        if (Opcode(h.opcode) != Opcode::kAckReq) {
            if (hold_request(r, h, payload, ce)) {
                return;
            }
        } else {
            watch_gap(r);
            if (!gap_expired(r) && !r.nak_sent) {
                /* a probe: where we stand, an ACK (the gap may yet fill;
                 * check_gaps NAKs it when it expires); a gap NAKed already
                 * is NAKed again, as on one path */
                r.gap_probed = true;
                r.last_seen  = now_;
                if (!r.ack_due) {
                    r.ack_due = true;
                    ack_list_.push_back(&r);
                }
                return;
            }
        }
    }
    /* The hold an ACK reports counts from when this process could first
     * have taken the packet: its kernel arrival, or the end of this
     * process's previous receive if it arrived before that. So the time
     * the packet waited while the process was off its core (descheduled,
     * computing outside MPI) is held out of the requester's sample, as a
     * deferred ACK's delay is: no rate helps it. The time it waited behind
     * other datagrams a look did not take stays in: a receiving host that
     * does not keep up is a queue on the path (timed from the kernel's
     * arrival alone, the incast's receivers hid theirs: 5-7 % retransmits
     * against 0.6-0.7 %). Without kernel arrival times it counts from the
     * processing. */
    if (h.ts_send != 0) {
        /* (a segment or pack not stamped: the ACK echoes the last that
         * was, and its hold counts from that one) */
        uint64_t could = std::max(rx_ts_, rx_prev_look_);
        r.ts_echo      = h.ts_send;
        r.ts_echo_rx   = rx_timestamps_ && could < now_ ? could : now_;
    }
    r.last_seen = now_;
    if (h.length != 0 &&
        (Opcode(h.opcode) == Opcode::kWrite || Opcode(h.opcode) == Opcode::kSend)) {
        r.data_ns = now_; /* data that queues ahead of our answers to it (forward_rtt) */
    }
    if (ce) {
        /* payload, as the requester counts what an ACK acknowledges: with
         * a header's 64 bytes per packet the marked fraction read up to 1.05
         * on bulk data and 9 on 8-byte messages (a pack's message each) */
        r.ce_bytes += h.length;
    }
    auto ack_due = [&] {
        if (!r.ack_due) {
            r.ack_due = true;
            ack_list_.push_back(&r);
        }
    };
    auto refuse = [&](NakCause cause) { reject(r, h.psn, cause); };

    if (r.failed) {
        /* after an error nothing more is executed; repeat the verdict in
         * case the NAK was lost */
        if (d >= -1) {
            send_control(r, Opcode::kNak, nak_code_of(r.fail_cause), r.expected - 1, r.fail_cause);
        }
        drop(&doorbell_counters_t::rx_drop_state);
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
            send_read_response(r, h); /* the responses were lost */
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
        if (Opcode(h.opcode) != Opcode::kAckReq) {
            drop(&doorbell_counters_t::rx_drop_psn); /* a gap: resent after the NAK */
        }
        return;
    }
    if (Opcode(h.opcode) == Opcode::kAckReq) {
        ack_due(); /* d == 0: everything the prober sent arrived */
        return;
    }

    switch (Opcode(h.opcode)) {
    case Opcode::kWrite: {
        WireHeader w = h;
        if (NakCause bad = resolve_segment(r, w); bad != NakCause::kNone) {
            refuse(bad);
            return;
        }
        AccessDenial      why;
        doorbell_status_t status = pd.access(
            w.rkey, w.remote_addr, w.msg_length, DOORBELL_ACCESS_REMOTE_WRITE,
            [&](uint8_t *base) { std::memcpy(base + w.msg_offset, payload, w.length); }, &why);
        if (status != DOORBELL_OK) {
            r.wr_open = false;
            refuse(access_cause(why));
            return;
        }
        /* a WRITE is open until its bytes are all written (a PUT_SIGNAL's
         * data ends without LAST: its signal follows); its later segments
         * name nothing of it */
        if (w.flags & kFlagFirst) {
            r.wr_addr   = w.remote_addr;
            r.wr_rkey   = w.rkey;
            r.wr_length = w.msg_length;
            r.wr_done   = w.length;
        } else {
            r.wr_done += w.length;
        }
        r.wr_open = r.wr_done < r.wr_length;
        break;
    }
    case Opcode::kSignal: {
        /* executed once: only the packet at the expected PSN gets here, a
         * duplicate or a retransmission of it is re-ACKed above */
        uint64_t operand;
        std::memcpy(&operand, payload, sizeof(operand));
        if (h.remote_addr % alignof(uint64_t) != 0) {
            refuse(NakCause::kMisaligned);
            return;
        }
        AccessDenial      why;
        doorbell_status_t status = pd.access(
            h.rkey, h.remote_addr, sizeof(uint64_t), DOORBELL_ACCESS_REMOTE_WRITE,
            [&](uint8_t *base) {
                auto *word = reinterpret_cast<uint64_t *>(base);
                /* release: a reader that sees the signal sees the data
                 * written before it */
                if (h.am_id == DOORBELL_SIGNAL_ADD) {
                    __atomic_fetch_add(word, operand, __ATOMIC_RELEASE);
                } else {
                    __atomic_store_n(word, operand, __ATOMIC_RELEASE);
                }
            },
            &why);
        if (status != DOORBELL_OK) {
            refuse(access_cause(why));
            return;
        }
        break;
    }
    case Opcode::kAtomicReq:
        if (std::optional<NakCause> verdict = execute_atomic(r, h, payload)) {
            refuse(*verdict);
            return;
        }
        break;
    case Opcode::kReadReq:
        if (AccessDenial why = pd.check(h.rkey, h.remote_addr, h.msg_length,
                                        DOORBELL_ACCESS_REMOTE_READ);
            why != AccessDenial::kNone) {
            refuse(access_cause(why));
            return;
        }
        send_read_response(r, h);
        break;
    case Opcode::kSend: {
        WireHeader m = h;
        if (NakCause bad = resolve_segment(r, m); bad != NakCause::kNone) {
            refuse(bad);
            return;
        }
        if (!handle_send(r, m, buf, payload, slot)) {
            return;
        }
        break;
    }
    default:
        drop(&doorbell_counters_t::rx_drop_malformed); /* not a request */
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

/// A WRITE's or SEND's segment after its FIRST, at the PSN expected: its
/// offset, its message's length and a WRITE's target from the message in
/// progress (the FIRST's). A protocol error, and its cause, when no message
/// of that kind is in progress (or a WRITE's FIRST comes while one is), or
/// the segment runs past its message's end or is marked LAST and falls short
/// of it; kNone otherwise. Other packets are left as they are.
NakCause UdpIface::resolve_segment(Responder &r, WireHeader &h)
{
    if (h.msg_offset != kOffsetImplied) {
        /* a message's FIRST, with its length (and target); a later
         * segment that names an offset is no sender's of this version, and
         * a WRITE's FIRST while another is open cuts it off */
        return (h.flags & kFlagFirst) && !(Opcode(h.opcode) == Opcode::kWrite && r.wr_open) ?
                   NakCause::kNone :
                   NakCause::kOutOfSequence;
    }
    uint32_t done, length;
    if (Opcode(h.opcode) == Opcode::kWrite) {
        if (!r.wr_open) {
            return NakCause::kOutOfSequence;
        }
        h.remote_addr = r.wr_addr;
        h.rkey        = r.wr_rkey;
        done          = r.wr_done;
        length        = r.wr_length;
    } else {
        if (r.am_buf == nullptr) {
            return NakCause::kOutOfSequence;
        }
        done   = r.am_length;
        length = r.am_alloc - uint32_t(DOORBELL_AM_HEADROOM);
    }
    uint64_t end = uint64_t(done) + h.length;
    if (end > length || ((h.flags & kFlagLast) && end != length)) {
        return NakCause::kPastEnd;
    }
    h.msg_offset = done;
    h.msg_length = length;
    return NakCause::kNone;
}

/// Takes one SEND segment in order. Returns false if it was not accepted
/// (receiver busy: NAK sent, the peer keeps the AM; or a protocol error).
/// A message of one packet is delivered in place when the 64 bytes before
/// its data, the callee's headroom, lie in its receive buffer and belong to
/// nothing delivered: behind a full header, a data header or a pack's (a
/// datagram lands kRxLead bytes into its buffer), unless an earlier message
/// of the same pack holds the buffer. Otherwise it is copied, and a message
/// of several packets is reassembled, in an allocation of its own size,
/// within the iface's rx_reassembly_bytes (a first segment beyond it is put
/// off as busy). A message may be longer than this iface's SEG_SIZE, up to
/// the largest any iface sends.
bool UdpIface::handle_send(Responder &r, const WireHeader &h, uint8_t *buf, const uint8_t *payload,
                           size_t slot)
{
    /* else a peer's largest message would be put off as busy forever */
    static_assert((uint64_t(DOORBELL_MIN_RX_REASSEMBLY_KB) << 10) >=
                      uint64_t(DOORBELL_MAX_SEG_SIZE) + DOORBELL_AM_HEADROOM,
                  "the smallest RX_REASSEMBLY holds the largest message a peer sends");
    bool first    = h.msg_offset == 0;
    bool in_place = first && h.length == h.msg_length && !rx_lent_ && payload >= buf &&
                    size_t(payload - buf) + kRxLead >= DOORBELL_AM_HEADROOM;
    /* Not bounded by our own SEG_SIZE: a peer's may be larger (a context
     * that asked for its own, a rank configured apart), and its message
     * costs an allocation of its own size within rx_reassembly_bytes */
    if (h.msg_length > DOORBELL_MAX_SEG_SIZE) {
        reject(r, h.psn, NakCause::kTooLong);
        return false;
    }
    if ((first && r.am_buf != nullptr) ||
        (!first && (r.am_buf == nullptr || h.msg_offset != r.am_length ||
                    h.msg_length + uint32_t(DOORBELL_AM_HEADROOM) != r.am_alloc))) {
        reject(r, h.psn, NakCause::kOutOfSequence);
        return false;
    }
    if (first) {
        if (held_.size() >= params.rx_queue_len) {
            send_control(r, Opcode::kNak, NakCode::kReceiverBusy, h.psn);
            return false;
        }
        if (!in_place) {
            uint32_t need = uint32_t(DOORBELL_AM_HEADROOM) + h.msg_length;
            if (reasm_bytes_ + need > params.rx_reassembly_bytes) {
                reap_reassembly(true);
            }
            uint8_t *mem = reasm_bytes_ + need <= params.rx_reassembly_bytes ? new (std::nothrow)
                                                                                   uint8_t[need] :
                                                                               nullptr;
            if (mem == nullptr) {
                ++counters.reasm_busy; /* offered again after rto_min */
                send_control(r, Opcode::kNak, NakCode::kReceiverBusy, h.psn);
                return false;
            }
            r.am_buf    = mem;
            r.am_alloc  = need;
            r.am_length = 0;
            reasm_bytes_ += need;
            counters.reasm_bytes = reasm_bytes_;
            counters.reasm_peak  = std::max(counters.reasm_peak, reasm_bytes_);
        }
    }
    uint8_t *data  = const_cast<uint8_t *>(payload);
    uint8_t *alloc = buf - kRxLead; /* in place: the receive buffer */
    if (!in_place) {
        std::memcpy(r.am_buf + DOORBELL_AM_HEADROOM + h.msg_offset, payload, h.length);
        r.am_length += h.length;
        r.am_last_ns = now_;
        if (r.am_length < h.msg_length) {
            return true;
        }
        alloc = r.am_buf;
        data  = alloc + DOORBELL_AM_HEADROOM;
        reasm_bytes_ -= r.am_alloc; /* complete: no longer half-finished */
        counters.reasm_bytes = reasm_bytes_;
        r.am_buf             = nullptr;
        r.am_alloc           = 0;
    }
    /* accept before the callback: it may post, and must see a consistent
     * responder; expected is advanced by the caller right after */
    doorbell_status_t status = DOORBELL_OK;
    if (am_cb != nullptr) {
        status = am_cb(am_arg, h.am_id, data, h.msg_length);
    }
    if (status == DOORBELL_INPROGRESS) {
        held_[data] = {alloc, in_place}; /* a receive buffer, or the copy's own */
        if (in_place && slot == kNoSlot) {
            held_injected_ = true;
        } else if (in_place) {
            rx_slots_[slot] = take_buffer(); /* the slot's buffer is lent */
        }
        rx_lent_ |= in_place;
    } else if (!in_place) {
        delete[] alloc;
    }
    return true;
}

/// The messages of a pack, one request each in PSN order, as if each had
/// come alone. The responder is found again by its id before each: a
/// handler may post, and a post may change the responder table.
void UdpIface::handle_pack(uint32_t responder, const ParseResult &pr, uint8_t *buf, bool ce,
                           size_t slot)
{
    PackReader     reader(pr);
    WireHeader     h;
    const uint8_t *payload;
    while (reader.next(h, payload)) {
        auto it = responders_.find(responder);
        if (it == responders_.end()) {
            return;
        }
        handle_request(it->second, h, buf, payload, ce, slot);
    }
}

void UdpIface::release_am(void *data)
{
    auto it = held_.find(static_cast<uint8_t *>(data));
    if (it == held_.end()) {
        return;
    }
    if (it->second.rx_buffer) {
        give_buffer(it->second.alloc);
    } else {
        delete[] it->second.alloc;
    }
    held_.erase(it);
}

} // namespace doorbell::udp
