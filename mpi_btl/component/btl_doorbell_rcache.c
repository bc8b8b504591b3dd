/*
 * Registration cache: btl_register_mem through Open MPI's rcache framework
 * (grdma), so that a buffer registered again (ob1's rendezvous reads the
 * same send buffer message after message; osc rdma creates windows over
 * the same memory) finds its registration instead of making one.
 *
 * Invalidation: grdma subscribes to Open MPI's memory hooks (the patcher's
 * munmap/brk/madvise interception, mca_rcache_base_mem_cb): memory given
 * back to the system invalidates every registration over it, and an unused
 * one is deregistered, so a later allocation at the same address never
 * finds a remote key a peer was once given. Without those hooks the cache
 * is not created and every registration is made and dropped as before.
 *
 * Bound: at most btl_doorbell_rcache_max regions are registered through the
 * cache; past it the register callback answers out of resources and grdma
 * deregisters its least recently used unused region and retries. When every
 * cached region is in use the registration is made outside the cache.
 */
#include "btl_doorbell.h"

#include "opal/mca/memory/base/base.h"
#include "opal/mca/rcache/base/base.h"
#include "opal/runtime/opal_params.h"
#include "opal/memoryhooks/memory.h"

#include <stdlib.h>

static int mca_btl_doorbell_rcache_reg(void *reg_data, void *base, size_t size,
                                       mca_rcache_base_registration_t *base_reg)
{
    mca_btl_doorbell_component_t  *cm  = reg_data;
    mca_btl_doorbell_rcache_reg_t *reg = (mca_btl_doorbell_rcache_reg_t *)
        base_reg;
    unsigned          access = 0;
    doorbell_status_t status;

    if (cm->rcache_regions >= cm->rcache_max) {
        return OPAL_ERR_OUT_OF_RESOURCE; /* grdma evicts one and retries */
    }
    if (base_reg->access_flags & MCA_RCACHE_ACCESS_REMOTE_READ) {
        access |= DOORBELL_ACCESS_REMOTE_READ;
    }
    if (base_reg->access_flags & MCA_RCACHE_ACCESS_REMOTE_WRITE) {
        access |= DOORBELL_ACCESS_REMOTE_WRITE;
    }
    if (base_reg->access_flags & MCA_RCACHE_ACCESS_REMOTE_ATOMIC) {
        access |= DOORBELL_ACCESS_REMOTE_ATOMIC;
    }
    status = doorbell_mr_register(cm->pd, base, size, access, &reg->mr,
                                  &reg->handle.rkey);
    if (status != DOORBELL_OK) {
        return mca_btl_doorbell_status_to_opal(status);
    }
    reg->handle.reserved = MCA_BTL_DOORBELL_HANDLE_CACHED;
    cm->rcache_regions++;
    cm->rcache_misses++;
    return OPAL_SUCCESS;
}

static int mca_btl_doorbell_rcache_dereg(
    void *reg_data, mca_rcache_base_registration_t *base_reg)
{
    mca_btl_doorbell_component_t  *cm  = reg_data;
    mca_btl_doorbell_rcache_reg_t *reg = (mca_btl_doorbell_rcache_reg_t *)
        base_reg;
    doorbell_status_t status;

    if (reg->mr == NULL) {
        return OPAL_SUCCESS;
    }
    status  = doorbell_mr_deregister(cm->pd, reg->mr);
    reg->mr = NULL;
    cm->rcache_regions--;
    return mca_btl_doorbell_status_to_opal(status);
}

void mca_btl_doorbell_rcache_init(void)
{
    mca_btl_doorbell_component_t *cm        = &mca_btl_doorbell_component;
    mca_rcache_base_resources_t   resources = {
          .cache_name     = "doorbell",
          .reg_data       = cm,
          .sizeof_reg     = sizeof(mca_btl_doorbell_rcache_reg_t),
          .register_mem   = mca_btl_doorbell_rcache_reg,
          .deregister_mem = mca_btl_doorbell_rcache_dereg,
    };
    const int needed = OPAL_MEMORY_FREE_SUPPORT | OPAL_MEMORY_MUNMAP_SUPPORT;

    cm->rcache         = NULL;
    cm->rcache_regions = 0;
    if (cm->rcache_max == 0) {
        BTL_DOORBELL_VERBOSE(
            1, "no registration cache (btl_doorbell_rcache_max 0)");
        return;
    }
    /* the memory framework's hooks (the patcher), opened as Open MPI's
     * UCX and OFI components open it; a second open only counts */
    if (mca_base_framework_open(&opal_memory_base_framework, 0) !=
        OPAL_SUCCESS) {
        BTL_DOORBELL_VERBOSE(1, "no registration cache: Open MPI's memory "
                                "framework did not open");
        return;
    }
    cm->memory_opened = 1;
    if ((opal_mem_hooks_support_level() & needed) != needed) {
        BTL_DOORBELL_VERBOSE(1, "no registration cache: Open MPI's memory "
                                "hooks are not active, freed memory could "
                                "keep a registration");
        return;
    }
    cm->rcache = mca_rcache_base_module_create("grdma", cm, &resources);
    if (cm->rcache == NULL) {
        BTL_DOORBELL_VERBOSE(1, "no registration cache: rcache grdma is not "
                                "available");
        return;
    }
    BTL_DOORBELL_VERBOSE(1,
                         "registration cache: grdma, at most %u regions "
                         "(mpi_leave_pinned %d)",
                         cm->rcache_max, opal_leave_pinned);
}

void mca_btl_doorbell_rcache_fini(void)
{
    mca_btl_doorbell_component_t *cm = &mca_btl_doorbell_component;

    if (cm->rcache != NULL) {
        mca_rcache_base_module_destroy(cm->rcache);
        cm->rcache = NULL;
    }
    if (cm->memory_opened) {
        (void)mca_base_framework_close(&opal_memory_base_framework);
        cm->memory_opened = 0;
    }
}

/* A registration from the cache, or NULL (then the caller registers outside
 * it). */
mca_btl_base_registration_handle_t *mca_btl_doorbell_rcache_register(
    void *base, size_t size, uint32_t flags)
{
    mca_btl_doorbell_component_t   *cm = &mca_btl_doorbell_component;
    mca_rcache_base_registration_t *base_reg;
    int                             access = 0;

    if (cm->rcache == NULL) {
        return NULL;
    }
    /* the btl's flags and the rcache's access flags name the same bits */
    if (flags & MCA_BTL_REG_FLAG_LOCAL_WRITE) {
        access |= MCA_RCACHE_ACCESS_LOCAL_WRITE;
    }
    if (flags & MCA_BTL_REG_FLAG_REMOTE_READ) {
        access |= MCA_RCACHE_ACCESS_REMOTE_READ;
    }
    if (flags & MCA_BTL_REG_FLAG_REMOTE_WRITE) {
        access |= MCA_RCACHE_ACCESS_REMOTE_WRITE;
    }
    if (flags & MCA_BTL_REG_FLAG_REMOTE_ATOMIC) {
        access |= MCA_RCACHE_ACCESS_REMOTE_ATOMIC;
    }
    if (cm->rcache->rcache_register(cm->rcache, base, size, 0, access,
                                    &base_reg) != OPAL_SUCCESS) {
        cm->rcache_full++;
        return NULL;
    }
    cm->rcache_lookups++;
    return &((mca_btl_doorbell_rcache_reg_t *)base_reg)->handle;
}

/* 1 if handle came from the cache (and is released to it), 0 otherwise. */
int mca_btl_doorbell_rcache_deregister(
    mca_btl_base_registration_handle_t *handle)
{
    mca_btl_doorbell_component_t  *cm = &mca_btl_doorbell_component;
    mca_btl_doorbell_rcache_reg_t *reg;

    if (handle->reserved != MCA_BTL_DOORBELL_HANDLE_CACHED) {
        return 0;
    }
    reg = MCA_BTL_DOORBELL_CONTAINER(handle, mca_btl_doorbell_rcache_reg_t,
                                     handle);
    cm->rcache->rcache_deregister(cm->rcache, &reg->super);
    return 1;
}
