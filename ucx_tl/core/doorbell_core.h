/*
 * doorbell core: the C boundary between the transport core (C++20, no UCX
 * types) and its adapters (the UCT module, the GPU host API, tools).
 *
 * Objects: a protection domain (memory regions and remote keys, shared by the
 * ifaces of one UCT memory domain), an iface (one device context: a socket on
 * the UDP device, an ibv_context port on verbs) and queue pairs (RC semantics:
 * reliable, in order) from an iface to a remote iface.
 *
 * Threading: calls on one iface and its QPs are serialized by the caller (the
 * UCX worker does this). Protection-domain calls are thread-safe.
 *
 * Errors: functions return doorbell_status_t; on failure a message naming the
 * device, the peer and the cause is available from doorbell_last_error() on
 * the calling thread until the next failing call.
 *
 * Units: sizes in bytes, times in nanoseconds, rates in bytes per second
 * unless a name says otherwise (_gbps: Gb/s).
 */
#ifndef DOORBELL_CORE_H
#define DOORBELL_CORE_H

#include "doorbell_defaults.h"
#include "doorbell_wqe.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum doorbell_status {
    DOORBELL_OK                = 0,
    DOORBELL_INPROGRESS        = 1,  /* accepted; completion callback follows */
    DOORBELL_ERR_NO_RESOURCE   = -1, /* send ring or credits full: retry after progress */
    DOORBELL_ERR_INVALID_PARAM = -2,
    DOORBELL_ERR_NO_MEMORY     = -3,
    DOORBELL_ERR_IO            = -4, /* a system call failed */
    DOORBELL_ERR_NO_DEVICE     = -5,
    DOORBELL_ERR_UNREACHABLE   = -6,
    DOORBELL_ERR_REMOTE_ACCESS = -7, /* remote key, bounds or access flags rejected */
    DOORBELL_ERR_TIMED_OUT     = -8, /* peer stopped answering (retries exhausted) */
    DOORBELL_ERR_CANCELED      = -9, /* QP destroyed or flushed in error */
    DOORBELL_ERR_UNSUPPORTED   = -10,
    DOORBELL_ERR_REMOTE        = -11 /* peer reported a protocol error */
} doorbell_status_t;

const char *doorbell_status_string(doorbell_status_t status);

/* Message of the last failure on this thread ("" if none). */
const char *doorbell_last_error(void);

/* Diagnostics below errors, one line each: why a device was skipped, a
 * fallback a device took (normal pages for huge ones, software pacing),
 * the capabilities it found, input it dropped. Process-wide; without a
 * handler (the default) they are dropped. The UCT module hands them to
 * UCX's log at debug level (UCX_LOG_LEVEL=debug). */
typedef void (*doorbell_debug_cb_t)(void *arg, const char *message);
void doorbell_set_debug_handler(doorbell_debug_cb_t cb, void *arg);

/* ---------------------------------------------------------------- devices */

typedef enum doorbell_device_kind {
    DOORBELL_DEVICE_UDP   = 0, /* software RDMA NIC over UDP on a netdev */
    DOORBELL_DEVICE_VERBS = 1  /* libibverbs port "<hca>:<port>" */
} doorbell_device_kind_t;

typedef struct doorbell_device_info {
    char                   name[64]; /* "lo", "eth0", "mlx5_0:1" */
    doorbell_device_kind_t kind;
    uint32_t               mtu;        /* largest packet payload, bytes */
    double                 bandwidth;  /* bytes/s (estimate) */
    double                 latency_ns; /* one-way estimate, ns */
    int                    numa_node;  /* -1 if unknown */
    /* verbs ports only (zero elsewhere) */
    char     link_layer[8]; /* "IB" or "RoCE" */
    uint16_t lid;           /* IB local identifier */
    uint8_t  gid[16];       /* GID the device uses */
} doorbell_device_info_t;

/* Fills up to max entries; returns how many devices exist (may exceed max). */
int doorbell_query_devices(doorbell_device_info_t *devices, int max);

/* ------------------------------------------------------ protection domain */

typedef struct doorbell_pd doorbell_pd_t;
typedef struct doorbell_mr doorbell_mr_t;

enum doorbell_access {
    DOORBELL_ACCESS_REMOTE_READ   = 1u << 0,
    DOORBELL_ACCESS_REMOTE_WRITE  = 1u << 1,
    DOORBELL_ACCESS_REMOTE_ATOMIC = 1u << 2 /* target of doorbell_qp_atomic */
};

doorbell_status_t doorbell_pd_create(doorbell_pd_t **pd_p);
void              doorbell_pd_destroy(doorbell_pd_t *pd);

/* Registers [address, address+length) with a fresh random 32-bit remote key. */
doorbell_status_t doorbell_mr_register(doorbell_pd_t *pd, void *address, size_t length,
                                       unsigned access, doorbell_mr_t **mr_p, uint32_t *rkey_p);
doorbell_status_t doorbell_mr_deregister(doorbell_pd_t *pd, doorbell_mr_t *mr);

/* ------------------------------------------------------------------ iface */

typedef struct doorbell_iface doorbell_iface_t;
typedef struct doorbell_qp    doorbell_qp_t;

typedef struct doorbell_iface_params {
    const char *device;                /* device name from doorbell_query_devices() */
    uint32_t    mtu;                   /* packet payload bytes; 0 = device maximum */
    uint32_t    tx_queue_len;          /* send ring WQEs per QP (power of two) */
    uint32_t    tx_batch;              /* most WQEs behind one doorbell */
    uint32_t    tx_moderation;         /* one signaled completion per N WQEs */
    uint32_t    am_credits;            /* active messages in flight per QP */
    uint32_t    seg_size;              /* largest active message (header included), bytes */
    uint32_t    rx_queue_len;          /* receive buffers of the iface */
    uint64_t    rto_min_ns;            /* first retransmit timeout */
    uint64_t    rto_max_ns;            /* backoff ceiling */
    uint32_t    retry_count;           /* retransmits before DOORBELL_ERR_TIMED_OUT */
    const char *cc;                    /* pacing policy: "ibrc", "dcqcn", "timely",
                                  * "none" (NULL alike), or "auto": ibrc, but
                                  * none on a loopback device */
    double      ibrc_gain;             /* 0 = derived from the measured RTT */
    uint64_t    cc_target_delay_ns;    /* queueing-delay target; 0 = automatic */
    double      cc_min_rate;           /* pacing floor, bytes/s; 0 = line rate / 2048 */
    double      cc_max_rate;           /* pacing ceiling, bytes/s; 0 = line rate */
    uint64_t    keepalive_interval_ns; /* a connected QP that heard nothing from its
                                     * peer this long probes it; 0 = never */
    uint64_t    keepalive_timeout_ns;  /* a peer silent this long is dead: the QP
                                     * fails with DOORBELL_ERR_TIMED_OUT */
    size_t      rx_reassembly_bytes;   /* bytes of half-finished active messages
                                     * an iface holds at most */
    uint32_t    paths;                 /* UDP device: source ports a connection's
                                     * packets are spread over, one socket each,
                                     * so that a fabric's ECMP hash spreads them
                                     * over its paths (the receiver puts them back
                                     * in order); 0 = automatic: 8, or 1 on a
                                     * loopback device. The verbs device: unused */
} doorbell_iface_params_t;

/* Defaults for every field (device left NULL): doorbell_defaults.h, the
 * same values the UCX transport's UCX_DOORBELL_* variables default to. */
void doorbell_iface_params_init(doorbell_iface_params_t *params);

/* Checks every field against its range (doorbell_defaults.h). No value is
 * adjusted: one outside its range fails with DOORBELL_ERR_INVALID_PARAM,
 * and doorbell_last_error() names the parameter (prefix followed by its
 * configuration name, e.g. "UCX_DOORBELL_" "TX_QUEUE_LEN"), the value and
 * the range. doorbell_iface_open checks with prefix "". */
doorbell_status_t doorbell_iface_params_check(const doorbell_iface_params_t *params,
                                              const char                    *prefix);

doorbell_status_t doorbell_iface_open(doorbell_pd_t *pd, const doorbell_iface_params_t *params,
                                      doorbell_iface_t **iface_p);
void              doorbell_iface_close(doorbell_iface_t *iface);

/* Addresses: the device address names the host (UDP: IPv4), the iface
 * address the endpoint on it (UDP: port and the iface's random 64-bit token,
 * the secret a peer needs to connect). Opaque blobs that travel out of band
 * through a trusted channel (the job's launcher); their lengths depend on
 * the device kind: ask, never assume. */
size_t doorbell_iface_device_address_length(const doorbell_iface_t *iface);
size_t doorbell_iface_address_length(const doorbell_iface_t *iface);
void   doorbell_iface_get_device_address(const doorbell_iface_t *iface, void *addr);
void   doorbell_iface_get_address(const doorbell_iface_t *iface, void *addr);
int    doorbell_iface_is_reachable(const doorbell_iface_t *iface, const void *device_addr,
                                   const void *iface_addr);

/* Limits the adapter advertises. */
typedef struct doorbell_iface_limits {
    size_t max_short;     /* put_short / am_short payload (AM: header included) */
    size_t max_bcopy;     /* put_bcopy / get_bcopy */
    size_t max_am_bcopy;  /* am_bcopy, header included */
    size_t max_zcopy;     /* put/get zcopy total */
    size_t max_iov;       /* entries per zcopy */
    size_t max_am_header; /* am_zcopy header */
    size_t max_am_zcopy;  /* am_zcopy header + payload */
    /* atomics (doorbell_qp_atomic) the device executes: one bit
     * (1u << doorbell_atomic_op_t) per operation, 0 for none */
    uint32_t atomic_ops;
    uint32_t atomic_sizes;      /* word sizes it takes: 4 | 8 (bytes) */
    uint32_t atomic_big_endian; /* 1: the target word is big-endian (the
                                   HCA's order), not the host's */
} doorbell_iface_limits_t;
void doorbell_iface_query_limits(const doorbell_iface_t *iface, doorbell_iface_limits_t *limits);

/* Progress: drives the device (receive, ACK, retransmit, completions).
 * Returns the number of completions and messages delivered. */
unsigned doorbell_iface_progress(doorbell_iface_t *iface);

/* The same, on behalf of an application that is not polling (a background
 * timer): it does not count as the application busy-polling, so an armed
 * event fd stays armed however often it runs. */
unsigned doorbell_iface_progress_background(doorbell_iface_t *iface);

/* Wake-up: a file descriptor that becomes readable when progress has work.
 * arm returns DOORBELL_ERR_NO_RESOURCE ("busy") if work is already pending. */
int               doorbell_iface_event_fd(const doorbell_iface_t *iface);
doorbell_status_t doorbell_iface_arm(doorbell_iface_t *iface);

/* Active messages. data is valid for the call; DOORBELL_AM_HEADROOM bytes
 * before it belong to the callee. If the callback returns DOORBELL_INPROGRESS
 * the buffer stays valid until doorbell_iface_release_am(). The callback may
 * post sends. */
#define DOORBELL_AM_HEADROOM 64
typedef doorbell_status_t (*doorbell_am_cb_t)(void *arg, uint8_t am_id, void *data, size_t length);
void doorbell_iface_set_am_handler(doorbell_iface_t *iface, doorbell_am_cb_t cb, void *arg);
void doorbell_iface_release_am(doorbell_iface_t *iface, void *data);

/* Completions of zcopy / get / flush: called from progress with the cookie
 * the caller passed (UCT: a uct_completion_t*). */
typedef void (*doorbell_completion_cb_t)(void *cookie, doorbell_status_t status);
void doorbell_iface_set_completion_handler(doorbell_iface_t *iface, doorbell_completion_cb_t cb);

/* The same with an argument handed back first (e.g. the caller's iface), so
 * the handler needs no global or thread-local state to find its context.
 * Setting either kind of handler replaces the other. */
typedef void (*doorbell_completion_arg_cb_t)(void *arg, void *cookie, doorbell_status_t status);
void doorbell_iface_set_completion_handler_arg(doorbell_iface_t            *iface,
                                               doorbell_completion_arg_cb_t cb, void *arg);

/* Asynchronous errors of a QP (remote access error of a put without a
 * completion, peer timeout): called once per error from progress; the QP is
 * then in error and its operations fail with DOORBELL_ERR_CANCELED. */
typedef void (*doorbell_qp_error_cb_t)(void *arg, doorbell_qp_t *qp, doorbell_status_t status,
                                       const char *message);
void doorbell_iface_set_error_handler(doorbell_iface_t *iface, doorbell_qp_error_cb_t cb,
                                      void *arg);

/* Resources: becomes nonzero when a QP that returned NO_RESOURCE can send. */
int doorbell_qp_can_send(const doorbell_qp_t *qp);

/* Flush all QPs of the iface: DOORBELL_OK if nothing is outstanding, else
 * DOORBELL_INPROGRESS and cookie completes when every earlier operation has
 * completed remotely. */
doorbell_status_t doorbell_iface_flush(doorbell_iface_t *iface, void *cookie);

/* Counters of an iface (also printed at close when params asked for stats). */
typedef struct doorbell_counters {
    uint64_t wqes;      /* WQEs posted */
    uint64_t doorbells; /* doorbells rung (batches handed to the device) */
    uint64_t signaled;  /* signaled completions */
    uint64_t cq_polls;  /* completion polls */
    uint64_t tx_packets;
    uint64_t rx_packets;
    uint64_t tx_bytes;
    uint64_t rx_bytes;
    uint64_t retransmits;   /* packets sent again */
    uint64_t rx_dropped;    /* datagrams dropped, whatever the reason (below) */
    uint64_t rx_duplicates; /* duplicates suppressed */
    uint64_t naks;          /* NAKs sent */
    uint64_t ce_marks;      /* packets received with CE */
    uint64_t rtt_samples;
    uint64_t remote_access_errors;
    uint64_t timeouts;       /* retransmit timer expiries */
    uint64_t paced_waits;    /* sends held back by the pacer */
    uint64_t busy_naks;      /* receiver-busy NAKs received (AM held back) */
    uint64_t tail_probes;    /* tail-loss probes sent (ACK requests) */
    uint64_t rx_timestamped; /* datagrams received with a kernel arrival time */
    /* rx_dropped by reason (UDP device): */
    uint64_t rx_drop_malformed;   /* truncated or inconsistent */
    uint64_t rx_drop_foreign;     /* not our magic or version */
    uint64_t rx_drop_no_conn;     /* names no connection of this iface */
    uint64_t rx_drop_token;       /* wrong connection (or iface) token */
    uint64_t rx_drop_source;      /* right token, sent from another address */
    uint64_t rx_drop_psn;         /* not the PSN expected (ahead of it: a gap) */
    uint64_t rx_drop_state;       /* valid, but not now (a stale response, a request
                                   * after an error, a reply to no handshake) */
    uint64_t connects;            /* connections accepted (as responder) */
    uint64_t conn_refused;        /* handshakes refused: the table is full */
    uint64_t keepalives;          /* keepalive probes sent */
    uint64_t reasm_busy;          /* messages put off: reassembly at its bound */
    uint64_t reasm_reclaimed;     /* half-finished messages reclaimed */
    uint64_t reasm_bytes;         /* bytes held in reassembly now (a gauge) */
    uint64_t reasm_peak;          /* the most held at once */
    uint64_t acks_sent;           /* ACK datagrams sent (UDP device) */
    uint64_t acks_carried;        /* ACKs that rode on a request instead */
    uint64_t packs;               /* datagrams that carried active messages in a pack
                                   * (UDP device; wire.h PackHeader) */
    uint64_t packed;              /* messages in those packs */
    uint64_t rx_held;             /* requests that arrived ahead of a gap on a
                                   * multipath connection, held and executed in
                                   * order once it filled (UDP device) */
    uint64_t spine_probes;        /* ports probed with a TTL that expires at the
                                   * spine (UDP device, PATHS > 1) */
    uint64_t spine_answers;       /* ICMP Time Exceeded that answered one */
    uint64_t path_errors;         /* other errors queued on the sending ports
                                   * (port unreachable, foreign or short quotes) */
    uint64_t near_paths;          /* QPs that learned no spine lies between
                                   * them and their peer (a peer's spine probe
                                   * reached us; UDP device) */
    uint64_t rx_merged;           /* receives that held several datagrams the
                                   * kernel merged (UDP GRO; UDP device) */
    uint64_t rx_merged_datagrams; /* datagrams in those */
    uint64_t idle_windows;        /* windows of messages a quiet paced QP sent
                                   * unpaced once its pacer would have held
                                   * them (UDP device, "Idle windows") */
} doorbell_counters_t;
void doorbell_iface_get_counters(const doorbell_iface_t *iface, doorbell_counters_t *counters);
/* Enables the counters dump at close ("<device> <counter> <value>" lines). */
void doorbell_iface_set_stats(doorbell_iface_t *iface, int enable);

/* --------------------------------------------------------------- queue pair */

/* Connects to a remote iface (CONNECT_TO_IFACE). The connection is made
 * by a handshake the QP runs itself when it is first used (the first
 * operation posted): operations may be posted at once
 * and wait in the send ring until the peer accepts; a QP never used sends
 * nothing. A peer that never accepts fails the QP (DOORBELL_ERR_TIMED_OUT,
 * or DOORBELL_ERR_REMOTE when it refuses) through the error handler. */
doorbell_status_t doorbell_qp_create(doorbell_iface_t *iface, const void *device_addr,
                                     const void *iface_addr, doorbell_qp_t **qp_p);
/* Outstanding operations complete with DOORBELL_ERR_CANCELED. */
void doorbell_qp_destroy(doorbell_qp_t *qp);

/* Asks the peer for a sign of life now (a keepalive probe; nothing on a
 * QP never used, which depends on no peer). DOORBELL_OK: if the peer stays
 * silent for keepalive_timeout_ns, the QP fails with DOORBELL_ERR_TIMED_OUT
 * through the error handler; DOORBELL_ERR_CANCELED if the QP is in error
 * already. */
doorbell_status_t doorbell_qp_check(doorbell_qp_t *qp);

typedef size_t (*doorbell_pack_cb_t)(void *dest, void *arg);
typedef void (*doorbell_unpack_cb_t)(void *arg, const void *data, size_t length);

/* Active messages (never dropped: credit flow control; NO_RESOURCE when out
 * of credits or send slots). Returns OK when the data was taken. */
doorbell_status_t doorbell_qp_am_short(doorbell_qp_t *qp, uint8_t am_id, uint64_t header,
                                       const void *payload, size_t length);
/* Returns the packed length, or a negative doorbell_status_t. */
ssize_t doorbell_qp_am_bcopy(doorbell_qp_t *qp, uint8_t am_id, doorbell_pack_cb_t pack, void *arg);
doorbell_status_t doorbell_qp_am_zcopy(doorbell_qp_t *qp, uint8_t am_id, const void *header,
                                       size_t header_length, const struct iovec *iov, size_t iovcnt,
                                       void *cookie);

/* RDMA write. */
doorbell_status_t doorbell_qp_put_short(doorbell_qp_t *qp, const void *buffer, size_t length,
                                        uint64_t remote_addr, uint32_t rkey);
ssize_t           doorbell_qp_put_bcopy(doorbell_qp_t *qp, doorbell_pack_cb_t pack, void *arg,
                                        uint64_t remote_addr, uint32_t rkey);
doorbell_status_t doorbell_qp_put_zcopy(doorbell_qp_t *qp, const struct iovec *iov, size_t iovcnt,
                                        uint64_t remote_addr, uint32_t rkey, void *cookie);

/* RDMA read. */
doorbell_status_t doorbell_qp_get_bcopy(doorbell_qp_t *qp, doorbell_unpack_cb_t unpack, void *arg,
                                        size_t length, uint64_t remote_addr, uint32_t rkey,
                                        void *cookie);
doorbell_status_t doorbell_qp_get_zcopy(doorbell_qp_t *qp, const struct iovec *iov, size_t iovcnt,
                                        uint64_t remote_addr, uint32_t rkey, void *cookie);

/* Atomics: one read-modify-write of an aligned 4- or 8-byte word at
 * remote_addr, executed once at the target (whatever the network loses or
 * repeats) and never torn by another atomic of the same device. The target
 * checks the key, the bounds, the alignment and DOORBELL_ACCESS_REMOTE_ATOMIC
 * of the region; a rejected atomic completes with DOORBELL_ERR_REMOTE_ACCESS
 * and leaves the word untouched. Returns INPROGRESS, then cookie completes;
 * by then *result (unless NULL) holds the word's value before the operation,
 * zero-extended for a 4-byte word. UNSUPPORTED for an operation or a size the
 * device lacks (doorbell_iface_limits_t::atomic_ops, atomic_sizes);
 * INVALID_PARAM for a misaligned address; NO_RESOURCE when the QP has
 * DOORBELL_MAX_ATOMICS_INFLIGHT atomics incomplete (or its ring is full).
 * A 4-byte atomic uses the low 32 bits of operand and compare. Atomics of
 * one device are atomic with each other, not with the CPU's or another
 * device's on the same word, unless the device says so (see docs/core.md). */
typedef enum doorbell_atomic_op {
    DOORBELL_ATOMIC_ADD   = 0, /* word += operand */
    DOORBELL_ATOMIC_AND   = 1, /* word &= operand */
    DOORBELL_ATOMIC_OR    = 2, /* word |= operand */
    DOORBELL_ATOMIC_XOR   = 3, /* word ^= operand */
    DOORBELL_ATOMIC_SWAP  = 4, /* word = operand */
    DOORBELL_ATOMIC_CSWAP = 5, /* if (word == compare) word = operand */
    DOORBELL_ATOMIC_LAST
} doorbell_atomic_op_t;

/* Atomics a QP keeps incomplete at most (an InfiniBand QP's max_rd_atomic):
 * the UDP device's targets remember this many answers per QP to execute each
 * atomic exactly once. */
#define DOORBELL_MAX_ATOMICS_INFLIGHT 16

doorbell_status_t doorbell_qp_atomic(doorbell_qp_t *qp, doorbell_atomic_op_t op, unsigned size,
                                     uint64_t operand, uint64_t compare, uint64_t remote_addr,
                                     uint32_t rkey, uint64_t *result, void *cookie);

/* Raw WQEs (the GPU engine and tools post these): data referenced by
 * local_addr must stay valid until the WQE completes. */
doorbell_status_t doorbell_qp_post(doorbell_qp_t *qp, const doorbell_wqe_t *wqes, unsigned count);

/* Remote completion of every earlier operation on the QP: OK when nothing is
 * outstanding, INPROGRESS with cookie completing later, NO_RESOURCE. */
doorbell_status_t doorbell_qp_flush(doorbell_qp_t *qp, void *cookie);
/* Later operations start only after earlier ones completed remotely. */
doorbell_status_t doorbell_qp_fence(doorbell_qp_t *qp);

/* ------------------------------------------- direct send queues (mlx5) */

/* The local key of a region (what a WQE's local_addr needs on a NIC); 0
 * where the region has no hardware registration (UDP device). */
uint32_t doorbell_mr_local_key(const doorbell_mr_t *mr);

/* A QP whose send queue another agent drives -- a GPU writing mlx5 WQEs and
 * ringing the doorbell itself (IBGDA). The QP connects as any other (progress
 * the iface until doorbell_qp_export_mlx5 stops answering NO_RESOURCE); the
 * core then posts nothing to it: its put/get/AM/post calls fail with
 * DOORBELL_ERR_UNSUPPORTED, and a flush completes at once (the core holds
 * nothing of it). It has its own send CQ, which only the agent polls.
 * Verbs devices only (UNSUPPORTED on the UDP device). */
doorbell_status_t doorbell_qp_create_direct(doorbell_iface_t *iface, const void *device_addr,
                                            const void *iface_addr, doorbell_qp_t **qp_p);

/* What an agent needs to drive a direct QP (host addresses; map them for a
 * GPU). Layouts are the vendor's (infiniband/mlx5dv.h). */
typedef struct doorbell_qp_mlx5 {
    void              *sq_buf;     /* send queue: sq_wqebbs 64-byte blocks */
    uint32_t           sq_wqebbs;  /* a power of two */
    uint32_t           qpn;        /* QP number (ctrl segments) */
    volatile uint32_t *dbrec;      /* doorbell record; [1] = SQ producer
                                        index, 16 bits, big-endian */
    void              *uar;        /* doorbell register: 8 bytes per ring */
    uint32_t           uar_size;   /* bytes of its window (bf.size) */
    uint32_t           cqn;        /* the QP's send CQ */
    void              *cq_buf;     /* cqe_cnt CQEs of cqe_size bytes */
    uint32_t           cqe_cnt;    /* a power of two */
    uint32_t           cqe_size;   /* 64 or 128 bytes */
    volatile uint32_t *cq_dbrec;   /* [0] = CQ consumer index (24 bits,
                                        big-endian) */
    uint64_t           fetch_addr; /* 8 registered bytes: fetch-add results */
    uint32_t           fetch_lkey;
    uint32_t           reserved;
} doorbell_qp_mlx5_t;

/* Fills *mlx5 for a QP made by doorbell_qp_create_direct. DOORBELL_OK;
 * NO_RESOURCE while the QP is still connecting; UNSUPPORTED with the reason
 * (built without mlx5dv, not an mlx5 device, UDP device); an error. */
doorbell_status_t doorbell_qp_export_mlx5(doorbell_qp_t *qp, doorbell_qp_mlx5_t *mlx5);

#ifdef __cplusplus
}
#endif

#endif /* DOORBELL_CORE_H */
