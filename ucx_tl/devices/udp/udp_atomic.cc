/* UDP device, atomics at both ends. The requester sends an ATOMIC_REQ in
 * PSN order like any request and completes the WQE with its ATOMIC_RESP.
 * The responder executes it once, with a CPU atomic on the target word (so
 * it is atomic with every other atomic on that word, wherever it comes
 * from), and keeps the answer: a repeated request (its answer was lost) is
 * answered from that cache, as an InfiniBand RC responder answers a repeated
 * atomic, so a lost packet costs a resend, never a second addition. */
#include "udp_device.h"

#include <algorithm>
#include <cstring>

namespace doorbell::udp {

namespace {

/// Applies op to *word and returns the value before it. Acquire-release: an
/// atomic orders the data written before it (a lock word, a counter).
template <class T>
T apply_atomic(T *word, uint8_t op, T operand, T compare)
{
    switch (op) {
    case DOORBELL_ATOMIC_ADD:
        return __atomic_fetch_add(word, operand, __ATOMIC_ACQ_REL);
    case DOORBELL_ATOMIC_AND:
        return __atomic_fetch_and(word, operand, __ATOMIC_ACQ_REL);
    case DOORBELL_ATOMIC_OR:
        return __atomic_fetch_or(word, operand, __ATOMIC_ACQ_REL);
    case DOORBELL_ATOMIC_XOR:
        return __atomic_fetch_xor(word, operand, __ATOMIC_ACQ_REL);
    case DOORBELL_ATOMIC_SWAP:
        return __atomic_exchange_n(word, operand, __ATOMIC_ACQ_REL);
    default: /* CSWAP; the parser admits no other */
        __atomic_compare_exchange_n(word, &compare, operand, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE);
        return compare; /* the value found, whether it was swapped or not */
    }
}

} // namespace

/// Executes the ATOMIC_REQ h at the expected PSN and answers it. The cause
/// when it is rejected (the word untouched): a key, bounds, alignment or
/// access failure (NAK ACCESS), operands wider than the word (INVALID).
std::optional<NakCause> UdpIface::execute_atomic(Responder &r, const WireHeader &h,
                                                 const uint8_t *payload)
{
    AtomicArgs a;
    std::memcpy(&a, payload, sizeof(a));
    uint32_t size = h.msg_length;
    if (size == 4 && ((a.operand | a.compare) >> 32) != 0) {
        return NakCause::kOperandTooWide;
    }
    if (h.remote_addr % size != 0) {
        return NakCause::kMisaligned; /* a torn word would not be atomic */
    }
    uint64_t          old = 0;
    AccessDenial      why;
    doorbell_status_t status = pd.access(
        h.rkey, h.remote_addr, size, DOORBELL_ACCESS_REMOTE_ATOMIC,
        [&](uint8_t *base) {
            if (size == 8) {
                old = apply_atomic(reinterpret_cast<uint64_t *>(base), h.am_id, a.operand,
                                   a.compare);
            } else {
                old = apply_atomic(reinterpret_cast<uint32_t *>(base), h.am_id, uint32_t(a.operand),
                                   uint32_t(a.compare));
            }
        },
        &why);
    if (status != DOORBELL_OK) {
        return access_cause(why);
    }
    if (!r.atomics) {
        r.atomics = std::make_unique<AtomicCache>();
    }
    AtomicCache &cache        = *r.atomics;
    cache.answers[cache.next] = {h.psn, size, old};
    cache.next                = (cache.next + 1) % AtomicCache::kSize;
    send_atomic_response(r, h, old);
    return std::nullopt;
}

/// A repeated ATOMIC_REQ (below the expected PSN): answers it from the cache.
/// False when it is not there: a stale copy of an atomic the requester has
/// completed (one it may still wait for is always there).
bool UdpIface::answer_atomic_again(const Responder &r, const WireHeader &h)
{
    if (!r.atomics) {
        return false;
    }
    for (const AtomicCache::Answer &a : r.atomics->answers) {
        if (a.size != 0 && a.psn == h.psn && a.size == h.msg_length) {
            send_atomic_response(r, h, a.value);
            return true;
        }
    }
    return false;
}

void UdpIface::send_atomic_response(const Responder &r, const WireHeader &req, uint64_t value)
{
    WireHeader h = make_header(Opcode::kAtomicResp);
    h.flags      = kFlagFirst; /* an RTT sample, as a read's first answer */
    h.token      = r.token;
    h.dst_qp     = r.qpn;
    h.src_qp     = r.id;
    h.psn        = req.psn;
    h.msg_length = req.msg_length;
    set_atomic_value(h, value);
    h.ts_send = now_;
    h.ts_echo = req.ts_send;
    stage(h, nullptr, 0, nullptr, 0, r.peer, next_path(r.path_next));
}

/// The answer to one of qp's atomics: the old value to the caller's result;
/// it acknowledges everything up to the request (executed in PSN order).
void UdpIface::handle_atomic_resp(UdpQp &qp, const WireHeader &h)
{
    ack_psn(qp, h.psn + 1, now_);
    auto it = std::find_if(qp.reads.begin(), qp.reads.end(),
                           [&](const ReadPiece &p) { return p.psn == h.psn; });
    if (it == qp.reads.end() || !it->atomic) {
        ++counters.rx_duplicates; /* answered already */
        return;
    }
    if (h.msg_length != it->length) {
        drop(&doorbell_counters_t::rx_drop_state);
        return;
    }
    if (it->dest != nullptr) {
        uint64_t value = atomic_value(h);
        std::memcpy(it->dest, &value, sizeof(value));
    }
    if (h.ts_echo != 0 && h.ts_echo <= now_) {
        uint64_t elapsed = now_ - h.ts_echo;
        qp.srtt_ns       = qp.srtt_ns ? (7 * qp.srtt_ns + elapsed) / 8 : elapsed;
        ++counters.rtt_samples;
    }
    qp.retries   = 0;
    uint64_t wqe = it->wqe;
    qp.reads.erase(it);
    qp.tracks[wqe - qp.tracks.front().wqe].reads_left--;
    bool idle      = qp.unacked.empty() && qp.reads.empty();
    qp.deadline_ns = idle ? 0 : now_ + qp.rto_ns;
    qp.tlp_at_ns   = idle ? 0 : now_ + tlp_timeout(qp);
    retire(qp);
}

} // namespace doorbell::udp
