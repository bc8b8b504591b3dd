/*
 * Whether a pass of a wait runs the UCP worker, when the peer waited for
 * writes this rank's scratch through a mapping (shared memory).
 *
 * Such a peer raises the flag with its own stores: the worker cannot, and on
 * the software NIC each run of it costs a receive system call per socket.
 * The peer is usually a rank of the same host, often on the same core: a
 * pass ends by handing it the core (yield), and a shorter pass hands it
 * sooner. So while no put of this rank is in flight (those need the worker
 * for their acknowledgements) a wait for a mapped peer runs the worker only
 * on every `every`-th pass, enough for the other peers' messages and
 * acknowledgements. Waits for any other peer run it on every pass.
 *
 * C and C++ (the Open MPI component is C); no MPI or UCX types. Counts are
 * passes of wait loops, not time.
 */
#ifndef DOORBELL_COLL_MAPPED_WAIT_H
#define DOORBELL_COLL_MAPPED_WAIT_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct doorbell_coll_mapped_wait {
    unsigned every;  /* a wait for a mapped peer runs the worker on every
                        `every`-th pass (1: on every pass) */
    unsigned passes; /* passes of such waits so far */
} doorbell_coll_mapped_wait_t;

static inline void doorbell_coll_mapped_wait_init(doorbell_coll_mapped_wait_t *w, unsigned every)
{
    w->every  = (every == 0) ? 1 : every;
    w->passes = 0;
}

/* Whether this pass runs the worker. worker_peers: the team has peers the
 * worker reaches (else no pass needs it); peer_mapped: the peer waited for
 * writes through a mapping; puts_in_flight: puts of this rank not complete. */
static inline int doorbell_coll_mapped_wait_runs_worker(doorbell_coll_mapped_wait_t *w,
                                                        int worker_peers, int peer_mapped,
                                                        int puts_in_flight)
{
    if (!worker_peers) {
        return 0;
    }
    if (!peer_mapped || puts_in_flight) {
        return 1;
    }
    return (++w->passes % w->every) == 0;
}

#ifdef __cplusplus
}
#endif

#endif
