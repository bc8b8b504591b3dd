/*
 * How often the component's progress hook polls its UCP worker between
 * collectives. Polling costs a receive system call on the doorbell iface's
 * socket; a process that waits for point-to-point messages runs the hook
 * thousands of times for nothing. After `empty_limit` empty polls in a row
 * the hook polls every `every`-th call only; a poll that moved something,
 * and every collective (its last puts' acknowledgements and the peers' early
 * puts follow it), make it poll on every call again.
 *
 * C and C++ (the Open MPI component is C); no MPI or UCX types. Counts are
 * calls, not time: the hook runs only while the process is in MPI.
 */
#ifndef DOORBELL_COLL_PROGRESS_BACKOFF_H
#define DOORBELL_COLL_PROGRESS_BACKOFF_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct doorbell_coll_backoff {
    unsigned empty_limit; /* empty polls before backing off (0: never poll
                             less) */
    unsigned every;       /* then poll on every `every`-th call (>= 1) */
    unsigned empty;       /* empty polls in a row, at most empty_limit */
    unsigned calls;       /* calls while backed off */
} doorbell_coll_backoff_t;

static inline void doorbell_coll_backoff_init(doorbell_coll_backoff_t *b, unsigned empty_limit,
                                              unsigned every)
{
    b->empty_limit = empty_limit;
    b->every       = (every == 0) ? 1 : every;
    b->empty       = 0;
    b->calls       = 0;
}

/* Whether this call of the hook polls. */
static inline int doorbell_coll_backoff_poll(doorbell_coll_backoff_t *b)
{
    if ((b->empty_limit == 0) || (b->empty < b->empty_limit)) {
        return 1;
    }
    return (++b->calls % b->every) == 0;
}

/* Poll on every call again: a collective has run, or a poll moved
 * something. */
static inline void doorbell_coll_backoff_reset(doorbell_coll_backoff_t *b)
{
    b->empty = 0;
    b->calls = 0;
}

/* The poll's result: how many events it moved. */
static inline void doorbell_coll_backoff_polled(doorbell_coll_backoff_t *b, unsigned events)
{
    if (events > 0) {
        doorbell_coll_backoff_reset(b);
    } else if (b->empty < b->empty_limit) {
        ++b->empty;
    }
}

#ifdef __cplusplus
}
#endif

#endif
