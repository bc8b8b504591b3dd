/*
 * The device-independent half of an iface and of its queue pairs: the send
 * ring, batching, signaling, the completion queue and completion dispatch.
 * A device (udp, verbs) derives its iface and QP types from these and
 * consumes the ring between its own cursor and the doorbell.
 */
#pragma once

#include "batcher.h"
#include "doorbell_core.h"
#include "protection_domain.h"
#include "send_ring.h"

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <utility>
#include <vector>

struct doorbell_iface {
    doorbell_device_kind_t kind;
};

struct doorbell_qp {};

namespace doorbell {

class IfaceCore;

/// A completion written by the device for a signaled (or failed) WQE.
struct Cqe {
    uint64_t          index; ///< ring index of the WQE
    doorbell_status_t status;
};

/// One iface flush over several QPs: completes when the last part does.
struct FlushGroup {
    void             *cookie;
    unsigned          remaining;
    doorbell_status_t status;
};

class QpCore : public doorbell_qp {
public:
    QpCore(IfaceCore &iface, uint32_t qpn);
    QpCore(const QpCore &)            = delete;
    QpCore &operator=(const QpCore &) = delete;

    /* ---- posting (core side) ---- */

    /// OK if count WQEs fit; CANCELED in error; NO_RESOURCE if the ring is full.
    doorbell_status_t can_post(unsigned count) const;
    /// A zeroed WQE at the tail and its context. REQUIRES: can_post() was OK.
    doorbell_wqe_t &prepare(SlotContext **ctx_p);
    /// Applies signaling and fence flags and publishes the WQE. force_signal:
    /// the poster needs a completion.
    void commit(bool force_signal);
    /// The batcher's decision for the WQEs posted since the last doorbell;
    /// called once per post. The first post after a progress call counts as
    /// idle: a reply in a ping-pong leaves at once instead of at the next
    /// poll, while posts back to back without progress still coalesce.
    bool ring_now()
    {
        bool first = posted_at_ != iface_progress_calls();
        posted_at_ = iface_progress_calls();
        return batcher_.ring_now(ring.unrung(), busy() && !first);
    }
    /// Busy: the device holds rung WQEs that have not completed.
    bool busy() const { return done < ring.rung(); }
    /// Nothing posted is incomplete.
    bool idle() const { return done == ring.tail(); }
    /// A bounce buffer of seg_size bytes for the slot, from the QP's pool:
    /// the one given back last (LIFO), so a QP with one message in flight
    /// copies into the same warm buffer every time. It goes back when the
    /// slot is reclaimed.
    uint8_t *bounce(SlotContext &ctx);
    /// Every bounce buffer the QP has made (the verbs device's registration
    /// cache forgets them at destroy).
    const std::vector<std::unique_ptr<uint8_t[]>> &bounce_buffers() const { return bounce_all_; }

    /* ---- device side ---- */

    /// WQEs [done, end) completed successfully: CQEs for the signaled ones.
    void complete_to(uint64_t end);
    /// The WQE at done failed: an error CQE for it, the QP goes to error and
    /// the rest is canceled when the CQ is polled. message names the cause.
    void              fail(doorbell_status_t status, const std::string &message);
    bool              in_error() const { return error_ != DOORBELL_OK; }
    doorbell_status_t error() const { return error_; }

    /* ---- completions (core side) ---- */

    /// Dispatches CQEs; returns the number of completions delivered.
    unsigned poll();
    /// QP destroy: every outstanding operation completes CANCELED.
    void cancel_all();
    /// Flush with a context (kFlush or kFlushGroup); see doorbell_qp_flush.
    doorbell_status_t post_flush(SlotKind kind, void *cookie);

    IfaceCore      &iface;
    const uint32_t  qpn; ///< local QP number (random base + n)
    SendRing        ring;
    uint64_t        done = 0; ///< WQEs below this index have completed
    std::deque<Cqe> cq;       ///< written by the device, polled here
    bool            fence_next  = false;
    uint32_t        am_inflight = 0; ///< SENDs posted, not yet completed
    /// ATOMICs posted, not yet completed (at most
    /// DOORBELL_MAX_ATOMICS_INFLIGHT; retired in ring order by complete_to)
    uint32_t atomics_inflight = 0;

private:
    void complete_slot(uint64_t index, doorbell_status_t status);
    /// Slots below end are free again: their bounce buffers back to the pool.
    void reclaim_to(uint64_t end);
    /// The bounce buffers of slots the device has finished with (below
    /// done) that still wait for a signaled completion to be reclaimed:
    /// back to the pool, but a get's, which its completion unpacks. Each
    /// slot is looked at once (bounce_scan_).
    void     collect_done_bounces();
    uint64_t iface_progress_calls() const;

    /* Bounce buffers: allocated on demand, given back when their slot is
     * reclaimed, reused last-in first-out. Tied to slots, a ping-pong took
     * a fresh one for each of the ring's 256 slots before reusing any: the
     * first 256 messages paid an allocation and the first touch of its
     * pages (the btl's 40 KiB slots: 30 against 12 us one way across the
     * emulated spine, the first 250 round trips of every job). Given back
     * at reclaim only, they waited for the next signaled completion (one per
     * tx_moderation WQEs): the first 63 messages of a ping-pong still took
     * fresh ones (24 against 10 us one way); a pool found empty now takes
     * back those of the slots the device has completed. */
    std::vector<std::unique_ptr<uint8_t[]>> bounce_all_;
    std::vector<uint8_t *>                  bounce_free_;
    uint64_t                                bounce_scan_ = 0; ///< slots below: looked at

    Batcher           batcher_;
    Signaler          signaler_;
    doorbell_status_t error_ = DOORBELL_OK;
    std::string       error_message_;
    bool              error_pending_   = false;        ///< error handler not yet called
    bool              error_to_cookie_ = false;        ///< failing op had a cookie
    uint64_t          posted_at_       = ~uint64_t(0); ///< progress calls at the
                                                       ///< last post
};

class IfaceCore : public doorbell_iface {
public:
    IfaceCore(doorbell_device_kind_t kind, ProtectionDomain &pd,
              const doorbell_iface_params_t &params, std::string name);
    IfaceCore(const IfaceCore &)            = delete;
    IfaceCore &operator=(const IfaceCore &) = delete;
    ~IfaceCore();

    /// Completions of every QP; returns how many were delivered.
    unsigned poll_completions();
    /// CQE accounting and the handlers, called by QpCore.
    void deliver(void *cookie, doorbell_status_t status)
    {
        if (cookie == nullptr) {
            return;
        }
        if (completion_arg_cb != nullptr) {
            completion_arg_cb(completion_arg, cookie, status);
        } else if (completion_cb != nullptr) {
            completion_cb(cookie, status);
        }
    }
    void report_error(QpCore &qp, doorbell_status_t status, const std::string &message);
    /// Prints counters as "<device> <counter> <value>" lines to stderr.
    void dump_counters() const;
    /// The same for a device's own counters (stats at close).
    void print_counters(std::span<const std::pair<const char *, uint64_t>> rows) const;

    ProtectionDomain       &pd;
    doorbell_iface_params_t params; ///< checked (doorbell_iface_params_check)
    const std::string       name;   ///< device name
    doorbell_counters_t     counters{};
    bool                    stats = false;
    std::vector<QpCore *>   qps;
    uint64_t                progress_calls = 0;     ///< doorbell_iface_progress
    bool                    background     = false; ///< in ..._progress_background

    doorbell_am_cb_t             am_cb             = nullptr;
    void                        *am_arg            = nullptr;
    doorbell_completion_cb_t     completion_cb     = nullptr;
    doorbell_completion_arg_cb_t completion_arg_cb = nullptr;
    void                        *completion_arg    = nullptr;
    doorbell_qp_error_cb_t       error_cb          = nullptr;
    void                        *error_arg         = nullptr;
};

inline uint64_t QpCore::iface_progress_calls() const
{
    return iface.progress_calls;
}

} // namespace doorbell
