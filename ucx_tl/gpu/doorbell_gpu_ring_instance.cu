/*
 * The ring protocol compiled by nvcc for the device (sm_80, sm_90) and for
 * the host half of a CUDA translation unit: the very header the host tests
 * run under ThreadSanitizer. Kernels that instantiate every entry point,
 * including the warp group, so a change that does not compile for the GPU
 * fails the build.
 */
#include "doorbell_gpu_device.cuh"
#include "doorbell_gpu_mlx5.h"

__global__ void doorbell_gpu_ring_instance_kernel(doorbell_gpu_ring_t r, doorbell_wqe_t *out,
                                                  int *status)
{
    doorbell_gpu_ticket_t t    = 0;
    doorbell_wqe_t        w[2] = {doorbell_gpu_make_put(out, 8, 0, 1),
                                  doorbell_gpu_make_put_signal(out, 8, 0, 1, 8, 1, DOORBELL_SIGNAL_ADD,
                                                               1)};
    int                   st   = doorbell_gpu_put_batch(r, w, 2, &t);
    st |= doorbell_gpu_warp_put_batch(r, w, threadIdx.x & 1, &t);
    st |= doorbell_gpu_wait_warp(r, t);
    st |= doorbell_gpu_wait_block(r, t);
    if (threadIdx.x == 0) {
        doorbell_gpu_ring_consume(r, 0, 1, out);
        doorbell_gpu_ring_complete(r, 1);
        doorbell_gpu_ring_fail(r, DOORBELL_ERR_CANCELED);
    }
    *status = st;
}

/* The mlx5 translation and doorbell ring as a GPU thread would run them on
 * the IBGDA path. */
__global__ void doorbell_gpu_mlx5_instance_kernel(doorbell_mlx5_sq_t sq, doorbell_wqe_t w,
                                                  uint16_t *pi, uint32_t *used)
{
    *used = doorbell_mlx5_post(sq, pi, &w, 1, 2);
}

/* Host half: the same functions from host code of a CUDA translation unit. */
extern "C" int doorbell_gpu_ring_instance_host(doorbell_gpu_ring_t r)
{
    doorbell_wqe_t w   = doorbell_gpu_make_put(nullptr, 0, 0, 0);
    uint64_t       end = 0;
    int            st  = doorbell_gpu_ring_post(r, &w, 1, &end);
    return st | (int)doorbell_gpu_ring_status(r);
}
