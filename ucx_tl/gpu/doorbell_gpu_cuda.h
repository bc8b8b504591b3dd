/*
 * doorbell GPU queues on CUDA: ring memory a kernel writes and the host
 * engine reads (host-mapped slots and words, device-memory reservation
 * counter), GPU detection, and the kernels the tests, benchmark and sample
 * launch. Only in builds where CUDA was found (DOORBELL_HAVE_CUDA).
 */
#ifndef DOORBELL_GPU_CUDA_H
#define DOORBELL_GPU_CUDA_H

#include "doorbell_gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable GPUs; 0 with the reason (cudaGetDeviceCount's error, or
 * "no CUDA device") in reason. */
int doorbell_gpu_cuda_device_count(char *reason, size_t length);

/* Memory ops for doorbell_gpu_queue_params_t.memory: slots, sequence numbers
 * and shared words in cudaHostAlloc(mapped) memory, the reservation counter
 * in cudaMalloc memory (only GPU threads reserve: its atomics stay on the
 * GPU). */
const doorbell_gpu_memory_ops_t *doorbell_gpu_cuda_memory(void);

typedef enum doorbell_gpu_kernel_kind {
    DOORBELL_GPU_KERNEL_THREAD = 0, /* each thread: put_signal, one doorbell each */
    DOORBELL_GPU_KERNEL_WARP   = 1, /* warp-aggregated: one doorbell per warp */
    DOORBELL_GPU_KERNEL_BATCH  = 2  /* each thread: batch of `batch` puts, one doorbell */
} doorbell_gpu_kernel_kind_t;

/* Every thread t of the grid puts `bytes` from local + t * bytes to
 * remote_addr + t * bytes, `iters` rounds; each round's last WQE carries a
 * signal at signal_addr + t * signal_stride: ADD 1, or SET to the round
 * number (1, 2, ... iters); signal_addr 0: plain puts (THREAD, WARP). Then
 * the block waits for completion. */
typedef struct doorbell_gpu_kernel_args {
    doorbell_gpu_kernel_kind_t kind;
    uint32_t                   blocks;
    uint32_t                   threads; /* per block */
    uint32_t                   iters;
    uint32_t                   batch; /* BATCH: WQEs per doorbell */
    uint32_t                   bytes;
    const void                *local; /* host-mapped source */
    uint64_t                   remote_addr;
    uint32_t                   rkey;
    uint32_t                   signal_rkey;
    uint64_t                   signal_addr;
    uint32_t                   signal_op;     /* DOORBELL_SIGNAL_ADD / _SET */
    uint32_t                   signal_stride; /* bytes between threads' words */
} doorbell_gpu_kernel_args_t;

typedef struct doorbell_gpu_kernel_result {
    doorbell_status_t status;      /* first error any thread saw, or OK */
    uint64_t          puts;        /* WQEs the kernel posted */
    double            elapsed_ns;  /* launch to the last block's completion */
    double            wait_ns_max; /* longest put -> completion wait of a
                                      thread (kind THREAD, iters rounds) */
} doorbell_gpu_kernel_result_t;

/* Runs the put kernel on the current device and waits for it. */
doorbell_status_t doorbell_gpu_cuda_run_puts(const doorbell_gpu_ring_t        *ring,
                                             const doorbell_gpu_kernel_args_t *args,
                                             doorbell_gpu_kernel_result_t     *result);

/* One GPU thread: `iters` rounds of put (bytes; with a SET signal unless
 * signal_addr is 0) + wait; per-round latency
 * (put issue to completion seen by the GPU) in ns into lat_ns[iters]. */
doorbell_status_t doorbell_gpu_cuda_run_latency(const doorbell_gpu_ring_t        *ring,
                                                const doorbell_gpu_kernel_args_t *args,
                                                double                           *lat_ns);

#ifdef __cplusplus
}
#endif

#endif /* DOORBELL_GPU_CUDA_H */
