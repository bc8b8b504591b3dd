/*
 * doorbell-gpu-sample: a kernel that puts a buffer to the next rank with a
 * signal, then waits in the kernel for the previous rank's signal.
 *
 *   mpirun -np 2 doorbell-gpu-sample [bytes] [rounds]
 *
 * DOORBELL_GPU_DEVICE=mlx5_0:1 runs it on a verbs port: the queue is IBGDA
 * (MLX5 mode: the kernel writes the NIC's send queue) where the QP exports
 * and maps, CPU-proxy otherwise; the last line says which.
 *
 * Each rank opens the UDP device (DOORBELL_GPU_DEVICE, default lo), registers
 * a host-mapped receive buffer and flag word, and exchanges their addresses
 * and keys with MPI_Allgather. Per round, each thread of the kernel puts its
 * slice to rank+1 through the GPU send ring; the round's last put carries a
 * SET signal (value = round). The kernel then polls its own flag -- written
 * by the previous rank through the device -- until it reaches the round.
 */
#include "doorbell_gpu_core.h"
#include "doorbell_gpu_cuda.h"
#include "doorbell_gpu_device.cuh"

#include <cuda_runtime.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct Peer {
    uint8_t  dev[32];
    uint8_t  ifa[32];
    uint64_t buf;
    uint64_t flag;
    uint32_t buf_rkey;
    uint32_t flag_rkey;
};

__global__ void ring_exchange(doorbell_gpu_ring_t ring, const uint8_t *src, Peer next,
                              volatile uint64_t *my_flag, uint32_t bytes, uint32_t rounds,
                              int *status)
{
    uint32_t tid   = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t slice = bytes / (gridDim.x * blockDim.x);
    bool     last  = (tid == gridDim.x * blockDim.x - 1);

    for (uint32_t round = 1; round <= rounds; ++round) {
        doorbell_gpu_ticket_t t  = 0;
        doorbell_status_t     st = doorbell_gpu_warp_put(ring, src + tid * slice, slice,
                                                         next.buf + tid * slice, next.buf_rkey, &t);
        /* every thread reaches the block wait, failed or not */
        doorbell_status_t wst = doorbell_gpu_wait_block(ring, t);
        st                    = (st != DOORBELL_OK) ? st : wst;
        if ((st == DOORBELL_OK) && last) {
            /* everything before completed: the flag says "round is complete" */
            st = doorbell_gpu_put_signal(ring, src, 0, next.buf, next.buf_rkey, next.flag,
                                         next.flag_rkey, DOORBELL_SIGNAL_SET, round, &t);
        }
        if (st != DOORBELL_OK) {
            atomicCAS(status, 0, (int)st);
        }
        /* wait for the previous rank's round (bounded) */
        if ((threadIdx.x == 0) && (*(volatile int *)status == 0)) {
            uint64_t start = doorbell_gpu_port::now_ns();
            while (*my_flag < round) {
                if (doorbell_gpu_port::now_ns() - start > 10ull * 1000 * 1000 * 1000) {
                    atomicCAS(status, 0, (int)DOORBELL_ERR_TIMED_OUT);
                    break;
                }
                __nanosleep(1000);
            }
        }
        __syncthreads();
    }
}

int fail(const char *what, const char *why)
{
    std::fprintf(stderr, "doorbell-gpu-sample: %s: %s\n", what, why);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

} /* namespace */

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    uint32_t       bytes  = (argc > 1) ? uint32_t(std::strtoul(argv[1], nullptr, 0)) : 65536;
    uint32_t       rounds = (argc > 2) ? uint32_t(std::strtoul(argv[2], nullptr, 0)) : 100;
    const uint32_t blocks = 2, threads = 64;
    bytes -= bytes % (blocks * threads);
    const char *device = std::getenv("DOORBELL_GPU_DEVICE");
    device             = (device != nullptr) ? device : "lo";

    char reason[256];
    if (doorbell_gpu_cuda_device_count(reason, sizeof(reason)) == 0) {
        if (rank == 0) {
            std::printf("doorbell-gpu-sample: no GPU (%s); nothing to run\n", reason);
        }
        MPI_Finalize();
        return 0;
    }
    if ((size < 2) || (bytes == 0)) {
        return fail("usage", "mpirun -np N (N >= 2) doorbell-gpu-sample [bytes] [rounds]");
    }

    doorbell_pd_t          *pd    = nullptr;
    doorbell_iface_t       *iface = nullptr;
    doorbell_iface_params_t ip;
    doorbell_iface_params_init(&ip);
    ip.device = device;
    if ((doorbell_pd_create(&pd) != DOORBELL_OK) ||
        (doorbell_iface_open(pd, &ip, &iface) != DOORBELL_OK)) {
        return fail(device, doorbell_last_error());
    }

    /* receive buffer and flag: host-mapped, so the device writes them and
     * the kernel reads the flag */
    const doorbell_gpu_memory_ops_t *mem  = doorbell_gpu_cuda_memory();
    void                            *recv = nullptr, *src = nullptr, *dummy = nullptr;
    if ((mem->alloc_shared(nullptr, bytes + 64, &recv, &dummy) != DOORBELL_OK) ||
        (mem->alloc_shared(nullptr, bytes, &src, &dummy) != DOORBELL_OK)) {
        return fail("cudaHostAlloc", "no host-mapped memory");
    }
    for (uint32_t i = 0; i < bytes; ++i) {
        static_cast<uint8_t *>(src)[i] = uint8_t(rank * 13 + i);
    }
    uint64_t      *flag   = reinterpret_cast<uint64_t *>(static_cast<uint8_t *>(recv) + bytes);
    Peer           me     = {};
    doorbell_mr_t *mr_buf = nullptr, *mr_flag = nullptr, *mr_src = nullptr;
    uint32_t       src_rkey_unused;
    /* the source registered too: on a verbs device (IBGDA) the GPU's WQEs
     * name its local key */
    if ((doorbell_mr_register(pd, src, bytes, 0, &mr_src, &src_rkey_unused) != DOORBELL_OK) ||
        (doorbell_mr_register(pd, recv, bytes, DOORBELL_ACCESS_REMOTE_WRITE, &mr_buf,
                              &me.buf_rkey) != DOORBELL_OK) ||
        (doorbell_mr_register(pd, flag, 8, DOORBELL_ACCESS_REMOTE_WRITE, &mr_flag, &me.flag_rkey) !=
         DOORBELL_OK)) {
        return fail("doorbell_mr_register", doorbell_last_error());
    }
    doorbell_iface_get_device_address(iface, me.dev);
    doorbell_iface_get_address(iface, me.ifa);
    me.buf    = (uint64_t)(uintptr_t)recv;
    me.flag   = (uint64_t)(uintptr_t)flag;
    Peer *all = new Peer[size];
    MPI_Allgather(&me, sizeof(Peer), MPI_BYTE, all, sizeof(Peer), MPI_BYTE, MPI_COMM_WORLD);
    const Peer &next = all[(rank + 1) % size];

    doorbell_gpu_engine_t      *engine = nullptr;
    doorbell_gpu_queue_t       *queue  = nullptr;
    doorbell_gpu_queue_params_t qp;
    doorbell_gpu_queue_params_init(&qp);
    qp.memory    = mem;
    qp.mlx5_lkey = doorbell_mr_local_key(mr_src);
    if ((doorbell_gpu_engine_create_for_iface(iface, device, nullptr, &engine) != DOORBELL_OK) ||
        (doorbell_gpu_queue_create_for_peer(engine, next.dev, next.ifa, &qp, &queue) !=
         DOORBELL_OK) ||
        (doorbell_gpu_engine_start(engine) != DOORBELL_OK)) {
        return fail("GPU queue", "cannot create the engine or queue (see above)");
    }
    MPI_Barrier(MPI_COMM_WORLD);

    int *status = nullptr;
    cudaMalloc(&status, sizeof(int));
    cudaMemset(status, 0, sizeof(int));
    double t0 = MPI_Wtime();
    ring_exchange<<<blocks, threads>>>(doorbell_gpu_queue_device_ring(queue),
                                       static_cast<const uint8_t *>(src), next,
                                       reinterpret_cast<volatile uint64_t *>(flag), bytes, rounds,
                                       status);
    cudaError_t err = cudaDeviceSynchronize();
    double      t1  = MPI_Wtime();
    int         kst = 0;
    cudaMemcpy(&kst, status, sizeof(int), cudaMemcpyDeviceToHost);
    if (err != cudaSuccess) {
        return fail("kernel", cudaGetErrorString(err));
    }

    /* the previous rank's data */
    int      prev = (rank + size - 1) % size;
    uint64_t bad  = 0;
    for (uint32_t i = 0; i < bytes; ++i) {
        bad += static_cast<uint8_t *>(recv)[i] != uint8_t(prev * 13 + i);
    }
    std::printf("rank %d: %u rounds of %u bytes to rank %d in %.3f ms (%.1f us/round): "
                "kernel status %s, flag %llu, %llu bad bytes, queue mode %s\n",
                rank, rounds, bytes, (rank + 1) % size, (t1 - t0) * 1e3, (t1 - t0) * 1e6 / rounds,
                doorbell_status_string((doorbell_status_t)kst), (unsigned long long)*flag,
                (unsigned long long)bad, doorbell_gpu_mode_string(doorbell_gpu_queue_mode(queue)));
    MPI_Barrier(MPI_COMM_WORLD); /* peers still need our ACKs until here */

    doorbell_gpu_core_engine_destroy(engine);
    doorbell_mr_deregister(pd, mr_flag);
    doorbell_mr_deregister(pd, mr_buf);
    doorbell_mr_deregister(pd, mr_src);
    doorbell_iface_close(iface);
    doorbell_pd_destroy(pd);
    mem->free_shared(nullptr, src);
    mem->free_shared(nullptr, recv);
    cudaFree(status);
    delete[] all;
    MPI_Finalize();
    return ((kst == 0) && (bad == 0)) ? 0 : 1;
}
