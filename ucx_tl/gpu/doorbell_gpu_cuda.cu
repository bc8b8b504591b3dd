/*
 * Ring memory for kernels: slots and shared words host-mapped (the engine
 * reads them as a NIC reads host memory), the reservation counter in device
 * memory (only GPU threads reserve). GPU detection for tests and tools.
 */
#include "doorbell_gpu_cuda.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

namespace {

doorbell_status_t cuda_failed(const char *call, cudaError_t err)
{
    std::fprintf(stderr, "doorbell gpu: cuda: %s failed: %s\n", call, cudaGetErrorString(err));
    return (err == cudaErrorMemoryAllocation) ? DOORBELL_ERR_NO_MEMORY : DOORBELL_ERR_IO;
}

doorbell_status_t alloc_shared(void *, size_t bytes, void **host_p, void **device_p)
{
    void *host = nullptr, *device = nullptr;
    cudaError_t err = cudaHostAlloc(&host, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
    if (err != cudaSuccess) {
        return cuda_failed("cudaHostAlloc(mapped)", err);
    }
    std::memset(host, 0, bytes);
    err = cudaHostGetDevicePointer(&device, host, 0);
    if (err != cudaSuccess) {
        cudaFreeHost(host);
        return cuda_failed("cudaHostGetDevicePointer", err);
    }
    *host_p   = host;
    *device_p = device;
    return DOORBELL_OK;
}

void free_shared(void *, void *host)
{
    cudaFreeHost(host);
}

doorbell_status_t alloc_producer(void *, size_t bytes, void **ptr_p)
{
    void *p = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
        return cuda_failed("cudaMalloc", err);
    }
    err = cudaMemset(p, 0, bytes);
    if (err != cudaSuccess) {
        cudaFree(p);
        return cuda_failed("cudaMemset", err);
    }
    *ptr_p = p;
    return DOORBELL_OK;
}

void free_producer(void *, void *p)
{
    cudaFree(p);
}

const doorbell_gpu_memory_ops_t cuda_memory = {
    alloc_shared, free_shared, alloc_producer, free_producer, nullptr
};

} /* namespace */

extern "C" int doorbell_gpu_cuda_device_count(char *reason, size_t length)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        std::snprintf(reason, length, "cudaGetDeviceCount() failed: %s",
                      cudaGetErrorString(err));
        return 0;
    }
    if (count == 0) {
        std::snprintf(reason, length, "no CUDA device");
        return 0;
    }
    int can_map = 0;
    cudaDeviceGetAttribute(&can_map, cudaDevAttrCanMapHostMemory, 0);
    if (!can_map) {
        std::snprintf(reason, length, "GPU 0 cannot map host memory");
        return 0;
    }
    std::snprintf(reason, length, "%d CUDA devices", count);
    return count;
}

extern "C" const doorbell_gpu_memory_ops_t *doorbell_gpu_cuda_memory(void)
{
    return &cuda_memory;
}
