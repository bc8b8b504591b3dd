/*
 * The work-queue entry: one 64-byte slot of a send ring. The CPU batcher and
 * GPU threads write the same format; a device (the UDP engine, or the verbs
 * translation) consumes it. Plain C so that CUDA, C and C++ share it.
 */
#ifndef DOORBELL_WQE_H
#define DOORBELL_WQE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum doorbell_opcode {
    DOORBELL_OP_NOP        = 0, /* no data; still completes (used to pad/flush) */
    DOORBELL_OP_PUT        = 1, /* RDMA WRITE local_addr -> remote_addr */
    DOORBELL_OP_GET        = 2, /* RDMA READ remote_addr -> local_addr */
    DOORBELL_OP_SEND       = 3, /* active message into a pre-posted receive buffer */
    DOORBELL_OP_PUT_SIGNAL = 4, /* PUT, then (ordered after it) an 8-byte
                                   signal update at signal_addr */
    DOORBELL_OP_ATOMIC     = 5, /* one atomic on the length-byte word at
                                   remote_addr (doorbell_qp_atomic); the old
                                   value to local_addr when it is not 0 */
    DOORBELL_OP_LAST
};

enum doorbell_wqe_flags {
    DOORBELL_WQE_SIGNALED = 1u << 0, /* generate a completion for this WQE */
    DOORBELL_WQE_INLINE   = 1u << 1, /* payload is in inline_data, not local_addr */
    DOORBELL_WQE_FENCE    = 1u << 2  /* start only after all earlier WQEs completed */
};

enum doorbell_signal_op {
    DOORBELL_SIGNAL_SET = 0, /* *signal_addr = signal_value */
    DOORBELL_SIGNAL_ADD = 1  /* *signal_addr += signal_value */
};

#define DOORBELL_WQE_INLINE_MAX 16 /* bytes of payload carried in the WQE itself */

typedef struct doorbell_wqe {
    uint8_t  opcode;      /* enum doorbell_opcode */
    uint8_t  flags;       /* enum doorbell_wqe_flags */
    uint8_t  am_id;       /* SEND: active-message id; PUT_SIGNAL: signal op;
                              ATOMIC: doorbell_atomic_op */
    uint8_t  inline_len;  /* bytes in inline_data when DOORBELL_WQE_INLINE */
    uint32_t rkey;        /* remote key of remote_addr */
    uint64_t remote_addr; /* target virtual address (bytes) */
    uint64_t local_addr;  /* source (PUT/SEND) or destination (GET) address */
    uint32_t length;      /* payload bytes (ATOMIC: the word's, 4 or 8) */
    uint32_t signal_rkey; /* PUT_SIGNAL: remote key of signal_addr */
    union {
        uint64_t signal_addr;    /* PUT_SIGNAL: remote address of a 64-bit word */
        uint64_t atomic_compare; /* ATOMIC CSWAP: the value expected */
    };
    union {
        uint64_t signal_value;   /* PUT_SIGNAL: operand of the signal op */
        uint64_t atomic_operand; /* ATOMIC: the operand (CSWAP: the new value) */
    };
    union {
        uint64_t wr_id; /* completion cookie returned to the poster */
        uint8_t  inline_data[DOORBELL_WQE_INLINE_MAX];
    };
} doorbell_wqe_t;

#ifdef __cplusplus
static_assert(sizeof(doorbell_wqe_t) == 64, "a WQE is one cache line");
}
#endif

#endif /* DOORBELL_WQE_H */
