/*
 * Endpoints: a peer process reached by one module. Its queue pair is made on
 * first use (CONNECT_TO_IFACE: no handshake). Sends and RDMA operations the
 * queue pair cannot take yet wait here, in order, and progress posts them;
 * a queue pair that fails (the peer stopped answering) fails the endpoint.
 */
#include "btl_doorbell.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

static void mca_btl_doorbell_endpoint_construct(mca_btl_doorbell_endpoint_t *ep)
{
    OBJ_CONSTRUCT(&ep->pending_item, opal_list_item_t);
    OBJ_CONSTRUCT(&ep->pending_sends, opal_list_t);
    OBJ_CONSTRUCT(&ep->pending_rdma, opal_list_t);
    ep->module       = NULL;
    ep->proc         = NULL;
    ep->qp           = NULL;
    ep->state        = MCA_BTL_DOORBELL_EP_OK;
    ep->in_pending   = 0;
    ep->peer_name[0] = '\0';
}

/* Work still queued at destruction (del_procs, finalize: the upper layer is
 * done with the peer) is released without callbacks. */
static void mca_btl_doorbell_endpoint_destruct(mca_btl_doorbell_endpoint_t *ep)
{
    opal_list_item_t *item;
    size_t            dropped = 0;

    while (NULL != (item = opal_list_remove_first(&ep->pending_sends))) {
        mca_btl_doorbell_frag_t *frag = (mca_btl_doorbell_frag_t *)item;
        if (frag->base.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP) {
            mca_btl_doorbell_frag_return(frag);
        }
        dropped++;
    }
    while (NULL != (item = opal_list_remove_first(&ep->pending_rdma))) {
        opal_free_list_return(&ep->module->rdma_ops,
                              (opal_free_list_item_t *)item);
        dropped++;
    }
    if (dropped > 0) {
        BTL_DOORBELL_VERBOSE(1, "%s: %zu operations to %s never left",
                             ep->module->device.name, dropped, ep->peer_name);
    }
    if (ep->qp != NULL) {
        doorbell_qp_destroy(ep->qp);
        ep->qp = NULL;
    }
    if (ep->proc != NULL) {
        OBJ_RELEASE(ep->proc);
    }
    OBJ_DESTRUCT(&ep->pending_rdma);
    OBJ_DESTRUCT(&ep->pending_sends);
    OBJ_DESTRUCT(&ep->pending_item);
}

OBJ_CLASS_INSTANCE(mca_btl_doorbell_endpoint_t, opal_list_item_t,
                   mca_btl_doorbell_endpoint_construct,
                   mca_btl_doorbell_endpoint_destruct);

mca_btl_doorbell_endpoint_t *mca_btl_doorbell_endpoint_create(
    mca_btl_doorbell_module_t *module, opal_proc_t *proc,
    const mca_btl_doorbell_modex_entry_t *entry)
{
    mca_btl_doorbell_endpoint_t *ep = OBJ_NEW(mca_btl_doorbell_endpoint_t);
    const char *host = proc->proc_hostname != NULL ? proc->proc_hostname : "?";

    if (ep == NULL) {
        return NULL;
    }
    ep->module = module;
    ep->proc   = proc;
    OBJ_RETAIN(proc);
    memcpy(ep->device_addr, entry->device_addr, entry->device_addr_len);
    memcpy(ep->iface_addr, entry->iface_addr, entry->iface_addr_len);
    if (entry->kind == DOORBELL_DEVICE_UDP && entry->device_addr_len == 4 &&
        entry->iface_addr_len == 2) {
        char     ip[INET_ADDRSTRLEN];
        uint16_t port;

        inet_ntop(AF_INET, entry->device_addr, ip, sizeof(ip));
        memcpy(&port, entry->iface_addr, 2);
        snprintf(ep->peer_name, sizeof(ep->peer_name), "%s (%s:%u)", host, ip,
                 ntohs(port));
    } else {
        snprintf(ep->peer_name, sizeof(ep->peer_name), "%s", host);
    }

    BTL_DOORBELL_LOCK(module);
    opal_list_append(&module->endpoints, &ep->super);
    BTL_DOORBELL_UNLOCK(module);
    return ep;
}

/* Called with the module lock held. */
int mca_btl_doorbell_endpoint_qp(mca_btl_doorbell_endpoint_t *ep)
{
    doorbell_status_t status;

    if (OPAL_LIKELY(ep->qp != NULL)) {
        return OPAL_SUCCESS;
    }
    if (ep->state == MCA_BTL_DOORBELL_EP_FAILED) {
        return OPAL_ERR_UNREACH;
    }
    status = doorbell_qp_create(ep->module->iface, ep->device_addr,
                                ep->iface_addr, &ep->qp);
    if (status != DOORBELL_OK) {
        ep->qp = NULL;
        mca_btl_doorbell_endpoint_fail(ep, status, doorbell_last_error());
        return OPAL_ERR_UNREACH;
    }
    return OPAL_SUCCESS;
}

void mca_btl_doorbell_endpoint_queue(mca_btl_doorbell_endpoint_t *ep)
{
    if (!ep->in_pending) {
        opal_list_append(&ep->module->pending_eps, &ep->pending_item);
        ep->in_pending = 1;
    }
}

static void mca_btl_doorbell_endpoint_dequeue(mca_btl_doorbell_endpoint_t *ep)
{
    if (ep->in_pending) {
        opal_list_remove_item(&ep->module->pending_eps, &ep->pending_item);
        ep->in_pending = 0;
    }
}

static void mca_btl_doorbell_rdma_op_fail(mca_btl_doorbell_rdma_op_t *op,
                                          int                         status)
{
    mca_btl_doorbell_module_t *module = op->endpoint->module;

    if (op->cbfunc != NULL) {
        op->cbfunc(&module->super, op->endpoint, op->local_address,
                   op->local_handle, op->cbcontext, op->cbdata, status);
    }
    opal_free_list_return(&module->rdma_ops, &op->super);
}

/* Posts what waits, oldest first, until the queue pair is full again.
 * Called with the module lock held, from progress. */
unsigned mca_btl_doorbell_endpoint_drain(mca_btl_doorbell_endpoint_t *ep)
{
    unsigned posted = 0;
    int      rc;

    while (!opal_list_is_empty(&ep->pending_sends)) {
        mca_btl_doorbell_frag_t *frag = (mca_btl_doorbell_frag_t *)
            opal_list_get_first(&ep->pending_sends);

        rc = mca_btl_doorbell_post_frag(frag);
        if (rc == OPAL_ERR_OUT_OF_RESOURCE) {
            break;
        }
        opal_list_remove_first(&ep->pending_sends);
        /* a queued send owes its callback whatever its flags */
        if (ep->module->defer_always) {
            mca_btl_doorbell_deferred_t *d;

            d = mca_btl_doorbell_defer(ep->module, MCA_BTL_DOORBELL_DEFER_SEND);
            if (d != NULL) {
                d->frag = frag;
                d->rc   = rc;
            } else {
                mca_btl_doorbell_frag_complete(frag, rc);
            }
        } else {
            mca_btl_doorbell_frag_complete(frag, rc);
        }
        posted++;
    }
    while (!opal_list_is_empty(&ep->pending_rdma)) {
        mca_btl_doorbell_rdma_op_t *op = (mca_btl_doorbell_rdma_op_t *)
            opal_list_get_first(&ep->pending_rdma);

        rc = mca_btl_doorbell_post_rdma(op);
        if (rc == OPAL_ERR_OUT_OF_RESOURCE) {
            break;
        }
        opal_list_remove_first(&ep->pending_rdma);
        if (rc != OPAL_SUCCESS) {
            mca_btl_doorbell_rdma_op_fail(op, rc);
        }
        posted++;
    }
    if (opal_list_is_empty(&ep->pending_sends) &&
        opal_list_is_empty(&ep->pending_rdma)) {
        mca_btl_doorbell_endpoint_dequeue(ep);
    }
    return posted;
}

void mca_btl_doorbell_endpoint_fail(mca_btl_doorbell_endpoint_t *ep,
                                    doorbell_status_t            status,
                                    const char                  *message)
{
    mca_btl_doorbell_module_t *module = ep->module;
    opal_list_item_t          *item;
    char                       info[512];

    if (ep->state == MCA_BTL_DOORBELL_EP_FAILED) {
        return;
    }
    ep->state = MCA_BTL_DOORBELL_EP_FAILED;
    snprintf(info, sizeof(info),
             "btl:doorbell: %s on %s: device %s lost peer %s on %s: %s (%s)",
             OPAL_NAME_PRINT(OPAL_PROC_MY_NAME), opal_process_info.nodename,
             module->device.name, OPAL_NAME_PRINT(ep->proc->proc_name),
             ep->peer_name, doorbell_status_string(status),
             message != NULL && message[0] != '\0' ? message : "no detail");
    /* the upper layer decides (ob1 aborts the job with this message); a
     * layer without an error callback still gets the message printed */
    if (module->error_cb != NULL) {
        module->error_cb(&module->super, MCA_BTL_ERROR_FLAGS_FATAL, ep->proc,
                         info);
    } else {
        opal_output(0, "%s", info);
    }
    mca_btl_doorbell_endpoint_dequeue(ep);
    while (NULL != (item = opal_list_remove_first(&ep->pending_sends))) {
        mca_btl_doorbell_frag_complete((mca_btl_doorbell_frag_t *)item,
                                       OPAL_ERR_UNREACH);
    }
    while (NULL != (item = opal_list_remove_first(&ep->pending_rdma))) {
        mca_btl_doorbell_rdma_op_fail((mca_btl_doorbell_rdma_op_t *)item,
                                      OPAL_ERR_UNREACH);
    }
}

/* The core's error callback (from progress): a queue pair failed. */
void mca_btl_doorbell_qp_error(void *arg, doorbell_qp_t *qp,
                               doorbell_status_t status, const char *message)
{
    mca_btl_doorbell_module_t   *module = arg;
    mca_btl_doorbell_endpoint_t *ep;

    if (module->in_background) {
        mca_btl_doorbell_deferred_t *d;

        d = mca_btl_doorbell_defer(module, MCA_BTL_DOORBELL_DEFER_ERROR);
        if (d != NULL) {
            d->qp     = qp;
            d->status = status;
            snprintf(d->message, sizeof(d->message), "%s",
                     message != NULL ? message : "");
            return;
        }
    }

    OPAL_LIST_FOREACH (ep, &module->endpoints, mca_btl_doorbell_endpoint_t) {
        if (ep->qp == qp) {
            mca_btl_doorbell_endpoint_fail(ep, status, message);
            return;
        }
    }
    BTL_DOORBELL_ERROR("device %s: a queue pair of no endpoint failed: %s (%s)",
                       module->device.name, doorbell_status_string(status),
                       message);
}
