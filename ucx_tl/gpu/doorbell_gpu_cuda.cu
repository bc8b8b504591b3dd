/*
 * Ring memory for kernels: slots and shared words host-mapped (the engine
 * reads them as a NIC reads host memory), the reservation counter in device
 * memory (only GPU threads reserve). GPU detection for tests and tools.
 */
#include "doorbell_gpu_cuda.h"

#include "core/error.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

namespace {

doorbell_status_t cuda_failed(const char *call, cudaError_t err)
{
    return doorbell::set_error((err == cudaErrorMemoryAllocation) ? DOORBELL_ERR_NO_MEMORY :
                                                                    DOORBELL_ERR_IO,
                               "cuda: %s failed: %s", call, cudaGetErrorString(err));
}

doorbell_status_t alloc_shared(void *, size_t bytes, void **host_p, void **device_p)
{
    void       *host = nullptr, *device = nullptr;
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
    void       *p   = nullptr;
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

/* IBGDA: the NIC's queues and doorbell records (host memory the provider
 * allocated) and its UAR page (device registers: IoMemory) mapped into the
 * GPU, as NVSHMEM's IBGDA maps its UAR. Registrations cover whole pages and
 * are counted: a page two objects share (the doorbell records of a QP and
 * its CQ) is registered once and unregistered with its last user. */
struct HostRange {
    uintptr_t end;
    unsigned  refs;
};
std::mutex                     g_ranges_lock;
std::map<uintptr_t, HostRange> g_ranges; /* by page-aligned start */

doorbell_status_t map_host(void *, void *host, size_t bytes, int io, void **device_p, char *why,
                           size_t why_length)
{
    const uintptr_t             page  = 4096;
    uintptr_t                   start = uintptr_t(host) & ~(page - 1);
    uintptr_t                   end   = (uintptr_t(host) + bytes + page - 1) & ~(page - 1);
    std::lock_guard<std::mutex> guard(g_ranges_lock);
    auto                        it      = g_ranges.upper_bound(start);
    bool                        covered = false;
    if (it != g_ranges.begin()) {
        auto prev = std::prev(it);
        covered   = (prev->first <= start) && (prev->second.end >= end);
        if (covered) {
            ++prev->second.refs;
        }
    }
    if (!covered) {
        unsigned flags = cudaHostRegisterMapped | cudaHostRegisterPortable |
                         (io ? cudaHostRegisterIoMemory : 0);
        cudaError_t err = cudaHostRegister(reinterpret_cast<void *>(start), end - start, flags);
        if (err != cudaSuccess) {
            std::snprintf(why, why_length, "cudaHostRegister(%p, %zu bytes%s) failed: %s", host,
                          size_t(end - start), io ? ", IoMemory" : "", cudaGetErrorString(err));
            cudaGetLastError();
            return DOORBELL_ERR_UNSUPPORTED;
        }
        g_ranges[start] = HostRange{end, 1};
    }
    void       *device = nullptr;
    cudaError_t err    = cudaHostGetDevicePointer(&device, host, 0);
    if (err != cudaSuccess) {
        std::snprintf(why, why_length, "cudaHostGetDevicePointer(%p) failed: %s", host,
                      cudaGetErrorString(err));
        cudaGetLastError();
        auto r = std::prev(g_ranges.upper_bound(start));
        if (--r->second.refs == 0) {
            cudaHostUnregister(reinterpret_cast<void *>(r->first));
            g_ranges.erase(r);
        }
        return DOORBELL_ERR_UNSUPPORTED;
    }
    *device_p = device;
    return DOORBELL_OK;
}

void unmap_host(void *, void *host)
{
    std::lock_guard<std::mutex> guard(g_ranges_lock);
    auto                        it = g_ranges.upper_bound(uintptr_t(host));
    if (it == g_ranges.begin()) {
        return;
    }
    --it;
    if (uintptr_t(host) >= it->second.end) {
        return;
    }
    if (--it->second.refs == 0) {
        cudaHostUnregister(reinterpret_cast<void *>(it->first));
        g_ranges.erase(it);
    }
}

// clang-format off
const doorbell_gpu_memory_ops_t cuda_memory = {
    alloc_shared, free_shared, alloc_producer, free_producer, nullptr, map_host, unmap_host
};
// clang-format on

} /* namespace */

extern "C" int doorbell_gpu_cuda_device_count(char *reason, size_t length)
{
    int         count = 0;
    cudaError_t err   = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        std::snprintf(reason, length, "cudaGetDeviceCount() failed: %s", cudaGetErrorString(err));
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
