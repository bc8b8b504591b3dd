/*
 * Real kernels on the ring: GPU threads post into host-mapped memory, the
 * engine thread consumes it and hands each batch to a loopback queue pair
 * that performs the puts and signals on host memory. Skipped where no GPU
 * is present.
 */
#include "doorbell_gpu_cuda.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace {

/* Performs PUT / PUT_SIGNAL on this process's memory (addresses are host
 * pointers), completes signaled WQEs from progress with a chosen status. */
struct LoopbackQp {
    std::vector<std::pair<void *, doorbell_status_t>> pending;
    doorbell_status_t                                 completion_status = DOORBELL_OK;

    static doorbell_status_t post(void *arg, const doorbell_wqe_t *wqes, unsigned n)
    {
        auto *qp = static_cast<LoopbackQp *>(arg);
        for (unsigned k = 0; k < n; ++k) {
            const doorbell_wqe_t &w = wqes[k];
            if ((w.opcode == DOORBELL_OP_PUT) || (w.opcode == DOORBELL_OP_PUT_SIGNAL)) {
                std::memcpy(reinterpret_cast<void *>(w.remote_addr),
                            reinterpret_cast<const void *>(w.local_addr), w.length);
            }
            if (w.opcode == DOORBELL_OP_PUT_SIGNAL) {
                auto *sig = reinterpret_cast<uint64_t *>(w.signal_addr);
                *sig = (w.am_id == DOORBELL_SIGNAL_ADD) ? *sig + w.signal_value : w.signal_value;
            }
            if (w.flags & DOORBELL_WQE_SIGNALED) {
                qp->pending.emplace_back((void *)(uintptr_t)w.wr_id, qp->completion_status);
            }
        }
        return DOORBELL_OK;
    }
    static unsigned progress(void *arg)
    {
        auto *qp   = static_cast<LoopbackQp *>(arg);
        auto  done = std::move(qp->pending);
        qp->pending.clear();
        for (auto &c : done) {
            doorbell_gpu_engine_complete(c.first, c.second);
        }
        return (unsigned)done.size();
    }
};

class gpu_kernel : public ::testing::TestWithParam<doorbell_gpu_kernel_kind_t> {
protected:
    void SetUp() override
    {
        char reason[256];
        if (doorbell_gpu_cuda_device_count(reason, sizeof(reason)) == 0) {
            GTEST_SKIP() << "no GPU: " << reason;
        }
        doorbell_gpu_engine_params_t ep;
        doorbell_gpu_engine_params_init(&ep);
        ep.progress     = LoopbackQp::progress;
        ep.progress_arg = &qp_;
        ep.name         = "loopback";
        ASSERT_EQ(DOORBELL_OK, doorbell_gpu_engine_create(&ep, &engine_));
        doorbell_gpu_queue_params_t qp;
        doorbell_gpu_queue_params_init(&qp);
        qp.post       = LoopbackQp::post;
        qp.post_arg   = &qp_;
        qp.size       = 256;
        qp.mode       = DOORBELL_GPU_MODE_DOORBELL;
        qp.timeout_ns = 5ull * 1000 * 1000 * 1000;
        qp.memory     = doorbell_gpu_cuda_memory();
        ASSERT_EQ(DOORBELL_OK, doorbell_gpu_queue_create(engine_, &qp, &queue_));
        ASSERT_EQ(DOORBELL_OK, doorbell_gpu_engine_start(engine_));
    }
    void TearDown() override
    {
        if (engine_ != nullptr) {
            doorbell_gpu_engine_destroy(engine_);
        }
    }

    LoopbackQp             qp_;
    doorbell_gpu_engine_t *engine_ = nullptr;
    doorbell_gpu_queue_t  *queue_  = nullptr;
};

} /* namespace */

TEST_P(gpu_kernel, puts_and_signals_arrive_through_the_ring)
{
    constexpr uint32_t kBlocks = 4, kThreads = 64, kBytes = 32, kIters = 8, kBatch = 4;
    const uint32_t     nthreads = kBlocks * kThreads;
    /* source and target are host-mapped: the loopback QP reads and writes them */
    std::vector<uint8_t> src(size_t(nthreads) * kBytes), dst(src.size(), 0);
    for (size_t i = 0; i < src.size(); ++i) {
        src[i] = uint8_t(i * 7 + 1);
    }
    doorbell_gpu_ring_t ring       = doorbell_gpu_queue_device_ring(queue_);
    void               *mapped_src = nullptr;
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_cuda_memory()->alloc_shared(nullptr, src.size(),
                                                                    &mapped_src, &mapped_src));
    std::memcpy(mapped_src, src.data(), src.size());
    uint64_t signal = 0;

    doorbell_gpu_kernel_args_t a     = {};
    a.kind                           = GetParam();
    a.blocks                         = kBlocks;
    a.threads                        = kThreads;
    a.iters                          = kIters;
    a.batch                          = kBatch;
    a.bytes                          = kBytes;
    a.local                          = mapped_src;
    a.remote_addr                    = (uint64_t)(uintptr_t)dst.data();
    a.signal_addr                    = (uint64_t)(uintptr_t)&signal;
    a.signal_op                      = DOORBELL_SIGNAL_ADD;
    doorbell_gpu_kernel_result_t res = {};
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_cuda_run_puts(&ring, &a, &res));
    EXPECT_EQ(DOORBELL_OK, res.status);
    uint64_t per_round = (a.kind == DOORBELL_GPU_KERNEL_BATCH) ? kBatch : 1;
    EXPECT_EQ(uint64_t(nthreads) * kIters * per_round, res.puts);
    doorbell_gpu_engine_stop(engine_); /* the loopback QP's writes happen-before */
    EXPECT_EQ(0, std::memcmp(src.data(), dst.data(), src.size()));
    EXPECT_EQ(uint64_t(nthreads) * kIters, signal);
    doorbell_gpu_queue_counters_t c;
    doorbell_gpu_queue_get_counters(queue_, &c);
    EXPECT_EQ(res.puts, c.wqes);
    EXPECT_EQ(res.puts, c.completed);
    if (a.kind != DOORBELL_GPU_KERNEL_THREAD) {
        EXPECT_LT(c.posts, c.wqes) << "warps and batches share doorbells";
    }
    doorbell_gpu_cuda_memory()->free_shared(nullptr, mapped_src);
}

INSTANTIATE_TEST_SUITE_P(kinds, gpu_kernel,
                         ::testing::Values(DOORBELL_GPU_KERNEL_THREAD, DOORBELL_GPU_KERNEL_WARP,
                                           DOORBELL_GPU_KERNEL_BATCH));

TEST_F(gpu_kernel, error_completion_ends_the_kernel_with_the_error)
{
    qp_.completion_status      = DOORBELL_ERR_REMOTE_ACCESS;
    doorbell_gpu_ring_t ring   = doorbell_gpu_queue_device_ring(queue_);
    void               *mapped = nullptr;
    ASSERT_EQ(DOORBELL_OK,
              doorbell_gpu_cuda_memory()->alloc_shared(nullptr, 4096, &mapped, &mapped));
    doorbell_gpu_kernel_args_t a     = {};
    a.kind                           = DOORBELL_GPU_KERNEL_WARP;
    a.blocks                         = 2;
    a.threads                        = 64;
    a.iters                          = 4;
    a.bytes                          = 8;
    a.local                          = mapped;
    a.remote_addr                    = (uint64_t)(uintptr_t)mapped + 2048;
    a.signal_addr                    = (uint64_t)(uintptr_t)mapped + 4088;
    a.signal_op                      = DOORBELL_SIGNAL_ADD;
    doorbell_gpu_kernel_result_t res = {};
    ASSERT_EQ(DOORBELL_OK, doorbell_gpu_cuda_run_puts(&ring, &a, &res));
    EXPECT_EQ(DOORBELL_ERR_REMOTE_ACCESS, res.status) << "the kernel returned instead of hanging";
    doorbell_gpu_engine_stop(engine_);
    doorbell_gpu_cuda_memory()->free_shared(nullptr, mapped);
}
