/*
 * Descriptors: fragments with a buffer of btl_eager_limit or
 * btl_max_send_size bytes, user fragments (header room; the data stays in
 * the user's buffer until the send copies it into its slot), and the
 * contexts of put/get operations.
 */
#include "btl_doorbell.h"

static void mca_btl_doorbell_frag_construct(mca_btl_doorbell_frag_t *frag)
{
    frag->base.des_segments      = frag->segments;
    frag->base.des_segment_count = 1;
    frag->endpoint               = NULL;
    frag->free_list              = NULL;
    frag->size                   = 0;
    frag->data                   = (uint8_t *)(frag + 1);
}

OBJ_CLASS_INSTANCE(mca_btl_doorbell_frag_t, mca_btl_base_descriptor_t,
                   mca_btl_doorbell_frag_construct, NULL);
OBJ_CLASS_INSTANCE(mca_btl_doorbell_rdma_op_t, opal_free_list_item_t, NULL,
                   NULL);

/* ctx: the buffer bytes of the list's fragments */
static int mca_btl_doorbell_frag_init(opal_free_list_item_t *item, void *ctx)
{
    ((mca_btl_doorbell_frag_t *)item)->size = (size_t)(uintptr_t)ctx;
    return OPAL_SUCCESS;
}

static int mca_btl_doorbell_frag_list(opal_free_list_t *list, size_t size)
{
    OBJ_CONSTRUCT(list, opal_free_list_t);
    return opal_free_list_init(list, sizeof(mca_btl_doorbell_frag_t) + size,
                               opal_cache_line_size,
                               OBJ_CLASS(mca_btl_doorbell_frag_t), 0,
                               opal_cache_line_size, 8, -1, 32, NULL, 0, NULL,
                               mca_btl_doorbell_frag_init,
                               (void *)(uintptr_t)size);
}

int mca_btl_doorbell_frag_lists_init(mca_btl_doorbell_module_t *module)
{
    int rc;

    rc = mca_btl_doorbell_frag_list(&module->eager_frags,
                                    module->super.btl_eager_limit);
    if (rc == OPAL_SUCCESS) {
        rc = mca_btl_doorbell_frag_list(&module->max_frags,
                                        module->super.btl_max_send_size);
    }
    if (rc == OPAL_SUCCESS) {
        rc = mca_btl_doorbell_frag_list(&module->user_frags,
                                        MCA_BTL_DOORBELL_USER_HDR_MAX);
    }
    if (rc == OPAL_SUCCESS) {
        OBJ_CONSTRUCT(&module->rdma_ops, opal_free_list_t);
        rc = opal_free_list_init(&module->rdma_ops,
                                 sizeof(mca_btl_doorbell_rdma_op_t),
                                 opal_cache_line_size,
                                 OBJ_CLASS(mca_btl_doorbell_rdma_op_t), 0, 0,
                                 32, -1, 32, NULL, 0, NULL, NULL, NULL);
    }
    if (rc == OPAL_SUCCESS) {
        OBJ_CONSTRUCT(&module->deferred_items, opal_free_list_t);
        rc = opal_free_list_init(&module->deferred_items,
                                 sizeof(mca_btl_doorbell_deferred_t),
                                 opal_cache_line_size,
                                 OBJ_CLASS(mca_btl_doorbell_deferred_t), 0, 0,
                                 16, -1, 64, NULL, 0, NULL, NULL, NULL);
    }
    return rc;
}

void mca_btl_doorbell_frag_lists_fini(mca_btl_doorbell_module_t *module)
{
    OBJ_DESTRUCT(&module->deferred_items);
    OBJ_DESTRUCT(&module->rdma_ops);
    OBJ_DESTRUCT(&module->user_frags);
    OBJ_DESTRUCT(&module->max_frags);
    OBJ_DESTRUCT(&module->eager_frags);
}

mca_btl_doorbell_frag_t *mca_btl_doorbell_frag_alloc(
    mca_btl_doorbell_module_t *module, mca_btl_doorbell_endpoint_t *endpoint,
    size_t size)
{
    opal_free_list_t        *list;
    mca_btl_doorbell_frag_t *frag;

    if (size <= module->super.btl_eager_limit) {
        list = &module->eager_frags;
    } else if (size <= module->super.btl_max_send_size) {
        list = &module->max_frags;
    } else {
        return NULL;
    }
    frag = (mca_btl_doorbell_frag_t *)opal_free_list_get(list);
    if (OPAL_UNLIKELY(frag == NULL)) {
        return NULL;
    }
    frag->free_list                 = list;
    frag->endpoint                  = endpoint;
    frag->segments[0].seg_addr.pval = frag->data;
    frag->segments[0].seg_len       = size;
    frag->base.des_segment_count    = 1;
    frag->base.des_flags            = 0;
    frag->base.des_cbfunc           = NULL;
    frag->base.order                = MCA_BTL_NO_ORDER;
    return frag;
}

void mca_btl_doorbell_frag_return(mca_btl_doorbell_frag_t *frag)
{
    opal_free_list_return(frag->free_list, &frag->base.super);
}

/* Local completion of a send that waited: the callback, then the fragment
 * goes back if the btl owns it. */
void mca_btl_doorbell_frag_complete(mca_btl_doorbell_frag_t *frag, int status)
{
    mca_btl_doorbell_endpoint_t *ep = frag->endpoint;

    if (frag->base.des_cbfunc != NULL) {
        frag->base.des_cbfunc(&ep->module->super, ep, &frag->base, status);
    }
    if (frag->base.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP) {
        mca_btl_doorbell_frag_return(frag);
    }
}
