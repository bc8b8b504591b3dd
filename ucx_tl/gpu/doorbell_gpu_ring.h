/*
 * The GPU send ring: a multi-producer ring of doorbell_wqe_t (the WQE the CPU
 * batcher writes) that GPU threads fill and one engine consumes, as a NIC
 * consumes its send queue. One source for host and device: compiled by the
 * host compiler (CPU producers, the engine, the ThreadSanitizer tests) and by
 * nvcc (kernels), through the small portability layer below.
 *
 * Protocol, per WQE index i (64-bit, never wraps; slot = i & mask):
 *   1. reserve   a group leader takes n consecutive indices with one
 *                fetch_add (one atomic per warp), then waits until
 *                completed >= base + n - size: a slot is reused only after
 *                the WQE it held completed (back-pressure, never overwrite);
 *   2. write     the WQE into its slot (plain stores);
 *   3. publish   seq[slot] = i + 1 with release order: a consumer that reads
 *                seq with acquire order never sees a half-written WQE;
 *   4. doorbell  raise rung to end (fetch_max), then store the doorbell
 *                word until it holds the highest rung (one per group or
 *                batch): the consumer polls this one word, not the ring;
 *   5. complete  the engine stores completed = end of each finished batch
 *                (release); producers wait on it. Error completions set
 *                `error`, which every wait returns: no endless waits.
 *
 * Who writes which word. A system-scoped read-modify-write of host-mapped
 * memory is invalid unless the platform has native host atomics (x86 over
 * PCIe has none; compute-sanitizer reports each one), so the host-mapped
 * words are only ever loaded and stored, and every read-modify-write is on
 * producer memory (device memory for a GPU ring):
 *   reserve, rung    producers fetch_add/max (producer memory)
 *   seq[], doorbell  producers store         engine loads
 *   completed, error engine stores           producers load
 *   producer_error   producers store         engine loads (set when a
 *                    producer gives up holding reserved slots: the gap can
 *                    never be filled, so the ring is dead)
 *
 * Units: indices count WQEs; times are nanoseconds.
 */
#ifndef DOORBELL_GPU_RING_H
#define DOORBELL_GPU_RING_H

#include "doorbell_core.h"
#include "doorbell_wqe.h"

#include <stdint.h>

/* ------------------------------------------------------ portability layer */

#if defined(__CUDACC__)
#include <cuda/atomic>
#define DOORBELL_HD __host__ __device__ __forceinline__
namespace doorbell_gpu_port {
template <class T>
using atomic_ref = cuda::atomic_ref<T, cuda::thread_scope_system>;
namespace mo     = cuda::std;
} // namespace doorbell_gpu_port
#else
#include <atomic>
#include <sched.h>
#include <time.h>
#define DOORBELL_HD inline
namespace doorbell_gpu_port {
template <class T>
using atomic_ref = std::atomic_ref<T>;
namespace mo     = std;
} // namespace doorbell_gpu_port
#endif

namespace doorbell_gpu_port {

DOORBELL_HD uint64_t load_acquire(uint64_t *p)
{
    return atomic_ref<uint64_t>(*p).load(mo::memory_order_acquire);
}

DOORBELL_HD uint64_t load_relaxed(uint64_t *p)
{
    return atomic_ref<uint64_t>(*p).load(mo::memory_order_relaxed);
}

DOORBELL_HD int32_t load_relaxed(int32_t *p)
{
    return atomic_ref<int32_t>(*p).load(mo::memory_order_relaxed);
}

DOORBELL_HD void store_release(uint64_t *p, uint64_t v)
{
    atomic_ref<uint64_t>(*p).store(v, mo::memory_order_release);
}

DOORBELL_HD void store_relaxed(int32_t *p, int32_t v)
{
    atomic_ref<int32_t>(*p).store(v, mo::memory_order_relaxed);
}

DOORBELL_HD uint64_t fetch_add_relaxed(uint64_t *p, uint64_t v)
{
    return atomic_ref<uint64_t>(*p).fetch_add(v, mo::memory_order_relaxed);
}

DOORBELL_HD uint64_t load_seq_cst(uint64_t *p)
{
    return atomic_ref<uint64_t>(*p).load(mo::memory_order_seq_cst);
}

DOORBELL_HD void store_seq_cst(uint64_t *p, uint64_t v)
{
    atomic_ref<uint64_t>(*p).store(v, mo::memory_order_seq_cst);
}

/* Raises *p to at least v and returns the value before. libcu++ has
 * fetch_max; std::atomic_ref gets it only in C++26, so the host uses a
 * compare-exchange loop. */
DOORBELL_HD uint64_t fetch_max_seq_cst(uint64_t *p, uint64_t v)
{
#if defined(__CUDACC__)
    return atomic_ref<uint64_t>(*p).fetch_max(v, mo::memory_order_seq_cst);
#else
    atomic_ref<uint64_t> ref(*p);
    uint64_t             cur = ref.load(mo::memory_order_relaxed);
    while (cur < v &&
           !ref.compare_exchange_weak(cur, v, mo::memory_order_seq_cst, mo::memory_order_relaxed)) {
    }
    return cur;
#endif
}

/* Monotonic time in ns: the GPU's global timer, CLOCK_MONOTONIC on the host. */
DOORBELL_HD uint64_t now_ns()
{
#if defined(__CUDA_ARCH__)
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

/* Back off inside a wait loop: sleep the warp briefly on the GPU, give the
 * core away on the host (stand-in producers outnumber the cores). */
DOORBELL_HD void pause()
{
#if defined(__CUDA_ARCH__)
    __nanosleep(64);
#else
    sched_yield();
#endif
}

} /* namespace doorbell_gpu_port */

/* ------------------------------------------------------------- the ring */

enum doorbell_gpu_ring_flags {
    /* CPU-proxy mode: the host thread discovers WQEs from the per-slot
     * sequence numbers, so producers skip the doorbell write. */
    DOORBELL_GPU_RING_PROXY = 1u << 0,
    /* IBGDA: producers write the NIC's mlx5 send queue themselves (`mlx5`,
     * doorbell_gpu_mlx5.h); the slots are not used. */
    DOORBELL_GPU_RING_MLX5 = 1u << 1
};

struct doorbell_mlx5_qp;

/* Everything a producer (kernel or CPU thread) needs; passed by value to a
 * kernel. Pointers are in the producer's address space. */
typedef struct doorbell_gpu_ring {
    doorbell_wqe_t                *slots;          /* size WQEs (host-mapped on a GPU) */
    uint64_t                      *seq;            /* size words: seq[i & mask] == i + 1 once
                                       WQE i is written */
    uint64_t                      *reserve;        /* next index to reserve */
    uint64_t                      *rung;           /* highest index rung (producer memory) */
    uint64_t                      *doorbell;       /* the rung the consumer sees (doorbell
                                       record; follows rung, stores only) */
    uint64_t                      *completed;      /* every WQE below this index completed */
    int32_t                       *error;          /* engine-set doorbell_status_t, 0 = OK */
    int32_t                       *producer_error; /* producer-set doorbell_status_t */
    uint32_t                       size;           /* slots, a power of two */
    uint32_t                       mask;           /* size - 1 */
    uint32_t                       flags;          /* enum doorbell_gpu_ring_flags */
    uint32_t                       reserved;
    uint64_t                       timeout_ns; /* longest wait for space or completion */
    const struct doorbell_mlx5_qp *mlx5;       /* DOORBELL_GPU_RING_MLX5: the QP */
} doorbell_gpu_ring_t;

/* Producer words: read-modify-written by producers only, so a GPU ring keeps
 * them in device memory, where the GPU's atomics are valid. Zeroed. */
typedef struct doorbell_gpu_ring_producer_words {
    uint64_t reserve;
    uint64_t rung;
} doorbell_gpu_ring_producer_words_t;

/* Shared words, each on its own cache line (producer and consumer lines
 * apart, so polling one side does not bounce the other's line). */
typedef struct doorbell_gpu_ring_words {
    uint64_t doorbell;
    uint64_t pad0[7];
    uint64_t completed;
    uint64_t pad1[7];
    int32_t  error;
    int32_t  producer_error;
    uint64_t pad2[7];
} doorbell_gpu_ring_words_t;

/* Bytes of host-visible memory a ring of `size` slots needs (slots, seq[]
 * and the shared words), 64-byte aligned. */
DOORBELL_HD uint64_t doorbell_gpu_ring_shared_bytes(uint32_t size)
{
    return (uint64_t)size * sizeof(doorbell_wqe_t) + (uint64_t)size * sizeof(uint64_t) +
           sizeof(doorbell_gpu_ring_words_t);
}

/* Lays a ring over zeroed memory: `shared` of doorbell_gpu_ring_shared_bytes
 * bytes (64-byte aligned) and zeroed producer words. */
DOORBELL_HD doorbell_gpu_ring_t
doorbell_gpu_ring_layout(void *shared, doorbell_gpu_ring_producer_words_t *producer, uint32_t size,
                         uint32_t flags, uint64_t timeout_ns)
{
    doorbell_gpu_ring_t        r;
    char                      *p = (char *)shared;
    doorbell_gpu_ring_words_t *w;

    r.slots = (doorbell_wqe_t *)p;
    p += (uint64_t)size * sizeof(doorbell_wqe_t);
    r.seq = (uint64_t *)p;
    p += (uint64_t)size * sizeof(uint64_t);
    w = (doorbell_gpu_ring_words_t *)p;

    r.reserve        = &producer->reserve;
    r.rung           = &producer->rung;
    r.doorbell       = &w->doorbell;
    r.completed      = &w->completed;
    r.error          = &w->error;
    r.producer_error = &w->producer_error;
    r.size           = size;
    r.mask           = size - 1;
    r.flags          = flags;
    r.reserved       = 0;
    r.timeout_ns     = timeout_ns;
    r.mlx5           = nullptr;
    return r;
}

/* The ring's error, or DOORBELL_OK. */
DOORBELL_HD doorbell_status_t doorbell_gpu_ring_status(const doorbell_gpu_ring_t &r)
{
    int32_t e = doorbell_gpu_port::load_relaxed(r.error);
    if (e == 0) {
        e = doorbell_gpu_port::load_relaxed(r.producer_error);
    }
    return (doorbell_status_t)e;
}

/* Waits until completed >= index. OK, the ring's error, or
 * DOORBELL_ERR_TIMED_OUT after r.timeout_ns. */
DOORBELL_HD doorbell_status_t doorbell_gpu_ring_wait_completed(const doorbell_gpu_ring_t &r,
                                                               uint64_t                   index)
{
    uint64_t          deadline = 0;
    doorbell_status_t st;

    for (;;) {
        if (doorbell_gpu_port::load_acquire(r.completed) >= index) {
            return DOORBELL_OK;
        }
        st = doorbell_gpu_ring_status(r);
        if (st != DOORBELL_OK) {
            return st;
        }
        uint64_t now = doorbell_gpu_port::now_ns();
        if (deadline == 0) {
            deadline = now + r.timeout_ns;
        } else if (now > deadline) {
            return DOORBELL_ERR_TIMED_OUT;
        }
        doorbell_gpu_port::pause();
    }
}

/* Reserves n consecutive slots with one atomic and waits until they are
 * free. On success *base_p is the first index. A timeout while holding the
 * reservation leaves a gap no one can fill: the ring is marked dead
 * (producer_error) so that the consumer and every waiter see it. */
DOORBELL_HD doorbell_status_t doorbell_gpu_ring_reserve(const doorbell_gpu_ring_t &r, uint32_t n,
                                                        uint64_t *base_p)
{
    doorbell_status_t st;
    uint64_t          base;

    if ((n == 0) || (n > r.size)) {
        return DOORBELL_ERR_INVALID_PARAM;
    }
    st = doorbell_gpu_ring_status(r);
    if (st != DOORBELL_OK) {
        return st;
    }
    base = doorbell_gpu_port::fetch_add_relaxed(r.reserve, n);
    if (base + n > r.size) {
        st = doorbell_gpu_ring_wait_completed(r, base + n - r.size);
        if (st == DOORBELL_ERR_TIMED_OUT) {
            doorbell_gpu_port::store_relaxed(r.producer_error, DOORBELL_ERR_TIMED_OUT);
        }
        if (st != DOORBELL_OK) {
            return st;
        }
    }
    *base_p = base;
    return DOORBELL_OK;
}

/* Writes WQE `index` (reserved by this group) and publishes it. */
DOORBELL_HD void doorbell_gpu_ring_write(const doorbell_gpu_ring_t &r, uint64_t index,
                                         const doorbell_wqe_t &wqe)
{
    r.slots[index & r.mask] = wqe;
    doorbell_gpu_port::store_release(&r.seq[index & r.mask], index + 1);
}

/* Rings the doorbell: every index below end is written (by this group or
 * an earlier one; the consumer stops at a slot not yet published).
 * The doorbell word is host-mapped, so it is stored, never max'ed: rung
 * takes the max, and whoever raised it stores the doorbell, then reads rung
 * again and stores once more if another producer raised it meanwhile. With
 * every step seq_cst, the last store to the doorbell holds the highest rung:
 * if a lower store landed last, its producer's re-read follows the higher
 * raise and stores that. The doorbell may step back for a moment (a late
 * lower store); the consumer re-reads it each pass and loses nothing. */
DOORBELL_HD void doorbell_gpu_ring_doorbell(const doorbell_gpu_ring_t &r, uint64_t end)
{
    if (r.flags & DOORBELL_GPU_RING_PROXY) {
        return;
    }
    if (doorbell_gpu_port::fetch_max_seq_cst(r.rung, end) >= end) {
        return; /* a later group raised it and publishes at least end */
    }
    for (uint64_t v = end;;) {
        doorbell_gpu_port::store_seq_cst(r.doorbell, v);
        uint64_t m = doorbell_gpu_port::load_seq_cst(r.rung);
        if (m <= v) {
            return;
        }
        v = m;
    }
}

/* One thread's batch: reserve n slots, write them, one doorbell. *end_p is
 * the ticket for doorbell_gpu_ring_wait_completed. */
DOORBELL_HD doorbell_status_t doorbell_gpu_ring_post(const doorbell_gpu_ring_t &r,
                                                     const doorbell_wqe_t *wqes, uint32_t n,
                                                     uint64_t *end_p)
{
    uint64_t          base;
    doorbell_status_t st = doorbell_gpu_ring_reserve(r, n, &base);
    if (st != DOORBELL_OK) {
        return st;
    }
    for (uint32_t k = 0; k < n; ++k) {
        doorbell_gpu_ring_write(r, base + k, wqes[k]);
    }
    doorbell_gpu_ring_doorbell(r, base + n);
    *end_p = base + n;
    return DOORBELL_OK;
}

/*
 * A group's post with one reservation and one doorbell for the whole group
 * (a warp on the GPU; a set of CPU threads in the tests). Group provides:
 *   bool     is_leader()
 *   uint32_t exclusive_sum(uint32_t v, uint32_t *total_p)   (collective)
 *   uint64_t broadcast(uint64_t v)      leader's v to all   (collective)
 *   void     sync()                                         (collective)
 * Every member calls it (n may be 0). *end_p is the member's own ticket;
 * *group_end_p the group's (wait on it for the group's puts).
 */
template <class Group>
DOORBELL_HD doorbell_status_t doorbell_gpu_ring_group_post(Group &g, const doorbell_gpu_ring_t &r,
                                                           const doorbell_wqe_t *wqes, uint32_t n,
                                                           uint64_t *end_p, uint64_t *group_end_p)
{
    uint32_t total;
    uint32_t offset = g.exclusive_sum(n, &total);
    uint64_t base   = 0;
    int32_t  st     = DOORBELL_OK;

    if (total == 0) {
        *end_p       = 0; /* nothing to wait for */
        *group_end_p = 0;
        return DOORBELL_ERR_INVALID_PARAM;
    }
    if (g.is_leader()) {
        st = doorbell_gpu_ring_reserve(r, total, &base);
    }
    st = (int32_t)g.broadcast((uint64_t)(int64_t)st);
    if (st != DOORBELL_OK) {
        return (doorbell_status_t)st;
    }
    base = g.broadcast(base);
    for (uint32_t k = 0; k < n; ++k) {
        doorbell_gpu_ring_write(r, base + offset + k, wqes[k]);
    }
    g.sync(); /* every member's WQEs are published before the doorbell */
    if (g.is_leader()) {
        doorbell_gpu_ring_doorbell(r, base + total);
    }
    *end_p       = base + offset + n;
    *group_end_p = base + total;
    return DOORBELL_OK;
}

/* ----------------------------------------------------------- consumer */

/* Copies up to max published WQEs starting at head into out and returns how
 * many. The consumer owns head. Doorbell mode reads only below the doorbell
 * (the producer decides the batch, as with a NIC); proxy mode scans the
 * sequence numbers. Never returns a WQE whose seq is not yet published. */
DOORBELL_HD uint32_t doorbell_gpu_ring_consume(const doorbell_gpu_ring_t &r, uint64_t head,
                                               uint32_t max, doorbell_wqe_t *out)
{
    uint64_t limit = head + max;
    uint32_t n     = 0;

    if (!(r.flags & DOORBELL_GPU_RING_PROXY)) {
        uint64_t db = doorbell_gpu_port::load_acquire(r.doorbell);
        if (db < limit) {
            limit = db;
        }
    }
    for (uint64_t i = head; i < limit; ++i, ++n) {
        if (doorbell_gpu_port::load_acquire(&r.seq[i & r.mask]) != i + 1) {
            break;
        }
        out[n] = r.slots[i & r.mask];
    }
    return n;
}

/* Engine side: every WQE below end completed. */
DOORBELL_HD void doorbell_gpu_ring_complete(const doorbell_gpu_ring_t &r, uint64_t end)
{
    if (doorbell_gpu_port::load_relaxed(r.completed) < end) {
        doorbell_gpu_port::store_release(r.completed, end);
    }
}

/* Engine side: the queue failed; every wait returns status from now on. */
DOORBELL_HD void doorbell_gpu_ring_fail(const doorbell_gpu_ring_t &r, doorbell_status_t status)
{
    if (doorbell_gpu_port::load_relaxed(r.error) == 0) {
        doorbell_gpu_port::store_relaxed(r.error, (int32_t)status);
    }
}

/* --------------------------------------------------------- WQE builders */

/* RDMA write of length bytes from local_addr to remote_addr/rkey. */
DOORBELL_HD doorbell_wqe_t doorbell_gpu_make_put(const void *local_addr, uint64_t length,
                                                 uint64_t remote_addr, uint32_t rkey)
{
    doorbell_wqe_t w = {};
    w.opcode         = DOORBELL_OP_PUT;
    w.rkey           = rkey;
    w.remote_addr    = remote_addr;
    w.local_addr     = (uint64_t)(uintptr_t)local_addr;
    w.length         = (uint32_t)length;
    return w;
}

/* RDMA write, then (ordered after it at the target) a 64-bit signal update:
 * op DOORBELL_SIGNAL_SET stores value, DOORBELL_SIGNAL_ADD adds it. */
DOORBELL_HD doorbell_wqe_t doorbell_gpu_make_put_signal(const void *local_addr, uint64_t length,
                                                        uint64_t remote_addr, uint32_t rkey,
                                                        uint64_t signal_addr, uint32_t signal_rkey,
                                                        uint32_t op, uint64_t value)
{
    doorbell_wqe_t w = doorbell_gpu_make_put(local_addr, length, remote_addr, rkey);
    w.opcode         = DOORBELL_OP_PUT_SIGNAL;
    w.am_id          = (uint8_t)op;
    w.signal_addr    = signal_addr;
    w.signal_rkey    = signal_rkey;
    w.signal_value   = value;
    return w;
}

#endif /* DOORBELL_GPU_RING_H */
