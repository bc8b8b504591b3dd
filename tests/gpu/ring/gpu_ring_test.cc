/*
 * The GPU send-ring protocol driven by CPU threads standing in for GPU
 * threads: reservation (per thread and per group, as a warp does),
 * wrap-around with back-pressure, publication order, doorbell, completion
 * and error states. Built into the ThreadSanitizer build.
 */
#include "doorbell_gpu_ring.h"
#include "../host_group.h"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

using doorbell_gpu_test::HostGroup;
using doorbell_gpu_test::HostGroupShared;

namespace {

/* A ring over plain host memory. */
class HostRing {
public:
    explicit HostRing(uint32_t size, uint32_t flags = 0,
                      uint64_t timeout_ns = 10ull * 1000 * 1000 * 1000)
    {
        shared_ = std::aligned_alloc(64, (doorbell_gpu_ring_shared_bytes(size) + 63) & ~63ull);
        std::memset(shared_, 0, doorbell_gpu_ring_shared_bytes(size));
        ring_ = doorbell_gpu_ring_layout(shared_, &producer_, size, flags, timeout_ns);
    }
    ~HostRing() { std::free(shared_); }
    HostRing(const HostRing &)            = delete;
    HostRing &operator=(const HostRing &) = delete;

    const doorbell_gpu_ring_t &ring() const { return ring_; }

private:
    void *shared_;
    alignas(64) doorbell_gpu_ring_producer_words_t producer_ = {};
    doorbell_gpu_ring_t ring_;
};

/* A WQE that names its producer and sequence number, checkable on arrival. */
doorbell_wqe_t tagged(uint32_t producer, uint32_t seq)
{
    doorbell_wqe_t w = doorbell_gpu_make_put_signal(
        reinterpret_cast<void *>(uintptr_t(0x1000 + seq)), 8, (uint64_t(producer) << 32) | seq,
        0xabcd0000u | producer, ~((uint64_t(producer) << 32) | seq), producer, DOORBELL_SIGNAL_ADD,
        seq + 1);
    return w;
}

bool tag_intact(const doorbell_wqe_t &w, uint32_t *producer_p, uint32_t *seq_p)
{
    uint32_t producer = uint32_t(w.remote_addr >> 32);
    uint32_t seq      = uint32_t(w.remote_addr);
    *producer_p       = producer;
    *seq_p            = seq;
    return (w.opcode == DOORBELL_OP_PUT_SIGNAL) && (w.rkey == (0xabcd0000u | producer)) &&
           (w.signal_addr == ~w.remote_addr) && (w.signal_rkey == producer) &&
           (w.signal_value == uint64_t(seq) + 1) && (w.local_addr == 0x1000u + seq) &&
           (w.am_id == DOORBELL_SIGNAL_ADD) && (w.length == 8);
}

} /* namespace */

TEST(gpu_ring, consumer_never_reads_an_unpublished_slot)
{
    HostRing       h(8);
    const auto    &r = h.ring();
    doorbell_wqe_t out[8];
    uint64_t       a = 0, b = 0;

    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_reserve(r, 1, &a));
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_reserve(r, 1, &b));
    EXPECT_EQ(0u, a);
    EXPECT_EQ(1u, b);

    /* the later reservation publishes and rings first */
    doorbell_gpu_ring_write(r, b, tagged(0, 1));
    doorbell_gpu_ring_doorbell(r, b + 1);
    EXPECT_EQ(0u, doorbell_gpu_ring_consume(r, 0, 8, out));

    doorbell_gpu_ring_write(r, a, tagged(0, 0));
    ASSERT_EQ(2u, doorbell_gpu_ring_consume(r, 0, 8, out));
    uint32_t p, s;
    EXPECT_TRUE(tag_intact(out[0], &p, &s));
    EXPECT_EQ(0u, s);
    EXPECT_TRUE(tag_intact(out[1], &p, &s));
    EXPECT_EQ(1u, s);
}

TEST(gpu_ring, doorbell_mode_reads_only_below_the_doorbell)
{
    HostRing       h(8);
    doorbell_wqe_t w[3] = {tagged(1, 0), tagged(1, 1), tagged(1, 2)};
    doorbell_wqe_t out[8];
    uint64_t       base = 0;

    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_reserve(h.ring(), 3, &base));
    for (uint32_t k = 0; k < 3; ++k) {
        doorbell_gpu_ring_write(h.ring(), base + k, w[k]);
    }
    EXPECT_EQ(0u, doorbell_gpu_ring_consume(h.ring(), 0, 8, out)) << "not rung yet";
    doorbell_gpu_ring_doorbell(h.ring(), base + 2);
    EXPECT_EQ(2u, doorbell_gpu_ring_consume(h.ring(), 0, 8, out));
    doorbell_gpu_ring_doorbell(h.ring(), base + 3);
    EXPECT_EQ(3u, doorbell_gpu_ring_consume(h.ring(), 0, 8, out));
    EXPECT_EQ(1u, doorbell_gpu_ring_consume(h.ring(), 0, 1, out)) << "max respected";
}

TEST(gpu_ring, proxy_mode_needs_no_doorbell)
{
    HostRing       h(8, DOORBELL_GPU_RING_PROXY);
    doorbell_wqe_t w[2] = {tagged(2, 0), tagged(2, 1)};
    doorbell_wqe_t out[8];
    uint64_t       end = 0;

    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_post(h.ring(), w, 2, &end));
    EXPECT_EQ(2u, end);
    EXPECT_EQ(0u, *h.ring().doorbell) << "proxy producers skip the doorbell write";
    EXPECT_EQ(2u, doorbell_gpu_ring_consume(h.ring(), 0, 8, out));
}

TEST(gpu_ring, full_ring_waits_for_completion_and_times_out_as_an_error)
{
    HostRing       h(4, 0, 2 * 1000 * 1000 /* 2 ms */);
    const auto    &r    = h.ring();
    doorbell_wqe_t w[4] = {tagged(3, 0), tagged(3, 1), tagged(3, 2), tagged(3, 3)};
    uint64_t       end = 0, base = 0;

    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_post(r, w, 4, &end));
    /* two slots complete: the next two reservations fit, over the wrap */
    doorbell_gpu_ring_complete(r, 2);
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_reserve(r, 2, &base));
    EXPECT_EQ(4u, base);
    doorbell_gpu_ring_write(r, 4, tagged(3, 4));
    doorbell_gpu_ring_write(r, 5, tagged(3, 5));
    EXPECT_EQ(5u, r.seq[0]) << "slot 0 reused for index 4";
    EXPECT_EQ(6u, r.seq[1]);
    uint32_t p, s;
    EXPECT_TRUE(tag_intact(r.slots[2], &p, &s));
    EXPECT_EQ(2u, s) << "unconsumed slot 2 not overwritten";

    /* nothing completes: the reservation gives up and the ring is dead */
    EXPECT_EQ(DOORBELL_ERR_TIMED_OUT, doorbell_gpu_ring_reserve(r, 1, &base));
    EXPECT_EQ(DOORBELL_ERR_TIMED_OUT, doorbell_gpu_ring_status(r));
    EXPECT_EQ(DOORBELL_ERR_TIMED_OUT, doorbell_gpu_ring_reserve(r, 1, &base));
}

TEST(gpu_ring, wait_sees_completion_error_and_timeout)
{
    HostRing       h(8, 0, 1000 * 1000 /* 1 ms */);
    const auto    &r   = h.ring();
    doorbell_wqe_t w   = tagged(4, 0);
    uint64_t       end = 0;

    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_post(r, &w, 1, &end));
    EXPECT_EQ(DOORBELL_ERR_TIMED_OUT, doorbell_gpu_ring_wait_completed(r, end));
    EXPECT_EQ(DOORBELL_OK, doorbell_gpu_ring_status(r)) << "a wait timeout leaves no gap";
    doorbell_gpu_ring_complete(r, end);
    EXPECT_EQ(DOORBELL_OK, doorbell_gpu_ring_wait_completed(r, end));

    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_post(r, &w, 1, &end));
    doorbell_gpu_ring_fail(r, DOORBELL_ERR_REMOTE_ACCESS);
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, doorbell_gpu_ring_wait_completed(r, end));
    EXPECT_EQ(DOORBELL_OK, doorbell_gpu_ring_wait_completed(r, end - 1))
        << "what completed before the error still reads as completed";
    uint64_t base = 0;
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, doorbell_gpu_ring_reserve(r, 1, &base));
}

TEST(gpu_ring, rejects_empty_and_oversized_reservations)
{
    HostRing h(4);
    uint64_t base = 0;
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_gpu_ring_reserve(h.ring(), 0, &base));
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_gpu_ring_reserve(h.ring(), 5, &base));
}

/*
 * Many producers -- single threads posting batches of 1..4 and groups of 4
 * threads posting as a warp (one reservation, one doorbell per group) --
 * against one consumer that completes what it takes, on a ring far smaller
 * than the traffic so that it wraps hundreds of times. Every WQE must arrive
 * exactly once, intact, and in each producer's order.
 */
TEST(gpu_ring, many_producers_wrap_around_exactly_once_in_order)
{
    constexpr uint32_t kRing      = 16;
    constexpr uint32_t kSingles   = 4; ///< threads posting alone
    constexpr uint32_t kGroups    = 2; ///< warps of kGroupSize threads
    constexpr uint32_t kGroupSize = 4;
    constexpr uint32_t kPerThread = 400; ///< WQEs per producer thread
    constexpr uint32_t kProducers = kSingles + kGroups * kGroupSize;
    constexpr uint64_t kTotal     = uint64_t(kProducers) * kPerThread;

    HostRing                  h(kRing);
    const doorbell_gpu_ring_t r = h.ring();
    std::atomic<int>          failures{0};
    std::vector<std::thread>  threads;

    for (uint32_t t = 0; t < kSingles; ++t) {
        threads.emplace_back([&, t] {
            uint32_t seq = 0;
            while (seq < kPerThread) {
                uint32_t       n = std::min<uint32_t>(1 + (seq + t) % 4, kPerThread - seq);
                doorbell_wqe_t w[4];
                for (uint32_t k = 0; k < n; ++k) {
                    w[k] = tagged(t, seq + k);
                }
                uint64_t end = 0;
                if (doorbell_gpu_ring_post(r, w, n, &end) != DOORBELL_OK) {
                    failures++;
                    return;
                }
                seq += n;
            }
        });
    }
    std::vector<std::unique_ptr<HostGroupShared>> groups;
    for (uint32_t g = 0; g < kGroups; ++g) {
        groups.emplace_back(new HostGroupShared(kGroupSize));
    }
    for (uint32_t g = 0; g < kGroups; ++g) {
        HostGroupShared *shared = groups[g].get();
        for (uint32_t lane = 0; lane < kGroupSize; ++lane) {
            uint32_t producer = kSingles + g * kGroupSize + lane;
            threads.emplace_back([&, shared, lane, producer] {
                HostGroup grp(*shared, lane);
                /* lanes alternate between 2 WQEs and none: every round the
                 * group posts 4 with one reservation and one doorbell */
                uint32_t seq = 0;
                for (uint32_t round = 0; round < kPerThread; ++round) {
                    uint32_t       n = ((round + lane) % 2) ? 2 : 0;
                    doorbell_wqe_t w[2];
                    for (uint32_t k = 0; k < n; ++k) {
                        w[k] = tagged(producer, seq + k);
                    }
                    uint64_t end = 0, group_end = 0;
                    if ((doorbell_gpu_ring_group_post(grp, r, w, n, &end, &group_end) !=
                         DOORBELL_OK) ||
                        (end > group_end)) {
                        failures++;
                        return;
                    }
                    seq += n;
                }
            });
        }
    }

    /* the consumer: take, check, complete */
    std::vector<uint32_t> next(kProducers, 0);
    uint64_t              head = 0;
    doorbell_wqe_t        out[kRing];
    while (head < kTotal && failures.load() == 0) {
        uint32_t n = doorbell_gpu_ring_consume(r, head, kRing, out);
        for (uint32_t k = 0; k < n; ++k) {
            uint32_t p, s;
            ASSERT_TRUE(tag_intact(out[k], &p, &s)) << "WQE " << head + k << " torn";
            ASSERT_LT(p, kProducers);
            ASSERT_EQ(next[p], s) << "producer " << p << " out of order";
            next[p]++;
        }
        head += n;
        if (n != 0) {
            doorbell_gpu_ring_complete(r, head);
        } else {
            std::this_thread::yield();
        }
    }
    for (auto &t : threads) {
        t.join();
    }
    ASSERT_EQ(0, failures.load());
    EXPECT_EQ(kTotal, head);
    for (uint32_t p = 0; p < kProducers; ++p) {
        EXPECT_EQ(kPerThread, next[p]) << "producer " << p;
    }
    EXPECT_EQ(kTotal, *r.reserve);
    EXPECT_EQ(kTotal, *r.doorbell);
}

/* The doorbell word is only stored to (host-mapped memory takes no atomics
 * from the GPU), yet producers ringing out of order must leave it at the
 * highest end rung. A plain "store my end" fails this in the first round;
 * the corrective re-read after a late lower store closes a window too narrow
 * to hit reliably on a CPU (the argument is in doorbell_gpu_ring_doorbell). */
TEST(gpu_ring, concurrent_doorbells_leave_the_highest_rung)
{
    constexpr uint32_t kProducers = 4, kRounds = 2000;

    for (uint32_t round = 0; round < kRounds; ++round) {
        HostRing                 h(8);
        std::atomic<uint32_t>    ready{0};
        std::vector<std::thread> threads;
        for (uint32_t t = 0; t < kProducers; ++t) {
            threads.emplace_back([&, t] {
                ready.fetch_add(1);
                while (ready.load() < kProducers) {
                    std::this_thread::yield();
                }
                /* interleaved ends: every producer rings below and above the others */
                for (uint64_t end = t + 1; end <= 4 * kProducers; end += kProducers) {
                    doorbell_gpu_ring_doorbell(h.ring(), end);
                }
            });
        }
        for (auto &th : threads) {
            th.join();
        }
        ASSERT_EQ(uint64_t(4 * kProducers), *h.ring().doorbell) << "round " << round;
    }
}
