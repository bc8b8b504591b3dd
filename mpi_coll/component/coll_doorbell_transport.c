/* The transport ops the schedules call, on UCP puts, active messages and
 * mapped peers, with the futex bell a waiting rank sleeps on.
 *
 * put_signal = one active message carrying the bytes and the flag (up to
 * coll_doorbell_am_max bytes; the target's handler checks and applies it),
 * else put the bytes, fence, put the flag; a mapped peer is written with
 * plain stores. quiet = wait for local completion of every send; progress =
 * one ucp_worker_progress (in a wait for a mapped peer, with no put of ours
 * in flight, one pass in coll_doorbell_mapped_wait_ucp_every: mapped_wait.h),
 * and every few empty passes opal_progress (the rest of the process's
 * communication); idle = yield, or sleep on the region's bell.
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
 * a wait for one of them only yields, and so does a rank whose own UCP puts
 * are still in flight (its worker must run). On several hosts a wait for a
 * rank of the same host still sleeps.
 */
#include "coll_doorbell.h"
#include "coll_doorbell_debug.h"

#include "ompi/constants.h"
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

/* the longest sleep on the bell (a sleeper also looks again then), and
 * how long a wait yields before it sleeps */
#define DOORBELL_SLEEP_NS 250000
#define DOORBELL_SPIN_NS  50000
/* empty polls between two passes of opal_progress (the other components) */
#define DOORBELL_OPAL_PROGRESS_EVERY 8

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

/* A blocking MPI call must let the process's other communication move:
 * an eager send that a peer needs before it joins this allreduce may still
 * sit in, say, the tcp btl's queue of this rank. */
static void mca_coll_doorbell_progress_others(mca_coll_doorbell_team_t *team)
{
    if (++team->idle_passes % DOORBELL_OPAL_PROGRESS_EVERY == 0) {
        opal_progress();
    }
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
        if (ucp_worker_progress(worker) == 0) {
            mca_coll_doorbell_progress_others(team);
            if (team->super.yield) {
                sched_yield();
            }
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

/* Whether `peer` (a rank, or -1) writes this rank's scratch through a
 * mapping: its flags come from its own stores, and it can ring the bell. */
static int mca_coll_doorbell_peer_mapped(const mca_coll_doorbell_team_t *team,
                                         int                             peer)
{
    return peer >= 0 && peer < team->super.size && team->rptr[peer] != NULL;
}

static int mca_coll_doorbell_progress_op(void *ctx, int peer)
{
    mca_coll_doorbell_team_t *team   = ctx;
    unsigned                  events = 0;

    /* A mapped peer's flag comes from its stores (mapped_wait.h). */
    if (doorbell_coll_mapped_wait_runs_worker(
            &team->mapped_wait, team->ucp_peers > 0,
            mca_coll_doorbell_peer_mapped(team, peer), team->outstanding > 0)) {
        events = ucp_worker_progress(mca_coll_doorbell_component.ucp.worker);
    }
    if (events == 0) {
        mca_coll_doorbell_progress_others(team);
    }
    return team->failed ? -1 : (int)events;
}

static int mca_coll_doorbell_idle(void *ctx, int peer, const uint64_t *flag,
                                  uint64_t value, unsigned idle_polls)
{
    mca_coll_doorbell_team_t *team = ctx;
    uint32_t       *bell  = (uint32_t *)((char *)team->region + team->bell_off);
    struct timespec bound = {0, DOORBELL_SLEEP_NS};
    uint32_t        ring;

    if (idle_polls == 1) {
        team->wait_since_ns = mca_coll_doorbell_now_ns(); /* a new wait */
    }
    /* Only a peer writing through a mapping rings the bell; and while puts
     * of ours are in flight the worker must keep running. */
    if (!mca_coll_doorbell_peer_mapped(team, peer) || team->outstanding > 0 ||
        idle_polls == 1 ||
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
const doorbell_coll_transport_ops_t mca_coll_doorbell_ops = {
    .put_signal = mca_coll_doorbell_put_signal,
    .quiet      = mca_coll_doorbell_quiet,
    .progress   = mca_coll_doorbell_progress_op,
    .idle       = mca_coll_doorbell_idle,
};
/* clang-format on */
