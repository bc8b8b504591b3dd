/*
 * The module: its template, set-up on an open device, add_procs/del_procs
 * (peers' addresses from the modex), finalize with the counters, and the
 * memory registration handles.
 */
#include "btl_doorbell.h"

#include "opal/mca/pmix/pmix.h"
#include "opal/runtime/opal_progress.h"

#include <stdlib.h>
#include <string.h>

static int mca_btl_doorbell_add_procs(mca_btl_base_module_t *btl, size_t nprocs,
                                      opal_proc_t             **procs,
                                      mca_btl_base_endpoint_t **peers,
                                      opal_bitmap_t            *reachable);
static int mca_btl_doorbell_del_procs(mca_btl_base_module_t *btl, size_t nprocs,
                                      opal_proc_t             **procs,
                                      mca_btl_base_endpoint_t **peers);
static int mca_btl_doorbell_finalize(mca_btl_base_module_t *btl);
static int mca_btl_doorbell_register_error(
    mca_btl_base_module_t *btl, mca_btl_base_module_error_cb_fn_t cbfunc);

/* clang-format off */
mca_btl_doorbell_module_t mca_btl_doorbell_module_template = {
    .super = {
        .btl_component      = &mca_btl_doorbell_component.super,
        .btl_add_procs      = mca_btl_doorbell_add_procs,
        .btl_del_procs      = mca_btl_doorbell_del_procs,
        .btl_finalize       = mca_btl_doorbell_finalize,
        .btl_alloc          = mca_btl_doorbell_alloc,
        .btl_free           = mca_btl_doorbell_free,
        .btl_prepare_src    = mca_btl_doorbell_prepare_src,
        .btl_send           = mca_btl_doorbell_send,
        .btl_sendi          = mca_btl_doorbell_sendi,
        .btl_put            = mca_btl_doorbell_put,
        .btl_get            = mca_btl_doorbell_get,
        .btl_dump           = mca_btl_base_dump,
        .btl_register_mem   = mca_btl_doorbell_register_mem,
        .btl_deregister_mem = mca_btl_doorbell_deregister_mem,
        .btl_register_error = mca_btl_doorbell_register_error,
        .btl_flush          = mca_btl_doorbell_flush,
        .btl_atomic_op      = mca_btl_doorbell_aop,
        .btl_atomic_fop     = mca_btl_doorbell_afop,
        .btl_atomic_cswap   = mca_btl_doorbell_acswap,
        .btl_registration_handle_size =
            sizeof(mca_btl_base_registration_handle_t),
    },
};
/* clang-format on */

int mca_btl_doorbell_status_to_opal(doorbell_status_t status)
{
    switch (status) {
    case DOORBELL_OK:
    case DOORBELL_INPROGRESS:
        return OPAL_SUCCESS;
    case DOORBELL_ERR_NO_RESOURCE:
    case DOORBELL_ERR_NO_MEMORY:
        return OPAL_ERR_OUT_OF_RESOURCE;
    case DOORBELL_ERR_INVALID_PARAM:
        return OPAL_ERR_BAD_PARAM;
    case DOORBELL_ERR_UNSUPPORTED:
        return OPAL_ERR_NOT_SUPPORTED;
    case DOORBELL_ERR_TIMED_OUT:
        return OPAL_ERR_TIMEOUT;
    case DOORBELL_ERR_UNREACHABLE:
    case DOORBELL_ERR_CANCELED:
        return OPAL_ERR_UNREACH;
    case DOORBELL_ERR_REMOTE_ACCESS:
        return OPAL_ERR_PERM;
    default:
        return OPAL_ERROR;
    }
}

/* Takes the device's limits: an eager message or a send fragment is one
 * active message, so neither exceeds the largest the device carries (on a
 * small MTU the device rounds it down to whole packets). */
int mca_btl_doorbell_module_init(mca_btl_doorbell_module_t *module)
{
    mca_btl_base_module_t *btl = &module->super;
    size_t                 am_max;

    doorbell_iface_query_limits(module->iface, &module->limits);
    am_max = module->limits.max_am_bcopy;
    if (btl->btl_eager_limit > am_max) {
        BTL_DOORBELL_VERBOSE(1,
                             "%s: eager_limit %zu lowered to %zu, the "
                             "largest active message of the device",
                             module->device.name, btl->btl_eager_limit, am_max);
        btl->btl_eager_limit = am_max;
    }
    if (btl->btl_max_send_size > am_max) {
        btl->btl_max_send_size = am_max;
    }
    if (btl->btl_rndv_eager_limit > btl->btl_eager_limit) {
        btl->btl_rndv_eager_limit = btl->btl_eager_limit;
    }
    if (btl->btl_get_limit > module->limits.max_zcopy) {
        btl->btl_get_limit = module->limits.max_zcopy;
    }
    if (btl->btl_put_limit > module->limits.max_zcopy) {
        btl->btl_put_limit = module->limits.max_zcopy;
    }
    mca_btl_doorbell_atomic_flags(module);
    if (btl->btl_bandwidth == 0) {
        /* bytes/s -> Mb/s */
        btl->btl_bandwidth = (uint32_t)(module->device.bandwidth * 8 / 1e6);
        if (btl->btl_bandwidth == 0) {
            btl->btl_bandwidth = 1;
        }
    }

    OBJ_CONSTRUCT(&module->endpoints, opal_list_t);
    OBJ_CONSTRUCT(&module->pending_eps, opal_list_t);
    OBJ_CONSTRUCT(&module->deferred, opal_list_t);
    OBJ_CONSTRUCT(&module->lock, opal_recursive_mutex_t);
    memset(&module->stats, 0, sizeof(module->stats));
    module->error_cb       = NULL;
    module->in_background  = 0;
    module->progress_calls = 0;
    module->progress_seen  = 0;
    if (mca_btl_doorbell_frag_lists_init(module) != OPAL_SUCCESS) {
        OBJ_DESTRUCT(&module->lock);
        OBJ_DESTRUCT(&module->deferred);
        OBJ_DESTRUCT(&module->pending_eps);
        OBJ_DESTRUCT(&module->endpoints);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }

    /* the device's own counters and a line per queue pair (pacer rate,
     * RTT, timeouts, tail probes) at close, with the btl's */
    doorbell_iface_set_stats(module->iface, mca_btl_doorbell_component.stats);
    doorbell_iface_set_am_handler(module->iface, mca_btl_doorbell_am_handler,
                                  module);
    doorbell_iface_set_completion_handler_arg(module->iface,
                                              mca_btl_doorbell_completion,
                                              module);
    doorbell_iface_set_error_handler(module->iface, mca_btl_doorbell_qp_error,
                                     module);
    return OPAL_SUCCESS;
}

/* A module on another device than the loopback one leaves peers on this host
 * to it: loopback is the shorter path. */
static int mca_btl_doorbell_have_loopback(void)
{
    for (int i = 0; i < mca_btl_doorbell_component.num_modules; i++) {
        if (mca_btl_doorbell_component.modules[i]->loopback) {
            return 1;
        }
    }
    return 0;
}

/* The modex entry of the peer that this module reaches, or NULL. The blob
 * comes from another process: its size, magic, version, count and every
 * address length are checked before an address is used. */
static const mca_btl_doorbell_modex_entry_t *mca_btl_doorbell_pick_entry(
    mca_btl_doorbell_module_t *module, const mca_btl_doorbell_modex_t *modex,
    size_t size, const char *peer)
{
    size_t dev_len   = doorbell_iface_device_address_length(module->iface);
    size_t iface_len = doorbell_iface_address_length(module->iface);

    if (size < sizeof(*modex) || modex->magic != MCA_BTL_DOORBELL_MODEX_MAGIC ||
        modex->version != MCA_BTL_DOORBELL_MODEX_VERSION ||
        size != sizeof(*modex) + modex->count * sizeof(modex->entries[0])) {
        BTL_DOORBELL_ERROR("%s: the addresses published by %s are malformed "
                           "(%zu bytes); peer not reached",
                           module->device.name, peer, size);
        return NULL;
    }
    for (unsigned i = 0; i < modex->count; i++) {
        const mca_btl_doorbell_modex_entry_t *e = &modex->entries[i];

        if (e->kind == module->device.kind && e->device_addr_len == dev_len &&
            e->iface_addr_len == iface_len &&
            dev_len <= MCA_BTL_DOORBELL_ADDR_MAX &&
            iface_len <= MCA_BTL_DOORBELL_ADDR_MAX &&
            doorbell_iface_is_reachable(module->iface, e->device_addr,
                                        e->iface_addr)) {
            return e;
        }
    }
    return NULL;
}

/* This module's own address as a modex entry (the endpoint to itself). */
static void mca_btl_doorbell_own_entry(mca_btl_doorbell_module_t      *module,
                                       mca_btl_doorbell_modex_entry_t *e)
{
    memset(e, 0, sizeof(*e));
    e->kind            = (uint8_t)module->device.kind;
    e->device_addr_len = (uint8_t)doorbell_iface_device_address_length(
        module->iface);
    e->iface_addr_len = (uint8_t)doorbell_iface_address_length(module->iface);
    doorbell_iface_get_device_address(module->iface, e->device_addr);
    doorbell_iface_get_address(module->iface, e->iface_addr);
}

/* Every process this module's device reaches gets an endpoint, this one and
 * those on this host included: osc rdma takes one btl for all the ranks of
 * a window, itself among them, and does all of the window's atomics through
 * it. ob1 still sends to this process over self and to its host over vader:
 * the bml puts a btl of lower exclusivity in a peer's RDMA list only, and
 * ob1 uses no RDMA btl that is not among its eager ones. So these endpoints
 * carry one-sided traffic; without vader in the btl list, sends too. */
static int mca_btl_doorbell_add_procs(mca_btl_base_module_t *btl, size_t nprocs,
                                      opal_proc_t             **procs,
                                      mca_btl_base_endpoint_t **peers,
                                      opal_bitmap_t            *reachable)
{
    mca_btl_doorbell_module_t *module  = (mca_btl_doorbell_module_t *)btl;
    opal_proc_t               *my_proc = opal_proc_local_get();
    int                        added   = 0;

    for (size_t i = 0; i < nprocs; i++) {
        opal_proc_t                          *proc = procs[i];
        const mca_btl_doorbell_modex_entry_t *entry;
        mca_btl_doorbell_modex_entry_t        own;
        uint8_t                              *blob = NULL;
        mca_btl_doorbell_endpoint_t          *ep;
        size_t                                size = 0;
        int                                   on_node, rc;
        const char *host = proc->proc_hostname != NULL ? proc->proc_hostname :
                                                         "?";

        peers[i] = NULL;
        on_node  = proc == my_proc || OPAL_PROC_ON_LOCAL_NODE(proc->proc_flags);
        if (on_node && !module->loopback && mca_btl_doorbell_have_loopback()) {
            continue; /* the loopback module's */
        }
        if (proc == my_proc) {
            mca_btl_doorbell_own_entry(module, &own);
            entry = &own;
        } else {
            OPAL_MODEX_RECV(rc, &mca_btl_doorbell_component.super.btl_version,
                            &proc->proc_name, &blob, &size);
            if (rc != OPAL_SUCCESS) {
                BTL_DOORBELL_VERBOSE(5, "%s: %s published no doorbell address",
                                     module->device.name,
                                     OPAL_NAME_PRINT(proc->proc_name));
                continue;
            }
            entry = mca_btl_doorbell_pick_entry(
                module, (const mca_btl_doorbell_modex_t *)blob, size, host);
            if (entry == NULL) {
                BTL_DOORBELL_VERBOSE(5,
                                     "%s: %s on %s has no address this device "
                                     "reaches",
                                     module->device.name,
                                     OPAL_NAME_PRINT(proc->proc_name), host);
                free(blob);
                continue;
            }
        }
        ep = mca_btl_doorbell_endpoint_create(module, proc, entry);
        free(blob);
        if (ep == NULL) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        BTL_DOORBELL_VERBOSE(5, "%s: reaches %s at %s%s", module->device.name,
                             OPAL_NAME_PRINT(proc->proc_name), ep->peer_name,
                             proc == my_proc ? " (itself)" :
                             on_node         ? " (this host)" :
                                               "");
        peers[i] = ep;
        if (reachable != NULL) {
            opal_bitmap_set_bit(reachable, (int)i);
        }
        added++;
    }
    if (added > 0) {
        mca_btl_doorbell_register_progress();
    }
    return OPAL_SUCCESS;
}

static void mca_btl_doorbell_release_endpoint(mca_btl_doorbell_endpoint_t *ep)
{
    mca_btl_doorbell_module_t *module = ep->module;

    BTL_DOORBELL_LOCK(module);
    if (ep->in_pending) {
        opal_list_remove_item(&module->pending_eps, &ep->pending_item);
        ep->in_pending = 0;
    }
    opal_list_remove_item(&module->endpoints, &ep->super);
    /* the background thread may be inside the device's progress, which
     * frees destroyed QPs on its way out: the QP goes while the lock keeps
     * that thread out, not in the destructor after the lock is dropped */
    if (ep->qp != NULL) {
        doorbell_qp_destroy(ep->qp);
        ep->qp = NULL;
    }
    BTL_DOORBELL_UNLOCK(module);
    OBJ_RELEASE(ep);
}

static int mca_btl_doorbell_del_procs(mca_btl_base_module_t *btl, size_t nprocs,
                                      opal_proc_t             **procs,
                                      mca_btl_base_endpoint_t **peers)
{
    for (size_t i = 0; i < nprocs; i++) {
        if (peers[i] != NULL) {
            mca_btl_doorbell_release_endpoint(peers[i]);
        }
    }
    return OPAL_SUCCESS;
}

static void mca_btl_doorbell_print_stats(mca_btl_doorbell_module_t *module)
{
    const mca_btl_doorbell_component_t *cm = &mca_btl_doorbell_component;
    const mca_btl_doorbell_stats_t     *s  = &module->stats;
    doorbell_counters_t                 c;

    doorbell_iface_get_counters(module->iface, &c);
    opal_output(0,
                "btl:doorbell %s %s stats: sends %" PRIu64 " sendis %" PRIu64
                " send_bytes %" PRIu64 " queued %" PRIu64 " recvs %" PRIu64
                " recv_bytes %" PRIu64 " puts %" PRIu64 " put_bytes %" PRIu64
                " gets %" PRIu64 " get_bytes %" PRIu64 " atomics %" PRIu64
                " dropped %" PRIu64 " wqes %" PRIu64 " doorbells %" PRIu64
                " tx_packets %" PRIu64 " rx_packets %" PRIu64
                " tx_bytes %" PRIu64 " rx_bytes %" PRIu64
                " retransmits %" PRIu64 " timeouts %" PRIu64
                " background %" PRIu64 " wakeups %" PRIu64
                " registrations %" PRIu64 " rcache_hits %" PRIu64
                " rcache_misses %" PRIu64 " rcache_bypassed %" PRIu64,
                OPAL_NAME_PRINT(OPAL_PROC_MY_NAME), module->device.name,
                s->sends, s->sendis, s->send_bytes, s->queued, s->recvs,
                s->recv_bytes, s->puts, s->put_bytes, s->gets, s->get_bytes,
                s->atomics, s->dropped, c.wqes, c.doorbells, c.tx_packets,
                c.rx_packets, c.tx_bytes, c.rx_bytes, c.retransmits, c.timeouts,
                s->background, s->wakeups, cm->registrations,
                cm->rcache_lookups - cm->rcache_misses, cm->rcache_misses,
                cm->rcache_full);
}

static int mca_btl_doorbell_finalize(mca_btl_base_module_t *btl)
{
    mca_btl_doorbell_module_t    *module = (mca_btl_doorbell_module_t *)btl;
    mca_btl_doorbell_component_t *cm     = &mca_btl_doorbell_component;
    opal_list_item_t             *item;

    /* the background thread touches every module: it stops first */
    mca_btl_doorbell_async_stop();
    if (cm->stats) {
        mca_btl_doorbell_print_stats(module);
    }
    while (NULL != (item = opal_list_remove_first(&module->deferred))) {
        opal_free_list_return_st(&module->deferred_items,
                                 (opal_free_list_item_t *)item);
    }
    while (NULL != (item = opal_list_get_first(&module->endpoints)) &&
           item != opal_list_get_end(&module->endpoints)) {
        mca_btl_doorbell_release_endpoint((mca_btl_doorbell_endpoint_t *)item);
    }
    doorbell_iface_close(module->iface);
    module->iface = NULL;
    mca_btl_doorbell_frag_lists_fini(module);
    OBJ_DESTRUCT(&module->lock);
    OBJ_DESTRUCT(&module->deferred);
    OBJ_DESTRUCT(&module->pending_eps);
    OBJ_DESTRUCT(&module->endpoints);

    for (int i = 0; i < cm->num_modules; i++) {
        if (cm->modules[i] == module) {
            cm->modules[i] = cm->modules[--cm->num_modules];
            break;
        }
    }
    if (cm->num_modules == 0 && cm->progress_registered) {
        opal_progress_unregister(mca_btl_doorbell_component_progress);
        cm->progress_registered = 0;
    }
    if (cm->num_modules == 0) {
        mca_btl_doorbell_rcache_fini(); /* before the protection domain */
    }
    free(module);
    return OPAL_SUCCESS;
}

static int mca_btl_doorbell_register_error(
    mca_btl_base_module_t *btl, mca_btl_base_module_error_cb_fn_t cbfunc)
{
    ((mca_btl_doorbell_module_t *)btl)->error_cb = cbfunc;
    return OPAL_SUCCESS;
}

unsigned mca_btl_doorbell_module_drain(mca_btl_doorbell_module_t *module)
{
    mca_btl_doorbell_endpoint_t *ep;
    opal_list_item_t            *item, *next;
    unsigned                     posted = 0;

    /* an endpoint leaves the list once empty; callbacks may queue more */
    for (item = opal_list_get_first(&module->pending_eps);
         item != opal_list_get_end(&module->pending_eps); item = next) {
        next = opal_list_get_next(item);
        ep   = MCA_BTL_DOORBELL_CONTAINER(item, mca_btl_doorbell_endpoint_t,
                                          pending_item);
        posted += mca_btl_doorbell_endpoint_drain(ep);
    }
    return posted;
}

mca_btl_base_registration_handle_t *mca_btl_doorbell_register_mem(
    mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint, void *base,
    size_t size, uint32_t flags)
{
    mca_btl_doorbell_module_t *module = (mca_btl_doorbell_module_t *)btl;
    mca_btl_base_registration_handle_t *handle;
    mca_btl_doorbell_reg_t             *reg;
    unsigned                            access = 0;
    doorbell_status_t                   status;

    if (flags & MCA_BTL_REG_FLAG_REMOTE_READ) {
        access |= DOORBELL_ACCESS_REMOTE_READ;
    }
    if (flags & MCA_BTL_REG_FLAG_REMOTE_WRITE) {
        access |= DOORBELL_ACCESS_REMOTE_WRITE;
    }
    if (flags & MCA_BTL_REG_FLAG_REMOTE_ATOMIC) {
        access |= DOORBELL_ACCESS_REMOTE_ATOMIC;
    }
    if (access != 0) {
        /* peers reach this memory through our device: it must progress */
        mca_btl_doorbell_register_progress();
    }
    handle = mca_btl_doorbell_rcache_register(base, size, flags);
    if (handle != NULL) {
        return handle;
    }
    reg = malloc(sizeof(*reg));
    if (reg == NULL) {
        return NULL;
    }
    status = doorbell_mr_register(mca_btl_doorbell_component.pd, base, size,
                                  access, &reg->mr, &reg->handle.rkey);
    if (status != DOORBELL_OK) {
        BTL_DOORBELL_ERROR("%s: registering %p+%zu: %s", module->device.name,
                           base, size, doorbell_last_error());
        free(reg);
        return NULL;
    }
    reg->handle.reserved = 0;
    mca_btl_doorbell_component.registrations++;
    return &reg->handle;
}

int mca_btl_doorbell_deregister_mem(mca_btl_base_module_t              *btl,
                                    mca_btl_base_registration_handle_t *handle)
{
    mca_btl_doorbell_reg_t *reg =
        MCA_BTL_DOORBELL_CONTAINER(handle, mca_btl_doorbell_reg_t, handle);
    doorbell_status_t status;

    if (mca_btl_doorbell_rcache_deregister(handle)) {
        return OPAL_SUCCESS;
    }
    status = doorbell_mr_deregister(mca_btl_doorbell_component.pd, reg->mr);
    free(reg);
    return mca_btl_doorbell_status_to_opal(status);
}
