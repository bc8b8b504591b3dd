/**
 * doorbell UCT transport: component, memory domain, interface and endpoint.
 * The data path lives in the core (doorbell_core.h); these types only hold
 * the core handles and what UCX needs beside them.
 */

#ifndef UCT_DOORBELL_H
#define UCT_DOORBELL_H

#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>
#include <ucs/async/async.h>
#include <ucs/datastruct/arbiter.h>
#include <ucs/datastruct/list.h>
#include <ucs/datastruct/queue.h>

#include "doorbell_core.h"
#include "pacing/policies.h"


#define UCT_DOORBELL_NAME          "doorbell"
#define UCT_DOORBELL_CONFIG_PREFIX "DOORBELL_"
#define UCT_DOORBELL_MAX_IOV       16 /* uct_iov_t entries converted on stack */
#define UCT_DOORBELL_AM_MAX_HDR    128 /* am_zcopy header, sent as iov[0] */
/* ASYNC_INTERVAL: 0 (off) or within these */
#define UCT_DOORBELL_MIN_ASYNC_INTERVAL_US 100
#define UCT_DOORBELL_MAX_ASYNC_INTERVAL_S  10
/* Background period of an iface that has moved nothing yet, seconds: a UCP
 * worker opens an iface and endpoints to every peer it can reach, used or
 * not, and a 10 ms tick of each such iface's async thread took the cores of
 * oversubscribed ranks (one host, 4 ranks on 2 cores: 30 % on the latency of
 * shared memory, through the coll component's idle worker) */
#define UCT_DOORBELL_QUIET_ASYNC_INTERVAL_S 0.1


/* Pacing policies (UCX_DOORBELL_CC): the pacing library's list, then auto */
/* clang-format off */
#define UCT_DOORBELL_CC_ENUM(_upper, _camel, _name) UCT_DOORBELL_CC_##_upper,
typedef enum uct_doorbell_cc {
    DOORBELL_PACING_POLICIES(UCT_DOORBELL_CC_ENUM)
    UCT_DOORBELL_CC_AUTO,
    UCT_DOORBELL_CC_LAST
} uct_doorbell_cc_t;
#undef UCT_DOORBELL_CC_ENUM
/* clang-format on */


typedef struct uct_doorbell_md_config {
    uct_md_config_t super;
} uct_doorbell_md_config_t;


typedef struct uct_doorbell_md {
    uct_md_t       super;
    doorbell_pd_t *pd; /* Memory regions and remote keys */
} uct_doorbell_md_t;


/* Memory handle: the core region and the key that remote peers use */
typedef struct uct_doorbell_memh {
    doorbell_mr_t *mr;
    uint32_t       rkey;
} uct_doorbell_memh_t;


/* Packed remote key as carried inside UCP's rkey buffer */
typedef struct uct_doorbell_packed_rkey {
    uint32_t rkey;
} UCS_S_PACKED uct_doorbell_packed_rkey_t;


typedef struct uct_doorbell_iface_config {
    uct_iface_config_t super;
    unsigned           tx_batch;        /* WQEs behind one doorbell */
    unsigned           tx_moderation;   /* WQEs per signaled completion */
    size_t             mtu;             /* Packet payload, bytes */
    size_t             seg_size;        /* Largest active message, bytes */
    unsigned           tx_queue_len;    /* Send ring WQEs per QP */
    unsigned           rx_queue_len;    /* Receive buffers per iface */
    unsigned           am_credits;      /* Active messages in flight per QP */
    double             rto_min;         /* First retransmit timeout, seconds */
    double             rto_max;         /* Backoff ceiling, seconds */
    unsigned           retry_count;     /* Retransmits before a timeout */
    uct_doorbell_cc_t  cc;              /* Pacing policy */
    char              *ibrc_gain;       /* "auto" or a positive number */
    double             cc_target_delay; /* seconds, 0 = automatic */
    double             cc_min_rate;     /* bytes/s or UCS_CONFIG_BW_AUTO */
    double             cc_max_rate;     /* bytes/s or UCS_CONFIG_BW_AUTO */
    int                stats;           /* Dump counters at close */
    double             async_interval;  /* Background progress period, s */
    double             keepalive_interval; /* Idle probe period, s (0: off) */
    double             keepalive_timeout;  /* Silent peer is dead after, s */
    size_t             rx_reassembly;      /* Half-finished AM bytes, at most */
    size_t             paths;              /* Source ports per connection, or
                                              UCS_ULUNITS_AUTO */
} uct_doorbell_iface_config_t;


/* A callback the core made from background progress, delivered by the next
 * uct_worker_progress (UCT_IFACE_FLAG_CB_SYNC) */
typedef enum uct_doorbell_deferred_type {
    UCT_DOORBELL_DEFERRED_AM,
    UCT_DOORBELL_DEFERRED_COMPLETION,
    UCT_DOORBELL_DEFERRED_ERROR
} uct_doorbell_deferred_type_t;

typedef struct uct_doorbell_deferred {
    ucs_queue_elem_t             queue;
    uct_doorbell_deferred_type_t type;
    doorbell_status_t            status; /* Completion or error status */
    uint8_t                      am_id;
    void                        *data; /* AM data (held by the core) */
    size_t                       length;
    void                        *cookie; /* uct_completion_t* */
    doorbell_qp_t               *qp;     /* Failed queue pair */
    char                         message[256];
} uct_doorbell_deferred_t;


/* A flush posted for a caller that passed no completion (it polls the flush
 * call instead): one is kept in flight, so polling does not fill the ring. */
typedef struct uct_doorbell_flush {
    uct_completion_t comp;
    int              in_flight;
} uct_doorbell_flush_t;


typedef struct uct_doorbell_iface {
    uct_base_iface_t     super;
    doorbell_iface_t    *core;           /* Device context and its QPs */
    ucs_arbiter_t        arbiter;        /* Endpoints with pending requests */
    ucs_list_link_t      ep_list;        /* Endpoints, for errors and fence */
    uct_recv_desc_t      release_desc;   /* Returns held AM buffers */
    uct_doorbell_flush_t flush;          /* Flush without a user completion */
    ucs_async_context_t *async;          /* Worker's; serializes background
                                            progress with every entry point */
    int                  timer_id;       /* Background progress, -1 if none */
    int                  timer_fd;       /* Its timerfd (the handler's id),
                                            -1 on a UCS timer */
    double               timer_period;   /* Its period, s: QUIET_... until
                                            the iface has moved something,
                                            then ASYNC_INTERVAL */
    double               async_interval; /* ASYNC_INTERVAL, s (0: none) */
    int                  quiet;          /* The timer still runs at the
                                            quiet period */
    int                  moved_in_background; /* background progress found
                                                 work: speed the timer up */
    unsigned             progress_count;      /* Foreground progress calls */
    unsigned             progress_seen;       /* ... at the last timer tick */
    int                  in_background; /* Core callbacks must be deferred */
    ucs_queue_head_t     deferred;      /* uct_doorbell_deferred_t */
    char                 dev_name[UCT_DEVICE_NAME_MAX];
    struct {
        doorbell_iface_limits_t limits;      /* Sizes the core accepts */
        doorbell_device_info_t  device;      /* Bandwidth/latency estimates */
        size_t                  rx_headroom; /* UCP's bytes before AM data */
        unsigned                am_flags;    /* UCT_CB_PARAM_FLAG_DESC or 0 */
    } config;
} uct_doorbell_iface_t;


typedef struct uct_doorbell_ep {
    uct_base_ep_t        super;
    doorbell_qp_t       *qp;        /* RC queue pair to the peer iface */
    ucs_arbiter_group_t  arb_group; /* Pending requests of this ep */
    ucs_list_link_t      list;      /* Entry in iface->ep_list */
    uct_doorbell_flush_t flush;     /* Flush without a user completion */
} uct_doorbell_ep_t;


extern uct_component_t uct_doorbell_component;


/* Every entry point holds the worker's async lock (as UCX's ud does): the
 * background progress timer drives the same core objects. The lock is a
 * recursive spinlock, free when uncontended. */
#define UCT_DOORBELL_ENTER(_iface) UCS_ASYNC_BLOCK((_iface)->async)
#define UCT_DOORBELL_LEAVE(_iface) UCS_ASYNC_UNBLOCK((_iface)->async)

static UCS_F_ALWAYS_INLINE uct_doorbell_iface_t *uct_doorbell_ep_iface(
    uct_ep_h tl_ep)
{
    return ucs_derived_of(tl_ep->iface, uct_doorbell_iface_t);
}


/* Maps a core status onto UCX's. */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_doorbell_status(doorbell_status_t status)
{
    switch (status) {
    case DOORBELL_OK:
        return UCS_OK;
    case DOORBELL_INPROGRESS:
        return UCS_INPROGRESS;
    case DOORBELL_ERR_NO_RESOURCE:
        return UCS_ERR_NO_RESOURCE;
    case DOORBELL_ERR_INVALID_PARAM:
        return UCS_ERR_INVALID_PARAM;
    case DOORBELL_ERR_NO_MEMORY:
        return UCS_ERR_NO_MEMORY;
    case DOORBELL_ERR_IO:
        return UCS_ERR_IO_ERROR;
    case DOORBELL_ERR_NO_DEVICE:
        return UCS_ERR_NO_DEVICE;
    case DOORBELL_ERR_UNREACHABLE:
        return UCS_ERR_UNREACHABLE;
    case DOORBELL_ERR_REMOTE_ACCESS:
        return UCS_ERR_INVALID_ADDR;
    case DOORBELL_ERR_TIMED_OUT:
        return UCS_ERR_ENDPOINT_TIMEOUT;
    case DOORBELL_ERR_CANCELED:
        return UCS_ERR_CANCELED;
    case DOORBELL_ERR_UNSUPPORTED:
        return UCS_ERR_UNSUPPORTED;
    case DOORBELL_ERR_REMOTE:
        return UCS_ERR_CONNECTION_RESET;
    }
    return UCS_ERR_IO_ERROR;
}


/* Posts a flush through post_flush, or reports the one already in flight
 * when the caller gave no completion. */
static UCS_F_ALWAYS_INLINE ucs_status_t uct_doorbell_flush_post(
    uct_doorbell_flush_t *flush, uct_completion_t         *comp,
    doorbell_status_t (*post_flush)(void *, void *), void *obj)
{
    doorbell_status_t status;

    if (comp != NULL) {
        return uct_doorbell_status(post_flush(obj, comp));
    }

    if (flush->in_flight) {
        return UCS_INPROGRESS;
    }

    flush->comp.count  = 1;
    flush->comp.status = UCS_OK;
    status             = post_flush(obj, &flush->comp);
    flush->in_flight   = (status == DOORBELL_INPROGRESS);
    return uct_doorbell_status(status);
}

void uct_doorbell_flush_init(uct_doorbell_flush_t *flush);

/* The period of an iface's background progress now, ns (0: none); for
 * tests. */
uint64_t uct_doorbell_iface_background_period_ns(uct_iface_h tl_iface);

ucs_status_t uct_doorbell_query_tl_devices(uct_md_h                   md,
                                           uct_tl_device_resource_t **devices_p,
                                           unsigned *num_devices_p);

void uct_doorbell_iface_qp_error(void *arg, doorbell_qp_t *qp,
                                 doorbell_status_t status, const char *message);

ucs_arbiter_cb_result_t uct_doorbell_ep_process_pending(
    ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
    ucs_arbiter_elem_t *elem, void *arg);

ucs_arbiter_cb_result_t uct_doorbell_ep_pending_ready(
    ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
    ucs_arbiter_elem_t *elem, void *arg);

UCS_CLASS_DECLARE_NEW_FUNC(uct_doorbell_ep_t, uct_ep_t,
                           const uct_ep_params_t *);
UCS_CLASS_DECLARE_DELETE_FUNC(uct_doorbell_ep_t, uct_ep_t);

ucs_status_t uct_doorbell_ep_am_short(uct_ep_h tl_ep, uint8_t id,
                                      uint64_t header, const void *payload,
                                      unsigned length);
ucs_status_t uct_doorbell_ep_am_short_iov(uct_ep_h tl_ep, uint8_t id,
                                          const uct_iov_t *iov, size_t iovcnt);
ssize_t      uct_doorbell_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                                      uct_pack_callback_t pack_cb, void *arg,
                                      unsigned flags);
ucs_status_t uct_doorbell_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id,
                                      const void      *header,
                                      unsigned         header_length,
                                      const uct_iov_t *iov, size_t iovcnt,
                                      unsigned flags, uct_completion_t *comp);
ucs_status_t uct_doorbell_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                       unsigned length, uint64_t remote_addr,
                                       uct_rkey_t rkey);
ssize_t uct_doorbell_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                                  void *arg, uint64_t remote_addr,
                                  uct_rkey_t rkey);
ucs_status_t uct_doorbell_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                       size_t iovcnt, uint64_t remote_addr,
                                       uct_rkey_t rkey, uct_completion_t *comp);
ucs_status_t uct_doorbell_ep_get_bcopy(uct_ep_h              tl_ep,
                                       uct_unpack_callback_t unpack_cb,
                                       void *arg, size_t length,
                                       uint64_t remote_addr, uct_rkey_t rkey,
                                       uct_completion_t *comp);
ucs_status_t uct_doorbell_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                       size_t iovcnt, uint64_t remote_addr,
                                       uct_rkey_t rkey, uct_completion_t *comp);
ucs_status_t uct_doorbell_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                         unsigned flags);
void         uct_doorbell_ep_pending_purge(uct_ep_h                     tl_ep,
                                           uct_pending_purge_callback_t cb, void *arg);
ucs_status_t uct_doorbell_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                   uct_completion_t *comp);
ucs_status_t uct_doorbell_ep_fence(uct_ep_h tl_ep, unsigned flags);
ucs_status_t uct_doorbell_ep_check(uct_ep_h tl_ep, unsigned flags,
                                   uct_completion_t *comp);

#endif
