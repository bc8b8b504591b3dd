/*
 * The defaults of doorbell_iface_params_t, in one place: the core's
 * doorbell_iface_params_init() and the UCX transport's configuration table
 * (UCX_DOORBELL_*, whose default strings are made from these with
 * DOORBELL_STRINGIFY) both read them, so a user of the C API and a user of
 * UCX get the same transport.
 *
 * Plain C macros: the UCX table needs them as string literals at compile
 * time. Units are in the names.
 */
#ifndef DOORBELL_DEFAULTS_H
#define DOORBELL_DEFAULTS_H

#define DOORBELL_DEFAULT_TX_QUEUE_LEN  256  /* send ring WQEs per QP */
#define DOORBELL_DEFAULT_TX_BATCH      64   /* most WQEs behind one doorbell */
#define DOORBELL_DEFAULT_TX_MODERATION 64   /* one signaled completion per N */
#define DOORBELL_DEFAULT_AM_CREDITS    64   /* active messages in flight per QP */
#define DOORBELL_DEFAULT_SEG_SIZE      8192 /* largest active message, bytes */
#define DOORBELL_DEFAULT_RX_QUEUE_LEN  256  /* receive buffers of an iface */
/* The first retransmit timeout is well above the UCX transport's background
 * progress period (10 ms): a peer acknowledges from its progress, and a
 * shorter timeout resends whole windows whenever a busy host delays that;
 * losses inside a window are repaired at once by NAKs. With the ceiling of
 * 1 s, 35 retries are about 30 s of silence before a peer is declared dead,
 * as UCX's ud transport allows: a busy peer is not a dead one. */
#define DOORBELL_DEFAULT_RTO_MIN_MS  50
#define DOORBELL_DEFAULT_RTO_MAX_MS  1000
#define DOORBELL_DEFAULT_RETRY_COUNT 35
/* Pacing: ibrc, except none on a loopback device (pacing/policies.h). */
#define DOORBELL_DEFAULT_CC "auto"
/* Liveness: a connected queue pair that has heard nothing from its peer for
 * the interval sends it a probe; a peer silent for the timeout is dead and
 * the queue pair fails with DOORBELL_ERR_TIMED_OUT. The timeout matches the
 * retransmit budget above (about 30 s): a busy peer is not a dead one. */
#define DOORBELL_DEFAULT_KEEPALIVE_INTERVAL_MS 1000
#define DOORBELL_DEFAULT_KEEPALIVE_TIMEOUT_S   30
/* Reassembly of active messages that take several packets: the most bytes
 * an iface holds in half-finished messages (one message per peer at a
 * time). 2048 messages of the default 8 KiB. */
#define DOORBELL_DEFAULT_RX_REASSEMBLY_MB 16
/* Multipath (UDP device): 0 = automatic, DOORBELL_AUTO_PATHS source ports
 * (each hashed by the fabric's ECMP onto a path of its own), or half as many
 * while that many consecutive ports cannot be had; one on a loopback device,
 * which has one path. A connection learns its spines from the ports after
 * the first: with 8 (7 probed) all of them hash onto one of two spines for 1
 * connection in 64 (5 of 242 cross-spine connections on the emulated
 * fabric). 16 steered ports made that 1 of 462, but the 4 x 1 allreduce of
 * 32-128 KiB slower in three A/B runs (medians 3-21 %), for a reason not
 * found (docs/fabric.md, twelfth round): 8 stay steered, and as many spare
 * ports are bound after them, which only such a connection probes and
 * sends from (spare_ports(), udp_device.h). */
#define DOORBELL_DEFAULT_PATHS 0
#define DOORBELL_AUTO_PATHS    8

/* Ranges: doorbell_iface_open refuses a value outside them, naming the
 * parameter, the value and the range (doorbell_iface_params_check), and the
 * UCX table's help prints them. */
#define DOORBELL_MIN_MTU                   576   /* bytes of payload; 0 = automatic */
#define DOORBELL_MAX_MTU                   64936 /* a 65000-byte datagram */
#define DOORBELL_MIN_TX_QUEUE_LEN          4     /* a power of two */
#define DOORBELL_MAX_TX_QUEUE_LEN          65536
#define DOORBELL_MIN_TX_BATCH              1
#define DOORBELL_MAX_TX_BATCH              4096
#define DOORBELL_MIN_TX_MODERATION         1
#define DOORBELL_MAX_TX_MODERATION         65536
#define DOORBELL_MIN_AM_CREDITS            1
#define DOORBELL_MAX_AM_CREDITS            65536
#define DOORBELL_MIN_SEG_SIZE              256
#define DOORBELL_MAX_SEG_SIZE              65472 /* a 64 KiB buffer less a header */
#define DOORBELL_MIN_RX_QUEUE_LEN          1
#define DOORBELL_MAX_RX_QUEUE_LEN          65536
#define DOORBELL_MIN_RTO_MIN_US            10
#define DOORBELL_MAX_RTO_MAX_S             60 /* RTO_MAX: from RTO_MIN to this */
#define DOORBELL_MIN_RETRY_COUNT           1
#define DOORBELL_MAX_RETRY_COUNT           1000
#define DOORBELL_MAX_CC_TARGET_DELAY_S     1
#define DOORBELL_MIN_KEEPALIVE_INTERVAL_MS 1    /* or 0: no keepalive */
#define DOORBELL_MIN_KEEPALIVE_TIMEOUT_MS  10   /* and at least twice the interval */
#define DOORBELL_MAX_KEEPALIVE_S           3600 /* both */
#define DOORBELL_MIN_RX_REASSEMBLY_KB      64   /* and at least SEG_SIZE */
#define DOORBELL_MAX_RX_REASSEMBLY_MB      1024
#define DOORBELL_MAX_PATHS                 16 /* PATHS: 0 (automatic) or 1 to this */

#define DOORBELL_STRINGIFY_(x) #x
/* A default as a string literal: DOORBELL_STRINGIFY(DOORBELL_DEFAULT_TX_BATCH) */
#define DOORBELL_STRINGIFY(x) DOORBELL_STRINGIFY_(x)

#endif /* DOORBELL_DEFAULTS_H */
