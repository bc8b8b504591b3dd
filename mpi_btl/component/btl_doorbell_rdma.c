/*
 * RDMA: put and get are zero-copy RDMA WRITE and READ on the remote key in
 * the peer's registration handle; their callback runs when the operation
 * completed remotely (the write is placed, the read's data is here). flush
 * waits for every earlier operation, atomics included (btl_doorbell_atomic.c
 * posts those through the same queue).
 */
#include "btl_doorbell.h"

#include <string.h>

static const char *mca_btl_doorbell_op_name(const mca_btl_doorbell_rdma_op_t *op)
{
    return op->kind == MCA_BTL_DOORBELL_OP_GET ? "get" :
           op->kind == MCA_BTL_DOORBELL_OP_PUT ? "put" :
                                                 "atomic";
}

static void mca_btl_doorbell_rdma_done(mca_btl_doorbell_comp_t *comp,
                                       doorbell_status_t        status)
{
    mca_btl_doorbell_rdma_op_t *op =
        MCA_BTL_DOORBELL_CONTAINER(comp, mca_btl_doorbell_rdma_op_t, comp);
    mca_btl_doorbell_module_t *module = op->endpoint->module;

    if (OPAL_UNLIKELY(status != DOORBELL_OK)) {
        BTL_DOORBELL_VERBOSE(1, "%s: %s of %zu bytes with %s failed: %s",
                             module->device.name, mca_btl_doorbell_op_name(op),
                             op->size, op->endpoint->peer_name,
                             doorbell_status_string(status));
    } else if (op->kind == MCA_BTL_DOORBELL_OP_ATOMIC &&
               op->local_address != NULL) {
        /* the old value, in the word's size (little-endian: its low bytes
         * come first) */
        memcpy(op->local_address, &op->result, op->size);
    }
    /* osc rdma passes no callback for a put whose completion only its
     * btl_flush needs to know of */
    if (op->cbfunc != NULL) {
        op->cbfunc(&module->super, op->endpoint, op->local_address,
                   op->local_handle, op->cbcontext, op->cbdata,
                   mca_btl_doorbell_status_to_opal(status));
    }
    opal_free_list_return(&module->rdma_ops, &op->super);
}

/* The core's completion callback: every cookie is a completion. */
void mca_btl_doorbell_completion(void *arg, void *cookie,
                                 doorbell_status_t status)
{
    mca_btl_doorbell_module_t *module = arg;
    mca_btl_doorbell_comp_t   *comp   = cookie;

    if (OPAL_UNLIKELY(mca_btl_doorbell_defers(module))) {
        mca_btl_doorbell_deferred_t *d;

        d = mca_btl_doorbell_defer(module, MCA_BTL_DOORBELL_DEFER_COMP);
        if (OPAL_LIKELY(d != NULL)) {
            d->comp   = comp;
            d->status = status;
            return;
        }
        BTL_DOORBELL_ERROR("%s: out of memory deferring a completion; it "
                           "runs now",
                           module->device.name);
    }
    comp->func(comp, status);
}

/* Posts a put, get or atomic: OPAL_SUCCESS (in flight),
 * OPAL_ERR_OUT_OF_RESOURCE (the queue pair is full now) or an error. */
int mca_btl_doorbell_post_rdma(mca_btl_doorbell_rdma_op_t *op)
{
    mca_btl_doorbell_endpoint_t *ep     = op->endpoint;
    mca_btl_doorbell_module_t   *module = ep->module;
    struct iovec iov = {.iov_base = op->local_address, .iov_len = op->size};
    doorbell_status_t status;

    if (OPAL_UNLIKELY(ep->state != MCA_BTL_DOORBELL_EP_OK)) {
        return OPAL_ERR_UNREACH;
    }
    switch (op->kind) {
    case MCA_BTL_DOORBELL_OP_GET:
        status = doorbell_qp_get_zcopy(ep->qp, &iov, 1, op->remote_address,
                                       op->rkey, &op->comp);
        break;
    case MCA_BTL_DOORBELL_OP_PUT:
        status = doorbell_qp_put_zcopy(ep->qp, &iov, 1, op->remote_address,
                                       op->rkey, &op->comp);
        break;
    default:
        status = doorbell_qp_atomic(ep->qp, op->atomic_op, (unsigned)op->size,
                                    op->operand, op->compare,
                                    op->remote_address, op->rkey,
                                    op->local_address != NULL ? &op->result :
                                                                NULL,
                                    &op->comp);
        break;
    }
    if (OPAL_LIKELY(status == DOORBELL_INPROGRESS)) {
        switch (op->kind) {
        case MCA_BTL_DOORBELL_OP_GET:
            module->stats.gets++;
            module->stats.get_bytes += op->size;
            break;
        case MCA_BTL_DOORBELL_OP_PUT:
            module->stats.puts++;
            module->stats.put_bytes += op->size;
            break;
        default:
            module->stats.atomics++;
            break;
        }
        return OPAL_SUCCESS;
    }
    if (status == DOORBELL_ERR_NO_RESOURCE) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    BTL_DOORBELL_ERROR("%s: %s of %zu bytes with %s: %s", module->device.name,
                       mca_btl_doorbell_op_name(op), op->size, ep->peer_name,
                       doorbell_last_error());
    return mca_btl_doorbell_status_to_opal(status);
}

/* Posts op now, or queues it behind what waits on its endpoint: the btl
 * never answers OPAL_ERR_OUT_OF_RESOURCE for want of slots (nothing would
 * retry the operation). On an error op goes back to its list. */
int mca_btl_doorbell_start_rdma(mca_btl_doorbell_rdma_op_t *op)
{
    mca_btl_doorbell_endpoint_t *endpoint = op->endpoint;
    mca_btl_doorbell_module_t   *module   = endpoint->module;
    int                          rc;

    op->comp.func = mca_btl_doorbell_rdma_done;
    BTL_DOORBELL_LOCK(module);
    rc = mca_btl_doorbell_endpoint_qp(endpoint);
    if (OPAL_LIKELY(rc == OPAL_SUCCESS) &&
        opal_list_is_empty(&endpoint->pending_rdma)) {
        rc = mca_btl_doorbell_post_rdma(op);
        if (OPAL_LIKELY(rc == OPAL_SUCCESS)) {
            BTL_DOORBELL_UNLOCK(module);
            return OPAL_SUCCESS;
        }
    }
    if (rc == OPAL_SUCCESS || rc == OPAL_ERR_OUT_OF_RESOURCE) {
        opal_list_append(&endpoint->pending_rdma, &op->super.super);
        mca_btl_doorbell_endpoint_queue(endpoint);
        module->stats.queued++;
        BTL_DOORBELL_UNLOCK(module);
        return OPAL_SUCCESS;
    }
    BTL_DOORBELL_UNLOCK(module);
    opal_free_list_return(&module->rdma_ops, &op->super);
    return rc;
}

static int mca_btl_doorbell_rdma(
    mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint, int kind,
    void *local_address, uint64_t remote_address,
    mca_btl_base_registration_handle_t *local_handle,
    mca_btl_base_registration_handle_t *remote_handle, size_t size,
    mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata)
{
    mca_btl_doorbell_module_t  *module = (mca_btl_doorbell_module_t *)btl;
    mca_btl_doorbell_rdma_op_t *op;

    if (OPAL_UNLIKELY(remote_handle == NULL)) {
        return OPAL_ERR_BAD_PARAM;
    }
    op = (mca_btl_doorbell_rdma_op_t *)opal_free_list_get(&module->rdma_ops);
    if (OPAL_UNLIKELY(op == NULL)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    op->kind           = kind;
    op->endpoint       = endpoint;
    op->local_address  = local_address;
    op->remote_address = remote_address;
    op->rkey           = remote_handle->rkey;
    op->size           = size;
    op->local_handle   = local_handle;
    op->cbfunc         = cbfunc;
    op->cbcontext      = cbcontext;
    op->cbdata         = cbdata;
    return mca_btl_doorbell_start_rdma(op);
}

int mca_btl_doorbell_put(mca_btl_base_module_t   *btl,
                         mca_btl_base_endpoint_t *endpoint, void *local_address,
                         uint64_t                            remote_address,
                         mca_btl_base_registration_handle_t *local_handle,
                         mca_btl_base_registration_handle_t *remote_handle,
                         size_t size, int flags, int order,
                         mca_btl_base_rdma_completion_fn_t cbfunc,
                         void *cbcontext, void *cbdata)
{
    return mca_btl_doorbell_rdma(btl, endpoint, MCA_BTL_DOORBELL_OP_PUT,
                                 local_address, remote_address, local_handle,
                                 remote_handle, size, cbfunc, cbcontext,
                                 cbdata);
}

int mca_btl_doorbell_get(mca_btl_base_module_t   *btl,
                         mca_btl_base_endpoint_t *endpoint, void *local_address,
                         uint64_t                            remote_address,
                         mca_btl_base_registration_handle_t *local_handle,
                         mca_btl_base_registration_handle_t *remote_handle,
                         size_t size, int flags, int order,
                         mca_btl_base_rdma_completion_fn_t cbfunc,
                         void *cbcontext, void *cbdata)
{
    return mca_btl_doorbell_rdma(btl, endpoint, MCA_BTL_DOORBELL_OP_GET,
                                 local_address, remote_address, local_handle,
                                 remote_handle, size, cbfunc, cbcontext,
                                 cbdata);
}

typedef struct mca_btl_doorbell_flush_comp {
    mca_btl_doorbell_comp_t super;
    volatile int            done;
    doorbell_status_t       status;
} mca_btl_doorbell_flush_comp_t;

static void mca_btl_doorbell_flush_done(mca_btl_doorbell_comp_t *comp,
                                        doorbell_status_t        status)
{
    mca_btl_doorbell_flush_comp_t *flush = (mca_btl_doorbell_flush_comp_t *)comp;

    flush->status = status;
    flush->done   = 1;
}

static int mca_btl_doorbell_endpoint_waits(mca_btl_doorbell_module_t   *module,
                                           mca_btl_doorbell_endpoint_t *ep)
{
    int waits;

    BTL_DOORBELL_LOCK(module);
    waits = (ep != NULL) ? ep->in_pending :
                           !opal_list_is_empty(&module->pending_eps);
    BTL_DOORBELL_UNLOCK(module);
    return waits;
}

/* Blocks until every put/get started before it completed: queued ones are
 * posted first, then one flush of the queue pair (or of every queue pair of
 * the device) is waited for. */
int mca_btl_doorbell_flush(mca_btl_base_module_t   *btl,
                           mca_btl_base_endpoint_t *endpoint)
{
    mca_btl_doorbell_module_t    *module = (mca_btl_doorbell_module_t *)btl;
    mca_btl_doorbell_flush_comp_t flush  = {{mca_btl_doorbell_flush_done},
                                            0,
                                            DOORBELL_OK};
    doorbell_status_t             status;

    while (mca_btl_doorbell_endpoint_waits(module, endpoint)) {
        mca_btl_doorbell_component_progress();
    }
    for (;;) {
        BTL_DOORBELL_LOCK(module);
        if (endpoint == NULL) {
            status = doorbell_iface_flush(module->iface, &flush.super);
        } else if (endpoint->qp == NULL) {
            status = DOORBELL_OK;
        } else {
            status = doorbell_qp_flush(endpoint->qp, &flush.super);
        }
        BTL_DOORBELL_UNLOCK(module);
        if (status != DOORBELL_ERR_NO_RESOURCE) {
            break;
        }
        mca_btl_doorbell_component_progress();
    }
    if (status == DOORBELL_INPROGRESS) {
        while (!flush.done) {
            mca_btl_doorbell_component_progress();
        }
        status = flush.status;
    }
    return mca_btl_doorbell_status_to_opal(status);
}
