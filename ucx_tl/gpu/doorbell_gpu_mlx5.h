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
    DOORBELL_MLX5_WQEBB          = 64,         /* MLX5_SEND_WQE_BB */
    DOORBELL_MLX5_OPCODE_NOP     = 0x00,
    DOORBELL_MLX5_OPCODE_WRITE   = 0x08,       /* MLX5_OPCODE_RDMA_WRITE */
    DOORBELL_MLX5_OPCODE_READ    = 0x10,
    DOORBELL_MLX5_OPCODE_FA      = 0x12,       /* MLX5_OPCODE_ATOMIC_FA */
    DOORBELL_MLX5_CTRL_CQ_UPDATE = 0x08,       /* MLX5_WQE_CTRL_CQ_UPDATE */
    DOORBELL_MLX5_CTRL_FENCE     = 0x80,       /* MLX5_WQE_CTRL_FENCE */
    DOORBELL_MLX5_SND_DBR        = 1           /* dbrec word of the SQ */
};
#define DOORBELL_MLX5_INLINE_SEG 0x80000000u   /* MLX5_INLINE_SEG */

/* What the translation needs from the verbs side. */
typedef struct doorbell_mlx5_sq {
    uint8_t           *buf;          /* SQ buffer: wqebbs * 64 bytes */
    uint32_t           wqebbs;       /* a power of two */
    uint32_t           qpn;          /* QP number */
    volatile uint32_t *dbrec;        /* doorbell record (2 words) */
    volatile uint64_t *uar;          /* doorbell register in the UAR page */
    uint32_t           lkey;         /* local key covering local_addr buffers */
    uint64_t           fetch_addr;   /* 8 bytes where fetch-add results land */
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
DOORBELL_HD uint32_t doorbell_mlx5_translate(const doorbell_wqe_t &w, uint16_t pi,
                                             uint32_t qpn, uint32_t lkey,
                                             uint64_t fetch_addr, uint32_t fetch_lkey,
                                             bool signaled, uint8_t *out)
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
        bool has_signal = (w.opcode == DOORBELL_OP_PUT_SIGNAL);
        uint8_t put_ce  = has_signal ? 0 : ce;
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
            doorbell_mlx5_ctrl(s, (uint16_t)(pi + 1), DOORBELL_MLX5_OPCODE_WRITE, qpn, 4, ce);
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
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

/* Rings the SQ: dbrec = pi (16 bits, big-endian), then the UAR gets the
 * first 8 bytes of the last WQE's ctrl segment, as the bytes lie in memory. */
DOORBELL_HD void doorbell_mlx5_ring(const doorbell_mlx5_sq_t &sq, uint16_t pi,
                                    const uint8_t *last_ctrl)
{
    uint8_t be[4];
    uint32_t rec;
    uint64_t db = 0;

    doorbell_mlx5_be32(be, pi);
    rec = (uint32_t)be[0] | ((uint32_t)be[1] << 8) | ((uint32_t)be[2] << 16) |
          ((uint32_t)be[3] << 24);
    for (uint32_t k = 0; k < 8; ++k) {
        db |= (uint64_t)last_ctrl[k] << (8 * k);
    }
    doorbell_mlx5_fence();
    sq.dbrec[DOORBELL_MLX5_SND_DBR] = rec;
    doorbell_mlx5_fence();
    *sq.uar = db;
}

/*
 * A batch put as one doorbell (the IBGDA path of doorbell_gpu_ring_post):
 * translates n WQEs into the SQ starting at producer index *pi_p, signals
 * only the last, rings once. Returns the WQEBBs used, 0 if a WQE cannot be
 * translated (nothing rung) or the SQ lacks room (caller tracks the consumer
 * index; room is the free WQEBBs).
 */
DOORBELL_HD uint32_t doorbell_mlx5_post(const doorbell_mlx5_sq_t &sq, uint16_t *pi_p,
                                        const doorbell_wqe_t *wqes, uint32_t n,
                                        uint32_t room)
{
    uint8_t tmp[2 * DOORBELL_MLX5_WQEBB];
    uint16_t pi       = *pi_p;
    uint32_t used     = 0;
    uint8_t *last     = nullptr;

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
