/**
 * doorbell interface: one core iface per UCT iface (a UDP socket on the
 * software device, a port on a verbs HCA), its configuration, capabilities,
 * progress, wake-up and the callbacks through which the core delivers AMs,
 * completions and errors.
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "doorbell.h"

#include <ucs/arch/cpu.h>
#include <ucs/sys/string.h>
#include <ucs/type/class.h>
#include <math.h>
#include <stdlib.h>
#include <sys/timerfd.h>
#include <unistd.h>


/* Forward declarations */
static uct_iface_ops_t uct_doorbell_iface_ops;
static unsigned uct_doorbell_iface_deliver_deferred(uct_doorbell_iface_t *iface);

/* UCX_DOORBELL_CC: the pacing library's policies, then "auto" */
/* clang-format off */
#define UCT_DOORBELL_CC_NAME(_upper, _camel, _name) \
    [UCT_DOORBELL_CC_##_upper] = _name,
static const char *uct_doorbell_cc_names[] = {
    DOORBELL_PACING_POLICIES(UCT_DOORBELL_CC_NAME)
    [UCT_DOORBELL_CC_AUTO] = DOORBELL_PACING_AUTO,
    [UCT_DOORBELL_CC_LAST] = NULL
};
#undef UCT_DOORBELL_CC_NAME
/* clang-format on */

/* SEG_SIZE again under the transport's prefix, as an alias (no default of
 * its own): ucp_config_modify() reaches a transport's variable by the name
 * its table gives it, so "SEG_SIZE" would set it for every transport of the
 * context (shared memory's too) while "DOORBELL_SEG_SIZE" sets this one
 * only; the collective component sizes it so (am_seg_size.h). The
 * environment reads UCX_DOORBELL_SEG_SIZE as before. The sub-table sits at
 * offset 0: its field's offset is the whole config's. */
/* clang-format off */
static ucs_config_field_t uct_doorbell_iface_prefixed_config_table[] = {
    {"SEG_SIZE", NULL, "Alias of SEG_SIZE.",
     ucs_offsetof(uct_doorbell_iface_config_t, seg_size),
     UCS_CONFIG_TYPE_MEMUNITS},

    {NULL}
};

static ucs_config_field_t uct_doorbell_iface_config_table[] = {
    {"", "", NULL,
     ucs_offsetof(uct_doorbell_iface_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {UCT_DOORBELL_CONFIG_PREFIX, NULL, NULL, 0,
     UCS_CONFIG_TYPE_TABLE(uct_doorbell_iface_prefixed_config_table)},

    {"TX_BATCH", DOORBELL_STRINGIFY(DOORBELL_DEFAULT_TX_BATCH),
     "Largest number of work requests one doorbell covers. An idle queue rings\n"
     "the doorbell at once; a busy one coalesces up to this many requests into\n"
     "one batch (one sendmmsg call on the UDP device).\n"
     "Range: [" DOORBELL_STRINGIFY(DOORBELL_MIN_TX_BATCH) ", " DOORBELL_STRINGIFY(DOORBELL_MAX_TX_BATCH) "].",
     ucs_offsetof(uct_doorbell_iface_config_t, tx_batch), UCS_CONFIG_TYPE_UINT},

    {"TX_MODERATION", DOORBELL_STRINGIFY(DOORBELL_DEFAULT_TX_MODERATION),
     "Request a signaled completion once every this many work requests (at most\n"
     "half of TX_QUEUE_LEN take effect: a ring of unsignaled requests could not\n"
     "be retired). A flush always requests one.\n"
     "Range: [" DOORBELL_STRINGIFY(DOORBELL_MIN_TX_MODERATION) ", " DOORBELL_STRINGIFY(DOORBELL_MAX_TX_MODERATION) "].",
     ucs_offsetof(uct_doorbell_iface_config_t, tx_moderation),
     UCS_CONFIG_TYPE_UINT},

    {"MTU", "auto",
     "Largest packet payload on the wire, in bytes. Larger messages are\n"
     "segmented. \"auto\" takes the largest the device allows.\n"
     "Range: auto or [" DOORBELL_STRINGIFY(DOORBELL_MIN_MTU) ", "
     DOORBELL_STRINGIFY(DOORBELL_MAX_MTU) "].",
     ucs_offsetof(uct_doorbell_iface_config_t, mtu), UCS_CONFIG_TYPE_MEMUNITS},

    {"SEG_SIZE", DOORBELL_STRINGIFY(DOORBELL_DEFAULT_SEG_SIZE),
     "Largest active message including its header, in bytes; this is also the\n"
     "size of each receive buffer and the largest bcopy put or get. Where an\n"
     "active message takes several packets, the software device rounds its\n"
     "active message limits down to whole packets.\n"
     "Range: [" DOORBELL_STRINGIFY(DOORBELL_MIN_SEG_SIZE) ", " DOORBELL_STRINGIFY(DOORBELL_MAX_SEG_SIZE) "].",
     ucs_offsetof(uct_doorbell_iface_config_t, seg_size),
     UCS_CONFIG_TYPE_MEMUNITS},

    {"TX_QUEUE_LEN", DOORBELL_STRINGIFY(DOORBELL_DEFAULT_TX_QUEUE_LEN),
     "Number of work-request slots in the send ring of each queue pair; a power\n"
     "of two. A full ring makes sends return UCS_ERR_NO_RESOURCE.\n"
     "Range: a power of two in [" DOORBELL_STRINGIFY(DOORBELL_MIN_TX_QUEUE_LEN) ", "
     DOORBELL_STRINGIFY(DOORBELL_MAX_TX_QUEUE_LEN) "].",
     ucs_offsetof(uct_doorbell_iface_config_t, tx_queue_len),
     UCS_CONFIG_TYPE_UINT},

    {"RX_QUEUE_LEN", DOORBELL_STRINGIFY(DOORBELL_DEFAULT_RX_QUEUE_LEN),
     "Number of received active messages the interface lends to their handlers\n"
     "at once; the next one waits (the sender offers it again).\n"
     "Range: [" DOORBELL_STRINGIFY(DOORBELL_MIN_RX_QUEUE_LEN) ", " DOORBELL_STRINGIFY(DOORBELL_MAX_RX_QUEUE_LEN) "].",
     ucs_offsetof(uct_doorbell_iface_config_t, rx_queue_len),
     UCS_CONFIG_TYPE_UINT},

    {"AM_CREDITS", DOORBELL_STRINGIFY(DOORBELL_DEFAULT_AM_CREDITS),
     "Number of active messages a queue pair may have in flight before it waits\n"
     "for the peer to return credits; an active message is never dropped.\n"
     "Range: [" DOORBELL_STRINGIFY(DOORBELL_MIN_AM_CREDITS) ", " DOORBELL_STRINGIFY(DOORBELL_MAX_AM_CREDITS) "].",
     ucs_offsetof(uct_doorbell_iface_config_t, am_credits),
     UCS_CONFIG_TYPE_UINT},

    {"RTO_MIN", DOORBELL_STRINGIFY(DOORBELL_DEFAULT_RTO_MIN_MS) "ms",
     "First retransmit timeout. It doubles on every retry up to RTO_MAX. It is\n"
     "well above ASYNC_INTERVAL: a peer acknowledges from its progress, and a\n"
     "shorter timeout resends whole windows whenever a busy host delays that.\n"
     "Losses inside a window are repaired at once by NAKs, not by this timer.\n"
     "Range: [" DOORBELL_STRINGIFY(DOORBELL_MIN_RTO_MIN_US) "us, "
     DOORBELL_STRINGIFY(DOORBELL_MAX_RTO_MAX_S) "s].",
     ucs_offsetof(uct_doorbell_iface_config_t, rto_min), UCS_CONFIG_TYPE_TIME},

    {"RTO_MAX", DOORBELL_STRINGIFY(DOORBELL_DEFAULT_RTO_MAX_MS) "ms",
     "Ceiling of the retransmit timeout backoff.\n"
     "Range: [RTO_MIN, " DOORBELL_STRINGIFY(DOORBELL_MAX_RTO_MAX_S) "s].",
     ucs_offsetof(uct_doorbell_iface_config_t, rto_max), UCS_CONFIG_TYPE_TIME},

    {"RETRY_COUNT", DOORBELL_STRINGIFY(DOORBELL_DEFAULT_RETRY_COUNT),
     "Number of retransmits of one packet before the peer is declared\n"
     "unreachable and the endpoint fails with a timeout. With the default\n"
     "RTO_MIN and RTO_MAX this is about 30 seconds of silence, as UCX's ud\n"
     "transport allows (UCX_UD_TIMEOUT=30s): a busy peer is not a dead one.\n"
     "The same number bounds the connection handshakes a queue pair sends.\n"
     "Range: [" DOORBELL_STRINGIFY(DOORBELL_MIN_RETRY_COUNT) ", " DOORBELL_STRINGIFY(DOORBELL_MAX_RETRY_COUNT) "].",
     ucs_offsetof(uct_doorbell_iface_config_t, retry_count),
     UCS_CONFIG_TYPE_UINT},

    {"CC", DOORBELL_DEFAULT_CC,
     "Pacing policy of each queue pair: ibrc (closed-loop rate control on RTT,\n"
     "ECN and loss), dcqcn, timely, none (send as fast as the window allows), or\n"
     "auto: ibrc, except none on a loopback device (nothing on it to pace: its\n"
     "only queue is the peer's socket buffer, which the window bounds).",
     ucs_offsetof(uct_doorbell_iface_config_t, cc),
     UCS_CONFIG_TYPE_ENUM(uct_doorbell_cc_names)},

    {"IBRC_GAIN", "auto",
     "Integral gain of the ibrc rate loop. \"auto\" derives it from the measured\n"
     "base RTT; a positive number fixes it (for experiments only).\n"
     "Range: auto or a positive number.",
     ucs_offsetof(uct_doorbell_iface_config_t, ibrc_gain),
     UCS_CONFIG_TYPE_STRING},

    {"CC_TARGET_DELAY", "0",
     "Queueing delay the pacing loop steers toward (ibrc, timely). 0 derives it\n"
     "from the MTU and the device's line rate; raise it on paths whose RTT\n"
     "jitters more than that (software paths on busy hosts).\n"
     "Range: [0, " DOORBELL_STRINGIFY(DOORBELL_MAX_CC_TARGET_DELAY_S) "s].",
     ucs_offsetof(uct_doorbell_iface_config_t, cc_target_delay),
     UCS_CONFIG_TYPE_TIME},

    {"CC_MIN_RATE", "auto",
     "Floor of the pacing rate of each queue pair, so that a quiet or noisy\n"
     "path is never starved (e.g. 10Mbps). auto: the line rate / 2048.\n"
     "Range: auto or a bandwidth up to CC_MAX_RATE.",
     ucs_offsetof(uct_doorbell_iface_config_t, cc_min_rate),
     UCS_CONFIG_TYPE_BW},

    {"CC_MAX_RATE", "auto",
     "Ceiling of the pacing rate of each queue pair (e.g. 200Mbps). auto: the\n"
     "device's line rate.\n"
     "Range: auto or a bandwidth.",
     ucs_offsetof(uct_doorbell_iface_config_t, cc_max_rate),
     UCS_CONFIG_TYPE_BW},

    {"KEEPALIVE_INTERVAL", DOORBELL_STRINGIFY(DOORBELL_DEFAULT_KEEPALIVE_INTERVAL_MS) "ms",
     "A connected endpoint that has heard nothing from its peer for this long\n"
     "sends it a probe (one small packet each way). 0 sends none.\n"
     "Range: 0 or [" DOORBELL_STRINGIFY(DOORBELL_MIN_KEEPALIVE_INTERVAL_MS) "ms, "
     DOORBELL_STRINGIFY(DOORBELL_MAX_KEEPALIVE_S) "s].",
     ucs_offsetof(uct_doorbell_iface_config_t, keepalive_interval),
     UCS_CONFIG_TYPE_TIME},

    {"KEEPALIVE_TIMEOUT", DOORBELL_STRINGIFY(DOORBELL_DEFAULT_KEEPALIVE_TIMEOUT_S) "s",
     "A peer that answers no probe for this long is dead: its endpoint fails with\n"
     "UCS_ERR_ENDPOINT_TIMEOUT, within KEEPALIVE_INTERVAL + KEEPALIVE_TIMEOUT of\n"
     "its last packet, even while nothing is outstanding to it.\n"
     "Range: [" DOORBELL_STRINGIFY(DOORBELL_MIN_KEEPALIVE_TIMEOUT_MS) "ms, "
     DOORBELL_STRINGIFY(DOORBELL_MAX_KEEPALIVE_S) "s], and at least twice\n"
     "KEEPALIVE_INTERVAL.",
     ucs_offsetof(uct_doorbell_iface_config_t, keepalive_timeout),
     UCS_CONFIG_TYPE_TIME},

    {"RX_REASSEMBLY", DOORBELL_STRINGIFY(DOORBELL_DEFAULT_RX_REASSEMBLY_MB) "m",
     "Most bytes of half-finished active messages (those that take several\n"
     "packets) an interface holds; a message beyond it waits until memory is\n"
     "free (its sender offers it again). A message whose sender stays silent for\n"
     "KEEPALIVE_TIMEOUT is reclaimed.\n"
     "Range: [" DOORBELL_STRINGIFY(DOORBELL_MIN_RX_REASSEMBLY_KB) "k, "
     DOORBELL_STRINGIFY(DOORBELL_MAX_RX_REASSEMBLY_MB) "m], and at least SEG_SIZE.",
     ucs_offsetof(uct_doorbell_iface_config_t, rx_reassembly),
     UCS_CONFIG_TYPE_MEMUNITS},

    {"PATHS", "auto",
     "Source ports (one socket each), so that a leaf-spine fabric's ECMP hash\n"
     "offers a connection several paths: each connection sends from one, probes\n"
     "the others, and moves when its path turns out to be shared (as PLB moves a\n"
     "flow label). Where the fabric answers an expired TTL (traceroute), it learns\n"
     "which spine each port reaches and sends its packets on the spines in turn.\n"
     "The receiver executes packets in order whatever their arrival. As many spare\n"
     "ports again are bound after them (16 in all at most), used only by a connection\n"
     "whose ports all reach one spine. auto: "
     DOORBELL_STRINGIFY(DOORBELL_AUTO_PATHS) ", or 1 on a loopback device.\n"
     "Range: auto or [1, " DOORBELL_STRINGIFY(DOORBELL_MAX_PATHS) "].",
     ucs_offsetof(uct_doorbell_iface_config_t, paths),
     UCS_CONFIG_TYPE_ULUNITS},

    {"ASYNC_INTERVAL", "10ms",
     "Period of background progress from the worker's async thread: it\n"
     "acknowledges, retransmits and moves queued packets while the application\n"
     "does not call progress (a software NIC has no engine of its own), and\n"
     "defers every callback to the next uct_worker_progress. Until the iface\n"
     "has moved anything it runs every 100 ms (a UCP worker opens ifaces and\n"
     "endpoints it may never use). 0 disables it.\n"
     "Range: 0 or [" DOORBELL_STRINGIFY(UCT_DOORBELL_MIN_ASYNC_INTERVAL_US) "us, "
     DOORBELL_STRINGIFY(UCT_DOORBELL_MAX_ASYNC_INTERVAL_S) "s].",
     ucs_offsetof(uct_doorbell_iface_config_t, async_interval),
     UCS_CONFIG_TYPE_TIME},

    {"STATS", "n",
     "Print the counters of each interface (WQEs, doorbells, signaled\n"
     "completions, packets, retransmits, CE marks, RTT samples) when it closes,\n"
     "one line per counter.",
     ucs_offsetof(uct_doorbell_iface_config_t, stats), UCS_CONFIG_TYPE_BOOL},

    {NULL}
};
/* clang-format on */

/* clang-format off */
static uct_iface_internal_ops_t uct_doorbell_iface_internal_ops = {
    .iface_estimate_perf = uct_base_iface_estimate_perf,
    .iface_vfs_refresh   = (uct_iface_vfs_refresh_func_t)ucs_empty_function,
    .ep_query            = (uct_ep_query_func_t)
                           ucs_empty_function_return_unsupported,
    .ep_invalidate       = (uct_ep_invalidate_func_t)
                           ucs_empty_function_return_unsupported
};
/* clang-format on */


static ucs_status_t uct_doorbell_iface_query(uct_iface_h       tl_iface,
                                             uct_iface_attr_t *attr)
{
    uct_doorbell_iface_t          *iface  = ucs_derived_of(tl_iface,
                                                           uct_doorbell_iface_t);
    const doorbell_iface_limits_t *limits = &iface->config.limits;
    size_t max_iov = ucs_min(limits->max_iov, UCT_DOORBELL_MAX_IOV);

    uct_base_iface_query(&iface->super, attr);

    attr->device_addr_len = doorbell_iface_device_address_length(iface->core);
    attr->iface_addr_len  = doorbell_iface_address_length(iface->core);
    attr->ep_addr_len     = 0;
    attr->max_conn_priv   = 0;
    attr->cap.flags       = UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                      UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_AM_BCOPY |
                      UCT_IFACE_FLAG_AM_ZCOPY | UCT_IFACE_FLAG_PUT_SHORT |
                      UCT_IFACE_FLAG_PUT_BCOPY | UCT_IFACE_FLAG_PUT_ZCOPY |
                      UCT_IFACE_FLAG_GET_BCOPY | UCT_IFACE_FLAG_GET_ZCOPY |
                      UCT_IFACE_FLAG_PENDING | UCT_IFACE_FLAG_CB_SYNC |
                      UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE |
                      UCT_IFACE_FLAG_EP_CHECK;
    attr->cap.event_flags = UCT_IFACE_FLAG_EVENT_SEND_COMP |
                            UCT_IFACE_FLAG_EVENT_RECV | UCT_IFACE_FLAG_EVENT_FD;

    attr->cap.put.max_short       = limits->max_short;
    attr->cap.put.max_bcopy       = limits->max_bcopy;
    attr->cap.put.min_zcopy       = 0;
    attr->cap.put.max_zcopy       = limits->max_zcopy;
    attr->cap.put.opt_zcopy_align = 1;
    attr->cap.put.align_mtu       = 1;
    attr->cap.put.max_iov         = max_iov;

    attr->cap.get.max_short       = 0;
    attr->cap.get.max_bcopy       = limits->max_bcopy;
    attr->cap.get.min_zcopy       = 0;
    attr->cap.get.max_zcopy       = limits->max_zcopy;
    attr->cap.get.opt_zcopy_align = 1;
    attr->cap.get.align_mtu       = 1;
    attr->cap.get.max_iov         = max_iov;

    attr->cap.am.max_short       = limits->max_short;
    attr->cap.am.max_bcopy       = limits->max_am_bcopy;
    attr->cap.am.min_zcopy       = 0;
    attr->cap.am.max_zcopy       = limits->max_am_zcopy;
    attr->cap.am.opt_zcopy_align = 1;
    attr->cap.am.align_mtu       = 1;
    attr->cap.am.max_hdr         = ucs_min(UCT_DOORBELL_AM_MAX_HDR,
                                           limits->max_am_zcopy);
    /* iov[0] carries the header (see uct_doorbell_ep_am_zcopy) */
    attr->cap.am.max_iov = (max_iov > 1) ? (max_iov - 1) : 0;

    /* One sendmmsg/recvmmsg pair per message on the software device; the
     * device reports its wire latency and bandwidth. */
    attr->latency = ucs_linear_func_make(iface->config.device.latency_ns * 1e-9,
                                         0);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = iface->config.device.bandwidth;
    attr->overhead            = 1e-6;
    attr->priority            = 0;
    return UCS_OK;
}

static ucs_status_t uct_doorbell_iface_get_device_address(
    uct_iface_h tl_iface, uct_device_addr_t *addr)
{
    uct_doorbell_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_doorbell_iface_t);

    doorbell_iface_get_device_address(iface->core, addr);
    return UCS_OK;
}

static ucs_status_t uct_doorbell_iface_get_address(uct_iface_h       tl_iface,
                                                   uct_iface_addr_t *addr)
{
    uct_doorbell_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_doorbell_iface_t);

    doorbell_iface_get_address(iface->core, addr);
    return UCS_OK;
}

static int uct_doorbell_iface_is_reachable(const uct_iface_h        tl_iface,
                                           const uct_device_addr_t *dev_addr,
                                           const uct_iface_addr_t  *iface_addr)
{
    uct_doorbell_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_doorbell_iface_t);

    if ((dev_addr == NULL) || (iface_addr == NULL)) {
        return 0;
    }

    return doorbell_iface_is_reachable(iface->core, dev_addr, iface_addr);
}

static void uct_doorbell_iface_timer_speed_up(uct_doorbell_iface_t *iface);

static unsigned uct_doorbell_iface_progress(uct_iface_h tl_iface)
{
    uct_doorbell_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_doorbell_iface_t);
    unsigned              count = 0;

    UCT_DOORBELL_ENTER(iface);
    ++iface->progress_count;
    if (ucs_unlikely(!ucs_queue_is_empty(&iface->deferred))) {
        count += uct_doorbell_iface_deliver_deferred(iface);
    }
    count += doorbell_iface_progress(iface->core);
    ucs_arbiter_dispatch(&iface->arbiter, 1, uct_doorbell_ep_process_pending,
                         NULL);
    if (ucs_unlikely(iface->quiet) &&
        ((count > 0) || iface->moved_in_background)) {
        uct_doorbell_iface_timer_speed_up(iface);
    }
    UCT_DOORBELL_LEAVE(iface);
    return count;
}

/* Async thread, with the async lock held: transport work only, callbacks
 * are deferred to the next foreground progress. */
static void uct_doorbell_iface_timer(int id, ucs_event_set_types_t events,
                                     void *arg)
{
    uct_doorbell_iface_t *iface = arg;
    uint64_t              expirations;

    if (iface->timer_fd >= 0) {
        /* Edge-triggered: each expiration is reported once; drained so
         * the count does not grow (EAGAIN when a missed event is replayed
         * from the foreground after the thread read it). */
        (void)!read(iface->timer_fd, &expirations, sizeof(expirations));
    }
    /* The application progresses by itself: a second thread polling the
     * same socket would only contend for the async lock. */
    if (iface->progress_count != iface->progress_seen) {
        iface->progress_seen = iface->progress_count;
        return;
    }

    iface->in_background = 1;
    if (doorbell_iface_progress_background(iface->core) > 0) {
        iface->moved_in_background = 1; /* the foreground speeds up */
    }
    iface->in_background = 0;
}

static void uct_doorbell_iface_timer_spec(double period, struct itimerspec *its)
{
    uint64_t ns = (uint64_t)(period * 1e9 + 0.5);

    its->it_interval.tv_sec  = (time_t)(ns / 1000000000ull);
    its->it_interval.tv_nsec = (long)(ns % 1000000000ull);
    its->it_value            = its->it_interval;
}

/* The background tick. On the async thread it is a timerfd in the
 * thread's epoll set, not a UCS timer: UCX 1.13's async thread waits for a
 * timer in whole milliseconds and spins on epoll_wait(0) for the rest of
 * each period (about 1 ms of every 10 ms period, 9 % of a core per
 * process, measured), and on a host with more ranks than cores that is
 * taken from the ranks. Signal and poll modes keep the UCS timer (a
 * timerfd cannot raise SIGIO, and poll mode dispatches every handler on
 * every poll). */
static ucs_status_t uct_doorbell_iface_timer_add(uct_doorbell_iface_t *iface,
                                                 double period, int *id_p)
{
    struct itimerspec its;
    ucs_status_t      status;
    int               fd;

    if ((iface->async->mode != UCS_ASYNC_MODE_THREAD_SPINLOCK) &&
        (iface->async->mode != UCS_ASYNC_MODE_THREAD_MUTEX)) {
        iface->timer_fd = -1;
        return ucs_async_add_timer(iface->async->mode,
                                   ucs_time_from_sec(period),
                                   uct_doorbell_iface_timer, iface,
                                   iface->async, id_p);
    }
    fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd < 0) {
        ucs_error("doorbell %s: timerfd_create() for background progress"
                  " failed: %m",
                  iface->dev_name);
        return UCS_ERR_IO_ERROR;
    }
    uct_doorbell_iface_timer_spec(period, &its);
    if (timerfd_settime(fd, 0, &its, NULL) != 0) {
        ucs_error("doorbell %s: timerfd_settime(%g s) failed: %m",
                  iface->dev_name, period);
        close(fd);
        return UCS_ERR_IO_ERROR;
    }
    iface->timer_fd = fd;
    status          = ucs_async_set_event_handler(iface->async->mode, fd,
                                                  UCS_EVENT_SET_EVREAD |
                                                      UCS_EVENT_SET_EDGE_TRIGGERED,
                                                  uct_doorbell_iface_timer, iface,
                                                  iface->async);
    if (status != UCS_OK) {
        iface->timer_fd = -1;
        close(fd);
        return status;
    }
    *id_p = fd;
    return UCS_OK;
}

static void uct_doorbell_iface_timer_remove(uct_doorbell_iface_t *iface)
{
    if (iface->timer_id < 0) {
        return;
    }
    ucs_async_remove_handler(iface->timer_id, 1);
    if (iface->timer_fd >= 0) {
        close(iface->timer_fd);
        iface->timer_fd = -1;
    }
    iface->timer_id = -1;
}

/* The iface has moved something: from now on its background progress runs
 * every ASYNC_INTERVAL. Foreground, with the async context blocked, so the
 * old timer's callback is not running; if the new period cannot be set the
 * quiet one stays (and is not tried again). */
static void uct_doorbell_iface_timer_speed_up(uct_doorbell_iface_t *iface)
{
    struct itimerspec its;
    int               id;
    ucs_status_t      status;

    iface->quiet = 0;
    if (iface->timer_fd >= 0) {
        uct_doorbell_iface_timer_spec(iface->async_interval, &its);
        if (timerfd_settime(iface->timer_fd, 0, &its, NULL) != 0) {
            ucs_debug("doorbell %s: background progress stays at %g s: %m",
                      iface->dev_name, iface->timer_period);
            return;
        }
        iface->timer_period = iface->async_interval;
        return;
    }
    status = uct_doorbell_iface_timer_add(iface, iface->async_interval, &id);
    if (status != UCS_OK) {
        ucs_debug("doorbell %s: background progress stays at %g s: %s",
                  iface->dev_name, iface->timer_period,
                  ucs_status_string(status));
        return;
    }
    ucs_async_remove_handler(iface->timer_id, 0);
    iface->timer_id     = id;
    iface->timer_period = iface->async_interval;
}

uint64_t uct_doorbell_iface_background_period_ns(uct_iface_h tl_iface)
{
    uct_doorbell_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_doorbell_iface_t);

    return (iface->timer_id < 0) ? 0 :
                                   (uint64_t)(iface->timer_period * 1e9 + 0.5);
}

static doorbell_status_t uct_doorbell_iface_core_flush(void *core, void *cookie)
{
    return doorbell_iface_flush(core, cookie);
}

static ucs_status_t uct_doorbell_iface_flush(uct_iface_h       tl_iface,
                                             unsigned          flags,
                                             uct_completion_t *comp)
{
    uct_doorbell_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_doorbell_iface_t);

    if (ucs_unlikely(flags & UCT_FLUSH_FLAG_CANCEL)) {
        ucs_fatal("doorbell: iface flush with UCT_FLUSH_FLAG_CANCEL is not"
                  " supported");
    }

    ucs_status_t status;

    UCT_DOORBELL_ENTER(iface);
    if (!ucs_arbiter_is_empty(&iface->arbiter)) {
        status = UCS_ERR_NO_RESOURCE;
    } else {
        status = uct_doorbell_flush_post(&iface->flush, comp,
                                         uct_doorbell_iface_core_flush,
                                         iface->core);
    }
    UCT_DOORBELL_LEAVE(iface);
    return status;
}

static void uct_doorbell_flush_done(uct_completion_t *self)
{
    ucs_container_of(self, uct_doorbell_flush_t, comp)->in_flight = 0;
}

void uct_doorbell_flush_init(uct_doorbell_flush_t *flush)
{
    flush->comp.func   = uct_doorbell_flush_done;
    flush->comp.count  = 0;
    flush->comp.status = UCS_OK;
    flush->in_flight   = 0;
}

static ucs_status_t uct_doorbell_iface_fence(uct_iface_h tl_iface,
                                             unsigned    flags)
{
    uct_doorbell_iface_t *iface  = ucs_derived_of(tl_iface,
                                                  uct_doorbell_iface_t);
    ucs_status_t          status = UCS_OK;
    uct_doorbell_ep_t    *ep;

    UCT_DOORBELL_ENTER(iface);
    ucs_list_for_each (ep, &iface->ep_list, list) {
        status = uct_doorbell_status(doorbell_qp_fence(ep->qp));
        if (status != UCS_OK) {
            break;
        }
    }
    UCT_DOORBELL_LEAVE(iface);
    return status;
}

static ucs_status_t uct_doorbell_iface_event_fd_get(uct_iface_h tl_iface,
                                                    int        *fd_p)
{
    uct_doorbell_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_doorbell_iface_t);
    int                   fd    = doorbell_iface_event_fd(iface->core);

    if (fd < 0) {
        return UCS_ERR_UNSUPPORTED;
    }

    *fd_p = fd;
    return UCS_OK;
}

static ucs_status_t uct_doorbell_iface_event_arm(uct_iface_h tl_iface,
                                                 unsigned    events)
{
    uct_doorbell_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_doorbell_iface_t);
    doorbell_status_t     status;
    int                   pending_ready = 0;

    UCT_DOORBELL_ENTER(iface);
    /* A pending request keeps the worker awake only if its endpoint could
     * send it now; one waiting for ACKs (a full ring, a paced QP) sleeps
     * until they arrive, instead of spinning the core its peers need */
    ucs_arbiter_dispatch(&iface->arbiter, 1, uct_doorbell_ep_pending_ready,
                         &pending_ready);
    if (pending_ready || !ucs_queue_is_empty(&iface->deferred)) {
        status = DOORBELL_ERR_NO_RESOURCE;
    } else {
        status = doorbell_iface_arm(iface->core);
    }
    UCT_DOORBELL_LEAVE(iface);

    return (status == DOORBELL_ERR_NO_RESOURCE) ? UCS_ERR_BUSY :
                                                  uct_doorbell_status(status);
}

static uct_doorbell_deferred_t *uct_doorbell_iface_defer(
    uct_doorbell_iface_t *iface, uct_doorbell_deferred_type_t type)
{
    uct_doorbell_deferred_t *d = ucs_malloc(sizeof(*d), "doorbell deferred");

    if (d == NULL) {
        ucs_error("doorbell %s: no memory to defer a callback",
                  iface->dev_name);
        return NULL;
    }

    d->type = type;
    ucs_queue_push(&iface->deferred, &d->queue);
    return d;
}

/* Foreground progress: the callbacks background progress deferred, in the
 * order the core made them. */
static unsigned uct_doorbell_iface_deliver_deferred(uct_doorbell_iface_t *iface)
{
    uct_doorbell_deferred_t *d;
    unsigned                 count = 0;
    ucs_status_t             status;

    while (!ucs_queue_is_empty(&iface->deferred)) {
        d = ucs_queue_pull_elem_non_empty(&iface->deferred,
                                          uct_doorbell_deferred_t, queue);
        switch (d->type) {
        case UCT_DOORBELL_DEFERRED_AM:
            if (iface->config.am_flags & UCT_CB_PARAM_FLAG_DESC) {
                uct_recv_desc(
                    UCS_PTR_BYTE_OFFSET(d->data, -iface->config.rx_headroom)) =
                    &iface->release_desc;
            }
            status = uct_iface_invoke_am(&iface->super, d->am_id, d->data,
                                         d->length, iface->config.am_flags);
            if (status != UCS_INPROGRESS) {
                doorbell_iface_release_am(iface->core, d->data);
            }
            break;
        case UCT_DOORBELL_DEFERRED_COMPLETION:
            uct_invoke_completion((uct_completion_t *)d->cookie,
                                  uct_doorbell_status(d->status));
            break;
        case UCT_DOORBELL_DEFERRED_ERROR:
            uct_doorbell_iface_qp_error(iface, d->qp, d->status, d->message);
            break;
        }
        ucs_free(d);
        ++count;
    }

    return count;
}

/* Active message from the core. The AM id comes from the wire: never trust
 * it. When UCP's headroom fits in front of the data, the buffer is lent to
 * UCP (UCT_CB_PARAM_FLAG_DESC) and comes back through release_desc. */
static doorbell_status_t uct_doorbell_iface_am_handler(void *arg, uint8_t am_id,
                                                       void  *data,
                                                       size_t length)
{
    uct_doorbell_iface_t    *iface = arg;
    uct_doorbell_deferred_t *d;
    ucs_status_t             status;

    if (ucs_unlikely(am_id >= UCT_AM_ID_MAX)) {
        ucs_debug("doorbell %s: dropping active message with invalid id %u",
                  iface->dev_name, am_id);
        return DOORBELL_OK;
    }

    if (ucs_unlikely(iface->in_background)) {
        d = uct_doorbell_iface_defer(iface, UCT_DOORBELL_DEFERRED_AM);
        if (d == NULL) {
            return DOORBELL_ERR_NO_MEMORY;
        }
        d->am_id  = am_id;
        d->data   = data;
        d->length = length;
        return DOORBELL_INPROGRESS; /* the core holds the buffer for us */
    }

    if (iface->config.am_flags & UCT_CB_PARAM_FLAG_DESC) {
        uct_recv_desc(UCS_PTR_BYTE_OFFSET(data, -iface->config.rx_headroom)) =
            &iface->release_desc;
    }

    status = uct_iface_invoke_am(&iface->super, am_id, data, length,
                                 iface->config.am_flags);
    return (status == UCS_INPROGRESS) ? DOORBELL_INPROGRESS : DOORBELL_OK;
}

static void uct_doorbell_iface_release_desc(uct_recv_desc_t *self, void *desc)
{
    uct_doorbell_iface_t *iface = ucs_container_of(self, uct_doorbell_iface_t,
                                                   release_desc);

    UCT_DOORBELL_ENTER(iface);
    doorbell_iface_release_am(iface->core,
                              UCS_PTR_BYTE_OFFSET(desc,
                                                  iface->config.rx_headroom));
    UCT_DOORBELL_LEAVE(iface);
}

static void uct_doorbell_iface_completion(void *arg, void *cookie,
                                          doorbell_status_t status)
{
    uct_doorbell_iface_t    *iface = arg;
    uct_doorbell_deferred_t *d;

    if (ucs_unlikely(iface->in_background)) {
        d = uct_doorbell_iface_defer(iface, UCT_DOORBELL_DEFERRED_COMPLETION);
        if (d != NULL) {
            d->cookie = cookie;
            d->status = status;
            return;
        }
        /* no memory: completing now beats losing the completion */
    }

    uct_invoke_completion((uct_completion_t *)cookie,
                          uct_doorbell_status(status));
}

void uct_doorbell_iface_qp_error(void *arg, doorbell_qp_t *qp,
                                 doorbell_status_t status, const char *message)
{
    uct_doorbell_iface_t    *iface      = arg;
    ucs_status_t             uct_status = uct_doorbell_status(status);
    uct_doorbell_deferred_t *d;
    ucs_status_t             handler_status;
    uct_doorbell_ep_t       *ep;

    if (ucs_unlikely(iface->in_background)) {
        d = uct_doorbell_iface_defer(iface, UCT_DOORBELL_DEFERRED_ERROR);
        if (d != NULL) {
            d->qp     = qp;
            d->status = status;
            ucs_strncpy_zero(d->message, message, sizeof(d->message));
            return;
        }
    }

    ucs_list_for_each (ep, &iface->ep_list, list) {
        if (ep->qp == qp) {
            handler_status = uct_iface_handle_ep_err(&iface->super.super,
                                                     &ep->super.super,
                                                     uct_status);
            ucs_log(uct_base_iface_failure_log_level(&iface->super,
                                                     handler_status,
                                                     uct_status),
                    "doorbell %s: ep %p: %s (%s)", iface->dev_name, ep, message,
                    ucs_status_string(uct_status));
            return;
        }
    }

    ucs_debug("doorbell %s: error on a destroyed endpoint: %s", iface->dev_name,
              message);
}

/* The core's devices, in an array the caller frees; their number, or -1 when
 * there is no memory for it. */
static int uct_doorbell_device_list(doorbell_device_info_t **devices_p)
{
    int count = doorbell_query_devices(NULL, 0);

    *devices_p = ucs_calloc(ucs_max(count, 1), sizeof(**devices_p),
                            "doorbell devices");
    if (*devices_p == NULL) {
        ucs_error("doorbell: failed to allocate the device list");
        return -1;
    }
    /* Devices may come and go between the two calls: take the smaller. */
    return ucs_min(doorbell_query_devices(*devices_p, count), count);
}

static ucs_status_t uct_doorbell_iface_find_device(const char *dev_name,
                                                   doorbell_device_info_t *info)
{
    doorbell_device_info_t *devices;
    ucs_status_t            status;
    int                     i, count;

    count = uct_doorbell_device_list(&devices);
    if (count < 0) {
        return UCS_ERR_NO_MEMORY;
    }
    status = UCS_ERR_NO_DEVICE;
    for (i = 0; i < count; ++i) {
        if (!strcmp(devices[i].name, dev_name)) {
            *info  = devices[i];
            status = UCS_OK;
            break;
        }
    }

    ucs_free(devices);
    if (status != UCS_OK) {
        ucs_error("doorbell: device %s not found (neither a network interface"
                  " with an IPv4 address nor an active verbs port)",
                  dev_name);
    }
    return status;
}

/* A UCX duration (seconds) in ns; negative, not a number or absurdly long
 * (which the core's range would refuse anyway, after an overflow) is
 * refused here, naming the variable. */
static ucs_status_t uct_doorbell_config_ns(const char *var, double seconds,
                                           uint64_t *ns_p)
{
    if (!(seconds >= 0) || !(seconds <= 1e6)) {
        ucs_error("UCX_DOORBELL_%s = %g s is out of range: a duration of 0 or "
                  "more (see ucx_info -c -f for its range)",
                  var, seconds);
        return UCS_ERR_INVALID_PARAM;
    }
    *ns_p = (uint64_t)(seconds * 1e9 + 0.5);
    return UCS_OK;
}

/* A UCX memory size that must fit 32 bits. */
static ucs_status_t uct_doorbell_config_u32(const char *var, size_t value,
                                            uint32_t *out_p)
{
    if (value > UINT32_MAX) {
        ucs_error("UCX_DOORBELL_%s = %zu is out of range (see ucx_info -c -f for"
                  " its range)",
                  var, value);
        return UCS_ERR_INVALID_PARAM;
    }
    *out_p = (uint32_t)value;
    return UCS_OK;
}

/* The core's parameters from UCX_DOORBELL_*. Every value is checked against
 * its range (doorbell_iface_params_check, with the variables' names) and
 * refused when outside: nothing is adjusted silently. */
static ucs_status_t uct_doorbell_iface_params_from_config(
    const uct_doorbell_iface_config_t *config, const char *dev_name,
    doorbell_iface_params_t *p)
{
    ucs_status_t status;
    uint64_t     async_ns;
    char        *end;

    doorbell_iface_params_init(p);
    p->device        = dev_name;
    p->tx_batch      = config->tx_batch;
    p->tx_moderation = config->tx_moderation;
    p->mtu           = 0;
    if ((config->mtu != UCS_MEMUNITS_AUTO) &&
        ((status = uct_doorbell_config_u32("MTU", config->mtu, &p->mtu)) !=
         UCS_OK)) {
        return status;
    }
    status = uct_doorbell_config_u32("SEG_SIZE", config->seg_size,
                                     &p->seg_size);
    if (status != UCS_OK) {
        return status;
    }
    p->tx_queue_len        = config->tx_queue_len;
    p->rx_queue_len        = config->rx_queue_len;
    p->am_credits          = config->am_credits;
    p->retry_count         = config->retry_count;
    p->rx_reassembly_bytes = config->rx_reassembly;
    p->paths               = 0; /* auto */
    if (config->paths == UCS_ULUNITS_INF) {
        ucs_error("UCX_DOORBELL_PATHS = inf is out of range: auto or [1, %u]",
                  DOORBELL_MAX_PATHS);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((config->paths != UCS_ULUNITS_AUTO) &&
        ((status = uct_doorbell_config_u32("PATHS", config->paths,
                                           &p->paths)) != UCS_OK)) {
        return status;
    }
    p->cc = uct_doorbell_cc_names[config->cc];
    if (((status = uct_doorbell_config_ns("RTO_MIN", config->rto_min,
                                          &p->rto_min_ns)) != UCS_OK) ||
        ((status = uct_doorbell_config_ns("RTO_MAX", config->rto_max,
                                          &p->rto_max_ns)) != UCS_OK) ||
        ((status = uct_doorbell_config_ns("CC_TARGET_DELAY",
                                          config->cc_target_delay,
                                          &p->cc_target_delay_ns)) != UCS_OK) ||
        ((status = uct_doorbell_config_ns("KEEPALIVE_INTERVAL",
                                          config->keepalive_interval,
                                          &p->keepalive_interval_ns)) !=
         UCS_OK) ||
        ((status = uct_doorbell_config_ns("KEEPALIVE_TIMEOUT",
                                          config->keepalive_timeout,
                                          &p->keepalive_timeout_ns)) !=
         UCS_OK) ||
        ((status = uct_doorbell_config_ns("ASYNC_INTERVAL",
                                          config->async_interval, &async_ns)) !=
         UCS_OK)) {
        return status;
    }
    if ((async_ns != 0) &&
        ((async_ns < UCT_DOORBELL_MIN_ASYNC_INTERVAL_US * 1000ull) ||
         (async_ns > UCT_DOORBELL_MAX_ASYNC_INTERVAL_S * 1000000000ull))) {
        ucs_error("UCX_DOORBELL_ASYNC_INTERVAL = %g s is out of range: 0 (off) "
                  "or [%u us, %u s]",
                  config->async_interval, UCT_DOORBELL_MIN_ASYNC_INTERVAL_US,
                  UCT_DOORBELL_MAX_ASYNC_INTERVAL_S);
        return UCS_ERR_INVALID_PARAM;
    }

    if (!strcasecmp(config->ibrc_gain, "auto")) {
        p->ibrc_gain = 0;
    } else {
        p->ibrc_gain = strtod(config->ibrc_gain, &end);
        if ((*end != '\0') || (end == config->ibrc_gain) ||
            !(p->ibrc_gain > 0) || !isfinite(p->ibrc_gain)) {
            ucs_error(
                "UCX_DOORBELL_IBRC_GAIN = \"%s\" is out of range: \"auto\" "
                "or a positive number",
                config->ibrc_gain);
            return UCS_ERR_INVALID_PARAM;
        }
    }

    p->cc_min_rate = UCS_CONFIG_BW_IS_AUTO(config->cc_min_rate) ?
                         0 :
                         config->cc_min_rate;
    p->cc_max_rate = UCS_CONFIG_BW_IS_AUTO(config->cc_max_rate) ?
                         0 :
                         config->cc_max_rate;

    if (doorbell_iface_params_check(p, "UCX_DOORBELL_") != DOORBELL_OK) {
        ucs_error("doorbell %s: %s", dev_name, doorbell_last_error());
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

static UCS_CLASS_INIT_FUNC(uct_doorbell_iface_t, uct_md_h tl_md,
                           uct_worker_h              worker,
                           const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    uct_doorbell_iface_config_t *config =
        ucs_derived_of(tl_config, uct_doorbell_iface_config_t);
    uct_doorbell_md_t      *md = ucs_derived_of(tl_md, uct_doorbell_md_t);
    doorbell_iface_params_t core_params;
    doorbell_status_t       core_status;
    ucs_status_t            status;
    const char             *dev_name;

    UCT_CHECK_PARAM(params->field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE,
                    "UCT_IFACE_PARAM_FIELD_OPEN_MODE is not defined");
    if (!(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) {
        ucs_error("doorbell supports only UCT_IFACE_OPEN_MODE_DEVICE");
        return UCS_ERR_UNSUPPORTED;
    }

    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, &uct_doorbell_iface_ops,
                              &uct_doorbell_iface_internal_ops, tl_md, worker,
                              params,
                              tl_config UCS_STATS_ARG(NULL)
                                  UCS_STATS_ARG(UCT_DOORBELL_NAME));

    dev_name = params->mode.device.dev_name;
    ucs_strncpy_zero(self->dev_name, dev_name, sizeof(self->dev_name));

    self->async = self->super.worker->async;
    if (self->async == NULL) {
        ucs_error("doorbell %s: the worker has no async context", dev_name);
        status = UCS_ERR_INVALID_PARAM;
        goto err;
    }

    status = uct_doorbell_iface_find_device(dev_name, &self->config.device);
    if (status != UCS_OK) {
        goto err;
    }

    status = uct_doorbell_iface_params_from_config(config, dev_name,
                                                   &core_params);
    if (status != UCS_OK) {
        goto err;
    }

    core_status = doorbell_iface_open(md->pd, &core_params, &self->core);
    if (core_status != DOORBELL_OK) {
        ucs_error("doorbell %s: opening the interface failed: %s", dev_name,
                  doorbell_last_error());
        status = uct_doorbell_status(core_status);
        goto err;
    }

    /* Lend receive buffers to UCP only if its headroom and our descriptor
     * pointer fit in the headroom the core leaves before AM data. */
    self->config.rx_headroom = UCT_IFACE_PARAM_VALUE(params, rx_headroom,
                                                     RX_HEADROOM, 0);
    self->config.am_flags    = ((self->config.rx_headroom +
                              sizeof(uct_recv_desc_t *)) <=
                             DOORBELL_AM_HEADROOM) ?
                                   UCT_CB_PARAM_FLAG_DESC :
                                   0;
    self->release_desc.cb    = uct_doorbell_iface_release_desc;
    uct_doorbell_flush_init(&self->flush);

    doorbell_iface_query_limits(self->core, &self->config.limits);
    doorbell_iface_set_am_handler(self->core, uct_doorbell_iface_am_handler,
                                  self);
    doorbell_iface_set_completion_handler_arg(self->core,
                                              uct_doorbell_iface_completion,
                                              self);
    doorbell_iface_set_error_handler(self->core, uct_doorbell_iface_qp_error,
                                     self);
    doorbell_iface_set_stats(self->core, config->stats);

    ucs_arbiter_init(&self->arbiter);
    ucs_list_head_init(&self->ep_list);
    ucs_queue_head_init(&self->deferred);

    self->in_background       = 0;
    self->timer_id            = -1;
    self->timer_fd            = -1;
    self->progress_count      = 0;
    self->progress_seen       = 0;
    self->moved_in_background = 0;
    self->async_interval      = config->async_interval;
    self->timer_period        = (config->async_interval > 0) ?
                                    ucs_max(config->async_interval,
                                            UCT_DOORBELL_QUIET_ASYNC_INTERVAL_S) :
                                    0;
    self->quiet               = self->timer_period != self->async_interval;
    if (config->async_interval > 0) {
        status = uct_doorbell_iface_timer_add(self, self->timer_period,
                                              &self->timer_id);
        if (status != UCS_OK) {
            ucs_error("doorbell %s: failed to add the background progress"
                      " timer: %s",
                      dev_name, ucs_status_string(status));
            goto err_close;
        }
    }

    ucs_debug("doorbell %s: iface %p opened (max_short %zu max_bcopy %zu"
              " max_zcopy %zu, AM descriptors %s)",
              dev_name, self, self->config.limits.max_short,
              self->config.limits.max_bcopy, self->config.limits.max_zcopy,
              self->config.am_flags ? "lent" : "copied");
    return UCS_OK;

err_close:
    ucs_arbiter_cleanup(&self->arbiter);
    doorbell_iface_close(self->core);
err:
    return status;
}

static UCS_CLASS_CLEANUP_FUNC(uct_doorbell_iface_t)
{
    uct_doorbell_deferred_t *d;

    uct_doorbell_iface_timer_remove(self);
    uct_base_iface_progress_disable(&self->super.super,
                                    UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    /* Callbacks nobody progressed for: AM buffers go back to the core */
    while (!ucs_queue_is_empty(&self->deferred)) {
        d = ucs_queue_pull_elem_non_empty(&self->deferred,
                                          uct_doorbell_deferred_t, queue);
        if (d->type == UCT_DOORBELL_DEFERRED_AM) {
            doorbell_iface_release_am(self->core, d->data);
        }
        ucs_free(d);
    }
    if (!ucs_list_is_empty(&self->ep_list)) {
        ucs_warn("doorbell %s: closing iface %p with endpoints still open",
                 self->dev_name, self);
    }
    doorbell_iface_close(self->core);
    ucs_arbiter_cleanup(&self->arbiter);
    ucs_debug("doorbell %s: iface %p closed", self->dev_name, self);
}

UCS_CLASS_DEFINE(uct_doorbell_iface_t, uct_base_iface_t);

/* No hardware tag matching: UCP never calls these without the capability. */
static ssize_t uct_doorbell_ep_tag_eager_bcopy(uct_ep_h tl_ep, uct_tag_t tag,
                                               uint64_t            imm,
                                               uct_pack_callback_t pack_cb,
                                               void *arg, unsigned flags)
{
    return UCS_ERR_UNSUPPORTED;
}

static ucs_status_ptr_t uct_doorbell_ep_tag_rndv_zcopy(
    uct_ep_h tl_ep, uct_tag_t tag, const void *header, unsigned header_length,
    const uct_iov_t *iov, size_t iovcnt, unsigned flags, uct_completion_t *comp)
{
    return UCS_STATUS_PTR(UCS_ERR_UNSUPPORTED);
}

static UCS_CLASS_DEFINE_NEW_FUNC(uct_doorbell_iface_t, uct_iface_t, uct_md_h,
                                 uct_worker_h, const uct_iface_params_t *,
                                 const uct_iface_config_t *);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_doorbell_iface_t, uct_iface_t);

/* clang-format off */
static uct_iface_ops_t uct_doorbell_iface_ops = {
    .ep_put_short             = uct_doorbell_ep_put_short,
    .ep_put_bcopy             = uct_doorbell_ep_put_bcopy,
    .ep_put_zcopy             = uct_doorbell_ep_put_zcopy,
    .ep_get_short             = (uct_ep_get_short_func_t)
                                ucs_empty_function_return_unsupported,
    .ep_get_bcopy             = uct_doorbell_ep_get_bcopy,
    .ep_get_zcopy             = uct_doorbell_ep_get_zcopy,
    .ep_am_short              = uct_doorbell_ep_am_short,
    .ep_am_short_iov          = uct_doorbell_ep_am_short_iov,
    .ep_am_bcopy              = uct_doorbell_ep_am_bcopy,
    .ep_am_zcopy              = uct_doorbell_ep_am_zcopy,
    .ep_atomic_cswap64        = (uct_ep_atomic_cswap64_func_t)
                                ucs_empty_function_return_unsupported,
    .ep_atomic_cswap32        = (uct_ep_atomic_cswap32_func_t)
                                ucs_empty_function_return_unsupported,
    .ep_atomic32_post         = (uct_ep_atomic32_post_func_t)
                                ucs_empty_function_return_unsupported,
    .ep_atomic64_post         = (uct_ep_atomic64_post_func_t)
                                ucs_empty_function_return_unsupported,
    .ep_atomic32_fetch        = (uct_ep_atomic32_fetch_func_t)
                                ucs_empty_function_return_unsupported,
    .ep_atomic64_fetch        = (uct_ep_atomic64_fetch_func_t)
                                ucs_empty_function_return_unsupported,
    .ep_tag_eager_short       = (uct_ep_tag_eager_short_func_t)
                                ucs_empty_function_return_unsupported,
    .ep_tag_eager_bcopy       = uct_doorbell_ep_tag_eager_bcopy,
    .ep_tag_eager_zcopy       = (uct_ep_tag_eager_zcopy_func_t)
                                ucs_empty_function_return_unsupported,
    .ep_tag_rndv_zcopy        = uct_doorbell_ep_tag_rndv_zcopy,
    .ep_tag_rndv_cancel       = (uct_ep_tag_rndv_cancel_func_t)
                                ucs_empty_function_return_unsupported,
    .ep_tag_rndv_request      = (uct_ep_tag_rndv_request_func_t)
                                ucs_empty_function_return_unsupported,
    .iface_tag_recv_zcopy     = (uct_iface_tag_recv_zcopy_func_t)
                                ucs_empty_function_return_unsupported,
    .iface_tag_recv_cancel    = (uct_iface_tag_recv_cancel_func_t)
                                ucs_empty_function_return_unsupported,
    .ep_pending_add           = uct_doorbell_ep_pending_add,
    .ep_pending_purge         = uct_doorbell_ep_pending_purge,
    .ep_flush                 = uct_doorbell_ep_flush,
    .ep_fence                 = uct_doorbell_ep_fence,
    .ep_check                 = uct_doorbell_ep_check,
    .ep_create                = UCS_CLASS_NEW_FUNC_NAME(uct_doorbell_ep_t),
    .ep_connect               = (uct_ep_connect_func_t)
                                ucs_empty_function_return_unsupported,
    .ep_disconnect            = (uct_ep_disconnect_func_t)
                                ucs_empty_function_return_unsupported,
    .cm_ep_conn_notify        = (uct_cm_ep_conn_notify_func_t)
                                ucs_empty_function_return_unsupported,
    .ep_destroy               = UCS_CLASS_DELETE_FUNC_NAME(uct_doorbell_ep_t),
    .ep_get_address           = (uct_ep_get_address_func_t)
                                ucs_empty_function_return_unsupported,
    .ep_connect_to_ep         = (uct_ep_connect_to_ep_func_t)
                                ucs_empty_function_return_unsupported,
    .iface_accept             = (uct_iface_accept_func_t)
                                ucs_empty_function_return_unsupported,
    .iface_reject             = (uct_iface_reject_func_t)
                                ucs_empty_function_return_unsupported,
    .iface_flush              = uct_doorbell_iface_flush,
    .iface_fence              = uct_doorbell_iface_fence,
    .iface_progress_enable    = uct_base_iface_progress_enable,
    .iface_progress_disable   = uct_base_iface_progress_disable,
    .iface_progress           = uct_doorbell_iface_progress,
    .iface_event_fd_get       = uct_doorbell_iface_event_fd_get,
    .iface_event_arm          = uct_doorbell_iface_event_arm,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_doorbell_iface_t),
    .iface_query              = uct_doorbell_iface_query,
    .iface_get_device_address = uct_doorbell_iface_get_device_address,
    .iface_get_address        = uct_doorbell_iface_get_address,
    .iface_is_reachable       = uct_doorbell_iface_is_reachable
};
/* clang-format on */

ucs_status_t uct_doorbell_query_tl_devices(uct_md_h                   md,
                                           uct_tl_device_resource_t **devices_p,
                                           unsigned *num_devices_p)
{
    doorbell_device_info_t   *infos;
    uct_tl_device_resource_t *devices;
    int                       i, count;

    count = uct_doorbell_device_list(&infos);
    if (count < 0) {
        return UCS_ERR_NO_MEMORY;
    }
    devices = (count > 0) ?
                  ucs_calloc(count, sizeof(*devices), "doorbell tl devices") :
                  NULL;
    if ((count > 0) && (devices == NULL)) {
        ucs_error("doorbell: failed to allocate the device list");
        ucs_free(infos);
        return UCS_ERR_NO_MEMORY;
    }
    for (i = 0; i < count; ++i) {
        ucs_snprintf_zero(devices[i].name, sizeof(devices[i].name), "%s",
                          infos[i].name);
        devices[i].type       = UCT_DEVICE_TYPE_NET;
        devices[i].sys_device = UCS_SYS_DEVICE_ID_UNKNOWN;
    }

    ucs_free(infos);
    *devices_p     = devices;
    *num_devices_p = count;
    return UCS_OK;
}

UCT_TL_DEFINE_ENTRY(&uct_doorbell_component, doorbell,
                    uct_doorbell_query_tl_devices, uct_doorbell_iface_t,
                    UCT_DOORBELL_CONFIG_PREFIX, uct_doorbell_iface_config_table,
                    uct_doorbell_iface_config_t);

/* The core's diagnostics (a device skipped, a fallback taken), in UCX's log
 * at debug level. */
static void uct_doorbell_log_debug(void *arg, const char *message)
{
    ucs_debug("doorbell: %s", message);
}

/* Debian's UCX loads only its compiled-in modules: this library is preloaded
 * and registers itself from a constructor. */
UCT_SINGLE_TL_INIT(&uct_doorbell_component, doorbell, ctor,
                   doorbell_set_debug_handler(uct_doorbell_log_debug, NULL),
                   doorbell_set_debug_handler(NULL, NULL))
