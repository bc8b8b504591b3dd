/*
 * Doorbell batching and selective signaling, the two CPU-posting policies
 * (eRPC's postlist and kUnsigBatch, UCX's TX_CQ_MODERATION).
 *
 * Batcher: an idle queue rings at once (latency); a busy one coalesces until
 * tx_batch WQEs wait, or until the next progress call rings what is left.
 * A queue is busy when the device holds work of it that has not completed:
 * WQEs rung but not yet sent or not yet acknowledged by the peer. While the
 * device is busy anyway, one doorbell per WQE only adds per-packet cost.
 *
 * Signaler: one signaled completion per tx_moderation WQEs; also signaled:
 * a WQE whose poster needs its completion (a cookie: zcopy, get, flush) and
 * the WQE that fills the ring (else the ring could fill with unsignaled WQEs
 * that nothing would ever retire).
 */
#pragma once

#include <cstdint>

namespace doorbell {

class Batcher {
public:
    explicit Batcher(uint32_t tx_batch) : batch_(tx_batch ? tx_batch : 1) {}

    /// Whether to ring now, given WQEs posted since the last doorbell and
    /// whether the device still holds incomplete work of this queue.
    bool ring_now(uint64_t unrung, bool busy) const
    {
        return unrung > 0 && (!busy || unrung >= batch_);
    }

    uint32_t batch() const { return batch_; }

private:
    uint32_t batch_;
};

class Signaler {
public:
    explicit Signaler(uint32_t moderation) : moderation_(moderation ? moderation : 1) {}

    /// Decides for the next WQE. force: the poster needs the completion;
    /// fills_ring: no slot is left after this WQE.
    bool next(bool force, bool fills_ring)
    {
        if (force || fills_ring || unsignaled_ + 1 >= moderation_) {
            unsignaled_ = 0;
            return true;
        }
        ++unsignaled_;
        return false;
    }

    uint32_t moderation() const { return moderation_; }

private:
    uint32_t moderation_;
    uint32_t unsignaled_ = 0; ///< WQEs since the last signaled one
};

} // namespace doorbell
