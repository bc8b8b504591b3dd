/*
 * IBGDA from real kernels against the fake verbs provider: GPU threads
 * write mlx5 WQEs into a direct QP's exported send queue (host memory the
 * fake's mlx5dv_init_obj handed out, mapped into the GPU), ring its doorbell
 * record and "UAR" (ordinary memory here, so it is mapped without
 * IoMemory), and poll its CQ; a host thread plays the NIC
 * (Fabric::mlx5_process). Skipped where no GPU is present.
 */
#include "doorbell_gpu_core.h"
#include "doorbell_gpu_cuda.h"
#include "verbs_pair.h"

#include <gtest/gtest.h>

#include <endian.h>

#include <atomic>
#include <cstring>
#include <thread>

using namespace doorbell;
using namespace doorbell::test;

namespace {

const doorbell_gpu_memory_ops_t *g_cuda = nullptr;

/* the fake's UAR is host memory, not a device BAR: no IoMemory */
doorbell_status_t map_plain(void *arg, void *host, size_t bytes, int, void **device_p, char *why,
                            size_t n)
{
    return g_cuda->map_host(arg, host, bytes, 0, device_p, why, n);
}

class gpu_ibgda_kernel : public ::testing::TestWithParam<doorbell_gpu_kernel_kind_t> {
protected:
    void SetUp() override
    {
        char reason[256];
        if (doorbell_gpu_cuda_device_count(reason, sizeof(reason)) == 0) {
            GTEST_SKIP() << "no GPU: " << reason;
        }
        g_cuda           = doorbell_gpu_cuda_memory();
        memory_          = *g_cuda;
        memory_.map_host = map_plain;
        ASSERT_EQ(DOORBELL_OK,
                  doorbell_gpu_engine_create_for_iface(pair_.a, "mlx5_0:1", nullptr, &engine_));
        std::vector<uint8_t> dev(doorbell_iface_device_address_length(pair_.b));
        std::vector<uint8_t> ifa(doorbell_iface_address_length(pair_.b));
        doorbell_iface_get_device_address(pair_.b, dev.data());
        doorbell_iface_get_address(pair_.b, ifa.data());
        ASSERT_EQ(DOORBELL_OK, doorbell_qp_create_direct(pair_.a, dev.data(), ifa.data(), &qp_));
        pair_.extra.push_back(qp_);
        doorbell_qp_mlx5_t x;
        ASSERT_TRUE(pair_.wait([&] { return doorbell_qp_export_mlx5(qp_, &x) == DOORBELL_OK; }));
    }
    void TearDown() override
    {
        if (engine_ != nullptr) {
            doorbell_gpu_core_engine_destroy(engine_);
        }
    }

    VerbsPair                 pair_;
    doorbell_gpu_memory_ops_t memory_{};
    doorbell_gpu_engine_t    *engine_ = nullptr;
    doorbell_qp_t            *qp_     = nullptr;
};

} /* namespace */

TEST_P(gpu_ibgda_kernel, puts_and_signals_reach_the_target_through_the_nic_queue)
{
    constexpr uint32_t kBlocks = 2, kThreads = 64, kBytes = 16, kIters = 4, kBatch = 4;
    const uint32_t     nthreads = kBlocks * kThreads;
    void              *src      = nullptr;
    size_t             bytes    = size_t(nthreads) * kBytes;
    ASSERT_EQ(DOORBELL_OK, g_cuda->alloc_shared(nullptr, bytes, &src, &src));
    for (size_t i = 0; i < bytes; ++i) {
        static_cast<uint8_t *>(src)[i] = uint8_t(i * 7 + 1);
    }
    doorbell_mr_t *mr;
    uint32_t       unused;
    ASSERT_EQ(DOORBELL_OK, doorbell_mr_register(pair_.pda, src, bytes, 0, &mr, &unused));
    std::vector<uint8_t> dst(bytes + 64, 0);
    uint32_t             rkey = pair_.expose(dst.data(), dst.size(), DOORBELL_ACCESS_REMOTE_WRITE);

    doorbell_gpu_queue_params_t p;
    doorbell_gpu_queue_params_init(&p);
    p.mode       = DOORBELL_GPU_MODE_MLX5;
    p.memory     = &memory_;
    p.mlx5_lkey  = doorbell_mr_local_key(mr);
    p.timeout_ns = 5ull * 1000 * 1000 * 1000;
    doorbell_gpu_queue_t *queue;
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_queue_create_for_qp(engine_, qp_, &p, &queue));
    ASSERT_EQ(DOORBELL_GPU_MODE_MLX5, doorbell_gpu_queue_mode(queue));

    std::atomic<bool>          stop{false};
    std::thread                nic([&] {
        while (!stop.load()) {
            pair_.fabric.mlx5_process();
            std::this_thread::yield();
        }
    });
    doorbell_gpu_ring_t        ring  = doorbell_gpu_queue_device_ring(queue);
    doorbell_gpu_kernel_args_t a     = {};
    a.kind                           = GetParam();
    a.blocks                         = kBlocks;
    a.threads                        = kThreads;
    a.iters                          = kIters;
    a.batch                          = kBatch;
    a.bytes                          = kBytes;
    a.local                          = src;
    a.remote_addr                    = uintptr_t(dst.data());
    a.rkey                           = rkey;
    a.signal_addr                    = uintptr_t(dst.data() + bytes);
    a.signal_rkey                    = rkey;
    a.signal_op                      = DOORBELL_SIGNAL_ADD;
    doorbell_gpu_kernel_result_t res = {};
    doorbell_status_t            st  = doorbell_gpu_cuda_run_puts(&ring, &a, &res);
    stop                             = true;
    nic.join();
    ASSERT_EQ(DOORBELL_OK, st);
    EXPECT_EQ(DOORBELL_OK, res.status);
    EXPECT_EQ(0, std::memcmp(src, dst.data(), bytes));
    uint64_t word;
    std::memcpy(&word, dst.data() + bytes, 8);
    EXPECT_EQ(uint64_t(nthreads) * kIters, be64toh(word)) << "fetch-adds on a big-endian word";
    doorbell_gpu_core_queue_destroy(queue);
    doorbell_mr_deregister(pair_.pda, mr);
    g_cuda->free_shared(nullptr, src);
}

INSTANTIATE_TEST_SUITE_P(kinds, gpu_ibgda_kernel,
                         ::testing::Values(DOORBELL_GPU_KERNEL_THREAD, DOORBELL_GPU_KERNEL_WARP,
                                           DOORBELL_GPU_KERNEL_BATCH));
