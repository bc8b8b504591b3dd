/* The batcher, selective signaling, fences, the wake-up fd and the counters dump,
 * observed through a real UDP iface. */
#include "loopback_pair.h"

#include "devices/udp/fault_injector.h"

#include <poll.h>

using namespace doorbell::test;
using doorbell::udp::FaultConfig;
using doorbell::udp::set_fault_injection;

namespace {

doorbell_iface_params_t batching_params()
{
    doorbell_iface_params_t p = steady_params();
    p.tx_batch                = 8;
    p.tx_moderation           = 4;
    return p;
}

} // namespace

TEST(UdpDoorbell, IdleQueueRingsAtOnceBusyQueueCoalesces)
{
    LoopbackPair pair(batching_params(), batching_params());
    Region       target(pair.pd, 4096, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t     v = 1;
    /* idle: the first WQE rings at once and its packet leaves */
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    auto c = pair.counters(pair.a);
    EXPECT_EQ(1u, c.wqes);
    EXPECT_EQ(1u, c.doorbells);
    EXPECT_EQ(1u, c.tx_packets);
    /* busy (the first is not acknowledged: no progress ran): coalesce */
    for (int i = 1; i < 8; ++i) {
        ASSERT_EQ(DOORBELL_OK,
                  doorbell_qp_put_short(pair.qa, &v, 8, target.addr(8 * i), target.rkey));
        EXPECT_EQ(1u, pair.counters(pair.a).doorbells) << i;
    }
    EXPECT_EQ(1u, pair.counters(pair.a).tx_packets);
    /* the 8th waiting WQE (tx_batch) rings; one sendmmsg carries all 8 */
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(64), target.rkey));
    c = pair.counters(pair.a);
    EXPECT_EQ(9u, c.wqes);
    EXPECT_EQ(2u, c.doorbells);
    EXPECT_EQ(9u, c.tx_packets);
    /* a leftover below the batch is rung by the next progress call */
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(72), target.rkey));
    EXPECT_EQ(2u, pair.counters(pair.a).doorbells);
    doorbell_iface_progress(pair.a);
    EXPECT_EQ(3u, pair.counters(pair.a).doorbells);
    EXPECT_EQ(10u, pair.counters(pair.a).tx_packets);
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
}

TEST(UdpDoorbell, SignalsEveryModerationAndOnFlush)
{
    LoopbackPair pair(batching_params(), batching_params());
    Region       target(pair.pd, 4096, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t     v = 1;
    for (int i = 0; i < 10; ++i) {
        ASSERT_EQ(DOORBELL_OK,
                  doorbell_qp_put_short(pair.qa, &v, 8, target.addr(8 * i), target.rkey));
    }
    /* WQEs 3 and 7 are signaled (one per 4); the flush's WQE always is */
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    auto c = pair.counters(pair.a);
    EXPECT_EQ(11u, c.wqes);
    EXPECT_EQ(3u, c.signaled);
    EXPECT_GE(c.cq_polls, 1u);
    /* a zcopy with a cookie is always signaled */
    iovec      iov{&v, 8};
    Completion z;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair.qa, &iov, 1, target.addr(), target.rkey, &z));
    ASSERT_TRUE(pair.wait([&] { return z.count == 1; }));
    EXPECT_EQ(4u, pair.counters(pair.a).signaled);
}

TEST(UdpDoorbell, FlushAfterSignaledPutSendsNoProbe)
{
    /* osc rdma's put + MPI_Win_flush: a signaled put asks for its ACK at
     * once, and that cumulative ACK answers the flush posted behind it */
    LoopbackPair pair(steady_params(), steady_params());
    Region       target(pair.pd, 4096, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t     v = 7;
    iovec        iov{&v, 8};
    Completion   put;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair.qa, &iov, 1, target.addr(), target.rkey, &put));
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    EXPECT_EQ(1, put.count);
    EXPECT_EQ(7u, *reinterpret_cast<const uint64_t *>(target.bytes.data()));
    auto a = pair.counters(pair.a), b = pair.counters(pair.b);
    EXPECT_EQ(1u, a.tx_packets); /* the write, no ACK_REQ probe behind it */
    EXPECT_EQ(1u, b.tx_packets); /* one ACK */
    EXPECT_EQ(0u, a.retransmits);
    EXPECT_EQ(0u, a.tail_probes);
    EXPECT_EQ(0u, a.timeouts);
}

TEST(UdpDoorbell, FlushAfterUnsignaledPutProbes)
{
    /* an unsignaled put's ACK may be deferred (rto_min / 8: 625 ms here):
     * the flush asks for it with one probe instead of waiting */
    LoopbackPair pair(steady_params(), steady_params());
    Region       target(pair.pd, 4096, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t     v = 9;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    EXPECT_EQ(9u, *reinterpret_cast<const uint64_t *>(target.bytes.data()));
    auto a = pair.counters(pair.a);
    EXPECT_EQ(2u, a.tx_packets); /* the write and the flush's probe */
    EXPECT_EQ(0u, a.tail_probes);
    EXPECT_EQ(0u, a.retransmits);
}

TEST(UdpDoorbell, RingNeverFillsWithUnsignaledWqes)
{
    doorbell_iface_params_t p = batching_params();
    p.tx_queue_len            = 8;
    p.tx_moderation           = 64; /* clamped to half the ring */
    LoopbackPair pair(p, p);
    Region       target(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t     v = 1;
    for (int i = 0; i < 200; ++i) {
        doorbell_status_t s;
        while ((s = doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey)) ==
               DOORBELL_ERR_NO_RESOURCE) {
            pair.progress();
        }
        ASSERT_EQ(DOORBELL_OK, s);
    }
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    EXPECT_GE(pair.counters(pair.a).wqes, 200u);
}

/// Counts the active messages `iface` receives in *got.
static void count_ams(doorbell_iface_t *iface, unsigned *got)
{
    doorbell_iface_set_am_handler(
        iface,
        [](void *arg, uint8_t, void *, size_t) {
            ++*static_cast<unsigned *>(arg);
            return DOORBELL_OK;
        },
        got);
}

/* Bounce buffers come from the QP's pool, the last given back first: 300
 * active messages one after the other, each flushed, copy into the same
 * buffer, not into a fresh one for each of the ring's 256 slots (a first
 * touch of new memory per message, for the first 256 messages). */
TEST(UdpDoorbell, BounceBuffersAreReusedLastInFirstOut)
{
    LoopbackPair pair(steady_params(), steady_params());
    unsigned     got = 0;
    count_ams(pair.b, &got);
    auto &qa = *static_cast<doorbell::QpCore *>(pair.qa);
    for (unsigned i = 0; i < 300; ++i) {
        ASSERT_EQ(DOORBELL_OK, doorbell_qp_am_short(pair.qa, 1, i, nullptr, 0));
        ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    }
    ASSERT_TRUE(pair.wait([&] { return got == 300; }));
    EXPECT_LE(qa.bounce_buffers().size(), 2u);
    /* in flight together, each has its own */
    for (unsigned i = 0; i < 20; ++i) {
        ASSERT_EQ(DOORBELL_OK, doorbell_qp_am_short(pair.qa, 1, i, nullptr, 0));
    }
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    ASSERT_TRUE(pair.wait([&] { return got == 320; }));
    EXPECT_GE(qa.bounce_buffers().size(), 20u);
}

/* A ping-pong without flushes: the device completes each message at its ACK,
 * but the slots are reclaimed at the next signaled completion only (one per
 * tx_moderation WQEs). Their bounce buffers are taken back from the
 * completed slots when the pool is empty, so the first messages of a QP do
 * not each take a fresh one. */
TEST(UdpDoorbell, BounceBuffersOfCompletedSlotsAreReusedBeforeTheirReclaim)
{
    doorbell_iface_params_t p = lo_params();
    p.tx_moderation           = 64;
    p.rto_min_ns              = 20000000; /* an unasked ACK waits an eighth of it */
    LoopbackPair pair(p, p);
    unsigned     got = 0;
    count_ams(pair.b, &got);
    auto &qa = *static_cast<doorbell::QpCore *>(pair.qa);
    for (unsigned i = 0; i < 40; ++i) {
        ASSERT_EQ(DOORBELL_OK, doorbell_qp_am_short(pair.qa, 1, i, nullptr, 0));
        ASSERT_TRUE(pair.wait([&] { return got == i + 1 && qa.idle(); }));
    }
    EXPECT_EQ(qa.iface.counters.signaled, 0u) << "a signaled completion came before the 64th WQE";
    EXPECT_LE(qa.bounce_buffers().size(), 2u);
}

TEST(UdpDoorbell, RawWqesAndFence)
{
    LoopbackPair pair;
    Region       target(pair.pd, 4096, DOORBELL_ACCESS_REMOTE_WRITE | DOORBELL_ACCESS_REMOTE_READ);
    auto         data = pattern(1000, 4);
    std::vector<uint8_t> back(1000);
    Completion           c;
    doorbell_wqe_t       w[3] = {};
    w[0].opcode               = DOORBELL_OP_PUT;
    w[0].rkey                 = target.rkey;
    w[0].remote_addr          = target.addr();
    w[0].local_addr           = uintptr_t(data.data());
    w[0].length               = 1000;
    w[1].opcode               = DOORBELL_OP_PUT;
    w[1].flags                = DOORBELL_WQE_INLINE;
    w[1].inline_len           = 4;
    std::memcpy(w[1].inline_data, "ABCD", 4);
    w[1].rkey        = target.rkey;
    w[1].remote_addr = target.addr(2000);
    /* read back what the first wrote: fenced behind it */
    w[2].opcode      = DOORBELL_OP_GET;
    w[2].flags       = DOORBELL_WQE_SIGNALED | DOORBELL_WQE_FENCE;
    w[2].rkey        = target.rkey;
    w[2].remote_addr = target.addr();
    w[2].local_addr  = uintptr_t(back.data());
    w[2].length      = 1000;
    w[2].wr_id       = uintptr_t(&c);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_post(pair.qa, w, 3));
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, c.status);
    EXPECT_EQ(data, back);
    EXPECT_EQ(0, std::memcmp(target.bytes.data() + 2000, "ABCD", 4));

    doorbell_wqe_t bad = {};
    bad.opcode         = DOORBELL_OP_PUT_SIGNAL;
    bad.am_id          = DOORBELL_SIGNAL_ADD + 1; /* no such signal op */
    EXPECT_EQ(DOORBELL_ERR_UNSUPPORTED, doorbell_qp_post(pair.qa, &bad, 1));
    bad.opcode = 99;
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_qp_post(pair.qa, &bad, 1));
}

/* A fence orders as IBV_SEND_FENCE does: behind earlier reads, not behind
 * the ACKs of earlier writes (the responder executes in PSN order, so the
 * flag written after the data lands after it). With every answer to the
 * requester lost, the fenced put still leaves at once. */
TEST(UdpDoorbell, FenceDoesNotWaitForTheAcksOfWrites)
{
    LoopbackPair pair;
    Region       target(pair.pd, 64, DOORBELL_ACCESS_REMOTE_WRITE);
    FaultConfig  deaf{.rx_drop = 1.0, .seed = 11};
    set_fault_injection(pair.a, &deaf); /* no ACK reaches the requester */
    uint64_t data = 0x1111, flag = 0x2222;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &data, 8, target.addr(0), target.rkey));
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_fence(pair.qa));
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &flag, 8, target.addr(8), target.rkey));
    ASSERT_TRUE(
        pair.wait([&] { return *reinterpret_cast<uint64_t *>(target.bytes.data() + 8) == flag; }));
    EXPECT_EQ(data, *reinterpret_cast<uint64_t *>(target.bytes.data()));
    set_fault_injection(pair.a, nullptr);
    EXPECT_EQ(DOORBELL_OK, pair.flush(pair.qa));
}

/* ... but a write fenced behind a read of the same bytes waits for the
 * read's data: the read returns what was there before the write. */
TEST(UdpDoorbell, FencedWriteWaitsForAnEarlierRead)
{
    LoopbackPair pair;
    Region       target(pair.pd, 4096, DOORBELL_ACCESS_REMOTE_WRITE | DOORBELL_ACCESS_REMOTE_READ);
    auto         before = pattern(4096, 5);
    std::copy(before.begin(), before.end(), target.bytes.begin());
    std::vector<uint8_t> back(4096), after(4096, 0xee);
    FaultConfig          deaf{.rx_drop = 1.0, .seed = 12};
    set_fault_injection(pair.a, &deaf); /* the read's data is lost */
    iovec      iov{back.data(), back.size()};
    Completion c;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_get_zcopy(pair.qa, &iov, 1, target.addr(), target.rkey, &c));
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_fence(pair.qa));
    iovec      out{after.data(), after.size()};
    Completion w;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair.qa, &out, 1, target.addr(), target.rkey, &w));
    /* b answers the read (and a drops the answer); the write stays back */
    const uint64_t b_sent = pair.counters(pair.b).tx_packets;
    ASSERT_TRUE(pair.wait([&] { return pair.counters(pair.b).tx_packets > b_sent; }));
    for (int i = 0; i < 100; ++i) {
        pair.progress();
    }
    EXPECT_EQ(before, target.bytes);
    EXPECT_EQ(0u, w.count);
    set_fault_injection(pair.a, nullptr);
    ASSERT_TRUE(pair.wait([&] { return c.count == 1 && w.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, c.status);
    EXPECT_EQ(DOORBELL_OK, w.status);
    EXPECT_EQ(before, back);
    EXPECT_EQ(after, target.bytes);
}

TEST(UdpDoorbell, ArmReportsPendingWorkAndEventFdWakes)
{
    LoopbackPair pair;
    Region       target(pair.pd, 64, DOORBELL_ACCESS_REMOTE_WRITE);
    int          fd = doorbell_iface_event_fd(pair.b);
    ASSERT_GE(fd, 0);
    EXPECT_EQ(DOORBELL_OK, doorbell_iface_arm(pair.b));
    uint64_t v = 5;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    /* loopback delivers within sendmmsg: b's socket is readable now */
    pollfd pfd{fd, POLLIN, 0};
    EXPECT_EQ(1, poll(&pfd, 1, 0));
    EXPECT_EQ(DOORBELL_ERR_NO_RESOURCE, doorbell_iface_arm(pair.b));
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    for (int i = 0; i < 3; ++i) {
        pair.progress();
    }
    EXPECT_EQ(DOORBELL_OK, doorbell_iface_arm(pair.a));
    EXPECT_EQ(DOORBELL_OK, doorbell_iface_arm(pair.b));
}

TEST(UdpDoorbell, EventFdWakesWhenArmedAfterBusyPolling)
{
    LoopbackPair pair;
    Region       target(pair.pd, 64, DOORBELL_ACCESS_REMOTE_WRITE);
    int          fd = doorbell_iface_event_fd(pair.b);
    EXPECT_EQ(DOORBELL_OK, doorbell_iface_arm(pair.b));
    /* busy polling takes the socket out of the wake-up set ... */
    for (int i = 0; i < 200; ++i) {
        doorbell_iface_progress(pair.b);
    }
    uint64_t v = 5;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    pollfd pfd{fd, POLLIN, 0};
    EXPECT_EQ(0, poll(&pfd, 1, 0)); /* not armed: no wake-up owed */
    /* ... and arm puts it back: the datagram already queued wakes */
    EXPECT_EQ(DOORBELL_ERR_NO_RESOURCE, doorbell_iface_arm(pair.b));
    EXPECT_EQ(1, poll(&pfd, 1, 0));
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    uint64_t got;
    std::memcpy(&got, target.bytes.data(), sizeof(got));
    EXPECT_EQ(5u, got);
}

TEST(UdpDoorbell, BackgroundProgressKeepsTheEventFdArmed)
{
    LoopbackPair pair;
    Region       target(pair.pd, 64, DOORBELL_ACCESS_REMOTE_WRITE);
    int          fd = doorbell_iface_event_fd(pair.b);
    EXPECT_EQ(DOORBELL_OK, doorbell_iface_arm(pair.b));
    /* the application sleeps on the fd; a timer progresses for it */
    for (int i = 0; i < 200; ++i) {
        doorbell_iface_progress_background(pair.b);
    }
    uint64_t v = 5;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    pollfd pfd{fd, POLLIN, 0};
    EXPECT_EQ(1, poll(&pfd, 1, 0)); /* still armed: the arrival wakes */
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
}

/* A worker asleep on the event fd while a timer progresses for it: what the
 * background pass takes from the socket (here the ACK that frees the QP)
 * must still wake the sleeper, or a request waiting for that ACK waits for
 * the next arrival that may never come. */
TEST(UdpDoorbell, BackgroundProgressThatTakesAnArrivalWakesTheSleeper)
{
    LoopbackPair pair(steady_params(), steady_params());
    Region       target(pair.pd, 64, DOORBELL_ACCESS_REMOTE_WRITE);
    int          fd = doorbell_iface_event_fd(pair.a);
    uint64_t     v  = 5;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    ASSERT_EQ(DOORBELL_OK, doorbell_iface_arm(pair.a)); /* a sleeps */
    pollfd pfd{fd, POLLIN, 0};
    ASSERT_EQ(0, poll(&pfd, 1, 0));
    /* b runs until its ACK reaches a's socket */
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    while (poll(&pfd, 1, 0) == 0) {
        doorbell_iface_progress(pair.b);
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no ACK from b";
    }
    ASSERT_GT(doorbell_iface_progress_background(pair.a), 0u);
    EXPECT_EQ(1, poll(&pfd, 1, 0)) << "the sleeper was not woken";
    /* once it has looked (armed again), an empty pass does not wake it */
    ASSERT_EQ(DOORBELL_OK, doorbell_iface_arm(pair.a));
    EXPECT_EQ(0u, doorbell_iface_progress_background(pair.a));
    EXPECT_EQ(0, poll(&pfd, 1, 0));
}

TEST(UdpDoorbell, CompletionHandlerWithArgumentGetsItBack)
{
    LoopbackPair pair;
    Region       target(pair.pd, 64, DOORBELL_ACCESS_REMOTE_WRITE);
    struct Seen {
        void             *arg    = nullptr;
        Completion       *cookie = nullptr;
        doorbell_status_t status = DOORBELL_ERR_IO;
    } seen;
    auto cb = [](void *arg, void *cookie, doorbell_status_t status) {
        auto *s   = static_cast<Seen *>(arg);
        s->arg    = arg;
        s->cookie = static_cast<Completion *>(cookie);
        s->status = status;
        on_completion(cookie, status);
    };
    doorbell_iface_set_completion_handler_arg(pair.a, cb, &seen);
    uint64_t   v = 7;
    iovec      iov{&v, sizeof(v)};
    Completion z;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair.qa, &iov, 1, target.addr(), target.rkey, &z));
    ASSERT_TRUE(pair.wait([&] { return z.count == 1; }));
    EXPECT_EQ(&seen, seen.arg);
    EXPECT_EQ(&z, seen.cookie);
    EXPECT_EQ(DOORBELL_OK, seen.status);
    /* the plain handler replaces it again */
    doorbell_iface_set_completion_handler(pair.a, on_completion);
    Completion f;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair.qa, &iov, 1, target.addr(), target.rkey, &f));
    ASSERT_TRUE(pair.wait([&] { return f.count == 1; }));
    EXPECT_EQ(&z, seen.cookie);
}

TEST(UdpDoorbell, ArmedTimerWakesForRetransmission)
{
    LoopbackPair pair;
    Region       target(pair.pd, 64, DOORBELL_ACCESS_REMOTE_WRITE);
    pair.close_b(); /* nobody answers */
    /* (its goodbye for its own QP to us arrives: taken by one progress) */
    ASSERT_TRUE(pair.wait([&] { return pair.counters(pair.a).rx_packets == 1; }));
    uint64_t v = 5;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    /* unacknowledged data: arm sets the retransmit timer on the event fd */
    ASSERT_EQ(DOORBELL_OK, doorbell_iface_arm(pair.a));
    pollfd pfd{doorbell_iface_event_fd(pair.a), POLLIN, 0};
    EXPECT_EQ(1, poll(&pfd, 1, 10000)); /* wakes at the RTO (200 us) */
    uint64_t before = pair.counters(pair.a).retransmits;
    doorbell_iface_progress(pair.a);
    EXPECT_EQ(before + 1, pair.counters(pair.a).retransmits);
}

TEST(UdpDoorbell, CountersDumpAtClose)
{
    LoopbackPair pair(steady_params(), steady_params());
    Region       target(pair.pd, 64, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t     v = 5;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    doorbell_iface_set_stats(pair.a, 1);
    doorbell_qp_destroy(pair.qa);
    pair.qa = nullptr;
    testing::internal::CaptureStderr();
    doorbell_iface_close(pair.a);
    pair.a          = nullptr;
    std::string out = testing::internal::GetCapturedStderr();
    EXPECT_NE(out.find("lo wqes 2\n"), std::string::npos) << out;
    EXPECT_NE(out.find("lo doorbells 2\n"), std::string::npos) << out;
    /* CONNECT for qa, ACCEPT for qb's, the put, the flush's ACK probe,
     * DISCONNECT when qa goes */
    EXPECT_NE(out.find("lo tx_packets 5\n"), std::string::npos) << out;
    EXPECT_NE(out.find("lo connects 1\n"), std::string::npos) << out;
    for (const char *name :
         {"signaled",       "cq_polls",          "rx_packets",      "tx_bytes",
          "rx_bytes",       "retransmits",       "rx_dropped",      "rx_duplicates",
          "naks",           "ce_marks",          "rtt_samples",     "remote_access_errors",
          "timeouts",       "paced_waits",       "busy_naks",       "tail_probes",
          "rx_timestamped", "rx_drop_malformed", "rx_drop_foreign", "rx_drop_no_conn",
          "rx_drop_token",  "rx_drop_source",    "rx_drop_psn",     "rx_drop_state",
          "conn_refused",   "keepalives",        "reasm_busy",      "reasm_reclaimed",
          "reasm_peak",     "acks_sent",         "acks_carried",    "packs",
          "packed",         "rx_held",           "spine_probes",    "spine_answers",
          "path_errors",    "near_paths",        "rx_merged",       "rx_merged_datagrams",
          "idle_windows"}) {
        EXPECT_NE(out.find(std::string("lo ") + name + " "), std::string::npos) << name;
    }
}
