/*
 * Atomics: btl_atomic_op, btl_atomic_fop and btl_atomic_cswap are the core's
 * doorbell_qp_atomic on the word at the remote address, posted (or queued)
 * in order with the endpoint's puts and gets; their callback runs once the
 * target executed them, a fetching one's old value in its local address.
 *
 * Offered where the device executes atomics on words in the host's byte
 * order: the UDP device (add, and, or, xor, swap, compare-and-swap, on 64
 * and 32 bits, executed by the target's CPU). A device whose words are the
 * HCA's big-endian ones (verbs) offers none: osc rdma reads its counters
 * and lock words with the CPU. Not offered: min/max (osc rdma maps MPI_MIN
 * and MPI_MAX of unsigned types to them too, and the btl cannot tell the
 * signedness), the logical operations and floating point; osc rdma then
 * runs those as get-modify-put under its accumulate lock. GLOB is not
 * claimed: the btl does not promise atomicity against the CPU's atomics.
 */
#include "btl_doorbell.h"

/* The core's operation for a btl one, and the support flag it needs. */
static int mca_btl_doorbell_atomic_of(mca_btl_base_atomic_op_t op,
                                      doorbell_atomic_op_t *out, uint32_t *flag)
{
    switch (op) {
    case MCA_BTL_ATOMIC_ADD:
        *out  = DOORBELL_ATOMIC_ADD;
        *flag = MCA_BTL_ATOMIC_SUPPORTS_ADD;
        return OPAL_SUCCESS;
    case MCA_BTL_ATOMIC_AND:
        *out  = DOORBELL_ATOMIC_AND;
        *flag = MCA_BTL_ATOMIC_SUPPORTS_AND;
        return OPAL_SUCCESS;
    case MCA_BTL_ATOMIC_OR:
        *out  = DOORBELL_ATOMIC_OR;
        *flag = MCA_BTL_ATOMIC_SUPPORTS_OR;
        return OPAL_SUCCESS;
    case MCA_BTL_ATOMIC_XOR:
        *out  = DOORBELL_ATOMIC_XOR;
        *flag = MCA_BTL_ATOMIC_SUPPORTS_XOR;
        return OPAL_SUCCESS;
    case MCA_BTL_ATOMIC_SWAP:
        *out  = DOORBELL_ATOMIC_SWAP;
        *flag = MCA_BTL_ATOMIC_SUPPORTS_SWAP;
        return OPAL_SUCCESS;
    default:
        return OPAL_ERR_NOT_SUPPORTED;
    }
}

/* Sets the module's atomic flags from its device: osc rdma needs at least
 * fetch-and-add and compare-and-swap on 64 bits. */
void mca_btl_doorbell_atomic_flags(mca_btl_doorbell_module_t *module)
{
    const doorbell_iface_limits_t *l   = &module->limits;
    mca_btl_base_module_t         *btl = &module->super;
    static const struct {
        doorbell_atomic_op_t op;
        uint32_t             flag;
    } ops[] = {
        {DOORBELL_ATOMIC_ADD, MCA_BTL_ATOMIC_SUPPORTS_ADD},
        {DOORBELL_ATOMIC_AND, MCA_BTL_ATOMIC_SUPPORTS_AND},
        {DOORBELL_ATOMIC_OR, MCA_BTL_ATOMIC_SUPPORTS_OR},
        {DOORBELL_ATOMIC_XOR, MCA_BTL_ATOMIC_SUPPORTS_XOR},
        {DOORBELL_ATOMIC_SWAP, MCA_BTL_ATOMIC_SUPPORTS_SWAP},
        {DOORBELL_ATOMIC_CSWAP, MCA_BTL_ATOMIC_SUPPORTS_CSWAP},
    };
    uint32_t need = (1u << DOORBELL_ATOMIC_ADD) | (1u << DOORBELL_ATOMIC_CSWAP);
    const char *why = NULL;

    btl->btl_atomic_flags = 0;
    if (!(btl->btl_flags &
          (MCA_BTL_FLAGS_ATOMIC_OPS | MCA_BTL_FLAGS_ATOMIC_FOPS))) {
        why = "btl_doorbell_flags leaves them out";
    } else if ((l->atomic_ops & need) != need || !(l->atomic_sizes & 8)) {
        why = "the device executes no 64-bit fetch-and-add and "
              "compare-and-swap";
    } else if (l->atomic_big_endian) {
        why = "the device keeps atomic words big-endian, and osc rdma reads "
              "them with the CPU";
    }
    if (why != NULL) {
        btl->btl_flags &= ~(MCA_BTL_FLAGS_ATOMIC_OPS |
                            MCA_BTL_FLAGS_ATOMIC_FOPS);
        BTL_DOORBELL_VERBOSE(1,
                             "%s: no atomics: %s (one-sided MPI will not "
                             "select this btl)",
                             module->device.name, why);
        return;
    }
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        if (l->atomic_ops & (1u << ops[i].op)) {
            btl->btl_atomic_flags |= ops[i].flag;
        }
    }
    if (l->atomic_sizes & 4) {
        btl->btl_atomic_flags |= MCA_BTL_ATOMIC_SUPPORTS_32BIT;
    }
}

/* Starts one atomic; OPAL_ERR_NOT_SUPPORTED for what the module does not
 * offer (osc rdma then falls back to get-modify-put). */
static int mca_btl_doorbell_atomic(
    mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
    void *local_address, uint64_t remote_address,
    mca_btl_base_registration_handle_t *local_handle,
    mca_btl_base_registration_handle_t *remote_handle, doorbell_atomic_op_t op,
    uint32_t need, uint64_t operand, uint64_t compare, int flags,
    mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata)
{
    mca_btl_doorbell_module_t  *module = (mca_btl_doorbell_module_t *)btl;
    mca_btl_doorbell_rdma_op_t *aop;

    if (flags & MCA_BTL_ATOMIC_FLAG_32BIT) {
        need |= MCA_BTL_ATOMIC_SUPPORTS_32BIT;
    }
    if ((flags & MCA_BTL_ATOMIC_FLAG_FLOAT) ||
        (btl->btl_atomic_flags & need) != need) {
        return OPAL_ERR_NOT_SUPPORTED;
    }
    if (OPAL_UNLIKELY(remote_handle == NULL)) {
        return OPAL_ERR_BAD_PARAM;
    }
    aop = (mca_btl_doorbell_rdma_op_t *)opal_free_list_get(&module->rdma_ops);
    if (OPAL_UNLIKELY(aop == NULL)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    aop->kind           = MCA_BTL_DOORBELL_OP_ATOMIC;
    aop->endpoint       = endpoint;
    aop->local_address  = local_address;
    aop->remote_address = remote_address;
    aop->rkey           = remote_handle->rkey;
    aop->size           = (flags & MCA_BTL_ATOMIC_FLAG_32BIT) ? 4 : 8;
    aop->local_handle   = local_handle;
    aop->cbfunc         = cbfunc;
    aop->cbcontext      = cbcontext;
    aop->cbdata         = cbdata;
    aop->atomic_op      = op;
    aop->operand        = operand;
    aop->compare        = compare;
    aop->result         = 0;
    return mca_btl_doorbell_start_rdma(aop);
}

int mca_btl_doorbell_aop(
    mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
    uint64_t remote_address, mca_btl_base_registration_handle_t *remote_handle,
    mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
    mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata)
{
    doorbell_atomic_op_t dop;
    uint32_t             need;

    if (mca_btl_doorbell_atomic_of(op, &dop, &need) != OPAL_SUCCESS) {
        return OPAL_ERR_NOT_SUPPORTED;
    }
    return mca_btl_doorbell_atomic(btl, endpoint, NULL, remote_address, NULL,
                                   remote_handle, dop, need, operand, 0, flags,
                                   cbfunc, cbcontext, cbdata);
}

int mca_btl_doorbell_afop(mca_btl_base_module_t   *btl,
                          mca_btl_base_endpoint_t *endpoint,
                          void *local_address, uint64_t remote_address,
                          mca_btl_base_registration_handle_t *local_handle,
                          mca_btl_base_registration_handle_t *remote_handle,
                          mca_btl_base_atomic_op_t op, uint64_t operand,
                          int flags, int order,
                          mca_btl_base_rdma_completion_fn_t cbfunc,
                          void *cbcontext, void *cbdata)
{
    doorbell_atomic_op_t dop;
    uint32_t             need;

    if (mca_btl_doorbell_atomic_of(op, &dop, &need) != OPAL_SUCCESS) {
        return OPAL_ERR_NOT_SUPPORTED;
    }
    if (OPAL_UNLIKELY(local_address == NULL)) {
        return OPAL_ERR_BAD_PARAM;
    }
    return mca_btl_doorbell_atomic(btl, endpoint, local_address, remote_address,
                                   local_handle, remote_handle, dop, need,
                                   operand, 0, flags, cbfunc, cbcontext,
                                   cbdata);
}

int mca_btl_doorbell_acswap(mca_btl_base_module_t   *btl,
                            mca_btl_base_endpoint_t *endpoint,
                            void *local_address, uint64_t remote_address,
                            mca_btl_base_registration_handle_t *local_handle,
                            mca_btl_base_registration_handle_t *remote_handle,
                            uint64_t compare, uint64_t value, int flags,
                            int order, mca_btl_base_rdma_completion_fn_t cbfunc,
                            void *cbcontext, void *cbdata)
{
    if (OPAL_UNLIKELY(local_address == NULL)) {
        return OPAL_ERR_BAD_PARAM;
    }
    return mca_btl_doorbell_atomic(btl, endpoint, local_address, remote_address,
                                   local_handle, remote_handle,
                                   DOORBELL_ATOMIC_CSWAP,
                                   MCA_BTL_ATOMIC_SUPPORTS_CSWAP, value,
                                   compare, flags, cbfunc, cbcontext, cbdata);
}
