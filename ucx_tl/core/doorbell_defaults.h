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

#define DOORBELL_STRINGIFY_(x) #x
/* A default as a string literal: DOORBELL_STRINGIFY(DOORBELL_DEFAULT_TX_BATCH) */
#define DOORBELL_STRINGIFY(x) DOORBELL_STRINGIFY_(x)

#endif /* DOORBELL_DEFAULTS_H */
