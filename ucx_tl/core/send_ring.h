/*
 * The send ring of a queue pair: WQE slots behind a doorbell.
 *
 *   head          rung                 tail
 *    |  handed to   |   posted, not yet  |   free
 *    |  the device  |   rung (batching)  |
 *
 * Indices are 64-bit and only grow; slot = index & mask. A slot is reclaimed
 * (head advances) only when a signaled completion at or after it is polled:
 * unsignaled WQEs are retired by the next signaled one, as on a real NIC.
 */
#pragma once

#include "doorbell_core.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace doorbell {

/// What completing a signaled WQE means to its poster.
enum class SlotKind : uint8_t {
    kNone,      ///< nothing (periodic signaling)
    kCookie,    ///< completion handler gets cookie (zcopy, get_zcopy, raw wr_id)
    kGetBcopy,  ///< unpack the bounce buffer, then complete cookie
    kFlush,     ///< flush of one QP: cookie completes with the QP's status
    kFlushGroup ///< part of an iface flush: cookie is a FlushGroup
};

/// Per-slot bookkeeping beside the 64-byte WQE (kept out of the WQE so the
/// device-visible format stays the shared one).
struct SlotContext {
    SlotKind             kind       = SlotKind::kNone;
    void                *cookie     = nullptr;
    doorbell_unpack_cb_t unpack     = nullptr;
    void                *unpack_arg = nullptr;
    uint8_t             *bounce     = nullptr; ///< copy buffer from the QP's pool
                                               ///< (QpCore::bounce), until reclaimed
};

class SendRing {
public:
    /// size: WQE slots, a power of two.
    explicit SendRing(uint32_t size) : wqes_(size), ctx_(size), size_(size), mask_(size - 1) {}

    uint32_t size() const { return size_; }
    uint64_t head() const { return head_; }
    uint64_t rung() const { return rung_; }
    uint64_t tail() const { return tail_; }
    uint32_t free_slots() const { return size_ - uint32_t(tail_ - head_); }
    uint64_t unrung() const { return tail_ - rung_; }

    doorbell_wqe_t       &wqe(uint64_t index) { return wqes_[index & mask_]; }
    const doorbell_wqe_t &wqe(uint64_t index) const { return wqes_[index & mask_]; }
    SlotContext          &ctx(uint64_t index) { return ctx_[index & mask_]; }

    /// A zeroed WQE at tail. REQUIRES: free_slots() > 0.
    doorbell_wqe_t &prepare()
    {
        doorbell_wqe_t &w = wqe(tail_);
        std::memset(&w, 0, sizeof(w));
        SlotContext &c = ctx(tail_);
        c.kind         = SlotKind::kNone;
        c.cookie       = nullptr;
        c.unpack       = nullptr;
        return w;
    }
    void commit() { ++tail_; }
    /// The doorbell: everything posted becomes visible to the device.
    void ring() { rung_ = tail_; }
    void reclaim_to(uint64_t index) { head_ = index; }
    /// Drops everything (QP in error): rung and head catch up with tail.
    void drain() { head_ = rung_ = tail_; }

private:
    std::vector<doorbell_wqe_t> wqes_;
    std::vector<SlotContext>    ctx_;
    uint32_t                    size_;
    uint64_t                    mask_;
    uint64_t                    head_ = 0;
    uint64_t                    rung_ = 0;
    uint64_t                    tail_ = 0;
};

} // namespace doorbell
