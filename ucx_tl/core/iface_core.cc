#include "iface_core.h"

#include "error.h"

#include <algorithm>
#include <cstdio>

namespace doorbell {

QpCore::QpCore(IfaceCore &iface_, uint32_t qpn_) :
    iface(iface_),
    qpn(qpn_),
    ring(iface_.params.tx_queue_len),
    batcher_(iface_.params.tx_batch),
    signaler_(std::min(iface_.params.tx_moderation, iface_.params.tx_queue_len / 2))
{
}

doorbell_status_t QpCore::can_post(unsigned count) const
{
    if (error_ != DOORBELL_OK) {
        return set_error(DOORBELL_ERR_CANCELED, "%s: qp 0x%x is in error (%s)", iface.name.c_str(),
                         qpn, error_message_.c_str());
    }
    if (ring.free_slots() < count) {
        return DOORBELL_ERR_NO_RESOURCE;
    }
    return DOORBELL_OK;
}

doorbell_wqe_t &QpCore::prepare(SlotContext **ctx_p)
{
    doorbell_wqe_t &wqe = ring.prepare();
    *ctx_p              = &ring.ctx(ring.tail());
    return wqe;
}

void QpCore::commit(bool force_signal)
{
    doorbell_wqe_t &wqe        = ring.wqe(ring.tail());
    bool            fills_ring = ring.free_slots() == 1;
    if (signaler_.next(force_signal || (wqe.flags & DOORBELL_WQE_SIGNALED), fills_ring)) {
        wqe.flags |= DOORBELL_WQE_SIGNALED;
    } else {
        wqe.flags &= uint8_t(~DOORBELL_WQE_SIGNALED);
    }
    if (fence_next) {
        wqe.flags |= DOORBELL_WQE_FENCE;
        fence_next = false;
    }
    ring.commit();
    ++iface.counters.wqes;
}

uint8_t *QpCore::bounce(SlotContext &ctx)
{
    if (ctx.bounce == nullptr) {
        if (bounce_free_.empty()) {
            collect_done_bounces();
        }
        if (bounce_free_.empty()) {
            bounce_all_.emplace_back(new uint8_t[iface.params.seg_size]);
            ctx.bounce = bounce_all_.back().get();
        } else {
            ctx.bounce = bounce_free_.back();
            bounce_free_.pop_back();
        }
    }
    return ctx.bounce;
}

void QpCore::collect_done_bounces()
{
    uint64_t from = std::max(bounce_scan_, ring.head());
    for (uint64_t i = from; i < done; ++i) {
        SlotContext &c = ring.ctx(i);
        if (c.bounce != nullptr && c.kind != SlotKind::kGetBcopy) {
            bounce_free_.push_back(c.bounce);
            c.bounce = nullptr;
        }
    }
    bounce_scan_ = std::max(from, done);
}

void QpCore::reclaim_to(uint64_t end)
{
    for (uint64_t i = ring.head(); i < end; ++i) {
        SlotContext &ctx = ring.ctx(i);
        if (ctx.bounce != nullptr) {
            bounce_free_.push_back(ctx.bounce);
            ctx.bounce = nullptr;
        }
    }
    ring.reclaim_to(end);
}

void QpCore::complete_to(uint64_t end)
{
    for (; done < end; ++done) {
        const doorbell_wqe_t &w = ring.wqe(done);
        if (w.opcode == DOORBELL_OP_ATOMIC && atomics_inflight > 0) {
            --atomics_inflight;
        }
        if (w.flags & DOORBELL_WQE_SIGNALED) {
            cq.push_back({done, DOORBELL_OK});
            ++iface.counters.signaled;
        }
    }
}

void QpCore::fail(doorbell_status_t status, const std::string &message)
{
    if (error_ != DOORBELL_OK) {
        return;
    }
    error_         = status;
    error_message_ = message;
    error_pending_ = true;
    if (done < ring.tail()) {
        /* errors always complete, signaled or not */
        const SlotContext &ctx = ring.ctx(done);
        error_to_cookie_ = (status == DOORBELL_ERR_REMOTE_ACCESS) && ctx.kind != SlotKind::kNone &&
                           ctx.cookie != nullptr;
        cq.push_back({done, status});
        ++iface.counters.signaled;
        ++done;
    }
}

void QpCore::complete_slot(uint64_t index, doorbell_status_t status)
{
    SlotContext &ctx    = ring.ctx(index);
    SlotKind     kind   = ctx.kind;
    void        *cookie = ctx.cookie;
    ctx.kind            = SlotKind::kNone;
    switch (kind) {
    case SlotKind::kNone:
        break;
    case SlotKind::kGetBcopy:
        if (status == DOORBELL_OK) {
            ctx.unpack(ctx.unpack_arg, ctx.bounce, ring.wqe(index).length);
        }
        iface.deliver(cookie, status);
        break;
    case SlotKind::kCookie:
        iface.deliver(cookie, status);
        break;
    case SlotKind::kFlush:
        iface.deliver(cookie, in_error() ? error_ : status);
        break;
    case SlotKind::kFlushGroup: {
        auto *group = static_cast<FlushGroup *>(cookie);
        if (in_error() && group->status == DOORBELL_OK) {
            group->status = error_;
        }
        if (--group->remaining == 0) {
            iface.deliver(group->cookie, group->status);
            delete group;
        }
        break;
    }
    }
}

unsigned QpCore::poll()
{
    unsigned count = 0;
    if (!cq.empty()) {
        ++iface.counters.cq_polls;
    }
    while (!cq.empty()) {
        Cqe cqe = cq.front();
        cq.pop_front();
        complete_slot(cqe.index, cqe.status);
        reclaim_to(cqe.index + 1);
        ++count;
    }
    if (error_pending_) {
        error_pending_ = false;
        /* everything after the failing WQE never ran */
        for (uint64_t i = ring.head(); i < ring.tail(); ++i) {
            complete_slot(i, DOORBELL_ERR_CANCELED);
        }
        reclaim_to(ring.tail());
        ring.drain();
        done             = ring.tail();
        am_inflight      = 0;
        atomics_inflight = 0;
        if (!error_to_cookie_) {
            iface.report_error(*this, error_, error_message_);
        }
        ++count;
    }
    return count;
}

void QpCore::cancel_all()
{
    cq.clear();
    for (uint64_t i = ring.head(); i < ring.tail(); ++i) {
        complete_slot(i, DOORBELL_ERR_CANCELED);
    }
    reclaim_to(ring.tail());
    ring.drain();
    done             = ring.tail();
    am_inflight      = 0;
    atomics_inflight = 0;
}

doorbell_status_t QpCore::post_flush(SlotKind kind, void *cookie)
{
    if (in_error()) {
        return error_;
    }
    if (idle()) {
        return DOORBELL_OK;
    }
    doorbell_status_t status = can_post(1);
    if (status != DOORBELL_OK) {
        return status;
    }
    SlotContext    *ctx;
    doorbell_wqe_t &wqe = prepare(&ctx);
    wqe.opcode          = DOORBELL_OP_NOP;
    ctx->kind           = kind;
    ctx->cookie         = cookie;
    commit(true);
    return DOORBELL_INPROGRESS;
}

IfaceCore::IfaceCore(doorbell_device_kind_t kind_, ProtectionDomain &pd_,
                     const doorbell_iface_params_t &params_, std::string name_) :
    doorbell_iface{kind_}, pd(pd_), params(params_), name(std::move(name_))
{
    params.device = nullptr; /* the caller's string is not ours to keep */
}

IfaceCore::~IfaceCore()
{
    if (stats) {
        dump_counters();
    }
}

unsigned IfaceCore::poll_completions()
{
    unsigned count = 0;
    /* a callback may create or destroy QPs: index, not iterators */
    for (size_t i = 0; i < qps.size(); ++i) {
        QpCore *qp = qps[i];
        if (!qp->cq.empty() || qp->in_error()) {
            count += qp->poll();
        }
    }
    return count;
}

void IfaceCore::report_error(QpCore &qp, doorbell_status_t status, const std::string &message)
{
    if (error_cb != nullptr) {
        error_cb(error_arg, &qp, status, message.c_str());
    } else {
        fprintf(stderr, "doorbell: %s: qp 0x%x: %s\n", name.c_str(), qp.qpn, message.c_str());
    }
}

void IfaceCore::dump_counters() const
{
    const doorbell_counters_t              &c      = counters;
    const std::pair<const char *, uint64_t> rows[] = {
        {"wqes", c.wqes},
        {"doorbells", c.doorbells},
        {"signaled", c.signaled},
        {"cq_polls", c.cq_polls},
        {"tx_packets", c.tx_packets},
        {"rx_packets", c.rx_packets},
        {"tx_bytes", c.tx_bytes},
        {"rx_bytes", c.rx_bytes},
        {"retransmits", c.retransmits},
        {"rx_dropped", c.rx_dropped},
        {"rx_duplicates", c.rx_duplicates},
        {"naks", c.naks},
        {"ce_marks", c.ce_marks},
        {"rtt_samples", c.rtt_samples},
        {"remote_access_errors", c.remote_access_errors},
        {"timeouts", c.timeouts},
        {"paced_waits", c.paced_waits},
        {"busy_naks", c.busy_naks},
        {"tail_probes", c.tail_probes},
        {"rx_timestamped", c.rx_timestamped},
        {"rx_drop_malformed", c.rx_drop_malformed},
        {"rx_drop_foreign", c.rx_drop_foreign},
        {"rx_drop_no_conn", c.rx_drop_no_conn},
        {"rx_drop_token", c.rx_drop_token},
        {"rx_drop_source", c.rx_drop_source},
        {"rx_drop_psn", c.rx_drop_psn},
        {"rx_drop_state", c.rx_drop_state},
        {"connects", c.connects},
        {"conn_refused", c.conn_refused},
        {"keepalives", c.keepalives},
        {"reasm_busy", c.reasm_busy},
        {"reasm_reclaimed", c.reasm_reclaimed},
        {"reasm_peak", c.reasm_peak},
        {"acks_sent", c.acks_sent},
        {"acks_carried", c.acks_carried},
        {"packs", c.packs},
        {"packed", c.packed},
        {"rx_held", c.rx_held},
        {"spine_probes", c.spine_probes},
        {"spine_answers", c.spine_answers},
        {"path_errors", c.path_errors},
        {"near_paths", c.near_paths},
        {"rx_merged", c.rx_merged},
        {"rx_merged_datagrams", c.rx_merged_datagrams},
        {"idle_windows", c.idle_windows},
    };
    print_counters(rows);
}

void IfaceCore::print_counters(std::span<const std::pair<const char *, uint64_t>> rows) const
{
    for (const auto &[counter, value] : rows) {
        fprintf(stderr, "%s %s %llu\n", name.c_str(), counter,
                static_cast<unsigned long long>(value));
    }
}

} // namespace doorbell
