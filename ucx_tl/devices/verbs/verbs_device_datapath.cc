/* Verbs device, data path: WR chains behind the doorbell, completions, active messages. */
#include "verbs_device.h"

#include "core/clock.h"

#include <arpa/inet.h>
#include <endian.h>

#include <algorithm>
#include <bit>
#include <cstring>

namespace doorbell::verbs {

namespace {

doorbell_status_t status_of(ibv_wc_status st)
{
    switch (st) {
    case IBV_WC_SUCCESS:
        return DOORBELL_OK;
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_MW_BIND_ERR:
        return DOORBELL_ERR_REMOTE_ACCESS;
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
        return DOORBELL_ERR_TIMED_OUT;
    case IBV_WC_WR_FLUSH_ERR:
        return DOORBELL_ERR_CANCELED;
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_ABORT_ERR:
    case IBV_WC_REM_INV_RD_REQ_ERR:
        return DOORBELL_ERR_REMOTE;
    default:
        return DOORBELL_ERR_IO;
    }
}

const char *op_name(uint8_t opcode)
{
    switch (opcode) {
    case DOORBELL_OP_PUT:
        return "put (RDMA WRITE)";
    case DOORBELL_OP_GET:
        return "get (RDMA READ)";
    case DOORBELL_OP_SEND:
        return "active message (SEND)";
    case DOORBELL_OP_PUT_SIGNAL:
        return "put with signal (RDMA WRITE, then the signal's WRITE or FETCH_AND_ADD)";
    case DOORBELL_OP_ATOMIC:
        return "atomic (FETCH_AND_ADD or CMP_AND_SWP)";
    default:
        return "flush";
    }
}

unsigned bucket_of(size_t wrs)
{
    unsigned b = unsigned(std::bit_width(wrs)) - 1;
    return std::min(b, kPostListBuckets - 1);
}

} // namespace

void VerbsIface::ring(VerbsQp &qp)
{
    if (qp.ring.unrung() == 0) {
        return;
    }
    qp.ring.ring();
    post(qp);
}

/// Hands the WQEs [cursor, rung) to the HCA as one chained ibv_post_send.
void VerbsIface::post(VerbsQp &qp)
{
    if (qp.direct) {
        /* only flushes reach a direct QP's core ring (posts are refused):
         * the core holds nothing there, so they complete at once */
        if (qp.done < qp.ring.rung() && !qp.in_error()) {
            qp.cursor = qp.ring.rung();
            qp.complete_to(qp.ring.rung());
        }
        return;
    }
    if (qp.state != VerbsQp::State::kConnected || qp.in_error() || qp.cursor >= qp.ring.rung()) {
        return;
    }
    apply_invalidations();
    const uint64_t mask = qp.ring.size() - 1;
    /* a PUT_SIGNAL is two WRs (and one more SGE) */
    if (wrs_.size() < 2 * qp.ring.size()) {
        wrs_.resize(2 * qp.ring.size());
        sges_.resize(qp.ring.size() * (max_sge_ + 1));
    }
    uint64_t          now  = now_ns();
    size_t            n_wr = 0, n_sge = 0;
    ibv_send_wr      *cur       = nullptr;
    uint64_t          cur_first = 0, cur_remote_end = 0;
    doorbell_status_t failed = DOORBELL_OK;
    std::string       failure;
    uint64_t          i = qp.cursor;
    for (; i < qp.ring.rung(); ++i) {
        const doorbell_wqe_t &w   = qp.ring.wqe(i);
        bool                  inl = (w.flags & DOORBELL_WQE_INLINE) != 0;
        uint32_t              len = inl ? w.inline_len : w.length;
        if (qp.gate && !hw_pacing_ && w.opcode != DOORBELL_OP_NOP) {
            /* software pacing: a WR leaves when the gate allows it;
             * progress posts the rest */
            if (qp.gate->next_send_ns(now, len) > now) {
                ++post_stats_.paced_holds;
                break;
            }
            qp.gate->on_send(now, len);
        }
        bool rdma        = w.opcode == DOORBELL_OP_PUT || w.opcode == DOORBELL_OP_GET;
        bool needs_lkey  = len != 0 && !inl && (w.opcode == DOORBELL_OP_GET || len > max_inline_);
        ibv_wr_opcode op = w.opcode == DOORBELL_OP_GET ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
        /* an iov entry continuing the previous WR: one more SGE */
        if (cur != nullptr && rdma && needs_lkey && cur->opcode == op && cur->num_sge > 0 &&
            cur->num_sge < int(max_sge_) &&
            !(cur->send_flags & (IBV_SEND_SIGNALED | IBV_SEND_INLINE)) &&
            !(w.flags & DOORBELL_WQE_FENCE) && cur->wr.rdma.rkey == w.rkey &&
            cur_remote_end == w.remote_addr) {
            CachedRegion     *r;
            doorbell_status_t st =
                rcache_->acquire(reinterpret_cast<void *>(uintptr_t(w.local_addr)), len, &r);
            if (st != DOORBELL_OK) {
                failed  = st;
                failure = doorbell_last_error();
                break;
            }
            qp.region[i & mask] = r;
            sges_[n_sge++]      = {w.local_addr, len, r->lkey};
            ++cur->num_sge;
            cur->wr_id = i;
            if (w.flags & DOORBELL_WQE_SIGNALED) {
                cur->send_flags |= IBV_SEND_SIGNALED;
            }
            cur_remote_end += len;
            qp.wr_first[i & mask] = cur_first;
            qp.post_ns[i & mask]  = now;
            ++post_stats_.merged_wqes;
            counters.tx_bytes += len;
            continue;
        }
        if (w.opcode == DOORBELL_OP_PUT_SIGNAL) {
            /* the data write, then the signal on the same RC QP: the
             * responder executes them in order, so the signal lands after
             * the data. Both carry the WQE's index as wr_id. */
            ibv_send_wr &d        = wrs_[n_wr];
            d                     = {};
            d.wr_id               = i;
            d.sg_list             = &sges_[n_sge];
            d.opcode              = IBV_WR_RDMA_WRITE;
            d.wr.rdma.remote_addr = w.remote_addr;
            d.wr.rdma.rkey        = w.rkey;
            if (w.flags & DOORBELL_WQE_FENCE) {
                d.send_flags |= IBV_SEND_FENCE;
            }
            doorbell_status_t st = attach_data(d, qp, i, w, len, n_sge);
            if (st != DOORBELL_OK) {
                failed  = st;
                failure = doorbell_last_error();
                break;
            }
            ibv_send_wr &g = wrs_[n_wr + 1];
            g              = {};
            g.wr_id        = i;
            g.sg_list      = &sges_[n_sge];
            g.num_sge      = 1;
            uint64_t *slot = &qp.scratch[i & mask];
            if (w.am_id == DOORBELL_SIGNAL_ADD) {
                g.opcode                = IBV_WR_ATOMIC_FETCH_AND_ADD;
                g.wr.atomic.remote_addr = w.signal_addr;
                g.wr.atomic.compare_add = w.signal_value;
                g.wr.atomic.rkey        = w.signal_rkey;
                sges_[n_sge++]          = {uintptr_t(slot), 8, qp.scratch_mr->lkey};
            } else {
                g.opcode              = IBV_WR_RDMA_WRITE;
                g.wr.rdma.remote_addr = w.signal_addr;
                g.wr.rdma.rkey        = w.signal_rkey;
                if (max_inline_ >= 8) {
                    sges_[n_sge++] = {uintptr_t(&w.signal_value), 8, 0};
                    g.send_flags |= IBV_SEND_INLINE;
                } else {
                    *slot          = w.signal_value;
                    sges_[n_sge++] = {uintptr_t(slot), 8, qp.scratch_mr->lkey};
                }
            }
            if (w.flags & DOORBELL_WQE_SIGNALED) {
                g.send_flags |= IBV_SEND_SIGNALED;
            }
            if (cur != nullptr) {
                cur->next = &d;
            }
            d.next                = &g;
            cur                   = &g;
            cur_first             = i;
            cur_remote_end        = ~uint64_t(0); /* nothing merges into a signal */
            qp.wr_first[i & mask] = i;
            qp.post_ns[i & mask]  = now;
            counters.tx_bytes += len + 8;
            n_wr += 2;
            continue;
        }
        if (w.opcode == DOORBELL_OP_ATOMIC) {
            /* the old value lands in the slot's scratch word (big-endian, as
             * the HCA returns it); complete_wrs hands it to the caller */
            ibv_send_wr &a          = wrs_[n_wr];
            a                       = {};
            a.wr_id                 = i;
            a.sg_list               = &sges_[n_sge];
            a.num_sge               = 1;
            a.wr.atomic.remote_addr = w.remote_addr;
            a.wr.atomic.rkey        = w.rkey;
            if (w.am_id == DOORBELL_ATOMIC_CSWAP) {
                a.opcode                = IBV_WR_ATOMIC_CMP_AND_SWP;
                a.wr.atomic.compare_add = w.atomic_compare;
                a.wr.atomic.swap        = w.atomic_operand;
            } else { /* ADD: the only other one query_limits offers */
                a.opcode                = IBV_WR_ATOMIC_FETCH_AND_ADD;
                a.wr.atomic.compare_add = w.atomic_operand;
            }
            sges_[n_sge++] = {uintptr_t(&qp.scratch[i & mask]), 8, qp.scratch_mr->lkey};
            if (w.flags & DOORBELL_WQE_SIGNALED) {
                a.send_flags |= IBV_SEND_SIGNALED;
            }
            if (w.flags & DOORBELL_WQE_FENCE) {
                a.send_flags |= IBV_SEND_FENCE;
            }
            if (cur != nullptr) {
                cur->next = &a;
            }
            cur                   = &a;
            cur_first             = i;
            cur_remote_end        = ~uint64_t(0); /* nothing merges into an atomic */
            qp.wr_first[i & mask] = i;
            qp.post_ns[i & mask]  = now;
            counters.tx_bytes += w.length;
            ++n_wr;
            continue;
        }
        ibv_send_wr &wr = wrs_[n_wr];
        wr              = {};
        wr.wr_id        = i;
        wr.sg_list      = &sges_[n_sge];
        switch (w.opcode) {
        case DOORBELL_OP_SEND:
            wr.opcode   = IBV_WR_SEND_WITH_IMM;
            wr.imm_data = htonl(w.am_id);
            break;
        case DOORBELL_OP_GET:
        case DOORBELL_OP_PUT:
            wr.opcode              = op;
            wr.wr.rdma.remote_addr = w.remote_addr;
            wr.wr.rdma.rkey        = w.rkey;
            break;
        default:
            /* NOP (flush): a zero-length write completes after everything
             * before it on the RC QP; no key is checked for zero bytes */
            wr.opcode = IBV_WR_RDMA_WRITE;
            len       = 0;
            break;
        }
        if (doorbell_status_t st = attach_data(wr, qp, i, w, len, n_sge); st != DOORBELL_OK) {
            failed  = st;
            failure = doorbell_last_error();
            break;
        }
        if (w.flags & DOORBELL_WQE_SIGNALED) {
            wr.send_flags |= IBV_SEND_SIGNALED;
        }
        /* AM credits come back only with a completion: signal a SEND at
         * least every half of the credits, or the sender would stall on
         * credits with nothing signaled in flight */
        if (w.opcode == DOORBELL_OP_SEND &&
            ++qp.unsignaled_sends >= std::max(1u, params.am_credits / 2)) {
            wr.send_flags |= IBV_SEND_SIGNALED;
        }
        if (wr.send_flags & IBV_SEND_SIGNALED) {
            qp.unsignaled_sends = 0;
        }
        if (w.flags & DOORBELL_WQE_FENCE) {
            wr.send_flags |= IBV_SEND_FENCE;
        }
        if (cur != nullptr) {
            cur->next = &wr;
        }
        cur                   = &wr;
        cur_first             = i;
        cur_remote_end        = w.remote_addr + len;
        qp.wr_first[i & mask] = i;
        qp.post_ns[i & mask]  = now;
        counters.tx_bytes += len;
        ++n_wr;
    }
    qp.cursor = i;
    if (n_wr != 0) {
        cur->next = nullptr;
        for (size_t k = 0; k < n_wr; ++k) {
            post_stats_.inline_wrs += (wrs_[k].send_flags & IBV_SEND_INLINE) != 0;
            post_stats_.signaled_wrs += (wrs_[k].send_flags & IBV_SEND_SIGNALED) != 0;
        }
        ++post_stats_.post_calls;
        post_stats_.wrs += n_wr;
        post_stats_.sges += n_sge;
        ++post_stats_.post_list[bucket_of(n_wr)];
        ++counters.doorbells;
        counters.tx_packets += n_wr;
        ibv_send_wr *bad = nullptr;
        int          rc  = ibv_post_send(qp.qp, &wrs_[0], &bad);
        if (rc != 0 && failed == DOORBELL_OK) {
            failed  = DOORBELL_ERR_IO;
            failure = name + ": ibv_post_send to peer " + peer_string(qp.peer) +
                      " failed: " + strerror(rc);
        }
    }
    if (failed != DOORBELL_OK) {
        release_slots(qp, qp.done, qp.ring.tail());
        qp.fail(failed, failure);
    }
}

/// The payload of WQE i as wr's SGE: inline (in the WQE, or a local buffer
/// up to max_inline) or registered through the cache.
doorbell_status_t VerbsIface::attach_data(ibv_send_wr &wr, VerbsQp &qp, uint64_t i,
                                          const doorbell_wqe_t &w, uint32_t len, size_t &n_sge)
{
    if (len == 0) {
        return DOORBELL_OK;
    }
    bool inl = (w.flags & DOORBELL_WQE_INLINE) != 0;
    if (inl) {
        sges_[n_sge++] = {uintptr_t(w.inline_data), len, 0};
        wr.send_flags |= IBV_SEND_INLINE;
    } else if (w.opcode != DOORBELL_OP_GET && len <= max_inline_) {
        sges_[n_sge++] = {w.local_addr, len, 0};
        wr.send_flags |= IBV_SEND_INLINE;
    } else {
        CachedRegion     *r;
        doorbell_status_t st = rcache_->acquire(reinterpret_cast<void *>(uintptr_t(w.local_addr)),
                                                len, &r);
        if (st != DOORBELL_OK) {
            return st;
        }
        qp.region[i & (qp.ring.size() - 1)] = r;
        sges_[n_sge++]                      = {w.local_addr, len, r->lkey};
    }
    wr.num_sge = 1;
    return DOORBELL_OK;
}

void VerbsIface::release_slots(VerbsQp &qp, uint64_t from, uint64_t to)
{
    const uint64_t mask = qp.ring.size() - 1;
    for (uint64_t j = from; j < to; ++j) {
        CachedRegion *&r = qp.region[j & mask];
        if (r != nullptr) {
            rcache_->release(r);
            r = nullptr;
        }
    }
}

void VerbsIface::complete_wrs(VerbsQp &qp, uint64_t end, uint64_t ts)
{
    if (end <= qp.done || end > qp.cursor) {
        return; /* not a WR of this QP's current window */
    }
    const uint64_t mask  = qp.ring.size() - 1;
    uint64_t       bytes = 0;
    for (uint64_t j = qp.done; j < end; ++j) {
        const doorbell_wqe_t &w = qp.ring.wqe(j);
        if (w.opcode == DOORBELL_OP_SEND && qp.am_inflight > 0) {
            --qp.am_inflight;
        }
        if (w.opcode == DOORBELL_OP_ATOMIC && w.local_addr != 0) {
            uint64_t old = be64toh(qp.scratch[j & mask]);
            std::memcpy(reinterpret_cast<void *>(uintptr_t(w.local_addr)), &old, sizeof(old));
        }
        bytes += (w.flags & DOORBELL_WQE_INLINE) ? w.inline_len : w.length;
    }
    release_slots(qp, qp.done, end);
    uint64_t rtt = 0;
    if (ts != 0 && hca_clock_khz_ != 0) {
        uint64_t at   = hca_to_host_ns(ts);
        uint64_t sent = qp.post_ns[(end - 1) & mask];
        if (at > sent && at - sent < 10000000000ull) {
            rtt = at - sent;
            ++counters.rtt_samples;
            qp.srtt_ns = qp.srtt_ns ? (7 * qp.srtt_ns + rtt) / 8 : rtt;
        }
    }
    if (qp.gate) {
        qp.gate->on_ack(now_ns(), bytes, 0, rtt, 0);
        apply_rate(qp);
    }
    qp.complete_to(end);
}

void VerbsIface::fail_wr(VerbsQp &qp, uint64_t wr_last, ibv_wc_status st)
{
    const uint64_t mask  = qp.ring.size() - 1;
    uint64_t       first = qp.done;
    if (wr_last >= qp.done && wr_last < qp.cursor) {
        first = std::max(qp.wr_first[wr_last & mask], qp.done);
    }
    /* RC: the WRs before the failing one completed */
    if (first > qp.done) {
        complete_wrs(qp, first, 0);
    }
    release_slots(qp, qp.done, qp.cursor);
    doorbell_status_t status = status_of(st);
    if (status == DOORBELL_ERR_REMOTE_ACCESS) {
        ++counters.remote_access_errors;
    }
    const doorbell_wqe_t &w = qp.ring.wqe(first);
    qp.fail(
        status, name + ": " + op_name(w.opcode) + " to peer " + peer_string(qp.peer) + " (qp 0x" +
                    [&] {
                        char b[16];
                        snprintf(b, sizeof(b), "%x", qp.qp->qp_num);
                        return std::string(b);
                    }() +
                    ") failed: " + ibv_wc_status_str(st));
}

unsigned VerbsIface::poll_send_cq()
{
    ibv_poll_cq_attr attr{};
    if (ibv_start_poll(send_cq_, &attr) != 0) {
        return 0;
    }
    ++counters.cq_polls;
    unsigned n = 0;
    do {
        uint32_t      qpn   = ibv_wc_read_qp_num(send_cq_);
        uint64_t      wr_id = send_cq_->wr_id;
        ibv_wc_status st    = send_cq_->status;
        uint64_t      ts    = hca_clock_khz_ != 0 ? ibv_wc_read_completion_ts(send_cq_) : 0;
        auto          it    = by_rc_qpn_.find(qpn);
        if (it != by_rc_qpn_.end() && !it->second->in_error()) {
            if (st == IBV_WC_SUCCESS) {
                complete_wrs(*it->second, wr_id + 1, ts);
            } else {
                fail_wr(*it->second, wr_id, st);
            }
        }
        ++n;
    } while (n < kPollBatch && ibv_next_poll(send_cq_) == 0);
    ibv_end_poll(send_cq_);
    return n;
}

unsigned VerbsIface::poll_recv_cq()
{
    struct Rx {
        uint8_t      *buf;
        uint32_t      qpn;
        uint32_t      len;
        uint32_t      imm;
        unsigned      flags;
        ibv_wc_status status;
    };
    Rx               rx[kPollBatch];
    unsigned         n = 0;
    ibv_poll_cq_attr attr{};
    if (ibv_start_poll(recv_cq_, &attr) != 0) {
        return 0;
    }
    do {
        Rx &r    = rx[n++];
        r.buf    = reinterpret_cast<uint8_t *>(uintptr_t(recv_cq_->wr_id));
        r.status = recv_cq_->status;
        r.qpn    = ibv_wc_read_qp_num(recv_cq_);
        r.len    = r.status == IBV_WC_SUCCESS ? ibv_wc_read_byte_len(recv_cq_) : 0;
        r.flags  = r.status == IBV_WC_SUCCESS ? ibv_wc_read_wc_flags(recv_cq_) : 0;
        r.imm    = (r.flags & IBV_WC_WITH_IMM) ? ntohl(ibv_wc_read_imm_data(recv_cq_)) : ~0u;
    } while (n < kPollBatch && ibv_next_poll(recv_cq_) == 0);
    ibv_end_poll(recv_cq_);

    unsigned delivered = 0;
    for (unsigned k = 0; k < n; ++k) {
        Rx      &r  = rx[k];
        auto     it = passive_by_qpn_.find(r.qpn);
        Passive *p  = it == passive_by_qpn_.end() ? nullptr : it->second;
        if (p != nullptr && p->bufs.erase(r.buf) != 0) {
            --p->posted;
        }
        if (r.status != IBV_WC_SUCCESS || p == nullptr) {
            pool_.put(r.buf); /* flushed at QP teardown */
            continue;
        }
        ++counters.rx_packets;
        counters.rx_bytes += r.len;
        if (r.imm > 0xff || r.len > params.seg_size || am_cb == nullptr) {
            ++counters.rx_dropped;
            pool_.put(r.buf);
            post_passive_recvs(*p);
            continue;
        }
        uint8_t          *data = r.buf + DOORBELL_AM_HEADROOM;
        uint32_t          qpn  = r.qpn;
        doorbell_status_t st   = am_cb(am_arg, uint8_t(r.imm), data, r.len);
        ++delivered;
        if (st == DOORBELL_INPROGRESS) {
            held_am_[data] = qpn;
            continue;
        }
        pool_.put(r.buf);
        /* the callback may have changed the tables: look the QP up again */
        auto again = passive_by_qpn_.find(qpn);
        if (again != passive_by_qpn_.end()) {
            post_passive_recvs(*again->second);
        }
    }
    return delivered;
}

void VerbsIface::release_am(void *data)
{
    auto it = held_am_.find(static_cast<uint8_t *>(data));
    if (it == held_am_.end()) {
        return;
    }
    uint32_t qpn = it->second;
    held_am_.erase(it);
    pool_.put(static_cast<uint8_t *>(data) - DOORBELL_AM_HEADROOM);
    auto p = passive_by_qpn_.find(qpn);
    if (p != passive_by_qpn_.end()) {
        post_passive_recvs(*p->second);
    }
}

unsigned VerbsIface::progress()
{
    ++depth_;
    for (size_t k = 0; k < qps.size(); ++k) {
        auto *qp = static_cast<VerbsQp *>(qps[k]);
        if (qp->ring.unrung() != 0) {
            qp->ring.ring(); /* what the batcher held back */
        }
        post(*qp);
    }
    unsigned count = 0;
    poll_ud_cq();
    poll_send_cq();
    count += poll_recv_cq();
    check_hellos();
    ibv_cq *cq;
    void   *cq_ctx;
    while (prov_.get_cq_event(channel_, &cq, &cq_ctx) == 0) {
        prov_.ack_cq_events(cq, 1);
    }
    uint64_t now = now_ns();
    if (hca_clock_khz_ != 0 && now >= next_calibrate_ns_) {
        calibrate_clock();
    }
    if (port_.roce && now >= next_congestion_ns_) {
        next_congestion_ns_ = now + 10000000; /* sysfs reads cost ~10 us */
        sample_congestion();
    }
    count += poll_completions();
    --depth_;
    return count;
}

} // namespace doorbell::verbs
