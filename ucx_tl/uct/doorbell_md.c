/**
 * doorbell memory domain and component: memory regions with random remote
 * keys from the core's protection domain.
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "doorbell.h"

#include <ucs/sys/string.h>


/* clang-format off */
static ucs_config_field_t uct_doorbell_md_config_table[] = {
    {"", "", NULL,
     ucs_offsetof(uct_doorbell_md_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

    {NULL}
};
/* clang-format on */


static ucs_status_t uct_doorbell_md_query(uct_md_h md, uct_md_attr_t *attr)
{
    attr->cap.flags            = UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_RKEY;
    attr->cap.max_alloc        = 0;
    attr->cap.max_reg          = ULONG_MAX;
    attr->cap.reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->cap.alloc_mem_types  = 0;
    attr->cap.access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->cap.detect_mem_types = 0;
    attr->rkey_packed_size     = sizeof(uct_doorbell_packed_rkey_t);
    /* A software region: a table insert, no page pinning */
    attr->reg_cost = ucs_linear_func_make(200e-9, 0);
    memset(&attr->local_cpus, 0xff, sizeof(attr->local_cpus));
    return UCS_OK;
}

static ucs_status_t uct_doorbell_md_mem_reg(uct_md_h tl_md, void *address,
                                            size_t length, unsigned flags,
                                            uct_mem_h *memh_p)
{
    uct_doorbell_md_t   *md = ucs_derived_of(tl_md, uct_doorbell_md_t);
    uct_doorbell_memh_t *memh;
    doorbell_status_t    status;

    memh = ucs_malloc(sizeof(*memh), "doorbell_memh");
    if (memh == NULL) {
        ucs_error("doorbell: failed to allocate a memory handle");
        return UCS_ERR_NO_MEMORY;
    }

    status = doorbell_mr_register(md->pd, address, length,
                                  DOORBELL_ACCESS_REMOTE_READ |
                                      DOORBELL_ACCESS_REMOTE_WRITE,
                                  &memh->mr, &memh->rkey);
    if (status != DOORBELL_OK) {
        ucs_error("doorbell: registering %p length %zu failed: %s", address,
                  length, doorbell_last_error());
        ucs_free(memh);
        return uct_doorbell_status(status);
    }

    *memh_p = memh;
    return UCS_OK;
}

static ucs_status_t uct_doorbell_md_mem_dereg(
    uct_md_h tl_md, const uct_md_mem_dereg_params_t *params)
{
    uct_doorbell_md_t   *md = ucs_derived_of(tl_md, uct_doorbell_md_t);
    uct_doorbell_memh_t *memh;
    doorbell_status_t    status;

    UCT_MD_MEM_DEREG_CHECK_PARAMS(params, 0);

    memh   = params->memh;
    status = doorbell_mr_deregister(md->pd, memh->mr);
    ucs_free(memh);
    if (status != DOORBELL_OK) {
        ucs_error("doorbell: deregistering failed: %s", doorbell_last_error());
        return uct_doorbell_status(status);
    }

    return UCS_OK;
}

static ucs_status_t uct_doorbell_md_mkey_pack(
    uct_md_h md, uct_mem_h tl_memh, const uct_md_mkey_pack_params_t *params,
    void *rkey_buffer)
{
    const uct_doorbell_memh_t  *memh   = tl_memh;
    uct_doorbell_packed_rkey_t *packed = rkey_buffer;

    packed->rkey = memh->rkey;
    return UCS_OK;
}

static void uct_doorbell_md_close(uct_md_h tl_md)
{
    uct_doorbell_md_t *md = ucs_derived_of(tl_md, uct_doorbell_md_t);

    doorbell_pd_destroy(md->pd);
    ucs_free(md);
}

/* clang-format off */
static uct_md_ops_t uct_doorbell_md_ops = {
    .close                  = uct_doorbell_md_close,
    .query                  = uct_doorbell_md_query,
    .mem_alloc              = (uct_md_mem_alloc_func_t)
                              ucs_empty_function_return_unsupported,
    .mem_free               = (uct_md_mem_free_func_t)
                              ucs_empty_function_return_unsupported,
    .mem_advise             = (uct_md_mem_advise_func_t)
                              ucs_empty_function_return_unsupported,
    .mem_reg                = uct_doorbell_md_mem_reg,
    .mem_dereg              = uct_doorbell_md_mem_dereg,
    .mem_query              = (uct_md_mem_query_func_t)
                              ucs_empty_function_return_unsupported,
    .mkey_pack              = uct_doorbell_md_mkey_pack,
    .is_sockaddr_accessible = (uct_md_is_sockaddr_accessible_func_t)
                              ucs_empty_function_return_zero_int,
    .detect_memory_type     = (uct_md_detect_memory_type_func_t)
                              ucs_empty_function_return_unsupported
};
/* clang-format on */

static ucs_status_t uct_doorbell_md_open(uct_component_t       *component,
                                         const char            *md_name,
                                         const uct_md_config_t *config,
                                         uct_md_h              *md_p)
{
    uct_doorbell_md_t *md;
    doorbell_status_t  status;

    md = ucs_calloc(1, sizeof(*md), "uct_doorbell_md_t");
    if (md == NULL) {
        ucs_error("doorbell: failed to allocate the memory domain");
        return UCS_ERR_NO_MEMORY;
    }

    status = doorbell_pd_create(&md->pd);
    if (status != DOORBELL_OK) {
        ucs_error("doorbell: creating the protection domain failed: %s",
                  doorbell_last_error());
        ucs_free(md);
        return uct_doorbell_status(status);
    }

    md->super.ops       = &uct_doorbell_md_ops;
    md->super.component = &uct_doorbell_component;
    *md_p               = &md->super;
    return UCS_OK;
}

static ucs_status_t uct_doorbell_rkey_unpack(uct_component_t *component,
                                             const void      *rkey_buffer,
                                             uct_rkey_t      *rkey_p,
                                             void           **handle_p)
{
    const uct_doorbell_packed_rkey_t *packed = rkey_buffer;

    *rkey_p   = packed->rkey;
    *handle_p = NULL;
    return UCS_OK;
}

/* clang-format off */
uct_component_t uct_doorbell_component = {
    .query_md_resources = uct_md_query_single_md_resource,
    .md_open            = uct_doorbell_md_open,
    .cm_open            = (uct_component_cm_open_func_t)
                          ucs_empty_function_return_unsupported,
    .rkey_unpack        = uct_doorbell_rkey_unpack,
    .rkey_ptr           = (uct_component_rkey_ptr_func_t)
                          ucs_empty_function_return_unsupported,
    .rkey_release       = (uct_component_rkey_release_func_t)
                          ucs_empty_function_return_success,
    .name               = UCT_DOORBELL_NAME,
    .md_config          = {
        .name           = "doorbell memory domain",
        .prefix         = UCT_DOORBELL_CONFIG_PREFIX,
        .table          = uct_doorbell_md_config_table,
        .size           = sizeof(uct_doorbell_md_config_t),
    },
    .cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    .tl_list            = UCT_COMPONENT_TL_LIST_INITIALIZER(
                                  &uct_doorbell_component),
    .flags              = 0,
    .md_vfs_init        = (uct_component_md_vfs_init_func_t)ucs_empty_function
};
/* clang-format on */
