/*
 * The whole GPU path: a kernel's threads post put-with-signal into a ring in
 * host-mapped memory, the engine thread posts the batches to a UDP-device QP,
 * a forked target process sees every signal after its data. Skipped where no
 * GPU is present.
 */
#include "doorbell_gpu_core.h"
#include "doorbell_gpu_cuda.h"
#include "udp_peer.h"

#include <gtest/gtest.h>

#include <cstring>

using doorbell_gpu_test::pattern;
using doorbell_gpu_test::PeerResult;
using doorbell_gpu_test::UdpPeer;

namespace {

constexpr uint32_t kBlocks = 2, kThreads = 64, kIters = 20, kBytes = 64, kBatch = 4;

class gpu_udp_kernel : public ::testing::TestWithParam<doorbell_gpu_kernel_kind_t> {
protected:
    void SetUp() override
    {
        char reason[256];
        if (doorbell_gpu_cuda_device_count(reason, sizeof(reason)) == 0) {
            GTEST_SKIP() << "no GPU: " << reason;
        }
    }
};

} /* namespace */

TEST_P(gpu_udp_kernel, kernel_puts_reach_another_process)
{
    const uint32_t regions = kBlocks * kThreads;
    UdpPeer        peer(regions, kBytes, kIters); /* fork before any thread */
    ASSERT_TRUE(peer.ok()) << "target process did not start";

    doorbell_pd_t          *pd     = nullptr;
    doorbell_iface_t       *iface  = nullptr;
    doorbell_gpu_engine_t  *engine = nullptr;
    doorbell_gpu_queue_t   *queue  = nullptr;
    doorbell_iface_params_t p;
    doorbell_iface_params_init(&p);
    p.device = "lo";
    ASSERT_EQ(DOORBELL_OK, doorbell_pd_create(&pd));
    ASSERT_EQ(DOORBELL_OK, doorbell_iface_open(pd, &p, &iface)) << doorbell_last_error();
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_engine_create_for_iface(iface, "lo", nullptr, &engine));
    doorbell_gpu_queue_params_t qp;
    doorbell_gpu_queue_params_init(&qp);
    qp.size       = 1024;
    qp.mode       = DOORBELL_GPU_MODE_AUTO;
    qp.memory     = doorbell_gpu_cuda_memory();
    qp.timeout_ns = 20ull * 1000 * 1000 * 1000;
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_queue_create_for_peer(engine, peer.info().dev,
                                                              peer.info().ifa, &qp, &queue));
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_engine_start(engine));

    void *src = nullptr;
    ASSERT_EQ(DOORBELL_OK,
              doorbell_gpu_cuda_memory()->alloc_shared(nullptr, size_t(regions) * kBytes, &src,
                                                       &src));
    for (uint32_t t = 0; t < regions; ++t) {
        for (uint32_t k = 0; k < kBytes; ++k) {
            static_cast<uint8_t *>(src)[size_t(t) * kBytes + k] = pattern(t, k);
        }
    }
    doorbell_gpu_kernel_args_t a      = {};
    a.kind                            = GetParam();
    a.blocks                          = kBlocks;
    a.threads                         = kThreads;
    a.iters                           = kIters;
    a.batch                           = kBatch;
    a.bytes                           = kBytes;
    a.local                           = src;
    a.remote_addr                     = peer.info().data_addr;
    a.rkey                            = peer.info().data_rkey;
    a.signal_addr                     = peer.info().flag_addr;
    a.signal_rkey                     = peer.info().flag_rkey;
    a.signal_op                       = DOORBELL_SIGNAL_SET;
    a.signal_stride                   = 8;
    doorbell_gpu_ring_t          ring = doorbell_gpu_queue_device_ring(queue);
    doorbell_gpu_kernel_result_t res  = {};
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_cuda_run_puts(&ring, &a, &res));
    EXPECT_EQ(DOORBELL_OK, res.status) << doorbell_status_string(res.status);

    PeerResult r;
    ASSERT_TRUE(peer.result(&r));
    EXPECT_EQ(0, r.timed_out);
    EXPECT_EQ(regions, r.flags_ok);
    EXPECT_EQ(0u, r.bytes_bad);

    doorbell_gpu_core_engine_destroy(engine);
    doorbell_gpu_cuda_memory()->free_shared(nullptr, src);
    doorbell_iface_close(iface);
    doorbell_pd_destroy(pd);
}

INSTANTIATE_TEST_SUITE_P(kinds, gpu_udp_kernel,
                         ::testing::Values(DOORBELL_GPU_KERNEL_THREAD, DOORBELL_GPU_KERNEL_WARP,
                                           DOORBELL_GPU_KERNEL_BATCH));
