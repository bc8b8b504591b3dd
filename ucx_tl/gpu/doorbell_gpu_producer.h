/*
 * What a producer calls, whatever the queue's mode: posts and waits go to
 * the doorbell ring (DOORBELL and PROXY modes: an engine consumes the ring)
 * or straight to the NIC's send queue (MLX5 mode, IBGDA: the producer
 * writes mlx5 WQEs and rings the doorbell itself). One source for host and
 * device, as the ring header. Tickets are opaque positions of the queue.
 */
#ifndef DOORBELL_GPU_PRODUCER_H
#define DOORBELL_GPU_PRODUCER_H

#include "doorbell_gpu_mlx5.h"
#include "doorbell_gpu_ring.h"

/* n WQEs, one doorbell; *end_p is the ticket. */
DOORBELL_HD doorbell_status_t doorbell_gpu_producer_post(const doorbell_gpu_ring_t &r,
                                                         const doorbell_wqe_t *wqes, uint32_t n,
                                                         uint64_t *end_p)
{
    if (r.flags & DOORBELL_GPU_RING_MLX5) {
        doorbell_status_t st = doorbell_gpu_ring_status(r); /* queue destroyed */
        if (st != DOORBELL_OK) {
            return st;
        }
        return doorbell_mlx5_qp_post(*r.mlx5, wqes, n, r.error, end_p);
    }
    return doorbell_gpu_ring_post(r, wqes, n, end_p);
}

/* A group's post (see doorbell_gpu_ring_group_post). */
template <class Group>
DOORBELL_HD doorbell_status_t doorbell_gpu_producer_group_post(Group                     &g,
                                                               const doorbell_gpu_ring_t &r,
                                                               const doorbell_wqe_t      *wqes,
                                                               uint32_t n, uint64_t *end_p,
                                                               uint64_t *group_end_p)
{
    if (r.flags & DOORBELL_GPU_RING_MLX5) {
        return doorbell_mlx5_qp_group_post(g, *r.mlx5, wqes, n, r.error, end_p, group_end_p);
    }
    return doorbell_gpu_ring_group_post(g, r, wqes, n, end_p, group_end_p);
}

/* Completion of everything up to ticket: OK, the queue's error, or
 * DOORBELL_ERR_TIMED_OUT. In MLX5 mode the waiter polls the CQ. */
DOORBELL_HD doorbell_status_t doorbell_gpu_producer_wait(const doorbell_gpu_ring_t &r,
                                                         uint64_t                   ticket)
{
    if (r.flags & DOORBELL_GPU_RING_MLX5) {
        return doorbell_mlx5_qp_wait(*r.mlx5, ticket, r.error);
    }
    return doorbell_gpu_ring_wait_completed(r, ticket);
}

#endif /* DOORBELL_GPU_PRODUCER_H */
