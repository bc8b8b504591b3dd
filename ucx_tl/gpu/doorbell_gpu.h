/*
 * doorbell GPU queues, host side: create the send ring a kernel (or a CPU
 * thread) fills, and the engine thread that consumes it and posts each batch
 * to a queue pair of the core with doorbell_qp_post (one ring doorbell = one
 * post = one device doorbell).
 *
 * Modes of a queue:
 *   DOORBELL  producers ring the doorbell word; the engine reads up to it and
 *             posts what the producer batched. On the UDP device the ring is
 *             in host-mapped memory and the engine is the NIC consuming it.
 *   PROXY     CPU-proxy fallback: producers only publish WQEs; the host
 *             thread finds them by sequence number and coalesces up to
 *             batch_max per post. Chosen when the GPU cannot reach the
 *             device's doorbell (said once on stderr).
 *   MLX5      IBGDA on a verbs QP: producers write mlx5 WQEs into the NIC's
 *             own send queue, ring its doorbell record and UAR, and poll
 *             its CQ (doorbell_gpu_producer.h); no host thread is involved.
 *
 * Errors: as in the core's C API (doorbell_core.h), a call returns a
 * doorbell_status_t and leaves a message naming the device and the cause in
 * doorbell_last_error() on the calling thread; a queue that fails on the
 * engine thread reports why through doorbell_gpu_queue_status().
 *
 * Threading: the engine owns its iface while it exists (it alone calls
 * progress and posts); queue create/destroy may be called from any thread.
 * Completions of the posted WQEs must be delivered to
 * doorbell_gpu_engine_complete() from the engine's progress (the core
 * binding in doorbell_gpu_core.h does this).
 */
#ifndef DOORBELL_GPU_H
#define DOORBELL_GPU_H

#include "doorbell_core.h"
#include "doorbell_gpu_ring.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct doorbell_gpu_engine doorbell_gpu_engine_t;
typedef struct doorbell_gpu_queue  doorbell_gpu_queue_t;

typedef enum doorbell_gpu_mode {
    DOORBELL_GPU_MODE_AUTO     = 0, /* DOORBELL where reachable, else PROXY */
    DOORBELL_GPU_MODE_DOORBELL = 1,
    DOORBELL_GPU_MODE_PROXY    = 2,
    DOORBELL_GPU_MODE_MLX5     = 3 /* IBGDA: the producers drive the NIC */
} doorbell_gpu_mode_t;

const char *doorbell_gpu_mode_string(doorbell_gpu_mode_t mode);

/* Where the ring lives. The default (NULL ops) is plain host memory, for CPU
 * producers; doorbell_gpu_cuda_memory() gives host-mapped slots and a
 * device-memory reservation counter for kernels. */
typedef struct doorbell_gpu_memory_ops {
    /* Zeroed memory both sides reach; *device_p is its producer-side address. */
    doorbell_status_t (*alloc_shared)(void *arg, size_t bytes, void **host_p, void **device_p);
    void (*free_shared)(void *arg, void *host);
    /* Zeroed memory only producers touch (the reservation counter and the
     * highest rung: device memory on a GPU, where its atomics are valid). */
    doorbell_status_t (*alloc_producer)(void *arg, size_t bytes, void **ptr_p);
    void (*free_producer)(void *arg, void *ptr);
    void *arg;
    /* Makes host memory of the NIC reachable by producers (IBGDA: the send
     * queue, CQ and doorbell records; io != 0: the UAR, a device register
     * page); *device_p is its producer-side address. NULL: producers share
     * the host's address space (CPU threads). The message names the cause. */
    doorbell_status_t (*map_host)(void *arg, void *host, size_t bytes, int io, void **device_p,
                                  char *why, size_t why_length);
    void (*unmap_host)(void *arg, void *host);
} doorbell_gpu_memory_ops_t;

/* What the engine drives: the device's progress, and a post per queue. A
 * post that fails leaves its message in doorbell_last_error(), as
 * doorbell_qp_post does; the queue's failure carries it. */
typedef unsigned (*doorbell_gpu_progress_func_t)(void *arg);
typedef doorbell_status_t (*doorbell_gpu_post_func_t)(void *arg, const doorbell_wqe_t *wqes,
                                                      unsigned count);

typedef struct doorbell_gpu_engine_params {
    doorbell_gpu_progress_func_t progress; /* may be NULL */
    void                        *progress_arg;
    uint32_t                     batch_max;    /* WQEs per post (default 64) */
    uint32_t                     max_inflight; /* posted, uncompleted batches
                                                  over all queues (default 4096) */
    uint32_t                     idle_spins;   /* empty passes before the thread
                                                  yields (default 1024) */
    const char                  *name;         /* device name for messages */
} doorbell_gpu_engine_params_t;

void doorbell_gpu_engine_params_init(doorbell_gpu_engine_params_t *params);

doorbell_status_t doorbell_gpu_engine_create(const doorbell_gpu_engine_params_t *params,
                                             doorbell_gpu_engine_t             **engine_p);
/* Stops the thread; queues still attached fail with DOORBELL_ERR_CANCELED. */
void doorbell_gpu_engine_destroy(doorbell_gpu_engine_t *engine);

/* Runs the engine on its own thread until stop (or destroy). */
doorbell_status_t doorbell_gpu_engine_start(doorbell_gpu_engine_t *engine);
void              doorbell_gpu_engine_stop(doorbell_gpu_engine_t *engine);

/* One pass without a thread (consume every queue, then progress): returns
 * the WQEs posted plus the progress count. Not while the thread runs. */
unsigned doorbell_gpu_engine_progress(doorbell_gpu_engine_t *engine);

/* Runs fn(arg) while the engine is between passes (no progress or post
 * runs meanwhile): for calls on the engine's iface from other threads, such
 * as creating or destroying a QP. */
void doorbell_gpu_engine_run_locked(doorbell_gpu_engine_t *engine, void (*fn)(void *arg),
                                    void                  *arg);

/* Delivery of a completion for a WQE the engine posted (cookie = its wr_id;
 * cookies of queues destroyed meanwhile are dropped). Called from the
 * engine's progress. Its signature is doorbell_completion_cb_t. */
void doorbell_gpu_engine_complete(void *cookie, doorbell_status_t status);

enum doorbell_gpu_queue_flags {
    /* The device lacks DOORBELL_OP_PUT_SIGNAL: the engine posts a SET signal
     * as a data put followed by an 8-byte inline put of the value (in order
     * on an RC QP); an ADD signal fails the queue with UNSUPPORTED. */
    DOORBELL_GPU_QUEUE_LOWER_SIGNAL = 1u << 0
};

typedef struct doorbell_gpu_queue_params {
    doorbell_gpu_post_func_t         post;       /* e.g. doorbell_qp_post */
    void                            *post_arg;   /* e.g. the doorbell_qp_t */
    uint32_t                         size;       /* ring slots, power of two
                                                    (default 1024) */
    doorbell_gpu_mode_t              mode;       /* AUTO resolves to DOORBELL */
    uint64_t                         timeout_ns; /* producer waits (default 10 s) */
    const doorbell_gpu_memory_ops_t *memory;     /* NULL: host memory */
    uint32_t                         flags;      /* doorbell_gpu_queue_flags */
    /* MLX5 mode: the QP the producers drive, as each side sees it (made by
     * doorbell_gpu_core.h from an exported verbs QP); post may be NULL. */
    const struct doorbell_mlx5_qp *mlx5_host;
    const struct doorbell_mlx5_qp *mlx5_device;
    uint32_t                       mlx5_lkey; /* local key of the producers'
                                                    source buffers (MLX5 mode:
                                                    doorbell_mr_local_key) */
} doorbell_gpu_queue_params_t;

void doorbell_gpu_queue_params_init(doorbell_gpu_queue_params_t *params);

doorbell_status_t doorbell_gpu_queue_create(doorbell_gpu_engine_t             *engine,
                                            const doorbell_gpu_queue_params_t *params,
                                            doorbell_gpu_queue_t             **queue_p);
/* Fails the ring with DOORBELL_ERR_CANCELED (waiters return) and frees it. */
void doorbell_gpu_queue_destroy(doorbell_gpu_queue_t *queue);

/* The ring as producers see it: pass by value to a kernel (device view), or
 * use from CPU threads (host view, for host-memory queues). */
doorbell_gpu_ring_t doorbell_gpu_queue_device_ring(const doorbell_gpu_queue_t *queue);
doorbell_gpu_ring_t doorbell_gpu_queue_host_ring(const doorbell_gpu_queue_t *queue);
doorbell_gpu_mode_t doorbell_gpu_queue_mode(const doorbell_gpu_queue_t *queue);

/* Marks the queue failed (e.g. its QP reported an asynchronous error). */
void doorbell_gpu_queue_fail(doorbell_gpu_queue_t *queue, doorbell_status_t status,
                             const char *message);

/* Whether the queue works: DOORBELL_OK, or the status of its first failure
 * (the one its producers' waits return), with the message naming the
 * device, the queue and the cause made this thread's doorbell_last_error().
 * A failure found on the engine thread is reported here, not printed. */
doorbell_status_t doorbell_gpu_queue_status(const doorbell_gpu_queue_t *queue);

typedef struct doorbell_gpu_queue_counters {
    uint64_t wqes;        /* WQEs taken from the ring and posted */
    uint64_t posts;       /* doorbell_qp_post calls that were accepted */
    uint64_t retries;     /* posts answered DOORBELL_ERR_NO_RESOURCE */
    uint64_t nops;        /* completion NOPs appended after an inline WQE */
    uint64_t completions; /* batch completions */
    uint64_t completed;   /* ring completion index */
    uint64_t lowered;     /* PUT_SIGNALs posted as two puts */
} doorbell_gpu_queue_counters_t;
void doorbell_gpu_queue_get_counters(const doorbell_gpu_queue_t    *queue,
                                     doorbell_gpu_queue_counters_t *counters);

#ifdef __cplusplus
}
#endif

#endif /* DOORBELL_GPU_H */
