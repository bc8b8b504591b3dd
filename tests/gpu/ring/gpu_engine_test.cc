/*
 * The engine between a GPU send ring and a device: CPU producers stand in
 * for GPU threads, a fake queue pair stands in for the core's QP (it records
 * every post and completes signaled WQEs from progress, as the core does).
 */
#include "doorbell_gpu.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

namespace {

/* Touched only by the engine (its thread, or the test's thread when the test
 * drives doorbell_gpu_engine_progress itself). */
struct FakeQp {
    std::vector<doorbell_wqe_t>                       posted;
    std::vector<unsigned>                             batches;
    std::vector<std::pair<void *, doorbell_status_t>> pending;
    unsigned                                          calls = 0;
    unsigned          no_resource_every = 0; ///< answer NO_RESOURCE every Nth post
    doorbell_status_t completion_status = DOORBELL_OK;
    doorbell_status_t post_status       = DOORBELL_OK;

    static doorbell_status_t post(void *arg, const doorbell_wqe_t *wqes, unsigned n)
    {
        auto *qp = static_cast<FakeQp *>(arg);
        if (qp->no_resource_every && (++qp->calls % qp->no_resource_every == 0)) {
            return DOORBELL_ERR_NO_RESOURCE;
        }
        if (qp->post_status != DOORBELL_OK) {
            return qp->post_status;
        }
        qp->batches.push_back(n);
        for (unsigned k = 0; k < n; ++k) {
            qp->posted.push_back(wqes[k]);
            if (wqes[k].flags & DOORBELL_WQE_SIGNALED) {
                qp->pending.emplace_back((void *)(uintptr_t)wqes[k].wr_id, qp->completion_status);
            }
        }
        return DOORBELL_OK;
    }

    static unsigned progress(void *arg)
    {
        auto *qp   = static_cast<FakeQp *>(arg);
        auto  done = std::move(qp->pending);
        qp->pending.clear();
        for (auto &c : done) {
            doorbell_gpu_engine_complete(c.first, c.second);
        }
        return (unsigned)done.size();
    }
};

class gpu_engine : public ::testing::Test {
protected:
    void SetUp() override
    {
        doorbell_gpu_engine_params_t ep;
        doorbell_gpu_engine_params_init(&ep);
        ep.progress     = FakeQp::progress;
        ep.progress_arg = &qp_;
        ep.name         = "fake0";
        ep.idle_spins   = 16;
        ASSERT_EQ(DOORBELL_OK, doorbell_gpu_engine_create(&ep, &engine_));
    }
    void TearDown() override
    {
        if (engine_ != nullptr) {
            doorbell_gpu_engine_destroy(engine_);
        }
    }
    doorbell_gpu_queue_t *make_queue(uint32_t size, doorbell_gpu_mode_t mode,
                                     uint64_t timeout_ns = 10ull * 1000 * 1000 * 1000,
                                     uint32_t flags      = 0)
    {
        doorbell_gpu_queue_params_t qp;
        doorbell_gpu_queue_params_init(&qp);
        qp.post                 = FakeQp::post;
        qp.post_arg             = &qp_;
        qp.size                 = size;
        qp.mode                 = mode;
        qp.timeout_ns           = timeout_ns;
        qp.flags                = flags;
        doorbell_gpu_queue_t *q = nullptr;
        EXPECT_EQ(DOORBELL_OK, doorbell_gpu_queue_create(engine_, &qp, &q));
        return q;
    }

    FakeQp                 qp_;
    doorbell_gpu_engine_t *engine_ = nullptr;
};

doorbell_wqe_t tagged_put(uint32_t producer, uint32_t seq)
{
    return doorbell_gpu_make_put(reinterpret_cast<void *>(uintptr_t(0x10000 + seq)), 64,
                                 (uint64_t(producer) << 32) | seq, 77);
}

} /* namespace */

/*
 * CPU threads post batches through the running engine thread; every fourth
 * post is refused for lack of resources. Each WQE reaches the QP exactly
 * once, in each producer's order; each batch carries exactly one signaled
 * WQE, its last; every producer's wait returns OK.
 */
TEST_F(gpu_engine, threads_post_batches_through_the_engine_thread)
{
    constexpr uint32_t kProducers = 4;
    constexpr uint32_t kPerThread = 600;
    qp_.no_resource_every         = 4;
    doorbell_gpu_queue_t *q       = make_queue(64, DOORBELL_GPU_MODE_DOORBELL);
    ASSERT_NE(nullptr, q);
    const doorbell_gpu_ring_t r = doorbell_gpu_queue_host_ring(q);
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_engine_start(engine_));

    std::atomic<int>         failures{0};
    std::vector<std::thread> threads;
    for (uint32_t t = 0; t < kProducers; ++t) {
        threads.emplace_back([&, t] {
            uint32_t seq = 0;
            uint64_t end = 0;
            while (seq < kPerThread) {
                uint32_t       n = std::min<uint32_t>(1 + seq % 5, kPerThread - seq);
                doorbell_wqe_t w[5];
                for (uint32_t k = 0; k < n; ++k) {
                    w[k] = tagged_put(t, seq + k);
                }
                if (doorbell_gpu_ring_post(r, w, n, &end) != DOORBELL_OK) {
                    failures++;
                    return;
                }
                seq += n;
            }
            if (doorbell_gpu_ring_wait_completed(r, end) != DOORBELL_OK) {
                failures++;
            }
        });
    }
    for (auto &t : threads) {
        t.join();
    }
    /* every producer saw its last WQE complete; drain the rest, then stop */
    ASSERT_EQ(0, failures.load());
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_wait_completed(r, kProducers * kPerThread));
    doorbell_gpu_engine_stop(engine_);

    ASSERT_EQ(size_t(kProducers * kPerThread), qp_.posted.size());
    std::vector<uint32_t> next(kProducers, 0);
    size_t                i = 0;
    for (unsigned n : qp_.batches) {
        ASSERT_GE(n, 1u);
        ASSERT_LE(n, 64u);
        for (unsigned k = 0; k < n; ++k, ++i) {
            const doorbell_wqe_t &w = qp_.posted[i];
            EXPECT_EQ(k + 1 == n, bool(w.flags & DOORBELL_WQE_SIGNALED)) << "WQE " << i;
            uint32_t p = uint32_t(w.remote_addr >> 32), s = uint32_t(w.remote_addr);
            ASSERT_LT(p, kProducers);
            ASSERT_EQ(next[p], s) << "producer " << p;
            EXPECT_EQ(0x10000u + s, w.local_addr);
            next[p]++;
        }
    }
    doorbell_gpu_queue_counters_t c;
    doorbell_gpu_queue_get_counters(q, &c);
    EXPECT_EQ(kProducers * kPerThread, c.wqes);
    EXPECT_EQ(qp_.batches.size(), c.posts);
    EXPECT_EQ(c.posts, c.completions);
    EXPECT_GT(c.retries, 0u);
    EXPECT_EQ(kProducers * kPerThread, c.completed);
}

TEST_F(gpu_engine, inline_last_wqe_completes_through_a_nop)
{
    doorbell_gpu_queue_t     *q = make_queue(8, DOORBELL_GPU_MODE_DOORBELL);
    const doorbell_gpu_ring_t r = doorbell_gpu_queue_host_ring(q);
    doorbell_wqe_t            w = {};
    w.opcode                    = DOORBELL_OP_PUT;
    w.flags                     = DOORBELL_WQE_INLINE | DOORBELL_WQE_SIGNALED;
    w.inline_len                = 16;
    w.length                    = 16;
    w.remote_addr               = 0x5000;
    for (int k = 0; k < 16; ++k) {
        w.inline_data[k] = uint8_t(0xa0 + k);
    }
    uint64_t end = 0;
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_post(r, &w, 1, &end));
    /* one pass: one WQE taken, its completion delivered by progress */
    EXPECT_EQ(2u, doorbell_gpu_engine_progress(engine_));
    ASSERT_EQ(2u, qp_.posted.size());
    EXPECT_EQ(0, qp_.posted[0].flags & DOORBELL_WQE_SIGNALED);
    EXPECT_EQ(0xaf, qp_.posted[0].inline_data[15]) << "inline payload untouched";
    EXPECT_EQ(DOORBELL_OP_NOP, qp_.posted[1].opcode);
    EXPECT_TRUE(qp_.posted[1].flags & DOORBELL_WQE_SIGNALED);
    EXPECT_EQ(DOORBELL_OK, doorbell_gpu_ring_wait_completed(r, end));
    doorbell_gpu_queue_counters_t c;
    doorbell_gpu_queue_get_counters(q, &c);
    EXPECT_EQ(1u, c.nops);
}

TEST_F(gpu_engine, batch_is_capped_at_batch_max)
{
    doorbell_gpu_queue_t       *q = make_queue(128, DOORBELL_GPU_MODE_DOORBELL);
    const doorbell_gpu_ring_t   r = doorbell_gpu_queue_host_ring(q);
    std::vector<doorbell_wqe_t> w(100);
    for (uint32_t k = 0; k < 100; ++k) {
        w[k] = tagged_put(0, k);
    }
    uint64_t end = 0;
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_post(r, w.data(), 100, &end));
    doorbell_gpu_engine_progress(engine_);
    doorbell_gpu_engine_progress(engine_);
    ASSERT_EQ((std::vector<unsigned>{64, 36}), qp_.batches);
    doorbell_gpu_engine_progress(engine_);
    EXPECT_EQ(DOORBELL_OK, doorbell_gpu_ring_wait_completed(r, end));
}

TEST_F(gpu_engine, proxy_mode_coalesces_without_doorbells)
{
    doorbell_gpu_queue_t *q = make_queue(16, DOORBELL_GPU_MODE_PROXY);
    EXPECT_EQ(DOORBELL_GPU_MODE_PROXY, doorbell_gpu_queue_mode(q));
    const doorbell_gpu_ring_t r   = doorbell_gpu_queue_host_ring(q);
    uint64_t                  end = 0;
    for (uint32_t k = 0; k < 10; ++k) {
        doorbell_wqe_t w = tagged_put(1, k);
        ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_post(r, &w, 1, &end));
    }
    EXPECT_EQ(0u, *r.doorbell);
    doorbell_gpu_engine_progress(engine_);
    ASSERT_EQ((std::vector<unsigned>{10}), qp_.batches) << "ten requests, one post";
    doorbell_gpu_engine_progress(engine_);
    EXPECT_EQ(DOORBELL_OK, doorbell_gpu_ring_wait_completed(r, end));
}

TEST_F(gpu_engine, error_completion_becomes_the_waiters_error)
{
    qp_.completion_status       = DOORBELL_ERR_REMOTE_ACCESS;
    doorbell_gpu_queue_t     *q = make_queue(8, DOORBELL_GPU_MODE_DOORBELL);
    const doorbell_gpu_ring_t r = doorbell_gpu_queue_host_ring(q);
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_engine_start(engine_));
    doorbell_wqe_t w   = tagged_put(0, 0);
    uint64_t       end = 0;
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_post(r, &w, 1, &end));
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, doorbell_gpu_ring_wait_completed(r, end));
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, doorbell_gpu_ring_post(r, &w, 1, &end));
}

TEST_F(gpu_engine, failed_post_and_bad_wqe_fail_the_queue)
{
    doorbell_gpu_queue_t     *q = make_queue(8, DOORBELL_GPU_MODE_DOORBELL);
    const doorbell_gpu_ring_t r = doorbell_gpu_queue_host_ring(q);
    doorbell_wqe_t            w = tagged_put(0, 0);
    w.opcode                    = 42;
    uint64_t end                = 0;
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_post(r, &w, 1, &end));
    doorbell_gpu_engine_progress(engine_);
    EXPECT_TRUE(qp_.posted.empty()) << "a bad WQE never reaches the device";
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_gpu_ring_wait_completed(r, end));
    /* why, through the error channel: the queue's status and its message */
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_gpu_queue_status(q));
    EXPECT_NE(nullptr, std::strstr(doorbell_last_error(), "opcode 42")) << doorbell_last_error();

    doorbell_gpu_queue_t     *q2 = make_queue(8, DOORBELL_GPU_MODE_DOORBELL);
    const doorbell_gpu_ring_t r2 = doorbell_gpu_queue_host_ring(q2);
    qp_.post_status              = DOORBELL_ERR_UNREACHABLE;
    w                            = tagged_put(0, 0);
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_post(r2, &w, 1, &end));
    doorbell_gpu_engine_progress(engine_);
    EXPECT_EQ(DOORBELL_ERR_UNREACHABLE, doorbell_gpu_ring_wait_completed(r2, end));
    EXPECT_EQ(DOORBELL_ERR_UNREACHABLE, doorbell_gpu_queue_status(q2));
    EXPECT_NE(nullptr, std::strstr(doorbell_last_error(), "posting a batch failed"))
        << doorbell_last_error();
}

TEST_F(gpu_engine, queue_failure_releases_a_blocked_waiter)
{
    doorbell_gpu_queue_t     *q   = make_queue(8, DOORBELL_GPU_MODE_DOORBELL);
    const doorbell_gpu_ring_t r   = doorbell_gpu_queue_host_ring(q);
    doorbell_wqe_t            w   = tagged_put(0, 0);
    uint64_t                  end = 0;
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_post(r, &w, 1, &end));
    /* the engine never runs: the waiter can only be released by the failure */
    doorbell_status_t seen = DOORBELL_OK;
    std::thread       waiter([&] { seen = doorbell_gpu_ring_wait_completed(r, end); });
    EXPECT_EQ(DOORBELL_OK, doorbell_gpu_queue_status(q));
    doorbell_gpu_queue_fail(q, DOORBELL_ERR_TIMED_OUT, "peer stopped answering");
    waiter.join();
    EXPECT_EQ(DOORBELL_ERR_TIMED_OUT, seen);
    /* the first failure is the queue's: a later one changes nothing */
    doorbell_gpu_queue_fail(q, DOORBELL_ERR_CANCELED, "closed");
    EXPECT_EQ(DOORBELL_ERR_TIMED_OUT, doorbell_gpu_queue_status(q));
    EXPECT_NE(nullptr, std::strstr(doorbell_last_error(), "peer stopped answering"))
        << doorbell_last_error();
}

TEST_F(gpu_engine, rejects_bad_parameters)
{
    doorbell_gpu_queue_params_t qp;
    doorbell_gpu_queue_params_init(&qp);
    doorbell_gpu_queue_t *q = nullptr;
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_gpu_queue_create(engine_, &qp, &q))
        << "no post function";
    qp.post = FakeQp::post;
    qp.size = 100;
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_gpu_queue_create(engine_, &qp, &q))
        << "not a power of two";
    EXPECT_NE(nullptr, std::strstr(doorbell_last_error(), "power-of-two size"))
        << doorbell_last_error();
    doorbell_gpu_engine_params_t ep;
    doorbell_gpu_engine_params_init(&ep);
    ep.batch_max             = 0;
    doorbell_gpu_engine_t *e = nullptr;
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_gpu_engine_create(&ep, &e));
    EXPECT_NE(nullptr, std::strstr(doorbell_last_error(), "batch_max")) << doorbell_last_error();
}

TEST_F(gpu_engine, put_signal_set_lowers_to_two_ordered_puts)
{
    doorbell_gpu_queue_t *q = make_queue(8, DOORBELL_GPU_MODE_DOORBELL, 10ull * 1000 * 1000 * 1000,
                                         DOORBELL_GPU_QUEUE_LOWER_SIGNAL);
    const doorbell_gpu_ring_t r = doorbell_gpu_queue_host_ring(q);
    doorbell_wqe_t w = doorbell_gpu_make_put_signal(reinterpret_cast<void *>(0x100), 32, 0x2000, 5,
                                                    0x3000, 6, DOORBELL_SIGNAL_SET,
                                                    0x1122334455667788ull);
    uint64_t       end = 0;
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_post(r, &w, 1, &end));
    doorbell_gpu_engine_progress(engine_);
    ASSERT_EQ(3u, qp_.posted.size()) << "data put, signal put, completion NOP";
    EXPECT_EQ(DOORBELL_OP_PUT, qp_.posted[0].opcode);
    EXPECT_EQ(0x2000u, qp_.posted[0].remote_addr);
    EXPECT_EQ(32u, qp_.posted[0].length);
    const doorbell_wqe_t &sig = qp_.posted[1];
    EXPECT_EQ(DOORBELL_OP_PUT, sig.opcode);
    EXPECT_TRUE(sig.flags & DOORBELL_WQE_INLINE);
    EXPECT_EQ(0x3000u, sig.remote_addr);
    EXPECT_EQ(6u, sig.rkey);
    uint64_t v;
    std::memcpy(&v, sig.inline_data, 8);
    EXPECT_EQ(0x1122334455667788ull, v);
    EXPECT_EQ(DOORBELL_OP_NOP, qp_.posted[2].opcode);
    EXPECT_EQ(DOORBELL_OK, doorbell_gpu_ring_wait_completed(r, end));

    /* an ADD cannot be expressed with puts: said, not silently dropped */
    w.am_id = DOORBELL_SIGNAL_ADD;
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_post(r, &w, 1, &end));
    doorbell_gpu_engine_progress(engine_);
    EXPECT_EQ(DOORBELL_ERR_UNSUPPORTED, doorbell_gpu_ring_wait_completed(r, end));
}

/* Doorbell mode: the engine posts what was rung, as rung -- a published but
 * unrung WQE waits for its doorbell; proxy mode would have taken it. */
TEST_F(gpu_engine, one_doorbell_is_one_post)
{
    doorbell_gpu_queue_t     *q    = make_queue(16, DOORBELL_GPU_MODE_DOORBELL);
    const doorbell_gpu_ring_t r    = doorbell_gpu_queue_host_ring(q);
    doorbell_wqe_t            a[3] = {tagged_put(0, 0), tagged_put(0, 1), tagged_put(0, 2)};
    uint64_t                  end = 0, base = 0;
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_post(r, a, 3, &end));
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_ring_reserve(r, 2, &base));
    doorbell_gpu_ring_write(r, base, tagged_put(0, 3));
    doorbell_gpu_ring_write(r, base + 1, tagged_put(0, 4));
    doorbell_gpu_engine_progress(engine_);
    doorbell_gpu_engine_progress(engine_);
    EXPECT_EQ((std::vector<unsigned>{3}), qp_.batches) << "written but not rung: not posted";
    doorbell_gpu_ring_doorbell(r, base + 2);
    doorbell_gpu_engine_progress(engine_);
    EXPECT_EQ((std::vector<unsigned>{3, 2}), qp_.batches);
    doorbell_gpu_engine_progress(engine_);
    EXPECT_EQ(DOORBELL_OK, doorbell_gpu_ring_wait_completed(r, base + 2));
}
