/*
 * The UCP side: one context and worker per process (transports from
 * coll_doorbell_tls), endpoints cached per peer process, and per
 * communicator a pre-registered region (two scratch halves, then the flags)
 * whose rkey every peer unpacks once. Worker addresses and rkeys travel
 * through the lower module's allgather: a coll component opens after the
 * modex, so it cannot publish there.
 *
 * The transport ops the schedules call: put_signal = one active message
 * carrying the bytes and the flag (up to coll_doorbell_am_max bytes; the target's
 * handler checks and applies it), else put the bytes, fence, put the flag;
 * quiet = wait for local completion of every send; progress = one
 * ucp_worker_progress; idle = yield, or sleep on the region's bell.
 *
 * The bell: two 32-bit words after the flags. A rank that has waited for
 * DOORBELL_SPIN_NS (yielding) while its peers run (more ranks than cores)
 * sets `sleeping` and waits on `ring` with futex(2), so its core goes to
 * the rank it waits for instead of being spent in sched_yield. Short waits
 * (small messages) only yield: a sleeper woken under load waits for a
 * core again, which costs more than the wait itself. A peer that writes
 * through a mapping stores the flag, then (full fence) reads `sleeping`,
 * and only then bumps `ring` and wakes the sleeper. The waiter sets `sleeping` (full fence)
 * before its last look at the flag, so one of the two sees the other; the
 * wait compares `ring` with the value read before that look, so a wake
 * between the look and the wait is not lost. A sleep is bounded
 * (DOORBELL_SLEEP_NS) all the same. Peers reached by UCP puts cannot ring:
 * teams with such peers only yield.
 */
#include "coll_doorbell.h"
#include "coll_doorbell_debug.h"

#include "ompi/constants.h"
#include "ompi/datatype/ompi_datatype.h"
#include "opal/runtime/opal_progress.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DOORBELL_HOSTNAME_LEN 64
#define DOORBELL_MAX_BLOB     (1 << 20) /* bytes; larger is hostile */
#define DOORBELL_BELL_BYTES   64        /* after the flags: ring, sleeping */
#define DOORBELL_SLEEP_NS \
    250000 /* longest sleep on the bell; a
                                             sleeper also looks again then */
#define DOORBELL_SPIN_NS \
    50000                      /* a wait yields this long before
                                             it sleeps */
#define DOORBELL_AM_ID    0x44 /* put_signal as an active message */
#define DOORBELL_AM_BLOCK 64   /* headers per allocation */

/* A put_signal sent as one active message: the data and the flag travel
 * together, so the flag needs neither a fence nor a packet of its own. */
typedef struct mca_coll_doorbell_am_hdr {
    uint64_t region; /* the target's region: which team */
    uint64_t offset; /* scratch offset of the bytes */
    uint64_t value;  /* the flag's new value */
    uint32_t slot;   /* the flag */
    uint32_t len;    /* bytes after the header */
} mca_coll_doorbell_am_hdr_t;

/* UCP 1.13 reads an AM header until the send completes: headers live in
 * blocks that never move, reused once quiet() saw every send complete. */
typedef struct mca_coll_doorbell_am_block {
    mca_coll_doorbell_am_hdr_t         hdr[DOORBELL_AM_BLOCK];
    struct mca_coll_doorbell_am_block *next;
} mca_coll_doorbell_am_block_t;

/* What each rank contributes to the exchange, followed by the worker
 * address and the packed rkey. */
typedef struct mca_coll_doorbell_blob {
    uint64_t address_len;
    uint64_t rkey_len;
    uint64_t base; /* region address */
    uint64_t region_len;
    char     host[DOORBELL_HOSTNAME_LEN];
} mca_coll_doorbell_blob_t;

/* Called from every opal_progress, i.e. by every other MPI call of the
 * process too. Only teams that put through UCP have work for the worker
 * (acknowledgements, retransmits, puts landing): with every peer mapped the
 * hook costs a load, not a worker pass. */
static int mca_coll_doorbell_progress(void)
{
    mca_coll_doorbell_ucp_t *u = &mca_coll_doorbell_component.ucp;

    if (u->ucp_teams == 0) {
        return 0;
    }
    return (int)ucp_worker_progress(u->worker);
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

static int mca_coll_doorbell_register_team(mca_coll_doorbell_team_t *team)
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

static void mca_coll_doorbell_unregister_team(mca_coll_doorbell_team_t *team)
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
    opal_progress_register(mca_coll_doorbell_progress);
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

/* The endpoint to `proc`, created from its worker address on first use. */
static int mca_coll_doorbell_get_ep(struct ompi_proc_t *proc,
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
            return OMPI_SUCCESS;
        }
    }
    if (u->num_eps == u->max_eps) {
        grown = realloc(u->eps, sizeof(*u->eps) * (u->max_eps * 2 + 8));
        if (grown == NULL) {
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        u->eps     = grown;
        u->max_eps = u->max_eps * 2 + 8;
    }
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    params.address    = (const ucp_address_t *)address;
    status = ucp_ep_create(u->worker, &params, &u->eps[u->num_eps].ep);
    if (status != UCS_OK) {
        DOORBELL_ERROR("ucp_ep_create() failed: %s", ucs_status_string(status));
        return OMPI_ERROR;
    }
    u->eps[u->num_eps].proc = proc;
    *ep_p                   = u->eps[u->num_eps++].ep;
    return OMPI_SUCCESS;
}

/* ----------------------------------------------------- transport ops */

static uint64_t mca_coll_doorbell_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void mca_coll_doorbell_put_done(void *request, ucs_status_t status,
                                       void *user_data)
{
    mca_coll_doorbell_team_t *team = user_data;

    team->outstanding--;
    if (status != UCS_OK) {
        DOORBELL_ERROR("rank %d: a put completed with %s", team->super.rank,
                       ucs_status_string(status));
        team->failed = 1;
    }
    ucp_request_free(request);
}

static int mca_coll_doorbell_track(mca_coll_doorbell_team_t *team, void *req,
                                   int peer)
{
    if (req == NULL) {
        return 0; /* completed in place */
    }
    if (UCS_PTR_IS_ERR(req)) {
        DOORBELL_ERROR("rank %d: a put to rank %d failed: %s", team->super.rank,
                       peer, ucs_status_string(UCS_PTR_STATUS(req)));
        team->failed = 1;
        return -1;
    }
    team->outstanding++;
    return 0;
}

/* The next free AM header of the team (blocks never move: UCP reads a
 * header until its send completes). */
static mca_coll_doorbell_am_hdr_t *mca_coll_doorbell_am_hdr(
    mca_coll_doorbell_team_t *team)
{
    mca_coll_doorbell_am_block_t **b = &team->am_blocks;
    unsigned                       i = team->am_used;

    for (;; b = &(*b)->next, i -= DOORBELL_AM_BLOCK) {
        if (*b == NULL && (*b = calloc(1, sizeof(**b))) == NULL) {
            return NULL;
        }
        if (i < DOORBELL_AM_BLOCK) {
            break;
        }
    }
    team->am_used++;
    return &(*b)->hdr[i];
}

static int mca_coll_doorbell_put_signal(void *ctx, int peer, const void *src,
                                        size_t len, size_t offset,
                                        uint32_t slot, uint64_t value)
{
    mca_coll_doorbell_team_t *team   = ctx;
    ucp_worker_h              worker = mca_coll_doorbell_component.ucp.worker;
    size_t                    flags_off = 2 * team->super.scratch_half;
    ucp_request_param_t       param;
    void                     *req;

    if (peer < 0 || peer >= team->super.size || team->eps[peer] == NULL ||
        offset + len > flags_off || slot >= 2 * team->super.flag_half) {
        return -1;
    }
    if (team->rptr[peer] != NULL) {
        /* Mapped peer: copy, then publish the flag with release order. */
        char     *base = team->rptr[peer];
        uint32_t *bell = (uint32_t *)(base + team->bell_off);

        memcpy(base + offset, src, len);
        __atomic_store_n((uint64_t *)(base + flags_off) + slot, value,
                         __ATOMIC_RELEASE);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        if (__atomic_load_n(&bell[1], __ATOMIC_RELAXED)) {
            __atomic_fetch_add(&bell[0], 1, __ATOMIC_SEQ_CST);
            syscall(SYS_futex, &bell[0], FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        }
        return 0;
    }
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                         UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send   = mca_coll_doorbell_put_done;
    param.user_data = team;
    if (len <= mca_coll_doorbell_component.am_max) {
        mca_coll_doorbell_am_hdr_t *hdr = mca_coll_doorbell_am_hdr(team);

        if (hdr == NULL) {
            DOORBELL_ERROR("rank %d: no memory for a put_signal header",
                           team->super.rank);
            return -1;
        }
        hdr->region = team->remote_base[peer];
        hdr->offset = offset;
        hdr->value  = value;
        hdr->slot   = slot;
        hdr->len    = (uint32_t)len;
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
        param.flags = UCP_AM_SEND_FLAG_EAGER;
        req         = ucp_am_send_nbx(team->eps[peer], DOORBELL_AM_ID, hdr,
                                      sizeof(*hdr), src, len, &param);
        return mca_coll_doorbell_track(team, req, peer);
    }
    if (len > 0) {
        req = ucp_put_nbx(team->eps[peer], src, len,
                          team->remote_base[peer] + offset, team->rkeys[peer],
                          &param);
        if (mca_coll_doorbell_track(team, req, peer) != 0) {
            return -1;
        }
        /* The flag must not overtake the bytes. */
        if (ucp_worker_fence(worker) != UCS_OK) {
            return -1;
        }
    }
    /* Every flag of a round carries the round's number; the round is
     * quiet()ed before the next one changes it. */
    team->signal_value = value;
    req = ucp_put_nbx(team->eps[peer], &team->signal_value, sizeof(uint64_t),
                      team->remote_base[peer] + flags_off +
                          (size_t)slot * sizeof(uint64_t),
                      team->rkeys[peer], &param);
    return mca_coll_doorbell_track(team, req, peer);
}

static int mca_coll_doorbell_quiet(void *ctx)
{
    mca_coll_doorbell_team_t *team   = ctx;
    ucp_worker_h              worker = mca_coll_doorbell_component.ucp.worker;
    uint64_t                  start  = 0;
    unsigned                  spins  = 0;

    while (team->outstanding > 0 && !team->failed) {
        /* A send completes when the target acknowledges it, and a target
         * on a software NIC acknowledges from its own progress: with more
         * ranks than cores it may be waiting for this very core, so an
         * empty pass yields it (a spin kept it for a whole time slice:
         * 64 KiB allreduces of 7 ms with four ranks on two cores). */
        if (ucp_worker_progress(worker) == 0 && team->super.yield) {
            sched_yield();
        }
        if (team->super.timeout_ns == 0 || ++spins % 64 != 0) {
            continue;
        }
        if (start == 0) {
            start = mca_coll_doorbell_now_ns();
        } else if (mca_coll_doorbell_now_ns() - start >
                   team->super.timeout_ns) {
            DOORBELL_ERROR("rank %d: %d puts still incomplete after %d ms",
                           team->super.rank, team->outstanding,
                           mca_coll_doorbell_component.timeout_ms);
            return -1;
        }
    }
    team->am_used = 0; /* every header's send has completed */
    return team->failed ? -1 : 0;
}

static int mca_coll_doorbell_progress_op(void *ctx)
{
    mca_coll_doorbell_team_t *team = ctx;
    unsigned                  events;

    if (team->ucp_peers == 0) {
        return 0; /* every peer writes through a mapping */
    }
    events = ucp_worker_progress(mca_coll_doorbell_component.ucp.worker);
    return team->failed ? -1 : (int)events;
}

static int mca_coll_doorbell_idle(void *ctx, const uint64_t *flag,
                                  uint64_t value, unsigned idle_polls)
{
    mca_coll_doorbell_team_t *team = ctx;
    uint32_t       *bell  = (uint32_t *)((char *)team->region + team->bell_off);
    struct timespec bound = {0, DOORBELL_SLEEP_NS};
    uint32_t        ring;

    if (team->ucp_peers == 0 && idle_polls == 1) {
        team->wait_since_ns = mca_coll_doorbell_now_ns(); /* a new wait */
    }
    if (team->ucp_peers > 0 || idle_polls == 1 ||
        mca_coll_doorbell_now_ns() - team->wait_since_ns < DOORBELL_SPIN_NS) {
        sched_yield();
        return 0;
    }
    ring = __atomic_load_n(&bell[0], __ATOMIC_ACQUIRE);
    __atomic_store_n(&bell[1], 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < value) {
        /* EAGAIN (rung meanwhile), EINTR and ETIMEDOUT all mean: look
         * again. */
        team->sleeps++;
        if (syscall(SYS_futex, &bell[0], FUTEX_WAIT, ring, &bound, NULL, 0) !=
                0 &&
            errno == ETIMEDOUT) {
            team->sleeps_bounded++;
        }
    }
    __atomic_store_n(&bell[1], 0, __ATOMIC_RELAXED);
    return 0;
}

/* clang-format off */
static const doorbell_coll_transport_ops_t mca_coll_doorbell_ops = {
    .put_signal = mca_coll_doorbell_put_signal,
    .quiet      = mca_coll_doorbell_quiet,
    .progress   = mca_coll_doorbell_progress_op,
    .idle       = mca_coll_doorbell_idle,
};
/* clang-format on */

/* ------------------------------------------------------------- teams */

void mca_coll_doorbell_team_destroy(mca_coll_doorbell_team_t *team)
{
    mca_coll_doorbell_ucp_t *u = &mca_coll_doorbell_component.ucp;
    int                      i;

    mca_coll_doorbell_unregister_team(team);
    while (team->am_blocks != NULL) {
        mca_coll_doorbell_am_block_t *next = team->am_blocks->next;

        free(team->am_blocks);
        team->am_blocks = next;
    }
    if (team->counted) {
        u->ucp_teams--;
    }
    if (team->rkeys != NULL) {
        for (i = 0; i < team->super.size; i++) {
            if (team->rkeys[i] != NULL) {
                ucp_rkey_destroy(team->rkeys[i]);
            }
        }
    }
    if (team->memh != NULL) {
        ucp_mem_unmap(u->context, team->memh); /* frees a UCP allocation */
    }
    if (team->own_region) {
        free(team->region);
    }
    free(team->rptr);
    free(team->peer_scratch);
    free(team->eps);
    free(team->rkeys);
    free(team->remote_base);
    free(team->node_of);
    free(team->leaf_of);
    free(team);
}

/* Builds the local blob: header, worker address, packed rkey. */
static int mca_coll_doorbell_local_blob(mca_coll_doorbell_team_t *team,
                                        void **blob_p, size_t *len_p)
{
    mca_coll_doorbell_ucp_t *u = &mca_coll_doorbell_component.ucp;
    mca_coll_doorbell_blob_t hdr;
    void                    *rkey_buf;
    size_t                   rkey_len;
    char                    *blob;

    if (ucp_rkey_pack(u->context, team->memh, &rkey_buf, &rkey_len) != UCS_OK) {
        DOORBELL_ERROR("ucp_rkey_pack() failed");
        return OMPI_ERROR;
    }
    memset(&hdr, 0, sizeof(hdr));
    hdr.address_len = u->address_len;
    hdr.rkey_len    = rkey_len;
    hdr.base        = (uint64_t)(uintptr_t)team->region;
    hdr.region_len  = team->region_len;
    gethostname(hdr.host, sizeof(hdr.host) - 1);
    blob = malloc(sizeof(hdr) + u->address_len + rkey_len);
    if (blob == NULL) {
        ucp_rkey_buffer_release(rkey_buf);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    memcpy(blob, &hdr, sizeof(hdr));
    memcpy(blob + sizeof(hdr), u->address, u->address_len);
    memcpy(blob + sizeof(hdr) + u->address_len, rkey_buf, rkey_len);
    ucp_rkey_buffer_release(rkey_buf);
    *blob_p = blob;
    *len_p  = sizeof(hdr) + u->address_len + rkey_len;
    return OMPI_SUCCESS;
}

/* Local part: UCP up, region allocated and registered. */
static int mca_coll_doorbell_team_local(mca_coll_doorbell_team_t *team, int n)
{
    mca_coll_doorbell_component_t *cm = &mca_coll_doorbell_component;
    ucp_mem_map_params_t           mp;
    ucs_status_t                   status;

    if (mca_coll_doorbell_ucp_init() != OMPI_SUCCESS) {
        return OMPI_ERROR;
    }
    team->super.flag_half    = doorbell_coll_flags_needed(n);
    team->super.scratch_half = cm->scratch_size;
    team->bell_off           = 2 * cm->scratch_size +
                     2 * (size_t)team->super.flag_half * sizeof(uint64_t);
    team->region_len = team->bell_off + DOORBELL_BELL_BYTES;
    /* Let UCP allocate the region (shared memory when a shared-memory
     * transport is enabled): peers on this node then map it and write with
     * plain stores (ucp_rkey_ptr), no protocol in the way. */
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                    UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                    UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.address = NULL;
    mp.length  = team->region_len;
    mp.flags   = UCP_MEM_MAP_ALLOCATE;
    status     = ucp_mem_map(cm->ucp.context, &mp, &team->memh);
    if (status == UCS_OK) {
        ucp_mem_attr_t attr;

        attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
        if (ucp_mem_query(team->memh, &attr) == UCS_OK) {
            team->region = attr.address;
            memset(team->region, 0, team->region_len);
            return OMPI_SUCCESS;
        }
        ucp_mem_unmap(cm->ucp.context, team->memh);
        team->memh = NULL;
    }
    /* Plain memory, registered. */
    if (posix_memalign(&team->region, 4096, team->region_len) != 0) {
        team->region = NULL;
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    team->own_region = 1;
    memset(team->region, 0, team->region_len);
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                    UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = team->region;
    mp.length  = team->region_len;
    status     = ucp_mem_map(cm->ucp.context, &mp, &team->memh);
    if (status != UCS_OK) {
        DOORBELL_ERROR("ucp_mem_map() of %zu bytes failed: %s",
                       team->region_len, ucs_status_string(status));
        team->memh = NULL;
        return OMPI_ERROR;
    }
    return OMPI_SUCCESS;
}

int mca_coll_doorbell_team_create(mca_coll_doorbell_module_t *module,
                                  mca_coll_doorbell_team_t  **team_p)
{
    mca_coll_doorbell_component_t *cm   = &mca_coll_doorbell_component;
    ompi_communicator_t           *comm = module->comm;
    int n = ompi_comm_size(comm), me = ompi_comm_rank(comm);
    mca_coll_doorbell_team_t *team;
    uint64_t                  my_len = 0, max_len = 0, *lens = NULL;
    char                     *blobs = NULL, *hosts = NULL, *mine;
    void                     *blob     = NULL;
    size_t                    blob_len = 0;
    int i, rc, local_ok, have_leaves = 0, mapped = 0, all_mapped;

    team = calloc(1, sizeof(*team));
    if (team == NULL) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    team->super.size = n;
    team->super.rank = me;
    /* Registered before any peer learns the region: a put_signal message
     * that arrives as soon as a peer is done setting up finds its team. */
    local_ok = mca_coll_doorbell_team_local(team, n) == OMPI_SUCCESS &&
               mca_coll_doorbell_register_team(team) == OMPI_SUCCESS &&
               mca_coll_doorbell_local_blob(team, &blob, &blob_len) ==
                   OMPI_SUCCESS;
    my_len = local_ok ? blob_len : 0;

    /* Round 1: blob lengths; a 0 says that rank could not set up, and then
     * every rank falls back (the decision must be collective). */
    lens = calloc(n, sizeof(uint64_t));
    if (lens == NULL) {
        rc = OMPI_ERR_OUT_OF_RESOURCE;
        goto err;
    }
    rc = module->previous_allgather(&my_len, 1, MPI_UINT64_T, lens, 1,
                                    MPI_UINT64_T, comm,
                                    module->previous_allgather_module);
    if (rc != OMPI_SUCCESS) {
        goto err;
    }
    for (i = 0; i < n; i++) {
        if (lens[i] < sizeof(mca_coll_doorbell_blob_t) ||
            lens[i] > DOORBELL_MAX_BLOB) {
            DOORBELL_VERBOSE(1,
                             "comm %s: rank %d could not set up (blob %llu "
                             "bytes); falling back",
                             comm->c_name, i, (unsigned long long)lens[i]);
            rc = OMPI_ERR_NOT_AVAILABLE;
            goto err;
        }
        if (lens[i] > max_len) {
            max_len = lens[i];
        }
    }

    /* Round 2: the blobs, padded to the longest. */
    blobs             = calloc(n + 1, max_len);
    hosts             = calloc(n, DOORBELL_HOSTNAME_LEN);
    team->eps         = calloc(n, sizeof(*team->eps));
    team->rkeys       = calloc(n, sizeof(*team->rkeys));
    team->remote_base = calloc(n, sizeof(*team->remote_base));
    team->node_of     = calloc(n, sizeof(int));
    team->leaf_of     = calloc(n, sizeof(int));
    team->rptr        = calloc(n, sizeof(*team->rptr));
    if (!blobs || !hosts || !team->eps || !team->rkeys || !team->remote_base ||
        !team->rptr || !team->node_of || !team->leaf_of) {
        rc = OMPI_ERR_OUT_OF_RESOURCE;
        goto err;
    }
    mine = blobs + (size_t)n * max_len;
    memcpy(mine, blob, blob_len);
    rc = module->previous_allgather(mine, (int)max_len, MPI_BYTE, blobs,
                                    (int)max_len, MPI_BYTE, comm,
                                    module->previous_allgather_module);
    if (rc != OMPI_SUCCESS) {
        goto err;
    }
    for (i = 0; i < n; i++) {
        mca_coll_doorbell_blob_t hdr;
        const char              *b = blobs + (size_t)i * max_len;

        memcpy(&hdr, b, sizeof(hdr));
        hdr.host[DOORBELL_HOSTNAME_LEN - 1] = '\0';
        memcpy(hosts + (size_t)i * DOORBELL_HOSTNAME_LEN, hdr.host,
               DOORBELL_HOSTNAME_LEN);
        /* Remote input: the lengths must add up to what was announced. */
        if (hdr.address_len > lens[i] || hdr.rkey_len > lens[i] ||
            sizeof(hdr) + hdr.address_len + hdr.rkey_len != lens[i] ||
            hdr.region_len != team->region_len) {
            DOORBELL_ERROR("comm %s: rank %d sent an inconsistent blob "
                           "(address %llu, rkey %llu, region %llu bytes; "
                           "coll_doorbell_scratch_size must match on all ranks)",
                           comm->c_name, i, (unsigned long long)hdr.address_len,
                           (unsigned long long)hdr.rkey_len,
                           (unsigned long long)hdr.region_len);
            rc = OMPI_ERROR;
            goto err;
        }
        if (i == me) {
            continue;
        }
        rc = mca_coll_doorbell_get_ep(ompi_comm_peer_lookup(comm, i),
                                      b + sizeof(hdr), &team->eps[i]);
        if (rc != OMPI_SUCCESS) {
            goto err;
        }
        if (ucp_ep_rkey_unpack(team->eps[i], b + sizeof(hdr) + hdr.address_len,
                               &team->rkeys[i]) != UCS_OK) {
            DOORBELL_ERROR("comm %s: rkey of rank %d did not unpack",
                           comm->c_name, i);
            rc = OMPI_ERROR;
            goto err;
        }
        team->remote_base[i] = hdr.base;
        /* Same node and shared memory: write through a mapping. */
        if (ucp_rkey_ptr(team->rkeys[i], hdr.base, &team->rptr[i]) != UCS_OK) {
            team->rptr[i] = NULL;
        } else {
            mapped++;
        }
    }
    rc = mca_coll_doorbell_topology(module, hosts, DOORBELL_HOSTNAME_LEN,
                                    team->node_of, team->leaf_of, &have_leaves);
    if (rc != OMPI_SUCCESS) {
        goto err;
    }
    /* Round 3: do all ranks map all peers? Only then may the schedules read
     * peers' scratch in place (the choice must be the same everywhere). */
    all_mapped = mapped == n - 1;
    rc = module->previous_allreduce(MPI_IN_PLACE, &all_mapped, 1, MPI_INT,
                                    MPI_MIN, comm,
                                    module->previous_allreduce_module);
    if (rc != OMPI_SUCCESS) {
        goto err;
    }
    if (all_mapped) {
        team->peer_scratch = calloc(n, sizeof(*team->peer_scratch));
        if (team->peer_scratch == NULL) {
            rc = OMPI_ERR_OUT_OF_RESOURCE;
            goto err;
        }
        for (i = 0; i < n; i++) {
            team->peer_scratch[i] = i == me ? team->region : team->rptr[i];
        }
    }

    team->ucp_peers = n - 1 - mapped;
    if (team->ucp_peers > 0) {
        cm->ucp.ucp_teams++;
        team->counted = 1;
    }
    team->super.ops     = &mca_coll_doorbell_ops;
    team->super.ctx     = team;
    team->super.node_of = team->node_of; /* scratch, flags: at registration */
    team->super.leaf_of = have_leaves ? team->leaf_of : NULL;
    team->super.seq     = 0;
    team->super.timeout_ns   = (uint64_t)cm->timeout_ms * 1000000ull;
    team->super.yield        = opal_progress_yield_when_idle ? 1 : 0;
    team->super.peer_scratch = (const unsigned char *const *)team->peer_scratch;
    DOORBELL_VERBOSE(2,
                     "comm %s (cid %u): team of %d ready, %zu scratch bytes "
                     "per half, %u flags, leaves %s, %d peers mapped, %d by "
                     "UCP puts%s",
                     comm->c_name, comm->c_contextid, n,
                     team->super.scratch_half, team->super.flag_half,
                     have_leaves ? "yes" : "no", mapped, n - 1 - mapped,
                     all_mapped ? ", all ranks read peers in place" : "");
    free(lens);
    free(blobs);
    free(hosts);
    free(blob);
    *team_p = team;
    return OMPI_SUCCESS;

err:
    free(lens);
    free(blobs);
    free(hosts);
    free(blob);
    mca_coll_doorbell_team_destroy(team);
    return rc;
}
