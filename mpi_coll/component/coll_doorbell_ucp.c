/* The UCP context of the component: one context and worker per process,
 * endpoints per peer process, the active-message handler of put_signals.
 *
 * Transports come from coll_doorbell_tls. Worker addresses and rkeys travel
 * through the lower module's allgather (coll_doorbell_team.c): a coll
 * component opens after the modex, so it cannot publish there. The handler
 * finds a put_signal's team by its region among the teams registered here.
 */
#include "coll_doorbell.h"
#include "coll_doorbell_debug.h"
#include "am_seg_size.h"

#include "ompi/constants.h"
#include "opal/runtime/opal_progress.h"

#include <stdlib.h>
#include <string.h>

/* Progress between collectives: acknowledgements, retransmits and peers'
 * early puts for the next call. A collective's own waits progress the
 * worker directly, so this hook is a low-priority one (every 8th
 * opal_progress): a worker pass polls the doorbell iface's socket, and on
 * every pass it cost a point-to-point ping-pong over the btl 3-4 us per
 * message across the emulated spine. Only teams that put through UCP have
 * work for the worker: with every peer mapped the hook costs a load.
 * After DOORBELL_HOOK_EMPTY empty polls it polls on every
 * DOORBELL_HOOK_EVERY-th pass (progress_backoff.h): a ping-pong's wait loop
 * then pays one receive system call in 128 opal_progress calls, not one in
 * 8, and a peer's late request for an ACK still gets one within
 * microseconds while this process is in MPI (the iface's async tick covers
 * a process outside it). */
#define DOORBELL_HOOK_EMPTY 64
#define DOORBELL_HOOK_EVERY 16

static int mca_coll_doorbell_progress(void)
{
    mca_coll_doorbell_ucp_t *u = &mca_coll_doorbell_component.ucp;
    unsigned                 events;

    if ((u->ucp_teams == 0) || !doorbell_coll_backoff_poll(&u->hook)) {
        return 0;
    }
    events = ucp_worker_progress(u->worker);
    doorbell_coll_backoff_polled(&u->hook, events);
    return (int)events;
}

/* A collective has run: its last puts' acknowledgements and the peers'
 * early puts may follow, so the hook polls on every pass again. */
void mca_coll_doorbell_ucp_busy(void)
{
    doorbell_coll_backoff_reset(&mca_coll_doorbell_component.ucp.hook);
}

/* The target's side of an AM put_signal. Remote input: the header names a
 * region this process registered, and the library checks the bounds. */
static ucs_status_t mca_coll_doorbell_am_recv(void *arg, const void *header,
                                              size_t header_length, void *data,
                                              size_t                     length,
                                              const ucp_am_recv_param_t *param)
{
    mca_coll_doorbell_ucp_t   *u = arg;
    mca_coll_doorbell_am_hdr_t hdr;
    int                        i;

    if (header_length != sizeof(hdr) ||
        (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        DOORBELL_ERROR("dropped a put_signal message with a %zu-byte header%s",
                       header_length,
                       (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ?
                           " sent by rendezvous" :
                           "");
        return UCS_OK;
    }
    memcpy(&hdr, header, sizeof(hdr));
    for (i = 0; i < u->num_teams; i++) {
        mca_coll_doorbell_team_t *team = u->teams[i];

        if ((uint64_t)(uintptr_t)team->region != hdr.region) {
            continue;
        }
        if (hdr.len != length ||
            doorbell_coll_deliver_put_signal(&team->super, data, length,
                                             hdr.offset, hdr.slot,
                                             hdr.value) != 0) {
            DOORBELL_ERROR("rank %d: dropped a put_signal of %zu bytes at "
                           "offset %llu, flag %u: outside the team's region",
                           team->super.rank, length,
                           (unsigned long long)hdr.offset, hdr.slot);
        }
        return UCS_OK;
    }
    DOORBELL_ERROR("dropped a put_signal for region 0x%llx: no such team here",
                   (unsigned long long)hdr.region);
    return UCS_OK;
}

int mca_coll_doorbell_ucp_register_team(mca_coll_doorbell_team_t *team)
{
    mca_coll_doorbell_ucp_t *u = &mca_coll_doorbell_component.ucp;

    if (u->num_teams == u->max_teams) {
        int   max = u->max_teams ? 2 * u->max_teams : 8;
        void *p   = realloc(u->teams, max * sizeof(*u->teams));

        if (p == NULL) {
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        u->teams     = p;
        u->max_teams = max;
    }
    /* What the handler writes into: the scratch halves and the flags. */
    team->super.scratch      = team->region;
    team->super.flags        = (uint64_t *)((char *)team->region +
                                     2 * team->super.scratch_half);
    u->teams[u->num_teams++] = team;
    return OMPI_SUCCESS;
}

void mca_coll_doorbell_ucp_unregister_team(mca_coll_doorbell_team_t *team)
{
    mca_coll_doorbell_ucp_t *u = &mca_coll_doorbell_component.ucp;
    int                      i;

    for (i = 0; i < u->num_teams; i++) {
        if (u->teams[i] == team) {
            u->teams[i] = u->teams[--u->num_teams];
            break;
        }
    }
}

/* A put_signal of up to am_max bytes as one active message over the doorbell
 * transport (am_seg_size.h says why), unless the user chose the size. Only
 * speed depends on it: UCP cuts a longer message, and delivers it whole. */
static void mca_coll_doorbell_ucp_am_seg_size(ucp_config_t *config)
{
    size_t seg = doorbell_coll_am_seg_size(mca_coll_doorbell_component.am_max);
    char   value[32];
    ucs_status_t status;

    if (seg == 0 || getenv("UCX_DOORBELL_SEG_SIZE") != NULL ||
        !doorbell_coll_tls_names_doorbell(mca_coll_doorbell_component.tls)) {
        return;
    }
    snprintf(value, sizeof(value), "%zu", seg);
    status = ucp_config_modify(config, "DOORBELL_SEG_SIZE", value);
    if (status != UCS_OK) {
        DOORBELL_VERBOSE(
            1,
            "UCX_DOORBELL_SEG_SIZE=%s for am_max %zu rejected (%s): "
            "longer active messages go in fragments",
            value, mca_coll_doorbell_component.am_max,
            ucs_status_string(status));
        return;
    }
    DOORBELL_VERBOSE(2,
                     "UCX_DOORBELL_SEG_SIZE=%s: puts of up to %zu bytes as one "
                     "active message",
                     value, mca_coll_doorbell_component.am_max);
}

int mca_coll_doorbell_ucp_init(void)
{
    mca_coll_doorbell_component_t *cm = &mca_coll_doorbell_component;
    mca_coll_doorbell_ucp_t       *u  = &cm->ucp;
    ucp_worker_params_t            worker_params;
    ucp_am_handler_param_t         am;
    ucp_params_t                   params;
    ucp_config_t                  *config;
    ucs_status_t                   status;

    if (u->initialized) {
        return OMPI_SUCCESS;
    }
    if (u->init_failed) {
        return OMPI_ERROR;
    }
    status = ucp_config_read(NULL, NULL, &config);
    if (status != UCS_OK) {
        DOORBELL_ERROR("ucp_config_read() failed: %s",
                       ucs_status_string(status));
        goto err;
    }
    status = ucp_config_modify(config, "TLS", cm->tls);
    if (status != UCS_OK) {
        DOORBELL_ERROR("UCX_TLS=%s rejected: %s", cm->tls,
                       ucs_status_string(status));
        ucp_config_release(config);
        goto err;
    }
    mca_coll_doorbell_ucp_am_seg_size(config);
    /* One rendezvous lane per peer: the component sends no rendezvous, and
     * with two UCP pairs a host's shared memory (cma) with a network lane
     * for a peer on the same host. */
    (void)ucp_config_modify(config, "MAX_RNDV_RAILS", "1");
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_RMA | UCP_FEATURE_AM;
    status            = ucp_init(&params, config, &u->context);
    ucp_config_release(config);
    if (status != UCS_OK) {
        DOORBELL_ERROR("ucp_init() with transports \"%s\" failed: %s "
                       "(is libuct_doorbell.so preloaded? see "
                       "coll_doorbell_tls)",
                       cm->tls, ucs_status_string(status));
        goto err;
    }
    memset(&worker_params, 0, sizeof(worker_params));
    worker_params.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
    status = ucp_worker_create(u->context, &worker_params, &u->worker);
    if (status != UCS_OK) {
        DOORBELL_ERROR("ucp_worker_create() failed: %s",
                       ucs_status_string(status));
        goto err_cleanup;
    }
    memset(&am, 0, sizeof(am));
    am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                    UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG;
    am.id  = DOORBELL_AM_ID;
    am.cb  = mca_coll_doorbell_am_recv;
    am.arg = u;
    status = ucp_worker_set_am_recv_handler(u->worker, &am);
    if (status != UCS_OK) {
        DOORBELL_ERROR("ucp_worker_set_am_recv_handler() failed: %s",
                       ucs_status_string(status));
        goto err_destroy_worker;
    }
    status = ucp_worker_get_address(u->worker, &u->address, &u->address_len);
    if (status != UCS_OK) {
        DOORBELL_ERROR("ucp_worker_get_address() failed: %s",
                       ucs_status_string(status));
        goto err_destroy_worker;
    }
    doorbell_coll_backoff_init(&u->hook, DOORBELL_HOOK_EMPTY,
                               DOORBELL_HOOK_EVERY);
    opal_progress_register_lp(mca_coll_doorbell_progress);
    u->initialized = 1;
    DOORBELL_VERBOSE(1,
                     "UCP context up on transports \"%s\" (address %zu bytes)",
                     cm->tls, u->address_len);
    return OMPI_SUCCESS;

err_destroy_worker:
    ucp_worker_destroy(u->worker);
err_cleanup:
    ucp_cleanup(u->context);
err:
    u->init_failed = 1;
    return OMPI_ERROR;
}

void mca_coll_doorbell_ucp_finalize(void)
{
    mca_coll_doorbell_ucp_t *u = &mca_coll_doorbell_component.ucp;
    ucp_request_param_t      param;
    void                    *req;
    int                      i;

    if (!u->initialized) {
        return;
    }
    opal_progress_unregister(mca_coll_doorbell_progress);
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags        = UCP_EP_CLOSE_FLAG_FORCE; /* peers may be gone */
    for (i = 0; i < u->num_eps; i++) {
        req = ucp_ep_close_nbx(u->eps[i].ep, &param);
        if (UCS_PTR_IS_PTR(req)) {
            while (ucp_request_check_status(req) == UCS_INPROGRESS) {
                ucp_worker_progress(u->worker);
            }
            ucp_request_free(req);
        }
    }
    free(u->eps);
    free(u->teams);
    ucp_worker_release_address(u->worker, u->address);
    ucp_worker_destroy(u->worker);
    ucp_cleanup(u->context);
    DOORBELL_VERBOSE(1, "UCP context closed (%d endpoints)", u->num_eps);
    memset(u, 0, sizeof(*u));
}

/* The endpoint to `proc`, created from its worker address on first use.
 * Returns UCP's status (UCS_ERR_UNREACHABLE: no transport reaches it). */
ucs_status_t mca_coll_doorbell_ucp_get_ep(struct ompi_proc_t *proc,
                                          const void *address, ucp_ep_h *ep_p)
{
    mca_coll_doorbell_ucp_t *u = &mca_coll_doorbell_component.ucp;
    ucp_ep_params_t          params;
    ucs_status_t             status;
    void                    *grown;
    int                      i;

    for (i = 0; i < u->num_eps; i++) {
        if (u->eps[i].proc == proc) {
            *ep_p = u->eps[i].ep;
            return UCS_OK;
        }
    }
    if (u->num_eps == u->max_eps) {
        grown = realloc(u->eps, sizeof(*u->eps) * (u->max_eps * 2 + 8));
        if (grown == NULL) {
            return UCS_ERR_NO_MEMORY;
        }
        u->eps     = grown;
        u->max_eps = u->max_eps * 2 + 8;
    }
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    params.address    = (const ucp_address_t *)address;
    status = ucp_ep_create(u->worker, &params, &u->eps[u->num_eps].ep);
    if (status != UCS_OK) {
        return status;
    }
    u->eps[u->num_eps].proc = proc;
    *ep_p                   = u->eps[u->num_eps++].ep;
    return UCS_OK;
}
