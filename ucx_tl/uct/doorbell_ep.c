/**
 * doorbell endpoint: a core RC queue pair to a remote iface. Every op
 * converts its arguments, calls the core and maps the status; the core
 * batches work requests behind the doorbell and completes them from progress.
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "doorbell.h"

#include <ucs/sys/math.h>
#include <ucs/type/class.h>


/* uct_iov_t -> struct iovec; UCP passes count 1, strided entries are rare
 * and are sent as count contiguous elements. */
static UCS_F_ALWAYS_INLINE size_t uct_doorbell_iov_convert(struct iovec    *dst,
                                                           const uct_iov_t *iov,
                                                           size_t iovcnt)
{
    size_t i;

    for (i = 0; i < iovcnt; ++i) {
        dst[i].iov_base = iov[i].buffer;
        dst[i].iov_len  = iov[i].length * iov[i].count;
    }
    return iovcnt;
}

static UCS_F_ALWAYS_INLINE ssize_t uct_doorbell_length_status(ssize_t ret)
{
    return (ret >= 0) ? ret : uct_doorbell_status((doorbell_status_t)ret);
}

ucs_status_t uct_doorbell_ep_am_short(uct_ep_h tl_ep, uint8_t id,
                                      uint64_t header, const void *payload,
                                      unsigned length)
{
    uct_doorbell_iface_t *iface = uct_doorbell_ep_iface(tl_ep);
    uct_doorbell_ep_t    *ep    = ucs_derived_of(tl_ep, uct_doorbell_ep_t);
    doorbell_status_t     status;

    UCT_CHECK_AM_ID(id);
    UCT_DOORBELL_ENTER(iface);
    status = doorbell_qp_am_short(ep->qp, id, header, payload, length);
    UCT_DOORBELL_LEAVE(iface);
    return uct_doorbell_status(status);
}

ucs_status_t uct_doorbell_ep_am_short_iov(uct_ep_h tl_ep, uint8_t id,
                                          const uct_iov_t *iov, size_t iovcnt)
{
    return uct_base_ep_am_short_iov(tl_ep, id, iov, iovcnt);
}

ssize_t uct_doorbell_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                                 uct_pack_callback_t pack_cb, void *arg,
                                 unsigned flags)
{
    uct_doorbell_iface_t *iface = uct_doorbell_ep_iface(tl_ep);
    uct_doorbell_ep_t    *ep    = ucs_derived_of(tl_ep, uct_doorbell_ep_t);
    ssize_t               ret;

    UCT_CHECK_AM_ID(id);
    UCT_DOORBELL_ENTER(iface);
    ret = doorbell_qp_am_bcopy(ep->qp, id, pack_cb, arg);
    UCT_DOORBELL_LEAVE(iface);
    return uct_doorbell_length_status(ret);
}

ucs_status_t uct_doorbell_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id,
                                      const void      *header,
                                      unsigned         header_length,
                                      const uct_iov_t *iov, size_t iovcnt,
                                      unsigned flags, uct_completion_t *comp)
{
    uct_doorbell_iface_t *iface = uct_doorbell_ep_iface(tl_ep);
    uct_doorbell_ep_t    *ep    = ucs_derived_of(tl_ep, uct_doorbell_ep_t);
    struct iovec          vec[UCT_DOORBELL_MAX_IOV];
    doorbell_status_t     status;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_IOV_SIZE(iovcnt + 1, UCT_DOORBELL_MAX_IOV, "am_zcopy");
    UCT_CHECK_LENGTH(header_length, 0, UCT_DOORBELL_AM_MAX_HDR,
                     "am_zcopy header");
    /* The header travels as the first gather entry: the core copies an AM
     * into its send slot anyway, and UCP's headers (24 B for a first eager
     * fragment) exceed what a WQE carries inline. */
    vec[0].iov_base = (void *)header;
    vec[0].iov_len  = header_length;
    UCT_DOORBELL_ENTER(iface);
    status = doorbell_qp_am_zcopy(ep->qp, id, NULL, 0, vec,
                                  1 + uct_doorbell_iov_convert(vec + 1, iov,
                                                               iovcnt),
                                  comp);
    UCT_DOORBELL_LEAVE(iface);
    return uct_doorbell_status(status);
}

ucs_status_t uct_doorbell_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                       unsigned length, uint64_t remote_addr,
                                       uct_rkey_t rkey)
{
    uct_doorbell_iface_t *iface = uct_doorbell_ep_iface(tl_ep);
    uct_doorbell_ep_t    *ep    = ucs_derived_of(tl_ep, uct_doorbell_ep_t);
    doorbell_status_t     status;

    UCT_DOORBELL_ENTER(iface);
    status = doorbell_qp_put_short(ep->qp, buffer, length, remote_addr,
                                   (uint32_t)rkey);
    UCT_DOORBELL_LEAVE(iface);
    return uct_doorbell_status(status);
}

ssize_t uct_doorbell_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                                  void *arg, uint64_t remote_addr,
                                  uct_rkey_t rkey)
{
    uct_doorbell_iface_t *iface = uct_doorbell_ep_iface(tl_ep);
    uct_doorbell_ep_t    *ep    = ucs_derived_of(tl_ep, uct_doorbell_ep_t);
    ssize_t               ret;

    UCT_DOORBELL_ENTER(iface);
    ret = doorbell_qp_put_bcopy(ep->qp, pack_cb, arg, remote_addr,
                                (uint32_t)rkey);
    UCT_DOORBELL_LEAVE(iface);
    return uct_doorbell_length_status(ret);
}

/* A zero-copy RDMA write or read: the core calls take the same arguments. */
typedef doorbell_status_t (*uct_doorbell_rma_zcopy_func_t)(
    doorbell_qp_t *qp, const struct iovec *iov, size_t iovcnt,
    uint64_t remote_addr, uint32_t rkey, void *cookie);

static ucs_status_t uct_doorbell_ep_rma_zcopy(
    uct_ep_h tl_ep, uct_doorbell_rma_zcopy_func_t op, const uct_iov_t *iov,
    size_t iovcnt, uint64_t remote_addr, uct_rkey_t rkey,
    uct_completion_t *comp, const char *name)
{
    uct_doorbell_iface_t *iface = uct_doorbell_ep_iface(tl_ep);
    uct_doorbell_ep_t    *ep    = ucs_derived_of(tl_ep, uct_doorbell_ep_t);
    struct iovec          vec[UCT_DOORBELL_MAX_IOV];
    doorbell_status_t     status;

    UCT_CHECK_IOV_SIZE(iovcnt, UCT_DOORBELL_MAX_IOV, name);
    UCT_DOORBELL_ENTER(iface);
    status = op(ep->qp, vec, uct_doorbell_iov_convert(vec, iov, iovcnt),
                remote_addr, (uint32_t)rkey, comp);
    UCT_DOORBELL_LEAVE(iface);
    return uct_doorbell_status(status);
}

ucs_status_t uct_doorbell_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                       size_t iovcnt, uint64_t remote_addr,
                                       uct_rkey_t rkey, uct_completion_t *comp)
{
    return uct_doorbell_ep_rma_zcopy(tl_ep, doorbell_qp_put_zcopy, iov, iovcnt,
                                     remote_addr, rkey, comp, "put_zcopy");
}

ucs_status_t uct_doorbell_ep_get_bcopy(uct_ep_h              tl_ep,
                                       uct_unpack_callback_t unpack_cb,
                                       void *arg, size_t length,
                                       uint64_t remote_addr, uct_rkey_t rkey,
                                       uct_completion_t *comp)
{
    uct_doorbell_iface_t *iface = uct_doorbell_ep_iface(tl_ep);
    uct_doorbell_ep_t    *ep    = ucs_derived_of(tl_ep, uct_doorbell_ep_t);
    doorbell_status_t     status;

    UCT_DOORBELL_ENTER(iface);
    status = doorbell_qp_get_bcopy(ep->qp, unpack_cb, arg, length, remote_addr,
                                   (uint32_t)rkey, comp);
    UCT_DOORBELL_LEAVE(iface);
    return uct_doorbell_status(status);
}

ucs_status_t uct_doorbell_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                       size_t iovcnt, uint64_t remote_addr,
                                       uct_rkey_t rkey, uct_completion_t *comp)
{
    return uct_doorbell_ep_rma_zcopy(tl_ep, doorbell_qp_get_zcopy, iov, iovcnt,
                                     remote_addr, rkey, comp, "get_zcopy");
}

ucs_status_t uct_doorbell_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                         unsigned flags)
{
    uct_doorbell_iface_t *iface = ucs_derived_of(tl_ep->iface,
                                                 uct_doorbell_iface_t);
    uct_doorbell_ep_t    *ep    = ucs_derived_of(tl_ep, uct_doorbell_ep_t);

    UCT_DOORBELL_ENTER(iface);
    if (ucs_arbiter_group_is_empty(&ep->arb_group) &&
        doorbell_qp_can_send(ep->qp)) {
        UCT_DOORBELL_LEAVE(iface);
        return UCS_ERR_BUSY;
    }

    UCS_STATIC_ASSERT(sizeof(uct_pending_req_priv_arb_t) <=
                      UCT_PENDING_REQ_PRIV_LEN);
    uct_pending_req_arb_group_push(&ep->arb_group, req);
    ucs_arbiter_group_schedule(&iface->arbiter, &ep->arb_group);
    UCT_TL_EP_STAT_PEND(&ep->super);
    UCT_DOORBELL_LEAVE(iface);
    return UCS_OK;
}

/* Called from iface progress. A group stays scheduled while it has requests:
 * when the queue pair cannot send yet, it is retried on the next progress. */
ucs_arbiter_cb_result_t uct_doorbell_ep_process_pending(
    ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
    ucs_arbiter_elem_t *elem, void *arg)
{
    uct_pending_req_t *req = ucs_container_of(elem, uct_pending_req_t, priv);
    uct_doorbell_ep_t *ep  = ucs_container_of(group, uct_doorbell_ep_t,
                                              arb_group);
    ucs_status_t       status;

    if (!doorbell_qp_can_send(ep->qp)) {
        return UCS_ARBITER_CB_RESULT_RESCHED_GROUP;
    }

    status = req->func(req);
    ucs_trace_poll("doorbell ep %p: pending request %p returned %s", ep, req,
                   ucs_status_string(status));
    if (status == UCS_OK) {
        return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
    }

    /* UCS_INPROGRESS (partly sent) or UCS_ERR_NO_RESOURCE: try again later */
    return UCS_ARBITER_CB_RESULT_RESCHED_GROUP;
}

/* Called from event_arm, one pass over the endpoints with pending requests:
 * sets *arg if one of them could send now. The others wait for their queue
 * pair to free slots, which only an arrival (the event fd) or a timer does. */
ucs_arbiter_cb_result_t uct_doorbell_ep_pending_ready(
    ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
    ucs_arbiter_elem_t *elem, void *arg)
{
    uct_doorbell_ep_t *ep = ucs_container_of(group, uct_doorbell_ep_t,
                                             arb_group);

    if (doorbell_qp_can_send(ep->qp)) {
        *(int *)arg = 1;
        return UCS_ARBITER_CB_RESULT_STOP;
    }

    return UCS_ARBITER_CB_RESULT_RESCHED_GROUP;
}

static ucs_arbiter_cb_result_t uct_doorbell_ep_purge_cb(
    ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
    ucs_arbiter_elem_t *elem, void *arg)
{
    uct_pending_req_t   *req  = ucs_container_of(elem, uct_pending_req_t, priv);
    uct_purge_cb_args_t *args = arg;

    if (args->cb != NULL) {
        args->cb(req, args->arg);
    } else {
        ucs_debug("doorbell: cancelling pending request %p", req);
    }
    return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
}

void uct_doorbell_ep_pending_purge(uct_ep_h                     tl_ep,
                                   uct_pending_purge_callback_t cb, void *arg)
{
    uct_doorbell_iface_t *iface = ucs_derived_of(tl_ep->iface,
                                                 uct_doorbell_iface_t);
    uct_doorbell_ep_t    *ep    = ucs_derived_of(tl_ep, uct_doorbell_ep_t);
    uct_purge_cb_args_t   args  = {cb, arg};

    UCT_DOORBELL_ENTER(iface);
    ucs_arbiter_group_purge(&iface->arbiter, &ep->arb_group,
                            uct_doorbell_ep_purge_cb, &args);
    UCT_DOORBELL_LEAVE(iface);
}

static doorbell_status_t uct_doorbell_ep_core_flush(void *qp, void *cookie)
{
    return doorbell_qp_flush(qp, cookie);
}

ucs_status_t uct_doorbell_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                   uct_completion_t *comp)
{
    uct_doorbell_iface_t *iface = uct_doorbell_ep_iface(tl_ep);
    uct_doorbell_ep_t    *ep    = ucs_derived_of(tl_ep, uct_doorbell_ep_t);
    ucs_status_t          status;

    UCT_DOORBELL_ENTER(iface);
    if (ucs_unlikely(flags & UCT_FLUSH_FLAG_CANCEL)) {
        /* Queued requests are dropped; posted ones still complete, with an
         * error if the peer is gone. */
        uct_doorbell_ep_pending_purge(tl_ep, NULL, NULL);
    } else if (!ucs_arbiter_group_is_empty(&ep->arb_group)) {
        UCT_DOORBELL_LEAVE(iface);
        return UCS_ERR_NO_RESOURCE;
    }

    UCT_TL_EP_STAT_FLUSH(&ep->super);
    status = uct_doorbell_flush_post(&ep->flush, comp,
                                     uct_doorbell_ep_core_flush, ep->qp);
    UCT_DOORBELL_LEAVE(iface);
    return status;
}

ucs_status_t uct_doorbell_ep_fence(uct_ep_h tl_ep, unsigned flags)
{
    uct_doorbell_iface_t *iface = uct_doorbell_ep_iface(tl_ep);
    uct_doorbell_ep_t    *ep    = ucs_derived_of(tl_ep, uct_doorbell_ep_t);
    doorbell_status_t     status;

    UCT_TL_EP_STAT_FENCE(&ep->super);
    UCT_DOORBELL_ENTER(iface);
    status = doorbell_qp_fence(ep->qp);
    UCT_DOORBELL_LEAVE(iface);
    return uct_doorbell_status(status);
}

/* A probe to the peer now: a peer that does not answer within
 * KEEPALIVE_TIMEOUT fails the endpoint through the error handler (as rc's
 * ep_check reports through the error path, never through comp). */
ucs_status_t uct_doorbell_ep_check(uct_ep_h tl_ep, unsigned flags,
                                   uct_completion_t *comp)
{
    uct_doorbell_iface_t *iface = uct_doorbell_ep_iface(tl_ep);
    uct_doorbell_ep_t    *ep    = ucs_derived_of(tl_ep, uct_doorbell_ep_t);
    doorbell_status_t     status;

    UCT_EP_KEEPALIVE_CHECK_PARAM(flags, comp);
    UCT_DOORBELL_ENTER(iface);
    status = doorbell_qp_check(ep->qp);
    UCT_DOORBELL_LEAVE(iface);
    return uct_doorbell_status(status);
}

static UCS_CLASS_INIT_FUNC(uct_doorbell_ep_t, const uct_ep_params_t *params)
{
    uct_doorbell_iface_t *iface = ucs_derived_of(params->iface,
                                                 uct_doorbell_iface_t);
    doorbell_status_t     status;

    UCT_EP_PARAMS_CHECK_DEV_IFACE_ADDRS(params);
    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super);

    UCT_DOORBELL_ENTER(iface);
    status = doorbell_qp_create(iface->core, params->dev_addr,
                                params->iface_addr, &self->qp);
    if (status == DOORBELL_OK) {
        ucs_arbiter_group_init(&self->arb_group);
        uct_doorbell_flush_init(&self->flush);
        ucs_list_add_tail(&iface->ep_list, &self->list);
    }
    UCT_DOORBELL_LEAVE(iface);
    if (status != DOORBELL_OK) {
        ucs_error("doorbell %s: connecting failed: %s", iface->dev_name,
                  doorbell_last_error());
        return uct_doorbell_status(status);
    }

    ucs_debug("doorbell %s: ep %p created", iface->dev_name, self);
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(uct_doorbell_ep_t)
{
    uct_doorbell_iface_t *iface = ucs_derived_of(self->super.super.iface,
                                                 uct_doorbell_iface_t);

    UCT_DOORBELL_ENTER(iface);
    uct_doorbell_ep_pending_purge(&self->super.super, NULL, NULL);
    ucs_arbiter_group_cleanup(&self->arb_group);
    ucs_list_del(&self->list);
    doorbell_qp_destroy(self->qp);
    UCT_DOORBELL_LEAVE(iface);
    ucs_debug("doorbell %s: ep %p destroyed", iface->dev_name, self);
}

UCS_CLASS_DEFINE(uct_doorbell_ep_t, uct_base_ep_t);
UCS_CLASS_DEFINE_NEW_FUNC(uct_doorbell_ep_t, uct_ep_t, const uct_ep_params_t *);
UCS_CLASS_DEFINE_DELETE_FUNC(uct_doorbell_ep_t, uct_ep_t);
