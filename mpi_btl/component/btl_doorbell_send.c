/*
 * Send and receive: every message is one doorbell active message whose id is
 * the btl tag. The sender packs it straight into the queue pair's send slot
 * (am_bcopy: one copy, from the user's buffer or the convertor), so a send
 * completes locally as soon as it is posted. The receiver hands the message
 * to the tag's callback in the receive buffer it arrived in.
 */
#include "btl_doorbell.h"

#include "opal/datatype/opal_convertor.h"

#include <string.h>

mca_btl_base_descriptor_t *mca_btl_doorbell_alloc(
    mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
    uint8_t order, size_t size, uint32_t flags)
{
    mca_btl_doorbell_frag_t *frag;

    frag = mca_btl_doorbell_frag_alloc((mca_btl_doorbell_module_t *)btl,
                                       endpoint, size);
    if (OPAL_UNLIKELY(frag == NULL)) {
        return NULL;
    }
    frag->base.des_flags = flags;
    frag->base.order     = order;
    return &frag->base;
}

int mca_btl_doorbell_free(mca_btl_base_module_t     *btl,
                          mca_btl_base_descriptor_t *des)
{
    mca_btl_doorbell_frag_return((mca_btl_doorbell_frag_t *)des);
    return OPAL_SUCCESS;
}

/* Contiguous data stays where it is (the send copies it into its slot);
 * anything else is packed into a fragment of the needed size. */
mca_btl_base_descriptor_t *mca_btl_doorbell_prepare_src(
    mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
    opal_convertor_t *convertor, uint8_t order, size_t reserve, size_t *size,
    uint32_t flags)
{
    mca_btl_doorbell_module_t *module = (mca_btl_doorbell_module_t *)btl;
    mca_btl_doorbell_frag_t   *frag;
    size_t                     max = module->super.btl_max_send_size;

    if (OPAL_UNLIKELY(reserve >= max)) {
        return NULL;
    }
    if (reserve + *size > max) {
        *size = max - reserve;
    }

    if (!opal_convertor_need_buffers(convertor) &&
        reserve <= MCA_BTL_DOORBELL_USER_HDR_MAX) {
        void *data_ptr = NULL;

        frag = (mca_btl_doorbell_frag_t *)opal_free_list_get(
            &module->user_frags);
        if (OPAL_UNLIKELY(frag == NULL)) {
            return NULL;
        }
        opal_convertor_get_current_pointer(convertor, &data_ptr);
        frag->free_list                 = &module->user_frags;
        frag->endpoint                  = endpoint;
        frag->segments[0].seg_addr.pval = frag->data;
        frag->segments[0].seg_len       = reserve;
        frag->segments[1].seg_addr.pval = data_ptr;
        frag->segments[1].seg_len       = *size;
        frag->base.des_segment_count    = 2;
        frag->base.des_cbfunc           = NULL;
    } else {
        struct iovec iov;
        uint32_t     iov_count = 1;
        size_t       max_data  = *size;

        frag = mca_btl_doorbell_frag_alloc(module, endpoint, reserve + *size);
        if (OPAL_UNLIKELY(frag == NULL)) {
            return NULL;
        }
        iov.iov_base = frag->data + reserve;
        iov.iov_len  = *size;
        if (opal_convertor_pack(convertor, &iov, &iov_count, &max_data) < 0) {
            mca_btl_doorbell_frag_return(frag);
            return NULL;
        }
        *size                     = max_data;
        frag->segments[0].seg_len = reserve + max_data;
    }
    frag->base.des_flags = flags;
    frag->base.order     = order;
    return &frag->base;
}

static size_t mca_btl_doorbell_pack_frag(void *dest, void *arg)
{
    mca_btl_doorbell_frag_t *frag = arg;
    uint8_t                 *out  = dest;

    for (size_t i = 0; i < frag->base.des_segment_count; i++) {
        size_t len = frag->segments[i].seg_len;

        memcpy(out, frag->segments[i].seg_addr.pval, len);
        out += len;
    }
    return (size_t)(out - (uint8_t *)dest);
}

/* Posts a fragment: OPAL_SUCCESS (the data is in the send slot),
 * OPAL_ERR_OUT_OF_RESOURCE (no slot or credit now) or an error. */
int mca_btl_doorbell_post_frag(mca_btl_doorbell_frag_t *frag)
{
    mca_btl_doorbell_endpoint_t *ep     = frag->endpoint;
    mca_btl_doorbell_module_t   *module = ep->module;
    ssize_t                      rc;

    if (OPAL_UNLIKELY(ep->state != MCA_BTL_DOORBELL_EP_OK)) {
        return OPAL_ERR_UNREACH;
    }
    rc = doorbell_qp_am_bcopy(ep->qp, frag->tag, mca_btl_doorbell_pack_frag,
                              frag);
    if (OPAL_LIKELY(rc >= 0)) {
        module->stats.sends++;
        module->stats.send_bytes += (uint64_t)rc;
        return OPAL_SUCCESS;
    }
    if (rc == DOORBELL_ERR_NO_RESOURCE) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    BTL_DOORBELL_ERROR("%s: send to %s: %s", module->device.name, ep->peer_name,
                       doorbell_last_error());
    return mca_btl_doorbell_status_to_opal((doorbell_status_t)rc);
}

int mca_btl_doorbell_send(mca_btl_base_module_t     *btl,
                          mca_btl_base_endpoint_t   *endpoint,
                          mca_btl_base_descriptor_t *des,
                          mca_btl_base_tag_t         tag)
{
    mca_btl_doorbell_module_t *module = (mca_btl_doorbell_module_t *)btl;
    mca_btl_doorbell_frag_t   *frag   = (mca_btl_doorbell_frag_t *)des;
    int                        rc;

    frag->endpoint = endpoint;
    frag->tag      = tag;

    BTL_DOORBELL_LOCK(module);
    rc = mca_btl_doorbell_endpoint_qp(endpoint);
    if (OPAL_UNLIKELY(rc != OPAL_SUCCESS)) {
        BTL_DOORBELL_UNLOCK(module);
        return rc;
    }
    if (OPAL_LIKELY(opal_list_is_empty(&endpoint->pending_sends))) {
        rc = mca_btl_doorbell_post_frag(frag);
        if (OPAL_LIKELY(rc == OPAL_SUCCESS)) {
            BTL_DOORBELL_UNLOCK(module);
            /* complete: the callback only if asked for */
            if (des->des_flags & MCA_BTL_DES_SEND_ALWAYS_CALLBACK) {
                des->des_cbfunc(btl, endpoint, des, OPAL_SUCCESS);
            }
            if (des->des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP) {
                mca_btl_doorbell_frag_return(frag);
            }
            return 1;
        }
        if (rc != OPAL_ERR_OUT_OF_RESOURCE) {
            BTL_DOORBELL_UNLOCK(module);
            return rc;
        }
    }
    /* later sends keep their order behind this one; progress posts it and
     * calls the callback */
    opal_list_append(&endpoint->pending_sends, &frag->base.super.super);
    mca_btl_doorbell_endpoint_queue(endpoint);
    module->stats.queued++;
    BTL_DOORBELL_VERBOSE(10, "%s: send of %zu bytes to %s waits for a slot",
                         module->device.name,
                         (size_t)(frag->segments[0].seg_len +
                                  (frag->base.des_segment_count > 1 ?
                                       frag->segments[1].seg_len :
                                       0)),
                         endpoint->peer_name);
    BTL_DOORBELL_UNLOCK(module);
    return OPAL_SUCCESS;
}

typedef struct mca_btl_doorbell_sendi_args {
    const void       *header;
    size_t            header_size;
    opal_convertor_t *convertor;
    size_t            payload_size;
} mca_btl_doorbell_sendi_args_t;

static size_t mca_btl_doorbell_pack_sendi(void *dest, void *arg)
{
    mca_btl_doorbell_sendi_args_t *args = arg;
    uint8_t                       *out  = dest;
    size_t                         max_data;

    memcpy(out, args->header, args->header_size);
    if (args->payload_size == 0) {
        return args->header_size;
    }
    struct iovec iov       = {.iov_base = out + args->header_size,
                              .iov_len  = args->payload_size};
    uint32_t     iov_count = 1;

    max_data = args->payload_size;
    (void)opal_convertor_pack(args->convertor, &iov, &iov_count, &max_data);
    return args->header_size + max_data;
}

/* The latency path: header and data packed straight into the send slot. If
 * the slot is not there now, a descriptor of the full size is handed back
 * (when asked for) and the upper layer sends it. */
int mca_btl_doorbell_sendi(mca_btl_base_module_t   *btl,
                           mca_btl_base_endpoint_t *endpoint,
                           opal_convertor_t *convertor, void *header,
                           size_t header_size, size_t payload_size,
                           uint8_t order, uint32_t flags,
                           mca_btl_base_tag_t          tag,
                           mca_btl_base_descriptor_t **descriptor)
{
    mca_btl_doorbell_module_t    *module = (mca_btl_doorbell_module_t *)btl;
    const size_t                  total  = header_size + payload_size;
    mca_btl_doorbell_sendi_args_t args   = {header, header_size, convertor,
                                            payload_size};
    ssize_t                       rc;

    BTL_DOORBELL_LOCK(module);
    if (OPAL_UNLIKELY(total > module->limits.max_am_bcopy ||
                      mca_btl_doorbell_endpoint_qp(endpoint) != OPAL_SUCCESS ||
                      !opal_list_is_empty(&endpoint->pending_sends))) {
        goto no_resource;
    }
    rc = doorbell_qp_am_bcopy(endpoint->qp, tag, mca_btl_doorbell_pack_sendi,
                              &args);
    if (OPAL_LIKELY(rc >= 0)) {
        module->stats.sendis++;
        module->stats.send_bytes += (uint64_t)rc;
        BTL_DOORBELL_UNLOCK(module);
        return OPAL_SUCCESS;
    }

no_resource:
    BTL_DOORBELL_UNLOCK(module);
    if (descriptor != NULL) {
        *descriptor = mca_btl_doorbell_alloc(btl, endpoint, order, total,
                                             flags);
    }
    return OPAL_ERR_OUT_OF_RESOURCE;
}

/* The core's active message callback: the message is valid for the call,
 * which is all a btl receive callback may assume. When the upper layer may
 * not be called now, the buffer is held until the foreground delivers it. */
doorbell_status_t mca_btl_doorbell_am_handler(void *arg, uint8_t am_id,
                                              void *data, size_t length)
{
    mca_btl_doorbell_module_t               *module = arg;
    const mca_btl_active_message_callback_t *reg;
    mca_btl_base_segment_t    seg = {.seg_addr.pval = data, .seg_len = length};
    mca_btl_base_descriptor_t des = {.des_segments      = &seg,
                                     .des_segment_count = 1};

    reg = &mca_btl_base_active_message_trigger[am_id];
    if (OPAL_UNLIKELY(reg->cbfunc == NULL)) {
        /* a tag no upper layer registered: not ours to interpret */
        module->stats.dropped++;
        return DOORBELL_OK;
    }
    if (OPAL_UNLIKELY(mca_btl_doorbell_defers(module))) {
        mca_btl_doorbell_deferred_t *d;

        d = mca_btl_doorbell_defer(module, MCA_BTL_DOORBELL_DEFER_AM);
        if (OPAL_LIKELY(d != NULL)) {
            d->am_id  = am_id;
            d->data   = data;
            d->length = length;
            return DOORBELL_INPROGRESS;
        }
        BTL_DOORBELL_ERROR("%s: out of memory holding a message for the "
                           "foreground; it is lost",
                           module->device.name);
        return DOORBELL_OK;
    }
    module->stats.recvs++;
    module->stats.recv_bytes += length;
    reg->cbfunc(&module->super, am_id, &des, reg->cbdata);
    return DOORBELL_OK;
}
