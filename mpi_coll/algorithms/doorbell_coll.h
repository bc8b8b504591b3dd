/*
 * doorbell collectives: the C boundary between the allreduce schedules
 * (C++20, no MPI or UCX types) and whoever moves the bytes: the Open MPI
 * component (UCP) or the in-process fake used by the tests.
 *
 * Transport model: every rank owns a remote-writable scratch area and an
 * array of 64-bit flags. A put writes bytes into a peer's scratch and then
 * raises one of the peer's flags to a value; the peer sees the flag only after
 * the bytes. The receiver polls its own flags. Scratch and flags are split in
 * two halves used by alternate rounds (a round = one segment of one
 * allreduce), which is what lets a fast rank start round k+1 while a slow one
 * still reads round k: a writer can only be one round ahead, because finishing
 * a round needs every rank's contribution to that round.
 *
 * Determinism: every element of the result is computed exactly once, by one
 * rank, in an order fixed by the algorithm and the communicator size (lower
 * ranks' partial results are always the left operand), then copied to the
 * others; results are bitwise identical on every rank and from run to run.
 *
 * Units: sizes and offsets in bytes, counts in elements, times in ns.
 */
#ifndef DOORBELL_COLL_H
#define DOORBELL_COLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum doorbell_coll_status {
    DOORBELL_COLL_OK              = 0,
    DOORBELL_COLL_ERR_INVALID     = -1, /* bad argument (message says which) */
    DOORBELL_COLL_ERR_UNSUPPORTED = -2, /* op/type pair not handled here */
    DOORBELL_COLL_ERR_TRANSPORT   = -3, /* put, quiet or progress failed */
    DOORBELL_COLL_ERR_TIMED_OUT   = -4, /* a peer did not signal in time */
    DOORBELL_COLL_ERR_NO_SPACE    = -5  /* scratch or flags too small */
} doorbell_coll_status_t;

/* Predefined MPI operations. */
typedef enum doorbell_coll_op {
    DOORBELL_COLL_OP_SUM,
    DOORBELL_COLL_OP_PROD,
    DOORBELL_COLL_OP_MAX,
    DOORBELL_COLL_OP_MIN,
    DOORBELL_COLL_OP_LAND,
    DOORBELL_COLL_OP_LOR,
    DOORBELL_COLL_OP_LXOR,
    DOORBELL_COLL_OP_BAND,
    DOORBELL_COLL_OP_BOR,
    DOORBELL_COLL_OP_BXOR,
    DOORBELL_COLL_OP_MAXLOC,
    DOORBELL_COLL_OP_MINLOC,
    DOORBELL_COLL_OP_COUNT
} doorbell_coll_op_t;

/* Element types by representation (MPI_INT -> INT32, MPI_LONG -> INT64 on
 * LP64, MPI_REAL -> FLOAT, ...). Pair types are the C structs MPI defines
 * (value first, then index), padding included in the element size. */
typedef enum doorbell_coll_dtype {
    DOORBELL_COLL_DT_INT8,
    DOORBELL_COLL_DT_UINT8,
    DOORBELL_COLL_DT_INT16,
    DOORBELL_COLL_DT_UINT16,
    DOORBELL_COLL_DT_INT32,
    DOORBELL_COLL_DT_UINT32,
    DOORBELL_COLL_DT_INT64,
    DOORBELL_COLL_DT_UINT64,
    DOORBELL_COLL_DT_FLOAT,
    DOORBELL_COLL_DT_DOUBLE,
    DOORBELL_COLL_DT_LONG_DOUBLE,
    DOORBELL_COLL_DT_FLOAT_COMPLEX,
    DOORBELL_COLL_DT_DOUBLE_COMPLEX,
    DOORBELL_COLL_DT_LONG_DOUBLE_COMPLEX,
    DOORBELL_COLL_DT_BOOL,            /* C _Bool (1 byte) */
    DOORBELL_COLL_DT_LOGICAL,         /* Fortran LOGICAL (4 bytes, 0 = false) */
    DOORBELL_COLL_DT_BYTE,            /* MPI_BYTE: bitwise ops only */
    DOORBELL_COLL_DT_FLOAT_INT,       /* MPI_FLOAT_INT */
    DOORBELL_COLL_DT_DOUBLE_INT,      /* MPI_DOUBLE_INT */
    DOORBELL_COLL_DT_LONG_INT,        /* MPI_LONG_INT */
    DOORBELL_COLL_DT_2INT,            /* MPI_2INT, MPI_2INTEGER */
    DOORBELL_COLL_DT_SHORT_INT,       /* MPI_SHORT_INT */
    DOORBELL_COLL_DT_LONG_DOUBLE_INT, /* MPI_LONG_DOUBLE_INT */
    DOORBELL_COLL_DT_2FLOAT,          /* MPI_2REAL */
    DOORBELL_COLL_DT_2DOUBLE,         /* MPI_2DOUBLE_PRECISION */
    DOORBELL_COLL_DT_COUNT
} doorbell_coll_dtype_t;

typedef enum doorbell_coll_algorithm {
    DOORBELL_COLL_ALG_AUTO,
    DOORBELL_COLL_ALG_RECURSIVE_DOUBLING,
    DOORBELL_COLL_ALG_RING,
    DOORBELL_COLL_ALG_RABENSEIFNER,
    DOORBELL_COLL_ALG_HIERARCHICAL,
    DOORBELL_COLL_ALG_DIRECT,   /* one step: all-to-all, fold in rank order */
    DOORBELL_COLL_ALG_TWO_STEP, /* all-to-all reduce-scatter, then allgather */
    /* The caller's own allreduce (in Open MPI the module below this one,
     * coll/tuned by default): where it is faster, auto hands the call back.
     * doorbell_coll_allreduce() does not run it (DOORBELL_COLL_ERR_INVALID). */
    DOORBELL_COLL_ALG_PREVIOUS,
    DOORBELL_COLL_ALG_COUNT
} doorbell_coll_algorithm_t;

/* What a transport provides. Calls on one team come from one thread. */
typedef struct doorbell_coll_transport_ops {
    /* Start writing len bytes from src into peer's scratch at offset, then
     * raise peer's flag[slot] to value, visible only after the bytes. src must
     * stay unchanged until quiet() returns. Returns 0 or nonzero on error. */
    int (*put_signal)(void *ctx, int peer, const void *src, size_t len, size_t offset,
                      uint32_t slot, uint64_t value);
    /* Wait until every put issued so far no longer reads its source. */
    int (*quiet)(void *ctx);
    /* One pass of progress (delivers incoming puts where the transport
     * needs the target's help). `peer` is the rank whose flag the caller
     * waits for, or -1: a transport may skip, on most passes, the work that
     * cannot raise that flag, as long as every pass of a wait still moves
     * the caller's own puts and some passes move the rest. Returns how
     * many events it handled (>= 0), negative when the transport failed. */
    int (*progress)(void *ctx, int peer);
    /* Optional (NULL: the schedules yield the CPU). Called, when the team
     * yields (more ranks than cores), after `idle_polls` consecutive polls
     * found nothing while this rank waits for *flag to reach value, which
     * `peer` raises. May yield, or sleep until a peer signals this rank (or
     * a short bound passes); must return promptly once *flag >= value.
     * Returns 0, or nonzero on error. */
    int (*idle)(void *ctx, int peer, const uint64_t *flag, uint64_t value, unsigned idle_polls);
} doorbell_coll_transport_ops_t;

/* One communicator as the schedules see it. Filled by the caller; the
 * library only reads it, except `seq`, which it advances once per round. */
typedef struct doorbell_coll_team {
    const doorbell_coll_transport_ops_t *ops;
    void                                *ctx; /* passed back to ops */
    int                                  rank;
    int                                  size;
    unsigned char                       *scratch;      /* local, 2 * scratch_half bytes */
    size_t                               scratch_half; /* bytes per half, 64-byte multiple */
    uint64_t                            *flags;        /* local, 2 * flag_half slots, zeroed */
    uint32_t                             flag_half;    /* slots per half */
    const int                           *node_of;    /* node id per rank, or NULL (one node each) */
    const int                           *leaf_of;    /* leaf id per rank, or NULL (no leaf level) */
    uint64_t                             seq;        /* rounds done; starts at 0 on every rank */
    uint64_t                             timeout_ns; /* a wait longer than this fails; 0 = never */
    int                                  yield;      /* 1: yield the CPU after idle polls */
    /* Every rank's scratch (both halves), readable by this rank with plain
     * loads (same node, mapped), indexed by rank; or NULL. Must be NULL on
     * every rank or on none. Lets the two-step allgather read finished
     * chunks in place instead of having them written to every rank. */
    const unsigned char *const *peer_scratch;
    /* Every rank's scratch (both halves) indexed by rank, readable with plain
     * loads at least for the ranks of this rank's node (node_of); or NULL.
     * Must be NULL on every rank or on none. Lets the hierarchical algorithm
     * read a node peer's finished slice in place while the ranks of other
     * nodes are reached over the network. */
    const unsigned char *const *node_scratch;
    /* What `auto` needs to know of node_of, set by doorbell_coll_team_layout()
     * once node_of is final (DOORBELL_COLL_LAYOUT_* bits); 0: not set, and
     * doorbell_coll_select() works it out on every call. */
    unsigned layout;
} doorbell_coll_team_t;

#define DOORBELL_COLL_LAYOUT_KNOWN       1u /* layout below is set */
#define DOORBELL_COLL_LAYOUT_MULTI_NODE  2u /* the ranks span several nodes */
#define DOORBELL_COLL_LAYOUT_SHARED_NODE 4u /* some node holds several ranks */
#define DOORBELL_COLL_LAYOUT_SHARED_LEAF \
    8u /* leaf_of names several leaves, and
                                               some leaf holds several nodes */

/* Size thresholds that `auto` uses (bytes of the whole message). */
typedef struct doorbell_coll_tuning {
    size_t small_max;         /* <= : direct (few ranks), recursive doubling;
                                peers read in place (one node) */
    size_t net_small_max;     /* <= : recursive doubling; peers reached over
                                the network (not read in place) */
    int    direct_max_ranks;  /* direct exchange up to this many ranks */
    size_t hier_max;          /* <= : hierarchical when ranks share nodes and
                                span several (larger: the flat algorithms);
                                default SIZE_MAX, every size */
    size_t hier_slice_min;    /* >= : hierarchical with every rank of a node
                                owning a slice (smaller: node leaders only) */
    size_t hier_slice_max;    /* >= : node leaders only again; SIZE_MAX:
                                slices at every size from hier_slice_min */
    size_t ring_min;          /* >= : ring, else Rabenseifner (2^k ranks);
                                peers read in place (one node) */
    size_t net_ring_min;      /* the same, some peer reached over the network;
                                default SIZE_MAX, never */
    size_t pipeline_block;    /* ring sub-block size, 0 = no pipelining */
    size_t previous_max;      /* <= : the caller's own allreduce (PREVIOUS)
                                when every peer is read in place (one node);
                                0 = never */
    size_t net_previous_max;  /* <= : the caller's own allreduce when some
                                peer is reached over the network; 0 = never */
    size_t net_leaf_hier_min; /* >= and <= net_leaf_hier_max: hierarchical
                                 when every rank has a node of its own but
                                 some leaf holds several of them (one flow
                                 per leaf crosses the spine) */
    size_t net_leaf_hier_max;
} doorbell_coll_tuning_t;

/* Default thresholds (measured, see docs/coll.md). */
void doorbell_coll_tuning_default(doorbell_coll_tuning_t *tuning_p);

/* Is this op defined on this type by the MPI standard (and implemented)? */
int doorbell_coll_supported(doorbell_coll_dtype_t dtype, doorbell_coll_op_t op);

/* Bytes per element of dtype (the MPI extent of the predefined type). */
size_t doorbell_coll_dtype_size(doorbell_coll_dtype_t dtype);

/* Flag slots per half a team of `size` ranks needs for any algorithm. */
uint32_t doorbell_coll_flags_needed(int size);

/*
 * The target's side of a put_signal that arrived as one message (a transport
 * that carries the bytes and the flag together, e.g. an active message, so
 * the flag needs no fence and no packet of its own). Remote input: checks
 * that len bytes at offset lie in this rank's scratch halves and slot among
 * its flags; then copies the bytes and raises flag[slot] to value with
 * release order. Returns 0, or -1 with nothing written.
 */
int doorbell_coll_deliver_put_signal(doorbell_coll_team_t *team, const void *src, size_t len,
                                     uint64_t offset, uint32_t slot, uint64_t value);

/* Sets team->layout from team->size and team->node_of, in O(size log size)
 * time: call it once node_of is final, so that doorbell_coll_select() does
 * not look at every pair of ranks on every call. */
void doorbell_coll_team_layout(doorbell_coll_team_t *team);

/* The algorithm `auto` (or a forced one) resolves to. DOORBELL_COLL_ALG_PREVIOUS
 * means: the caller runs its own allreduce instead (every rank decides the
 * same, from sizes and the team's layout that every rank shares). */
doorbell_coll_algorithm_t doorbell_coll_select(const doorbell_coll_team_t   *team,
                                               const doorbell_coll_tuning_t *tuning,
                                               doorbell_coll_algorithm_t requested, size_t bytes);

const char *doorbell_coll_algorithm_name(doorbell_coll_algorithm_t alg);
const char *doorbell_coll_op_name(doorbell_coll_op_t op);
const char *doorbell_coll_dtype_name(doorbell_coll_dtype_t dtype);

/*
 * recvbuf = reduction over all ranks of sendbuf (sendbuf == NULL: in place,
 * the input is in recvbuf). Collective over the team; every rank passes the
 * same count, dtype, op and algorithm. On failure returns a negative status
 * and writes a message naming the peer and cause into err (errlen bytes);
 * the team must not be used for another allreduce afterwards.
 */
int doorbell_coll_allreduce(doorbell_coll_team_t *team, const doorbell_coll_tuning_t *tuning,
                            doorbell_coll_algorithm_t algorithm, const void *sendbuf, void *recvbuf,
                            size_t count, doorbell_coll_dtype_t dtype, doorbell_coll_op_t op,
                            char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
