/*
 * The put kernels the gpu tests, the benchmark and the sample launch, with
 * their host launchers.
 */
#include "doorbell_gpu_cuda.h"
#include "doorbell_gpu_device.cuh"

#include "core/error.h"

#include <cuda_runtime.h>

#include <chrono>

namespace {

constexpr uint32_t kMaxBatch = 16; ///< WQEs a thread builds on its stack

__global__ void put_kernel(doorbell_gpu_ring_t r, doorbell_gpu_kernel_args_t a, int *status,
                           unsigned long long *puts)
{
    uint64_t              tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const char           *src = (const char *)a.local + tid * a.bytes;
    uint64_t              dst = a.remote_addr + tid * a.bytes;
    uint64_t              sig = a.signal_addr + tid * a.signal_stride;
    doorbell_gpu_ticket_t t   = 0;
    doorbell_status_t     st  = DOORBELL_OK;
    uint64_t              n   = 0;

    for (uint32_t i = 0; (i < a.iters) && (st == DOORBELL_OK); ++i) {
        uint64_t value = (a.signal_op == DOORBELL_SIGNAL_SET) ? i + 1 : 1;
        if ((a.signal_addr == 0) && (a.kind != DOORBELL_GPU_KERNEL_BATCH)) {
            /* plain puts */
            st = (a.kind == DOORBELL_GPU_KERNEL_WARP) ?
                     doorbell_gpu_warp_put(r, src, a.bytes, dst, a.rkey, &t) :
                     doorbell_gpu_put(r, src, a.bytes, dst, a.rkey, &t);
            n += 1;
        } else if (a.kind == DOORBELL_GPU_KERNEL_THREAD) {
            st = doorbell_gpu_put_signal(r, src, a.bytes, dst, a.rkey, sig, a.signal_rkey,
                                         a.signal_op, value, &t);
            n += 1;
        } else if (a.kind == DOORBELL_GPU_KERNEL_WARP) {
            st = doorbell_gpu_warp_put_signal(r, src, a.bytes, dst, a.rkey, sig, a.signal_rkey,
                                              a.signal_op, value, &t);
            n += 1;
        } else {
            doorbell_wqe_t w[kMaxBatch];
            uint32_t       b = (a.batch < kMaxBatch) ? a.batch : kMaxBatch;
            for (uint32_t k = 0; k + 1 < b; ++k) {
                w[k] = doorbell_gpu_make_put(src, a.bytes, dst, a.rkey);
            }
            w[b - 1] = doorbell_gpu_make_put_signal(src, a.bytes, dst, a.rkey, sig, a.signal_rkey,
                                                    a.signal_op, value);
            st       = doorbell_gpu_put_batch(r, w, b, &t);
            n += b;
        }
    }
    doorbell_status_t wst = doorbell_gpu_wait_block(r, t);
    if (st == DOORBELL_OK) {
        st = wst;
    }
    if (st != DOORBELL_OK) {
        atomicCAS(status, 0, (int)st);
    }
    atomicAdd(puts, (unsigned long long)n);
}

__global__ void latency_kernel(doorbell_gpu_ring_t r, doorbell_gpu_kernel_args_t a,
                               unsigned long long *lat, int *status)
{
    doorbell_gpu_ticket_t t = 0;
    for (uint32_t i = 0; i < a.iters; ++i) {
        uint64_t          t0 = doorbell_gpu_port::now_ns();
        doorbell_status_t st = (a.signal_addr == 0) ?
                                   doorbell_gpu_put(r, a.local, a.bytes, a.remote_addr, a.rkey,
                                                    &t) :
                                   doorbell_gpu_put_signal(r, a.local, a.bytes, a.remote_addr,
                                                           a.rkey, a.signal_addr, a.signal_rkey,
                                                           DOORBELL_SIGNAL_SET, i + 1, &t);
        if (st == DOORBELL_OK) {
            st = doorbell_gpu_wait(r, t);
        }
        if (st != DOORBELL_OK) {
            *status = st;
            return;
        }
        lat[i] = doorbell_gpu_port::now_ns() - t0;
    }
}

doorbell_status_t cuda_check(const char *what, cudaError_t err)
{
    if (err == cudaSuccess) {
        return DOORBELL_OK;
    }
    return doorbell::set_error(DOORBELL_ERR_IO, "cuda: %s failed: %s", what,
                               cudaGetErrorString(err));
}

} /* namespace */

extern "C" doorbell_status_t doorbell_gpu_cuda_run_puts(const doorbell_gpu_ring_t        *ring,
                                                        const doorbell_gpu_kernel_args_t *args,
                                                        doorbell_gpu_kernel_result_t     *result)
{
    int                *status = nullptr;
    unsigned long long *puts   = nullptr;
    doorbell_status_t   st;

    if ((args->blocks == 0) || (args->threads == 0) || (args->threads > 1024) ||
        ((args->kind == DOORBELL_GPU_KERNEL_BATCH) &&
         ((args->batch == 0) || (args->batch > kMaxBatch)))) {
        return doorbell::set_error(DOORBELL_ERR_INVALID_PARAM,
                                   "put kernel: bad shape (blocks %u threads %u batch %u)",
                                   args->blocks, args->threads, args->batch);
    }
    if ((st = cuda_check("cudaMalloc", cudaMalloc(&status, sizeof(int)))) != DOORBELL_OK) {
        return st;
    }
    if ((st = cuda_check("cudaMalloc", cudaMalloc(&puts, sizeof(*puts)))) != DOORBELL_OK) {
        cudaFree(status);
        return st;
    }
    cudaMemset(status, 0, sizeof(int));
    cudaMemset(puts, 0, sizeof(*puts));
    cudaDeviceSynchronize();

    auto t0 = std::chrono::steady_clock::now();
    put_kernel<<<args->blocks, args->threads>>>(*ring, *args, status, puts);
    st = cuda_check("put kernel", cudaGetLastError());
    if (st == DOORBELL_OK) {
        st = cuda_check("cudaDeviceSynchronize", cudaDeviceSynchronize());
    }
    auto t1 = std::chrono::steady_clock::now();
    if (st == DOORBELL_OK) {
        int                kst = 0;
        unsigned long long n   = 0;
        cudaMemcpy(&kst, status, sizeof(kst), cudaMemcpyDeviceToHost);
        cudaMemcpy(&n, puts, sizeof(n), cudaMemcpyDeviceToHost);
        result->status      = (doorbell_status_t)kst;
        result->puts        = n;
        result->elapsed_ns  = std::chrono::duration<double, std::nano>(t1 - t0).count();
        result->wait_ns_max = 0;
    }
    cudaFree(status);
    cudaFree(puts);
    return st;
}

extern "C" doorbell_status_t doorbell_gpu_cuda_run_latency(const doorbell_gpu_ring_t        *ring,
                                                           const doorbell_gpu_kernel_args_t *args,
                                                           double                           *lat_ns)
{
    unsigned long long *lat    = nullptr;
    int                *status = nullptr;
    doorbell_status_t   st;

    if ((st = cuda_check("cudaMalloc", cudaMalloc(&lat, sizeof(*lat) * args->iters))) !=
        DOORBELL_OK) {
        return st;
    }
    if ((st = cuda_check("cudaMalloc", cudaMalloc(&status, sizeof(int)))) != DOORBELL_OK) {
        cudaFree(lat);
        return st;
    }
    cudaMemset(status, 0, sizeof(int));
    latency_kernel<<<1, 1>>>(*ring, *args, lat, status);
    st = cuda_check("latency kernel", cudaGetLastError());
    if (st == DOORBELL_OK) {
        st = cuda_check("cudaDeviceSynchronize", cudaDeviceSynchronize());
    }
    if (st == DOORBELL_OK) {
        int kst = 0;
        cudaMemcpy(&kst, status, sizeof(kst), cudaMemcpyDeviceToHost);
        st = (doorbell_status_t)kst;
    }
    if (st == DOORBELL_OK) {
        for (uint32_t i = 0; i < args->iters; ++i) {
            unsigned long long v = 0;
            cudaMemcpy(&v, lat + i, sizeof(v), cudaMemcpyDeviceToHost);
            lat_ns[i] = (double)v;
        }
    }
    cudaFree(lat);
    cudaFree(status);
    return st;
}
