/*
 * IBGDA on a verbs QP, against the in-memory fake provider: a direct QP's
 * mlx5 send queue, doorbell record, UAR and CQ exported (the fake's
 * mlx5dv_init_obj gives host memory), a GPU queue in MLX5 mode whose
 * producers -- CPU threads standing in for GPU threads, running the same
 * header the kernels compile -- write mlx5 WQEs and ring; the fake's NIC
 * (Fabric::mlx5_process) executes them and writes CQEs the producers poll.
 * Asserted: the WQE bytes in the SQ, the doorbell record, the UAR write,
 * completions across SQ and CQ wrap-around, an error CQE ending the wait
 * with the error, and the fallback to CPU-proxy mode with its reason.
 */
#include "doorbell_gpu_core.h"
#include "doorbell_gpu_producer.h"
#include "host_group.h"
#include "verbs_pair.h"

#include <gtest/gtest.h>

#include <endian.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

using namespace doorbell;
using namespace doorbell::test;

namespace {

uint32_t be32_at(const volatile void *p)
{
    uint32_t v;
    std::memcpy(&v, const_cast<const void *>(p), 4);
    return be32toh(v);
}

doorbell_iface_params_t small_queue(const char *dev)
{
    doorbell_iface_params_t p = verbs_params(dev);
    p.tx_queue_len            = 16; /* SQ of 16 WQEBBs, CQ of 32 CQEs: wraps soon */
    return p;
}

class gpu_ibgda : public ::testing::Test {
protected:
    explicit gpu_ibgda(verbs::fake::HcaConfig ca = {}) :
        pair(ca, {}, small_queue("mlx5_0:1"), small_queue("mlx5_1:1"))
    {
    }

    void SetUp() override
    {
        ASSERT_EQ(DOORBELL_OK,
                  doorbell_gpu_engine_create_for_iface(pair.a, "mlx5_0:1", nullptr, &engine));
        src.assign(4096, 0);
        for (size_t i = 0; i < src.size(); ++i) {
            src[i] = uint8_t(i * 13 + 5);
        }
        doorbell_mr_t *mr;
        uint32_t       unused;
        ASSERT_EQ(DOORBELL_OK,
                  doorbell_mr_register(pair.pda, src.data(), src.size(), 0, &mr, &unused));
        lkey = doorbell_mr_local_key(mr);
        ASSERT_NE(0u, lkey);
        target.assign(8192, 0);
        rkey = pair.expose(target.data(), target.size(), DOORBELL_ACCESS_REMOTE_WRITE);
        base = uintptr_t(target.data());
    }

    void TearDown() override
    {
        if (engine != nullptr) {
            doorbell_gpu_core_engine_destroy(engine);
        }
    }

    /* A connected direct QP from a to b. */
    doorbell_qp_t *direct_qp()
    {
        std::vector<uint8_t> dev(doorbell_iface_device_address_length(pair.b));
        std::vector<uint8_t> ifa(doorbell_iface_address_length(pair.b));
        doorbell_iface_get_device_address(pair.b, dev.data());
        doorbell_iface_get_address(pair.b, ifa.data());
        doorbell_qp_t *q = nullptr;
        EXPECT_EQ(DOORBELL_OK, doorbell_qp_create_direct(pair.a, dev.data(), ifa.data(), &q))
            << doorbell_last_error();
        pair.extra.push_back(q);
        doorbell_qp_mlx5_t x;
        EXPECT_TRUE(pair.wait([&] { return doorbell_qp_export_mlx5(q, &x) == DOORBELL_OK; }));
        exported = x;
        return q;
    }

    doorbell_gpu_queue_params_t params(doorbell_gpu_mode_t mode = DOORBELL_GPU_MODE_AUTO)
    {
        doorbell_gpu_queue_params_t p;
        doorbell_gpu_queue_params_init(&p);
        p.mode       = mode;
        p.mlx5_lkey  = lkey;
        p.timeout_ns = 5ull * 1000 * 1000 * 1000;
        return p;
    }

    doorbell_wqe_t put(uint32_t off, uint32_t len)
    {
        return doorbell_gpu_make_put(src.data() + off, len, base + off, rkey);
    }

    const doorbell_mlx5_qp_t &qp_of(doorbell_gpu_queue_t *q)
    {
        return *doorbell_gpu_queue_host_ring(q).mlx5;
    }

    VerbsPair              pair;
    doorbell_gpu_engine_t *engine = nullptr;
    std::vector<uint8_t>   src, target;
    uint32_t               lkey = 0, rkey = 0;
    uint64_t               base = 0;
    doorbell_qp_mlx5_t     exported{};
};

class gpu_ibgda_not_mlx5 : public gpu_ibgda {
protected:
    static verbs::fake::HcaConfig not_mlx5()
    {
        verbs::fake::HcaConfig c;
        c.mlx5 = false;
        return c;
    }
    gpu_ibgda_not_mlx5() : gpu_ibgda(not_mlx5()) {}
};

} /* namespace */

#ifdef DOORBELL_VERBS_MLX5DV

TEST_F(gpu_ibgda, a_batch_is_mlx5_wqes_in_the_sq_one_doorbell_record_and_uar_write)
{
    doorbell_qp_t              *q = direct_qp();
    doorbell_gpu_queue_t       *queue;
    doorbell_gpu_queue_params_t p = params();
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_queue_create_for_qp(engine, q, &p, &queue));
    ASSERT_EQ(DOORBELL_GPU_MODE_MLX5, doorbell_gpu_queue_mode(queue));

    doorbell_gpu_ring_t r      = doorbell_gpu_queue_host_ring(queue);
    doorbell_wqe_t      w[3]   = {put(0, 256), put(256, 256),
                                  doorbell_gpu_make_put_signal(src.data() + 512, 64, base + 512, rkey,
                                                               base + 4096, rkey, DOORBELL_SIGNAL_ADD, 5)};
    uint64_t            ticket = 0;
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_producer_post(r, w, 3, &ticket));
    EXPECT_EQ(4u, ticket); /* WQEBBs: two puts, the write and the fetch-add */

    /* the SQ, as the NIC will read it */
    const uint8_t *sq = static_cast<const uint8_t *>(exported.sq_buf);
    for (uint32_t k = 0; k < 4; ++k) {
        const uint8_t *e      = sq + 64 * k;
        uint8_t        opcode = (k == 3) ? 0x12 : 0x08; /* fetch-add last */
        EXPECT_EQ((k << 8) | opcode, be32_at(e)) << k;
        EXPECT_EQ((exported.qpn << 8) | ((k == 3) ? 4u : 3u), be32_at(e + 4)) << k;
        EXPECT_EQ((k == 3) ? 0x08 : 0x00, e[11]) << "only the batch's last WQE asks a CQE";
    }
    EXPECT_EQ(lkey, be32_at(sq + 36));                         /* the producers' key */
    EXPECT_EQ(exported.fetch_lkey, be32_at(sq + 3 * 64 + 52)); /* fetch-add result */
    /* the doorbell record: the producer index, big-endian */
    EXPECT_EQ(4u, be32_at(&exported.dbrec[1]));
    /* the UAR: the first 8 bytes of the last WQE's ctrl segment */
    uint64_t ctrl;
    std::memcpy(&ctrl, sq + 3 * 64, 8);
    EXPECT_EQ(ctrl, *static_cast<volatile uint64_t *>(exported.uar));

    EXPECT_EQ(4u, pair.fabric.mlx5_process());
    EXPECT_EQ(DOORBELL_OK, doorbell_gpu_producer_wait(r, ticket));
    EXPECT_EQ(0, std::memcmp(target.data(), src.data(), 576));
    uint64_t word;
    std::memcpy(&word, target.data() + 4096, 8);
    EXPECT_EQ(5u, be64toh(word));
    const doorbell_mlx5_qp_t &m = qp_of(queue);
    EXPECT_EQ(4u, m.ctl->completed);
    EXPECT_EQ(1u, m.ctl->cq_ci);
    EXPECT_EQ(1u, be32_at(&exported.cq_dbrec[0])); /* the CQ's consumer index */
    EXPECT_EQ(ctrl, pair.fabric.mlx5_qp(exported.qpn).last_uar);
    doorbell_gpu_core_queue_destroy(queue);
}

TEST_F(gpu_ibgda, completions_follow_the_sq_and_cq_around_their_wrap)
{
    doorbell_qp_t              *q = direct_qp();
    doorbell_gpu_queue_t       *queue;
    doorbell_gpu_queue_params_t p = params(DOORBELL_GPU_MODE_MLX5);
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_queue_create_for_qp(engine, q, &p, &queue));
    doorbell_gpu_ring_t r = doorbell_gpu_queue_host_ring(queue);
    ASSERT_EQ(16u, exported.sq_wqebbs);
    ASSERT_EQ(32u, exported.cqe_cnt);
    /* 100 batches of 3 WQEBBs: the SQ wraps 18 times, the CQ 3 times, and
     * the 16-bit producer index is carried in the 64-bit tickets */
    for (uint32_t i = 0; i < 100; ++i) {
        doorbell_wqe_t w[2] = {put(8 * (i % 64), 8),
                               doorbell_gpu_make_put_signal(src.data(), 8, base + 2048, rkey,
                                                            base + 4096, rkey, DOORBELL_SIGNAL_SET,
                                                            i + 1)};
        uint64_t       ticket;
        ASSERT_EQ(DOORBELL_OK, doorbell_gpu_producer_post(r, w, 2, &ticket)) << i;
        ASSERT_EQ(3u * (i + 1), ticket);
        pair.fabric.mlx5_process();
        ASSERT_EQ(DOORBELL_OK, doorbell_gpu_producer_wait(r, ticket)) << i;
        uint64_t word;
        std::memcpy(&word, target.data() + 4096, 8);
        ASSERT_EQ(i + 1, word); /* SET: the value's own bytes */
    }
    EXPECT_EQ(300u, qp_of(queue).ctl->completed);
    EXPECT_EQ(100u, qp_of(queue).ctl->cq_ci);
    EXPECT_EQ(300u, pair.fabric.mlx5_qp(exported.qpn).wqes_executed);
    EXPECT_EQ(0u, pair.fabric.mlx5_cq_overruns);
    doorbell_gpu_core_queue_destroy(queue);
}

TEST_F(gpu_ibgda, an_error_cqe_ends_every_wait_with_the_error)
{
    doorbell_qp_t              *q = direct_qp();
    doorbell_gpu_queue_t       *queue;
    doorbell_gpu_queue_params_t p = params();
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_queue_create_for_qp(engine, q, &p, &queue));
    doorbell_gpu_ring_t r    = doorbell_gpu_queue_host_ring(queue);
    doorbell_wqe_t      good = put(0, 64);
    doorbell_wqe_t      bad  = doorbell_gpu_make_put(src.data(), 64, base, rkey ^ 0x5a5a);
    uint64_t            t1, t2;
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_producer_post(r, &good, 1, &t1));
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_producer_post(r, &bad, 1, &t2));
    pair.fabric.mlx5_process();
    EXPECT_EQ(DOORBELL_OK, doorbell_gpu_producer_wait(r, t1)); /* before the error */
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, doorbell_gpu_producer_wait(r, t2));
    const doorbell_mlx5_qp_t &m = qp_of(queue);
    EXPECT_EQ(0x13u, m.ctl->syndrome); /* MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR */
    EXPECT_EQ(1u, m.ctl->error_wqe);
    /* the queue is dead: later posts and waits return the error at once */
    uint64_t t3;
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, doorbell_gpu_producer_post(r, &good, 1, &t3));
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, doorbell_gpu_producer_wait(r, t2 + 100));
    doorbell_gpu_core_queue_destroy(queue);
}

TEST_F(gpu_ibgda, a_wait_the_nic_never_answers_times_out)
{
    doorbell_qp_t              *q = direct_qp();
    doorbell_gpu_queue_t       *queue;
    doorbell_gpu_queue_params_t p = params();
    p.timeout_ns                  = 20ull * 1000 * 1000; /* 20 ms */
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_queue_create_for_qp(engine, q, &p, &queue));
    doorbell_gpu_ring_t r = doorbell_gpu_queue_host_ring(queue);
    doorbell_wqe_t      w = put(0, 8);
    uint64_t            t;
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_producer_post(r, &w, 1, &t));
    /* no mlx5_process: no CQE ever comes */
    EXPECT_EQ(DOORBELL_ERR_TIMED_OUT, doorbell_gpu_producer_wait(r, t));
    doorbell_gpu_core_queue_destroy(queue);
}

TEST_F(gpu_ibgda, producer_threads_and_a_nic_thread_exactly_once)
{
    doorbell_qp_t              *q = direct_qp();
    doorbell_gpu_queue_t       *queue;
    doorbell_gpu_queue_params_t p = params();
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_queue_create_for_qp(engine, q, &p, &queue));
    doorbell_gpu_ring_t      r        = doorbell_gpu_queue_host_ring(queue);
    constexpr uint32_t       kThreads = 4, kIters = 100;
    std::atomic<uint32_t>    done{0};
    std::atomic<int>         failures{0};
    std::vector<std::thread> producers;
    for (uint32_t t = 0; t < kThreads; ++t) {
        producers.emplace_back([&, t] {
            uint64_t ticket = 0;
            for (uint32_t i = 0; i < kIters; ++i) {
                /* each thread its own 8 bytes and its own counter word */
                doorbell_wqe_t w = doorbell_gpu_make_put_signal(src.data() + 8 * t, 8, base + 8 * t,
                                                                rkey, base + 4096 + 8 * t, rkey,
                                                                DOORBELL_SIGNAL_ADD, 1);
                if (doorbell_gpu_producer_post(r, &w, 1, &ticket) != DOORBELL_OK) {
                    ++failures;
                    break;
                }
            }
            if (doorbell_gpu_producer_wait(r, ticket) != DOORBELL_OK) {
                ++failures;
            }
            ++done;
        });
    }
    /* the NIC: the fake's state is this thread's alone */
    while (done.load() < kThreads) {
        pair.fabric.mlx5_process();
        std::this_thread::yield();
    }
    for (auto &t : producers) {
        t.join();
    }
    EXPECT_EQ(0, failures.load());
    for (uint32_t t = 0; t < kThreads; ++t) {
        uint64_t word;
        std::memcpy(&word, target.data() + 4096 + 8 * t, 8);
        EXPECT_EQ(kIters, be64toh(word)) << t;
        EXPECT_EQ(0, std::memcmp(target.data() + 8 * t, src.data() + 8 * t, 8));
    }
    EXPECT_EQ(2u * kThreads * kIters, pair.fabric.mlx5_qp(exported.qpn).wqes_executed);
    EXPECT_EQ(0u, pair.fabric.mlx5_qp(exported.qpn).bad_wqes);
    doorbell_gpu_core_queue_destroy(queue);
}

TEST_F(gpu_ibgda, a_group_reserves_once_rings_once_and_only_its_last_wqe_asks_a_cqe)
{
    doorbell_qp_t              *q = direct_qp();
    doorbell_gpu_queue_t       *queue;
    doorbell_gpu_queue_params_t p = params();
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_queue_create_for_qp(engine, q, &p, &queue));
    doorbell_gpu_ring_t r = doorbell_gpu_queue_host_ring(queue);
    /* four threads as one warp: 2, 0, 1 and 1 WQEs (the last two with a
     * signal): 2 + 0 + 2 + 2 = 6 WQEBBs */
    constexpr uint32_t                 kMembers         = 4;
    const uint32_t                     counts[kMembers] = {2, 0, 1, 1};
    doorbell_gpu_test::HostGroupShared shared(kMembers);
    uint64_t                           ends[kMembers] = {}, group_ends[kMembers] = {};
    doorbell_status_t                  sts[kMembers];
    std::vector<std::thread>           members;
    for (uint32_t m = 0; m < kMembers; ++m) {
        members.emplace_back([&, m] {
            doorbell_gpu_test::HostGroup g(shared, m);
            doorbell_wqe_t               w[2] = {put(64 * m, 8), put(64 * m + 8, 8)};
            if (m >= 2) {
                w[0] = doorbell_gpu_make_put_signal(src.data() + 64 * m, 8, base + 64 * m, rkey,
                                                    base + 4096 + 8 * m, rkey, DOORBELL_SIGNAL_ADD,
                                                    m);
            }
            sts[m] = doorbell_gpu_producer_group_post(g, r, w, counts[m], &ends[m], &group_ends[m]);
        });
    }
    for (auto &t : members) {
        t.join();
    }
    for (uint32_t m = 0; m < kMembers; ++m) {
        EXPECT_EQ(DOORBELL_OK, sts[m]) << m;
        EXPECT_EQ(6u, group_ends[m]) << m;
    }
    EXPECT_EQ(2u, ends[0]);
    EXPECT_EQ(2u, ends[1]); /* nothing of its own: its offset */
    EXPECT_EQ(4u, ends[2]);
    EXPECT_EQ(6u, ends[3]);
    EXPECT_EQ(6u, qp_of(queue).ctl->reserve) << "one reservation of 6";
    EXPECT_EQ(6u, be32_at(&exported.dbrec[1])) << "one doorbell for the group";
    const uint8_t *sq = static_cast<const uint8_t *>(exported.sq_buf);
    for (uint32_t k = 0; k < 6; ++k) {
        EXPECT_EQ(k == 5 ? 0x08 : 0x00, sq[64 * k + 11]) << "CQE only for WQEBB 5, not " << k;
    }
    EXPECT_EQ(6u, pair.fabric.mlx5_process());
    EXPECT_EQ(DOORBELL_OK, doorbell_gpu_producer_wait(r, group_ends[0]));
    for (uint32_t m = 2; m < kMembers; ++m) {
        uint64_t word;
        std::memcpy(&word, target.data() + 4096 + 8 * m, 8);
        EXPECT_EQ(uint64_t(m), be64toh(word));
    }
    EXPECT_EQ(0, std::memcmp(target.data(), src.data(), 16));
    doorbell_gpu_core_queue_destroy(queue);
}

/* Memory ops whose GPU cannot map device registers (IoMemory). */
doorbell_status_t t_alloc(void *, size_t bytes, void **host_p, void **device_p)
{
    void *p = std::aligned_alloc(64, (bytes + 63) & ~size_t(63));
    std::memset(p, 0, (bytes + 63) & ~size_t(63));
    *host_p = p;
    if (device_p != nullptr) {
        *device_p = p;
    }
    return DOORBELL_OK;
}
doorbell_status_t t_alloc_producer(void *a, size_t bytes, void **p)
{
    return t_alloc(a, bytes, p, nullptr);
}
void t_free(void *, void *p)
{
    std::free(p);
}
int               g_maps = 0, g_unmaps = 0;
doorbell_status_t t_map(void *, void *host, size_t, int io, void **device_p, char *why, size_t n)
{
    if (io) {
        std::snprintf(why, n, "cudaHostRegister(IoMemory) failed: operation not supported");
        return DOORBELL_ERR_UNSUPPORTED;
    }
    ++g_maps;
    *device_p = host;
    return DOORBELL_OK;
}
void t_unmap(void *, void *)
{
    ++g_unmaps;
}

TEST_F(gpu_ibgda, a_gpu_that_cannot_map_the_uar_falls_back_to_proxy_and_says_why)
{
    doorbell_qp_t                  *q   = direct_qp();
    const doorbell_gpu_memory_ops_t mem = {t_alloc, t_free, t_alloc_producer, t_free,
                                           nullptr, t_map,  t_unmap};
    doorbell_gpu_queue_params_t     p   = params();
    p.memory                            = &mem;
    doorbell_gpu_queue_t *queue;
    testing::internal::CaptureStderr();
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_queue_create_for_qp(engine, q, &p, &queue));
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(DOORBELL_GPU_MODE_PROXY, doorbell_gpu_queue_mode(queue));
    EXPECT_NE(std::string::npos, err.find("mlx5_0:1")) << err;
    EXPECT_NE(std::string::npos, err.find("IoMemory")) << err;
    EXPECT_NE(std::string::npos, err.find("CPU-proxy")) << err;
    EXPECT_EQ(g_maps, g_unmaps); /* what was mapped before the UAR, undone */
    doorbell_gpu_core_queue_destroy(queue);
    /* MLX5 asked for explicitly: an error, not a fallback */
    p.mode = DOORBELL_GPU_MODE_MLX5;
    testing::internal::CaptureStderr();
    EXPECT_NE(DOORBELL_OK, doorbell_gpu_queue_create_for_qp(engine, q, &p, &queue));
    testing::internal::GetCapturedStderr();
}

#endif /* DOORBELL_VERBS_MLX5DV */

TEST_F(gpu_ibgda_not_mlx5, a_queue_to_a_peer_falls_back_to_proxy_once_naming_device_and_reason)
{
    std::vector<uint8_t> dev(doorbell_iface_device_address_length(pair.b));
    std::vector<uint8_t> ifa(doorbell_iface_address_length(pair.b));
    doorbell_iface_get_device_address(pair.b, dev.data());
    doorbell_iface_get_address(pair.b, ifa.data());
    doorbell_gpu_queue_params_t p = params();
    doorbell_gpu_queue_t       *q1, *q2;
    testing::internal::CaptureStderr();
    ASSERT_EQ(DOORBELL_OK,
              doorbell_gpu_queue_create_for_peer(engine, dev.data(), ifa.data(), &p, &q1));
    ASSERT_EQ(DOORBELL_OK,
              doorbell_gpu_queue_create_for_peer(engine, dev.data(), ifa.data(), &p, &q2));
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(DOORBELL_GPU_MODE_PROXY, doorbell_gpu_queue_mode(q1));
    EXPECT_EQ(DOORBELL_GPU_MODE_PROXY, doorbell_gpu_queue_mode(q2));
    EXPECT_NE(std::string::npos, err.find("mlx5_0:1")) << err;
#ifdef DOORBELL_VERBS_MLX5DV
    EXPECT_NE(std::string::npos, err.find("not an mlx5 device")) << err;
#endif
    EXPECT_NE(std::string::npos, err.find("CPU-proxy")) << err;
    /* said once */
    EXPECT_EQ(err.find("CPU-proxy"), err.rfind("CPU-proxy")) << err;
    /* the fallback queue works: CPU producers, the engine posts */
    doorbell_gpu_ring_t r = doorbell_gpu_queue_host_ring(q1);
    doorbell_wqe_t w = doorbell_gpu_make_put_signal(src.data(), 64, base, rkey, base + 4096, rkey,
                                                    DOORBELL_SIGNAL_ADD, 2);
    uint64_t       t;
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_producer_post(r, &w, 1, &t));
    for (int i = 0; i < 100000 && doorbell_gpu_port::load_acquire(r.completed) < t; ++i) {
        doorbell_gpu_engine_progress(engine);
        doorbell_iface_progress(pair.b);
    }
    EXPECT_EQ(DOORBELL_OK, doorbell_gpu_producer_wait(r, t));
    uint64_t word;
    std::memcpy(&word, target.data() + 4096, 8);
    EXPECT_EQ(2u, be64toh(word)); /* a verbs fetch-add: big-endian */
}
