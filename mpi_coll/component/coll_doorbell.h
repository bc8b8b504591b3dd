/*
 * Open MPI coll component "doorbell": MPI_Allreduce on one-sided UCP puts
 * with flags (own UCP context, TLS from coll_doorbell_tls, "doorbell" by
 * default). The schedules live in the C++ library doorbell_coll_algorithms
 * (doorbell_coll.h); this layer maps MPI handles, owns the UCP objects and
 * falls back to the previous module for anything it does not handle.
 */
#ifndef MCA_COLL_DOORBELL_H
#define MCA_COLL_DOORBELL_H

#include "ompi_config.h"

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"
#include "opal/class/opal_object.h"

#include "doorbell_coll.h"
#include "mapped_wait.h"
#include "progress_backoff.h"

#include <ucp/api/ucp.h>

BEGIN_C_DECLS

/* UCP objects shared by all communicators of the process. */
typedef struct mca_coll_doorbell_ucp {
    int            initialized; /* 1 after the first team */
    int            init_failed; /* 1: never try again */
    ucp_context_h  context;
    ucp_worker_h   worker;
    ucp_address_t *address;
    size_t         address_len;
    /* Endpoints by peer process, reused by every communicator. */
    struct mca_coll_doorbell_ep {
        struct ompi_proc_t *proc;
        ucp_ep_h            ep;
    } * eps;
    int num_eps;
    int max_eps;
    int ucp_teams; /* teams with a peer reached by UCP puts */
    /* How often the progress hook polls the worker (coll_doorbell_ucp.c). */
    doorbell_coll_backoff_t hook;
    /* Teams by region, for put_signals arriving as active messages. */
    struct mca_coll_doorbell_team **teams;
    int                             num_teams;
    int                             max_teams;
} mca_coll_doorbell_ucp_t;

typedef struct mca_coll_doorbell_component_t {
    mca_coll_base_component_2_0_0_t super;

    int   priority;      /* coll_doorbell_priority */
    int   verbose;       /* coll_doorbell_verbose */
    int   enable;        /* coll_doorbell_enable */
    int   np;            /* coll_doorbell_np: smallest communicator */
    char *algorithm_str; /* coll_doorbell_allreduce_algorithm */
    doorbell_coll_algorithm_t algorithm;
    size_t small_max;        /* bytes; direct / recursive doubling up to here */
    size_t net_small_max;    /* bytes; over the network: recursive doubling */
    int    direct_max_ranks; /* direct exchange up to this many ranks */
    size_t hier_max;         /* bytes; hierarchical up to here */
    size_t hier_slice_min;   /* bytes; hierarchical with a slice per rank */
    size_t hier_slice_max;   /* bytes; from here one leader per node again */
    size_t ring_min;         /* bytes; ring from here (one node) */
    size_t net_ring_min;     /* bytes; the same over the network */
    size_t pipeline_block;   /* bytes per ring sub-block */
    size_t previous_max;     /* bytes; one node: the module below up to here */
    size_t net_previous_max; /* bytes; several nodes: the module below */
    size_t net_leaf_hier_min;      /* bytes; a node per rank, several under a */
    size_t net_leaf_hier_max;      /* leaf: hierarchical between these sizes */
    size_t scratch_size;           /* bytes per scratch half per communicator */
    size_t am_max;                 /* bytes; put_signals up to here travel as
                                      one active message (0: always puts) */
    char  *tls;                    /* UCX transports of our UCP context */
    int    timeout_ms;             /* a peer silent this long is an error */
    int    mapped_wait_ucp_every;  /* a wait for a mapped peer runs the UCP
                                      worker every this many passes */
    char  *leaves;                 /* "host:leaf,..." map, or "" */
    char  *topology_file;          /* host -> leaf map file, or "" */
    int    emulate_ranks_per_node; /* testing: k consecutive ranks = a node */
    int    output;                 /* opal_output stream */
    int    config_error;           /* a parameter was out of its range */

    mca_coll_doorbell_ucp_t ucp;
} mca_coll_doorbell_component_t;

OMPI_MODULE_DECLSPEC extern mca_coll_doorbell_component_t
    mca_coll_doorbell_component;

#define DOORBELL_AM_ID      0x44 /* put_signal as an active message */
#define DOORBELL_AM_BLOCK   64   /* headers per allocation */
#define DOORBELL_BELL_BYTES 64   /* after the flags: ring, sleeping */

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

/* Per-communicator state, created on the first allreduce. */
typedef struct mca_coll_doorbell_team {
    doorbell_coll_team_t super; /* what the schedules see */
    ucp_mem_h            memh;
    void                *region; /* scratch halves, then flags */
    size_t               region_len;
    size_t               bell_off; /* region offset of the bell words */
    ucp_ep_h            *eps;      /* by communicator rank */
    ucp_rkey_h          *rkeys;
    void               **rptr;         /* peer region mapped here, or NULL */
    unsigned char      **peer_scratch; /* every rank's region when all
                                            ranks map all peers, or NULL */
    unsigned char      **node_scratch; /* the regions of this rank's node
                                            (others NULL) when all ranks map
                                            their node's peers, or NULL */
    int                  own_region;   /* region from posix_memalign */
    int                  ucp_peers;    /* peers reached by UCP puts */
    int                  counted;      /* counted in ucp.ucp_teams */
    uint64_t            *remote_base;
    int                 *node_of;
    int                 *leaf_of;
    uint64_t             signal_value; /* source of flag puts (this round) */
    struct mca_coll_doorbell_am_block *am_blocks; /* headers of AM put_signals
                                                     in flight, reused after quiet */
    unsigned am_used;        /* headers taken since the last quiet */
    int      outstanding;    /* puts not yet complete locally */
    int      failed;         /* a put completed with an error */
    uint64_t wait_since_ns;  /* first idle poll of this wait */
    unsigned idle_passes;    /* empty progress passes (opal_progress) */
    uint64_t sleeps;         /* futex waits on the bell */
    uint64_t sleeps_bounded; /* ... that ended by the bound */
    /* which passes of a wait for a mapped peer run the UCP worker */
    doorbell_coll_mapped_wait_t mapped_wait;
} mca_coll_doorbell_team_t;

typedef struct mca_coll_doorbell_module_t {
    mca_coll_base_module_t super;

    ompi_communicator_t      *comm;
    int                       failed;   /* a previous allreduce failed */
    int                       delegate; /* setup failed on some rank: all
                                           allreduces go to the previous module */
    mca_coll_doorbell_team_t *team;     /* NULL until the first allreduce */
    doorbell_coll_tuning_t    tuning;

    mca_coll_base_module_allreduce_fn_t previous_allreduce;
    mca_coll_base_module_t             *previous_allreduce_module;
    mca_coll_base_module_allgather_fn_t previous_allgather;
    mca_coll_base_module_t             *previous_allgather_module;
} mca_coll_doorbell_module_t;

OBJ_CLASS_DECLARATION(mca_coll_doorbell_module_t);

/* coll_doorbell_module.c */
int mca_coll_doorbell_init_query(bool enable_progress_threads,
                                 bool enable_mpi_threads);
mca_coll_base_module_t *mca_coll_doorbell_comm_query(
    struct ompi_communicator_t *comm, int *priority);

/* coll_doorbell_ucp.c: the process's UCP context, endpoints, and the teams
 * the active-message handler looks put_signals up in */
int          mca_coll_doorbell_ucp_init(void);
void         mca_coll_doorbell_ucp_finalize(void);
void         mca_coll_doorbell_ucp_busy(void);
ucs_status_t mca_coll_doorbell_ucp_get_ep(struct ompi_proc_t *proc,
                                          const void *address, ucp_ep_h *ep_p);

/* Parameters (coll_doorbell_params.c): registered with their ranges, then
 * checked; OMPI_ERR_BAD_PARAM after naming each one out of its range. */
void mca_coll_doorbell_params_register(void);
int  mca_coll_doorbell_params_check(void);
int  mca_coll_doorbell_ucp_register_team(mca_coll_doorbell_team_t *team);
void mca_coll_doorbell_ucp_unregister_team(mca_coll_doorbell_team_t *team);

/* coll_doorbell_transport.c: what the schedules call */
extern const doorbell_coll_transport_ops_t mca_coll_doorbell_ops;

/* coll_doorbell_team.c */
int  mca_coll_doorbell_team_create(mca_coll_doorbell_module_t *module,
                                   mca_coll_doorbell_team_t  **team_p);
void mca_coll_doorbell_team_destroy(mca_coll_doorbell_team_t *team);

/* coll_doorbell_topology.c */
int mca_coll_doorbell_topology(mca_coll_doorbell_module_t *module,
                               const char *hostnames, size_t stride,
                               int *node_of, int *leaf_of, int *have_leaves_p);

/* coll_doorbell_dtypes.c */
int mca_coll_doorbell_dtype(struct ompi_datatype_t *dtype,
                            doorbell_coll_dtype_t  *dt_p);
int mca_coll_doorbell_op(struct ompi_op_t *op, doorbell_coll_op_t *op_p);
int mca_coll_doorbell_is_device_buffer(const void *buf);

/* coll_doorbell_allreduce.c */
int mca_coll_doorbell_allreduce(const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t     *dtype,
                                struct ompi_op_t           *op,
                                struct ompi_communicator_t *comm,
                                mca_coll_base_module_t     *module);

END_C_DECLS

#endif
