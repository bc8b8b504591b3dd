/*
 * The mlx5 IBGDA recipe as code both sides compile: translating a
 * doorbell_wqe_t into ConnectX send-queue WQEs (ctrl / remote-address /
 * data / inline / atomic segments, big-endian), and ringing: the doorbell
 * record (16-bit SQ producer index, big-endian, in the low half of
 * dbrec[MLX5_SND_DBR]) and then the UAR (the first 8 bytes of the last
 * WQE's ctrl segment).
 *
 * Every WQE produced here is one 64-byte basic block (WQEBB), so an SQ never
 * holds a WQE split across its end. PUT_SIGNAL becomes two WQEs: the RDMA
 * write, then the signal (SET: an 8-byte inline RDMA write of the value's
 * native bytes; ADD: an 8-byte fetch-add, which ConnectX performs on a
 * big-endian word, so an ADD signal word is big-endian at the target) --
 * ordered after the write by RC's in-order execution at the responder.
 *
 * Layouts are the vendor's (infiniband/mlx5dv.h); the tests compare bytes
 * with mlx5dv's own inline builders when the header is present. Nothing
 * here has run against a NIC.
 */
#ifndef DOORBELL_GPU_MLX5_H
#define DOORBELL_GPU_MLX5_H

#include "doorbell_gpu_ring.h"

#if !defined(__CUDACC__)
#include <atomic>
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum {
    DOORBELL_MLX5_WQEBB          = 64, /* MLX5_SEND_WQE_BB */
    DOORBELL_MLX5_OPCODE_NOP     = 0x00,
    DOORBELL_MLX5_OPCODE_WRITE   = 0x08, /* MLX5_OPCODE_RDMA_WRITE */
    DOORBELL_MLX5_OPCODE_READ    = 0x10,
    DOORBELL_MLX5_OPCODE_FA      = 0x12, /* MLX5_OPCODE_ATOMIC_FA */
    DOORBELL_MLX5_CTRL_CQ_UPDATE = 0x08, /* MLX5_WQE_CTRL_CQ_UPDATE */
    DOORBELL_MLX5_CTRL_FENCE     = 0x80, /* MLX5_WQE_CTRL_FENCE */
    DOORBELL_MLX5_SND_DBR        = 1     /* dbrec word of the SQ */
};
#define DOORBELL_MLX5_INLINE_SEG 0x80000000u /* MLX5_INLINE_SEG */

/* What the translation needs from the verbs side. */
typedef struct doorbell_mlx5_sq {
    uint8_t           *buf;        /* SQ buffer: wqebbs * 64 bytes */
    uint32_t           wqebbs;     /* a power of two */
    uint32_t           qpn;        /* QP number */
    volatile uint32_t *dbrec;      /* doorbell record (2 words) */
    volatile uint64_t *uar;        /* doorbell register in the UAR page */
    uint32_t           lkey;       /* local key covering local_addr buffers */
    uint64_t           fetch_addr; /* 8 bytes where fetch-add results land */
    uint32_t           fetch_lkey;
} doorbell_mlx5_sq_t;

#ifdef __cplusplus
}
#endif

DOORBELL_HD void doorbell_mlx5_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

DOORBELL_HD void doorbell_mlx5_be64(uint8_t *p, uint64_t v)
{
    doorbell_mlx5_be32(p, (uint32_t)(v >> 32));
    doorbell_mlx5_be32(p + 4, (uint32_t)v);
}

/* ctrl segment (16 bytes): opmod_idx_opcode, qpn_ds, signature, stream id,
 * fm_ce_se, imm. ds counts 16-byte units of the whole WQE. */
DOORBELL_HD void doorbell_mlx5_ctrl(uint8_t *p, uint16_t pi, uint8_t opcode, uint32_t qpn,
                                    uint8_t ds, uint8_t fm_ce_se)
{
    doorbell_mlx5_be32(p, ((uint32_t)pi << 8) | opcode);
    doorbell_mlx5_be32(p + 4, (qpn << 8) | ds);
    p[8]  = 0;
    p[9]  = 0;
    p[10] = 0;
    p[11] = fm_ce_se;
    doorbell_mlx5_be32(p + 12, 0);
}

/* remote-address segment (16 bytes) */
DOORBELL_HD void doorbell_mlx5_raddr(uint8_t *p, uint64_t raddr, uint32_t rkey)
{
    doorbell_mlx5_be64(p, raddr);
    doorbell_mlx5_be32(p + 8, rkey);
    doorbell_mlx5_be32(p + 12, 0);
}

/* data (scatter/gather) segment (16 bytes) */
DOORBELL_HD void doorbell_mlx5_data(uint8_t *p, uint32_t length, uint32_t lkey, uint64_t addr)
{
    doorbell_mlx5_be32(p, length);
    doorbell_mlx5_be32(p + 4, lkey);
    doorbell_mlx5_be64(p + 8, addr);
}

/*
 * Writes the mlx5 WQEs for w at SQ positions pi, pi+1 (one WQEBB each) into
 * out (128 bytes). Returns how many WQEs (1 or 2), or 0 when w cannot be
 * expressed (SEND needs the verbs device's receive side; bad fields).
 * signaled asks for a CQE on the last WQE written.
 */
DOORBELL_HD uint32_t doorbell_mlx5_translate(const doorbell_wqe_t &w, uint16_t pi, uint32_t qpn,
                                             uint32_t lkey, uint64_t fetch_addr,
                                             uint32_t fetch_lkey, bool signaled, uint8_t *out)
{
    uint8_t fence = (w.flags & DOORBELL_WQE_FENCE) ? DOORBELL_MLX5_CTRL_FENCE : 0;
    uint8_t ce    = signaled ? DOORBELL_MLX5_CTRL_CQ_UPDATE : 0;

    for (uint32_t k = 0; k < 2 * DOORBELL_MLX5_WQEBB; ++k) {
        out[k] = 0;
    }
    switch (w.opcode) {
    case DOORBELL_OP_NOP:
        doorbell_mlx5_ctrl(out, pi, DOORBELL_MLX5_OPCODE_NOP, qpn, 1, fence | ce);
        return 1;
    case DOORBELL_OP_GET:
        doorbell_mlx5_ctrl(out, pi, DOORBELL_MLX5_OPCODE_READ, qpn, 3, fence | ce);
        doorbell_mlx5_raddr(out + 16, w.remote_addr, w.rkey);
        doorbell_mlx5_data(out + 32, w.length, lkey, w.local_addr);
        return 1;
    case DOORBELL_OP_PUT:
    case DOORBELL_OP_PUT_SIGNAL: {
        bool    has_signal = (w.opcode == DOORBELL_OP_PUT_SIGNAL);
        uint8_t put_ce     = has_signal ? 0 : ce;
        if (w.flags & DOORBELL_WQE_INLINE) {
            if (w.inline_len > DOORBELL_WQE_INLINE_MAX) {
                return 0;
            }
            /* 4-byte inline header + data, rounded up to 16-byte units */
            uint8_t ds = (uint8_t)(2 + (4 + w.inline_len + 15) / 16);
            doorbell_mlx5_ctrl(out, pi, DOORBELL_MLX5_OPCODE_WRITE, qpn, ds, fence | put_ce);
            doorbell_mlx5_raddr(out + 16, w.remote_addr, w.rkey);
            doorbell_mlx5_be32(out + 32, DOORBELL_MLX5_INLINE_SEG | w.inline_len);
            for (uint32_t k = 0; k < w.inline_len; ++k) {
                out[36 + k] = w.inline_data[k];
            }
        } else {
            doorbell_mlx5_ctrl(out, pi, DOORBELL_MLX5_OPCODE_WRITE, qpn, 3, fence | put_ce);
            doorbell_mlx5_raddr(out + 16, w.remote_addr, w.rkey);
            doorbell_mlx5_data(out + 32, w.length, lkey, w.local_addr);
        }
        if (!has_signal) {
            return 1;
        }
        uint8_t *s = out + DOORBELL_MLX5_WQEBB;
        if (w.am_id == DOORBELL_SIGNAL_SET) {
            /* ctrl + raddr + 4-byte inline header and 8 bytes: 3 units */
            doorbell_mlx5_ctrl(s, (uint16_t)(pi + 1), DOORBELL_MLX5_OPCODE_WRITE, qpn, 3, ce);
            doorbell_mlx5_raddr(s + 16, w.signal_addr, w.signal_rkey);
            doorbell_mlx5_be32(s + 32, DOORBELL_MLX5_INLINE_SEG | 8);
            for (uint32_t k = 0; k < 8; ++k) {
                s[36 + k] = (uint8_t)(w.signal_value >> (8 * k)); /* native LE bytes */
            }
        } else if (w.am_id == DOORBELL_SIGNAL_ADD) {
            doorbell_mlx5_ctrl(s, (uint16_t)(pi + 1), DOORBELL_MLX5_OPCODE_FA, qpn, 4, ce);
            doorbell_mlx5_raddr(s + 16, w.signal_addr, w.signal_rkey);
            doorbell_mlx5_be64(s + 32, w.signal_value); /* swap_add */
            doorbell_mlx5_be64(s + 40, 0);              /* compare */
            doorbell_mlx5_data(s + 48, 8, fetch_lkey, fetch_addr);
        } else {
            return 0;
        }
        return 2;
    }
    default:
        return 0;
    }
}

/* Order the WQE stores before the doorbell record, and the record before
 * the UAR write (the NIC may read the SQ as soon as the UAR is written). */
DOORBELL_HD void doorbell_mlx5_fence()
{
#if defined(__CUDA_ARCH__)
    __threadfence_system();
#elif defined(__CUDACC__)
    cuda::std::atomic_thread_fence(cuda::std::memory_order_seq_cst);
#elif defined(__SANITIZE_THREAD__)
    /* ThreadSanitizer has no fences; the record and UAR stores are release
     * stores, which order the WQE stores before them for the NIC thread */
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

/* Stores to the doorbell record and the UAR: single stores the NIC (a thread
 * in the tests) reads; release order on the host. */
DOORBELL_HD void doorbell_mlx5_mmio_store32(volatile uint32_t *p, uint32_t v)
{
#if defined(__CUDA_ARCH__)
    *p = v;
#else
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

DOORBELL_HD void doorbell_mlx5_mmio_store64(volatile uint64_t *p, uint64_t v)
{
#if defined(__CUDA_ARCH__)
    *p = v;
#else
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

/* Rings the SQ: dbrec = pi (16 bits, big-endian), then the UAR gets the
 * first 8 bytes of the last WQE's ctrl segment, as the bytes lie in memory. */
DOORBELL_HD void doorbell_mlx5_ring(const doorbell_mlx5_sq_t &sq, uint16_t pi,
                                    const uint8_t *last_ctrl)
{
    uint8_t  be[4];
    uint32_t rec;
    uint64_t db = 0;

    doorbell_mlx5_be32(be, pi);
    rec = (uint32_t)be[0] | ((uint32_t)be[1] << 8) | ((uint32_t)be[2] << 16) |
          ((uint32_t)be[3] << 24);
    for (uint32_t k = 0; k < 8; ++k) {
        db |= (uint64_t)last_ctrl[k] << (8 * k);
    }
    doorbell_mlx5_fence();
    doorbell_mlx5_mmio_store32(&sq.dbrec[DOORBELL_MLX5_SND_DBR], rec);
    doorbell_mlx5_fence();
    doorbell_mlx5_mmio_store64(sq.uar, db);
}

/*
 * A batch put as one doorbell (the IBGDA path of doorbell_gpu_ring_post):
 * translates n WQEs into the SQ starting at producer index *pi_p, signals
 * only the last, rings once. Returns the WQEBBs used, 0 if a WQE cannot be
 * translated (nothing rung) or the SQ lacks room (caller tracks the consumer
 * index; room is the free WQEBBs).
 */
DOORBELL_HD uint32_t doorbell_mlx5_post(const doorbell_mlx5_sq_t &sq, uint16_t *pi_p,
                                        const doorbell_wqe_t *wqes, uint32_t n, uint32_t room)
{
    uint8_t  tmp[2 * DOORBELL_MLX5_WQEBB];
    uint16_t pi   = *pi_p;
    uint32_t used = 0;
    uint8_t *last = nullptr;

    for (uint32_t i = 0; i < n; ++i) {
        uint32_t m = doorbell_mlx5_translate(wqes[i], (uint16_t)(pi + used), sq.qpn, sq.lkey,
                                             sq.fetch_addr, sq.fetch_lkey, i + 1 == n, tmp);
        if ((m == 0) || (used + m > room)) {
            return 0;
        }
        for (uint32_t k = 0; k < m; ++k) {
            uint8_t *dst = sq.buf + (((uint32_t)(uint16_t)(pi + used) & (sq.wqebbs - 1)) *
                                     DOORBELL_MLX5_WQEBB);
            for (uint32_t b = 0; b < DOORBELL_MLX5_WQEBB; ++b) {
                dst[b] = tmp[k * DOORBELL_MLX5_WQEBB + b];
            }
            last = dst;
            ++used;
        }
    }
    if (used == 0) {
        return 0;
    }
    *pi_p = (uint16_t)(pi + used);
    doorbell_mlx5_ring(sq, *pi_p, last);
    return used;
}

/* ================================================================ IBGDA
 *
 * Producers (GPU threads; CPU threads in the tests) drive an exported mlx5
 * send queue themselves, with the same ring protocol as the doorbell ring,
 * counted in 64-byte WQE blocks (WQEBBs) instead of ring slots:
 *   1. reserve   a group leader takes n WQEBBs with one fetch_add on
 *                ctl->reserve and waits until the SQ has room
 *                (completed >= base + n - window; window = the SQ's
 *                WQEBBs, at most the CQ's entries), polling the CQ itself;
 *   2. write     each producer translates its WQEs into the SQ at its
 *                positions; only the group's last WQE asks for a CQE;
 *   3. ring      in reservation order (wait ready == base): posted = end,
 *                doorbell record = end, UAR = the last WQE's ctrl bytes,
 *                ready = end. In order, so the record never moves back and
 *                never covers a WQE not yet written;
 *   4. complete  any waiter polls the CQ (one at a time, a try-lock): a CQE
 *                for WQE index k completes every WQEBB up to k + 1; an
 *                error CQE stores its status and syndrome, which every wait
 *                returns (never an endless wait); the CQ's doorbell record
 *                gets the consumer index so the NIC can reuse the entries.
 * Tickets are WQEBB positions. A queue holds at most 32768 WQEBBs, so a
 * CQE's 16-bit wqe_counter identifies one WQE among those posted.
 */

enum {
    DOORBELL_MLX5_CQE_REQ      = 0x0, /* MLX5_CQE_REQ */
    DOORBELL_MLX5_CQE_REQ_ERR  = 0xd, /* MLX5_CQE_REQ_ERR */
    DOORBELL_MLX5_CQE_RESP_ERR = 0xe, /* MLX5_CQE_RESP_ERR */
    DOORBELL_MLX5_CQE_INVALID  = 0xf, /* MLX5_CQE_INVALID */
    DOORBELL_MLX5_MAX_WQEBBS   = 32768
};

#ifdef __cplusplus
extern "C" {
#endif

/* The QP's own send CQ as the NIC writes it. */
typedef struct doorbell_mlx5_cq {
    uint8_t           *buf;      /* cqe_cnt CQEs of cqe_size bytes */
    uint32_t           cqe_cnt;  /* a power of two */
    uint32_t           cqe_size; /* 64 or 128; the 64-byte CQE is the last */
    volatile uint32_t *dbrec;    /* [0]: consumer index, 24 bits, big-endian */
    uint32_t           cqn;
    uint32_t           reserved;
} doorbell_mlx5_cq_t;

/* Producer-side words (zeroed memory only producers touch: device memory
 * for a GPU), each group on its own cache line. */
typedef struct doorbell_mlx5_ctl {
    uint64_t reserve; /* WQEBBs reserved */
    uint64_t pad0[7];
    uint64_t ready;  /* WQEBBs rung, in order (the turn) */
    uint64_t posted; /* WQEBBs about to be rung (>= any CQE's) */
    uint64_t pad1[6];
    uint64_t completed; /* WQEBBs completed */
    uint64_t cq_ci;     /* CQEs consumed */
    int32_t  poll_lock; /* one CQ poller at a time */
    int32_t  error;     /* doorbell_status_t of an error CQE */
    uint32_t syndrome;  /* its mlx5 syndrome */
    uint32_t error_wqe; /* its wqe_counter */
    uint64_t pad2[4];
} doorbell_mlx5_ctl_t;

/* Everything producers need, in their address space. */
typedef struct doorbell_mlx5_qp {
    doorbell_mlx5_sq_t   sq;
    doorbell_mlx5_cq_t   cq;
    doorbell_mlx5_ctl_t *ctl;
    uint64_t             timeout_ns; /* longest wait for room, turn or CQE */
} doorbell_mlx5_qp_t;

#ifdef __cplusplus
}
#endif

namespace doorbell_gpu_port {

DOORBELL_HD int32_t load_acquire(int32_t *p)
{
    return atomic_ref<int32_t>(*p).load(mo::memory_order_acquire);
}

DOORBELL_HD bool try_lock(int32_t *p)
{
    int32_t expected = 0;
    return atomic_ref<int32_t>(*p).compare_exchange_strong(expected, 1, mo::memory_order_acquire,
                                                           mo::memory_order_relaxed);
}

DOORBELL_HD void store_release(int32_t *p, int32_t v)
{
    atomic_ref<int32_t>(*p).store(v, mo::memory_order_release);
}

DOORBELL_HD void unlock(int32_t *p)
{
    atomic_ref<int32_t>(*p).store(0, mo::memory_order_release);
}

DOORBELL_HD uint8_t load_acquire_u8(const uint8_t *p)
{
#if defined(__CUDA_ARCH__)
    uint8_t v = *(const volatile uint8_t *)p;
    __threadfence_system();
    return v;
#else
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

} /* namespace doorbell_gpu_port */

/* An mlx5 completion syndrome as a doorbell status. */
DOORBELL_HD doorbell_status_t doorbell_mlx5_syndrome_status(uint8_t syndrome)
{
    switch (syndrome) {
    case 0x04: /* local protection */
    case 0x11: /* local access */
    case 0x13: /* remote access */
        return DOORBELL_ERR_REMOTE_ACCESS;
    case 0x15: /* transport retry counter exceeded */
    case 0x16: /* RNR retry counter exceeded */
        return DOORBELL_ERR_TIMED_OUT;
    case 0x05: /* work request flushed */
        return DOORBELL_ERR_CANCELED;
    case 0x12: /* remote invalid request */
    case 0x14: /* remote operation */
    case 0x22: /* remote aborted */
        return DOORBELL_ERR_REMOTE;
    default:
        return DOORBELL_ERR_IO;
    }
}

/* WQEBBs a WQE takes (PUT_SIGNAL: the write and the signal). */
DOORBELL_HD uint32_t doorbell_mlx5_wqebbs(const doorbell_wqe_t &w)
{
    return (w.opcode == DOORBELL_OP_PUT_SIGNAL) ? 2 : 1;
}

DOORBELL_HD doorbell_status_t doorbell_mlx5_qp_status(const doorbell_mlx5_qp_t &q)
{
    return (doorbell_status_t)doorbell_gpu_port::load_relaxed(&q.ctl->error);
}

DOORBELL_HD void doorbell_mlx5_qp_set_error(const doorbell_mlx5_qp_t &q, doorbell_status_t st)
{
    if (doorbell_gpu_port::load_relaxed(&q.ctl->error) == 0) {
        doorbell_gpu_port::store_relaxed(&q.ctl->error, (int32_t)st);
    }
}

/* Consumes the CQEs the NIC wrote, if no one else is polling. Returns how
 * many it consumed. */
DOORBELL_HD uint32_t doorbell_mlx5_qp_poll(const doorbell_mlx5_qp_t &q)
{
    doorbell_mlx5_ctl_t *c = q.ctl;
    uint32_t             n = 0;

    if (!doorbell_gpu_port::try_lock(&c->poll_lock)) {
        return 0;
    }
    for (;;) {
        uint64_t       ci = doorbell_gpu_port::load_relaxed(&c->cq_ci);
        const uint8_t *e  = q.cq.buf + (ci & (q.cq.cqe_cnt - 1)) * q.cq.cqe_size +
                           (q.cq.cqe_size - 64);
        uint8_t op_own = doorbell_gpu_port::load_acquire_u8(e + 63);
        uint8_t opcode = op_own >> 4;
        uint8_t owner  = (uint8_t)((ci / q.cq.cqe_cnt) & 1);
        if ((opcode == DOORBELL_MLX5_CQE_INVALID) || ((op_own & 1) != owner)) {
            break;
        }
        uint16_t wqe = (uint16_t)((e[60] << 8) | e[61]);
        if ((opcode == DOORBELL_MLX5_CQE_REQ_ERR) || (opcode == DOORBELL_MLX5_CQE_RESP_ERR)) {
            if (doorbell_gpu_port::load_relaxed(&c->error) == 0) {
                c->syndrome  = e[55];
                c->error_wqe = wqe;
                /* release: syndrome and wqe are read after the error */
                doorbell_gpu_port::store_release(&c->error,
                                                 (int32_t)doorbell_mlx5_syndrome_status(e[55]));
            }
        } else {
            /* the 64-bit end of WQE `wqe`: the nearest position at or
             * below `posted` whose low 16 bits are wqe + 1 */
            uint64_t posted = doorbell_gpu_port::load_acquire(&c->posted);
            uint64_t end    = posted - (uint16_t)((uint16_t)posted - (uint16_t)(wqe + 1));
            if (end > doorbell_gpu_port::load_relaxed(&c->completed)) {
                doorbell_gpu_port::store_release(&c->completed, end);
            }
        }
        ++ci;
        ++n;
        doorbell_gpu_port::store_release(&c->cq_ci, ci);
        uint8_t be[4];
        doorbell_mlx5_be32(be, (uint32_t)ci & 0xffffff);
        doorbell_mlx5_mmio_store32(&q.cq.dbrec[0], (uint32_t)be[0] | ((uint32_t)be[1] << 8) |
                                                       ((uint32_t)be[2] << 16) |
                                                       ((uint32_t)be[3] << 24));
    }
    doorbell_gpu_port::unlock(&c->poll_lock);
    return n;
}

/* Waits until every WQEBB below ticket completed: OK, the queue's error
 * (an error CQE, or *cancel set by the host), or TIMED_OUT. */
DOORBELL_HD doorbell_status_t doorbell_mlx5_qp_wait(const doorbell_mlx5_qp_t &q, uint64_t ticket,
                                                    int32_t *cancel)
{
    uint64_t deadline = 0;

    for (;;) {
        if (doorbell_gpu_port::load_acquire(&q.ctl->completed) >= ticket) {
            return DOORBELL_OK;
        }
        doorbell_status_t st = doorbell_mlx5_qp_status(q);
        if ((st == DOORBELL_OK) && (cancel != nullptr)) {
            st = (doorbell_status_t)doorbell_gpu_port::load_relaxed(cancel);
        }
        if (st != DOORBELL_OK) {
            return st;
        }
        if (doorbell_mlx5_qp_poll(q) != 0) {
            continue;
        }
        uint64_t now = doorbell_gpu_port::now_ns();
        if (deadline == 0) {
            deadline = now + q.timeout_ns;
        } else if (now > deadline) {
            return DOORBELL_ERR_TIMED_OUT;
        }
        doorbell_gpu_port::pause();
    }
}

/* Reserves n WQEBBs and waits for room in the SQ. A timeout while holding
 * the reservation leaves a gap the ring order can never pass: the queue is
 * failed. */
DOORBELL_HD doorbell_status_t doorbell_mlx5_qp_reserve(const doorbell_mlx5_qp_t &q, uint32_t n,
                                                       int32_t *cancel, uint64_t *base_p)
{
    doorbell_status_t st = doorbell_mlx5_qp_status(q);
    if (st != DOORBELL_OK) {
        return st;
    }
    /* in flight: what the SQ holds, and no more WQEs than the CQ has
     * entries (each may ask for a CQE) */
    uint32_t window = (q.cq.cqe_cnt < q.sq.wqebbs) ? q.cq.cqe_cnt : q.sq.wqebbs;
    if ((n == 0) || (n > window)) {
        return DOORBELL_ERR_INVALID_PARAM;
    }
    uint64_t base = doorbell_gpu_port::fetch_add_relaxed(&q.ctl->reserve, n);
    if (base + n > window) {
        st = doorbell_mlx5_qp_wait(q, base + n - window, cancel);
        if (st == DOORBELL_ERR_TIMED_OUT) {
            doorbell_mlx5_qp_set_error(q, DOORBELL_ERR_TIMED_OUT);
        }
        if (st != DOORBELL_OK) {
            return st;
        }
    }
    *base_p = base;
    return DOORBELL_OK;
}

/* Writes w at SQ position pos (1 or 2 WQEBBs). False: w cannot be
 * expressed; a NOP takes its place (the positions are reserved and must be
 * rung) and the queue fails with INVALID_PARAM. */
DOORBELL_HD bool doorbell_mlx5_qp_write(const doorbell_mlx5_qp_t &q, uint64_t pos,
                                        const doorbell_wqe_t &w, bool signaled)
{
    uint8_t  tmp[2 * DOORBELL_MLX5_WQEBB];
    uint32_t want = doorbell_mlx5_wqebbs(w);
    uint32_t m    = doorbell_mlx5_translate(w, (uint16_t)pos, q.sq.qpn, q.sq.lkey, q.sq.fetch_addr,
                                            q.sq.fetch_lkey, signaled, tmp);
    bool     ok   = (m == want);
    if (!ok) {
        doorbell_wqe_t nop = {};
        nop.opcode         = DOORBELL_OP_NOP;
        for (uint32_t k = 0; k < want; ++k) {
            doorbell_mlx5_translate(nop, (uint16_t)(pos + k), q.sq.qpn, 0, 0, 0,
                                    signaled && (k + 1 == want), tmp + k * DOORBELL_MLX5_WQEBB);
        }
        doorbell_mlx5_qp_set_error(q, DOORBELL_ERR_INVALID_PARAM);
    }
    for (uint32_t k = 0; k < want; ++k) {
        uint8_t *dst = q.sq.buf + ((pos + k) & (q.sq.wqebbs - 1)) * DOORBELL_MLX5_WQEBB;
        for (uint32_t b = 0; b < DOORBELL_MLX5_WQEBB; ++b) {
            dst[b] = tmp[k * DOORBELL_MLX5_WQEBB + b];
        }
    }
    return ok;
}

/* Rings WQEBBs [base, end) once every earlier reservation has rung. */
DOORBELL_HD doorbell_status_t doorbell_mlx5_qp_ring(const doorbell_mlx5_qp_t &q, uint64_t base,
                                                    uint64_t end)
{
    doorbell_mlx5_ctl_t *c        = q.ctl;
    uint64_t             deadline = 0;

    while (doorbell_gpu_port::load_acquire(&c->ready) != base) {
        /* an earlier producer that gave up never rings: the queue is dead */
        doorbell_status_t st = doorbell_mlx5_qp_status(q);
        if (st == DOORBELL_ERR_TIMED_OUT) {
            return st;
        }
        uint64_t now = doorbell_gpu_port::now_ns();
        if (deadline == 0) {
            deadline = now + q.timeout_ns;
        } else if (now > deadline) {
            doorbell_mlx5_qp_set_error(q, DOORBELL_ERR_TIMED_OUT);
            return DOORBELL_ERR_TIMED_OUT;
        }
        doorbell_gpu_port::pause();
    }
    doorbell_gpu_port::store_release(&c->posted, end);
    doorbell_mlx5_ring(q.sq, (uint16_t)end,
                       q.sq.buf + ((end - 1) & (q.sq.wqebbs - 1)) * DOORBELL_MLX5_WQEBB);
    doorbell_gpu_port::store_release(&c->ready, end);
    return DOORBELL_OK;
}

/* One producer's batch: n WQEs, the last signaled, one doorbell. *end_p is
 * the ticket. */
DOORBELL_HD doorbell_status_t doorbell_mlx5_qp_post(const doorbell_mlx5_qp_t &q,
                                                    const doorbell_wqe_t *wqes, uint32_t n,
                                                    int32_t *cancel, uint64_t *end_p)
{
    uint32_t total = 0;
    uint64_t base;

    for (uint32_t k = 0; k < n; ++k) {
        total += doorbell_mlx5_wqebbs(wqes[k]);
    }
    doorbell_status_t st = doorbell_mlx5_qp_reserve(q, total, cancel, &base);
    if (st != DOORBELL_OK) {
        return st;
    }
    uint64_t pos = base;
    bool     ok  = true;
    for (uint32_t k = 0; k < n; ++k) {
        ok &= doorbell_mlx5_qp_write(q, pos, wqes[k], k + 1 == n);
        pos += doorbell_mlx5_wqebbs(wqes[k]);
    }
    st = doorbell_mlx5_qp_ring(q, base, base + total);
    if (st != DOORBELL_OK) {
        return st;
    }
    *end_p = base + total;
    return ok ? DOORBELL_OK : DOORBELL_ERR_INVALID_PARAM;
}

/* A group's post (a warp): one reservation, one doorbell; the group's last
 * WQE is signaled. Same contract as doorbell_gpu_ring_group_post. */
template <class Group>
DOORBELL_HD doorbell_status_t doorbell_mlx5_qp_group_post(Group &g, const doorbell_mlx5_qp_t &q,
                                                          const doorbell_wqe_t *wqes, uint32_t n,
                                                          int32_t *cancel, uint64_t *end_p,
                                                          uint64_t *group_end_p)
{
    uint32_t mine = 0, total;
    for (uint32_t k = 0; k < n; ++k) {
        mine += doorbell_mlx5_wqebbs(wqes[k]);
    }
    uint32_t offset = g.exclusive_sum(mine, &total);
    uint64_t base   = 0;
    int32_t  st     = DOORBELL_OK;

    if (total == 0) {
        *end_p       = 0;
        *group_end_p = 0;
        return DOORBELL_ERR_INVALID_PARAM;
    }
    if (g.is_leader()) {
        st = doorbell_mlx5_qp_reserve(q, total, cancel, &base);
    }
    st = (int32_t)g.broadcast((uint64_t)(int64_t)st);
    if (st != DOORBELL_OK) {
        return (doorbell_status_t)st;
    }
    base         = g.broadcast(base);
    uint64_t pos = base + offset;
    bool     ok  = true;
    for (uint32_t k = 0; k < n; ++k) {
        bool last = (k + 1 == n) && (offset + mine == total);
        ok &= doorbell_mlx5_qp_write(q, pos, wqes[k], last);
        pos += doorbell_mlx5_wqebbs(wqes[k]);
    }
    g.sync(); /* every member's WQEs are in the SQ before the doorbell */
    if (g.is_leader()) {
        st = doorbell_mlx5_qp_ring(q, base, base + total);
    }
    st = (int32_t)g.broadcast((uint64_t)(int64_t)st);
    if (st != DOORBELL_OK) {
        return (doorbell_status_t)st;
    }
    *end_p       = base + offset + mine;
    *group_end_p = base + total;
    return ok ? DOORBELL_OK : DOORBELL_ERR_INVALID_PARAM;
}

#ifdef __cplusplus
extern "C" {
#endif

/* Run-time detection of the IBGDA path. Returns DOORBELL_OK when an mlx5
 * device is present and the build has mlx5dv; otherwise the reason (no
 * mlx5dv at build time, no RDMA device, no mlx5 device) in reason. */
doorbell_status_t doorbell_gpu_mlx5_probe(char *reason, size_t length);

#ifdef __cplusplus
}
#endif

#endif /* DOORBELL_GPU_MLX5_H */
