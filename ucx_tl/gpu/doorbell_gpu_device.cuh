/*
 * doorbell device API: RDMA puts issued by GPU threads into a doorbell GPU
 * queue (a doorbell_gpu_ring_t from doorbell_gpu_queue_device_ring(), passed
 * by value to the kernel).
 *
 *   doorbell_gpu_put / _put_signal           one thread, one WQE, one doorbell
 *   doorbell_gpu_put_batch                   one thread, n WQEs, one doorbell
 *   doorbell_gpu_warp_put / _put_signal      every calling lane one WQE: one
 *                                            reservation atomic and one
 *                                            doorbell for the warp
 *   doorbell_gpu_warp_put_batch              every lane n WQEs, one doorbell
 *   doorbell_gpu_wait / _wait_warp / _wait_block
 *                                            completion of the thread's /
 *                                            warp's / block's puts
 *
 * Every call returns a doorbell_status_t: DOORBELL_OK, the queue's error
 * (an error completion, a failed post, the queue destroyed) or
 * DOORBELL_ERR_TIMED_OUT after the queue's timeout -- never an endless wait.
 * A ticket is the queue position after the caller's last WQE.
 *
 * Modes: on a DOORBELL or PROXY queue the calls fill the send ring an engine
 * consumes; on an MLX5 queue (IBGDA, a verbs QP exported by the host) the
 * same calls write mlx5 WQEs into the NIC's send queue, ring its doorbell
 * record and UAR, and the waits poll its CQ (doorbell_gpu_mlx5.h).
 *
 * Warp calls: every lane in __activemask() must make the call together
 * (converged), as with __shfl_sync. Block waits: every thread of the block.
 *
 * Source buffers: on an MLX5 queue the NIC reads them under the queue's
 * local key (GPU memory needs GPUDirect RDMA). On the UDP device the host
 * engine reads local_addr, so sources must be host-mapped (cudaHostAlloc mapped; same address on both
 * sides under UVA). Remote addresses and keys are the target's registered
 * memory (doorbell_mr_register on the peer).
 */
#ifndef DOORBELL_GPU_DEVICE_CUH
#define DOORBELL_GPU_DEVICE_CUH

#include "doorbell_gpu_producer.h"

typedef uint64_t doorbell_gpu_ticket_t;

/* The active lanes of a warp as a group for doorbell_gpu_ring_group_post. */
struct doorbell_gpu_warp_group {
    unsigned mask;
    unsigned lane;
    unsigned leader;

    __device__ doorbell_gpu_warp_group() : mask(__activemask())
    {
        asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
        leader = __ffs(mask) - 1;
    }
    __device__ bool     is_leader() const { return lane == leader; }
    __device__ uint32_t exclusive_sum(uint32_t v, uint32_t *total_p) const
    {
        uint32_t before = 0, total = 0;
        for (unsigned m = mask; m != 0; m &= m - 1) {
            unsigned src = __ffs(m) - 1;
            uint32_t x   = __shfl_sync(mask, v, src);
            before += (src < lane) ? x : 0;
            total += x;
        }
        *total_p = total;
        return before;
    }
    __device__ uint64_t broadcast(uint64_t v) const
    {
        return __shfl_sync(mask, (unsigned long long)v, leader);
    }
    __device__ void     sync() const { __syncwarp(mask); }
    __device__ uint64_t max(uint64_t v) const
    {
        uint64_t m = v;
        for (unsigned s = mask; s != 0; s &= s - 1) {
            uint64_t x = __shfl_sync(mask, (unsigned long long)v, __ffs(s) - 1);
            m          = (x > m) ? x : m;
        }
        return m;
    }
};

__device__ __forceinline__ doorbell_status_t doorbell_gpu_put_batch(const doorbell_gpu_ring_t &r,
                                                                    const doorbell_wqe_t      *wqes,
                                                                    uint32_t                   n,
                                                                    doorbell_gpu_ticket_t *ticket_p)
{
    return doorbell_gpu_producer_post(r, wqes, n, ticket_p);
}

/* A WQE carries a 32-bit length. */
#define DOORBELL_GPU_MAX_PUT 0xffffffffull

__device__ __forceinline__ doorbell_status_t doorbell_gpu_put(const doorbell_gpu_ring_t &r,
                                                              const void *local, size_t length,
                                                              uint64_t remote_addr, uint32_t rkey,
                                                              doorbell_gpu_ticket_t *ticket_p)
{
    if (length > DOORBELL_GPU_MAX_PUT) {
        return DOORBELL_ERR_INVALID_PARAM;
    }
    doorbell_wqe_t w = doorbell_gpu_make_put(local, length, remote_addr, rkey);
    return doorbell_gpu_producer_post(r, &w, 1, ticket_p);
}

/* signal_op: DOORBELL_SIGNAL_SET or DOORBELL_SIGNAL_ADD on a remote 64-bit
 * word, applied after the data is in place at the target. */
__device__ __forceinline__ doorbell_status_t doorbell_gpu_put_signal(
    const doorbell_gpu_ring_t &r, const void *local, size_t length, uint64_t remote_addr,
    uint32_t rkey, uint64_t signal_addr, uint32_t signal_rkey, uint32_t signal_op,
    uint64_t signal_value, doorbell_gpu_ticket_t *ticket_p)
{
    if (length > DOORBELL_GPU_MAX_PUT) {
        return DOORBELL_ERR_INVALID_PARAM;
    }
    doorbell_wqe_t w = doorbell_gpu_make_put_signal(local, length, remote_addr, rkey, signal_addr,
                                                    signal_rkey, signal_op, signal_value);
    return doorbell_gpu_producer_post(r, &w, 1, ticket_p);
}

__device__ __forceinline__ doorbell_status_t
doorbell_gpu_warp_put_batch(const doorbell_gpu_ring_t &r, const doorbell_wqe_t *wqes, uint32_t n,
                            doorbell_gpu_ticket_t *ticket_p)
{
    doorbell_gpu_warp_group g;
    uint64_t                group_end;
    return doorbell_gpu_producer_group_post(g, r, wqes, n, ticket_p, &group_end);
}

/* A lane with a bad length still takes part in the warp's collective (with
 * no WQE) and gets DOORBELL_ERR_INVALID_PARAM. */
__device__ __forceinline__ doorbell_status_t doorbell_gpu_warp_put(const doorbell_gpu_ring_t &r,
                                                                   const void *local, size_t length,
                                                                   uint64_t remote_addr,
                                                                   uint32_t rkey,
                                                                   doorbell_gpu_ticket_t *ticket_p)
{
    uint32_t          n  = (length <= DOORBELL_GPU_MAX_PUT) ? 1 : 0;
    doorbell_wqe_t    w  = doorbell_gpu_make_put(local, length, remote_addr, rkey);
    doorbell_status_t st = doorbell_gpu_warp_put_batch(r, &w, n, ticket_p);
    return (n == 0) ? DOORBELL_ERR_INVALID_PARAM : st;
}

__device__ __forceinline__ doorbell_status_t doorbell_gpu_warp_put_signal(
    const doorbell_gpu_ring_t &r, const void *local, size_t length, uint64_t remote_addr,
    uint32_t rkey, uint64_t signal_addr, uint32_t signal_rkey, uint32_t signal_op,
    uint64_t signal_value, doorbell_gpu_ticket_t *ticket_p)
{
    uint32_t       n = (length <= DOORBELL_GPU_MAX_PUT) ? 1 : 0;
    doorbell_wqe_t w = doorbell_gpu_make_put_signal(local, length, remote_addr, rkey, signal_addr,
                                                    signal_rkey, signal_op, signal_value);
    doorbell_status_t st = doorbell_gpu_warp_put_batch(r, &w, n, ticket_p);
    return (n == 0) ? DOORBELL_ERR_INVALID_PARAM : st;
}

/* Completion of the calling thread's puts up to ticket. */
__device__ __forceinline__ doorbell_status_t doorbell_gpu_wait(const doorbell_gpu_ring_t &r,
                                                               doorbell_gpu_ticket_t      ticket)
{
    return doorbell_gpu_producer_wait(r, ticket);
}

/* Completion of every calling lane's puts: the leader waits for the largest
 * ticket, the lanes share its answer. */
__device__ __forceinline__ doorbell_status_t doorbell_gpu_wait_warp(const doorbell_gpu_ring_t &r,
                                                                    doorbell_gpu_ticket_t ticket)
{
    doorbell_gpu_warp_group g;
    uint64_t                last = g.max(ticket);
    int32_t                 st   = DOORBELL_OK;
    if (g.is_leader()) {
        st = doorbell_gpu_producer_wait(r, last);
    }
    return (doorbell_status_t)(int32_t)g.broadcast((uint64_t)(int64_t)st);
}

/* Completion of every thread's puts in the block (all threads call it). */
__device__ __forceinline__ doorbell_status_t doorbell_gpu_wait_block(const doorbell_gpu_ring_t &r,
                                                                     doorbell_gpu_ticket_t ticket)
{
    __shared__ unsigned long long last;
    __shared__ int                status;
    bool first = (threadIdx.x == 0) && (threadIdx.y == 0) && (threadIdx.z == 0);

    if (first) {
        last = 0;
    }
    __syncthreads();
    atomicMax(&last, (unsigned long long)ticket);
    __syncthreads();
    if (first) {
        status = doorbell_gpu_producer_wait(r, last);
    }
    __syncthreads();
    return (doorbell_status_t)status;
}

#endif /* DOORBELL_GPU_DEVICE_CUH */
