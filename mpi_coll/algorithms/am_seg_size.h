/*
 * The largest active message (header included) to ask of the doorbell
 * transport for the component's own UCP context, so that a put_signal of up
 * to coll_doorbell_am_max bytes travels as one message.
 *
 * Why: up to am_max a step's bytes and its flag go as one active message
 * instead of a put, a fence and a flag put: one datagram fewer per step,
 * and on the software NIC each datagram costs the sender a system call and
 * the receiver another. But UCP cuts an active message longer than the
 * transport's largest (UCX_DOORBELL_SEG_SIZE, 8 KiB: 7216 bytes on a
 * 1500-byte MTU) into fragments, each a message of its own, which cost more
 * than the flag saved. The transport reassembles a message of several
 * packets into an allocation of the message's own size, and its send
 * buffers of that size are made on demand, so a larger limit costs only
 * what is sent.
 *
 * C and C++ (the Open MPI component is C); no MPI or UCX types. Bytes.
 */
#ifndef DOORBELL_COLL_AM_SEG_SIZE_H
#define DOORBELL_COLL_AM_SEG_SIZE_H

#include <stddef.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* UCX_DOORBELL_SEG_SIZE: its default and its largest value (ucx_tl's
 * doorbell_defaults.h, which this layer does not include). */
#define DOORBELL_COLL_SEG_SIZE_DEFAULT 8192
#define DOORBELL_COLL_SEG_SIZE_MAX     65472

/* What an active message adds to its payload, and more: the component's
 * 32-byte header, UCP's eager header, and the part of a segment the
 * transport's limit may be rounded down by (it ends a multi-packet message
 * on a whole segment: up to one segment's payload, 1.4 KiB on a 1500-byte
 * MTU). */
#define DOORBELL_COLL_AM_SLACK 2048

/* The SEG_SIZE to ask for: 0 where the default carries am_max bytes in one
 * message (or am_max is 0: no active messages), else am_max plus the slack,
 * at most the transport's largest (a larger am_max is cut by UCP). */
static inline size_t doorbell_coll_am_seg_size(size_t am_max)
{
    size_t need = am_max + DOORBELL_COLL_AM_SLACK;

    if (am_max == 0 || need <= DOORBELL_COLL_SEG_SIZE_DEFAULT) {
        return 0;
    }
    return need < DOORBELL_COLL_SEG_SIZE_MAX ? need : DOORBELL_COLL_SEG_SIZE_MAX;
}

/* Whether a UCX transport list (coll_doorbell_tls: "doorbell,sm,self")
 * names the doorbell transport: UCP warns about a setting that no transport
 * of its context takes, so the component asks for SEG_SIZE only then. A
 * list that excludes ("^...") or names "all" is not read. */
static inline int doorbell_coll_tls_names_doorbell(const char *tls)
{
    static const char name[] = "doorbell";
    const size_t      len    = sizeof(name) - 1;
    const char       *p      = tls;

    if (tls == NULL || tls[0] == '^') {
        return 0;
    }
    while ((p = strstr(p, name)) != NULL) {
        if ((p == tls || p[-1] == ',') && (p[len] == '\0' || p[len] == ',')) {
            return 1;
        }
        p += len;
    }
    return 0;
}

#ifdef __cplusplus
}
#endif

#endif
