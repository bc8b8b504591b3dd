/*
 * Open MPI btl component "doorbell": pml ob1 (with its datatype engine) and
 * the one-sided components reach peers on other hosts over the doorbell
 * transport core, beside vader inside a host and self.
 *
 * One module per selected device (a netdev on the UDP software NIC, a verbs
 * port), all sharing one protection domain. A btl tag is the doorbell active
 * message id: a fragment travels as one active message with no header of the
 * btl's own, packed straight into the send slot (am_bcopy) and handed to the
 * receiver's callback in place. put/get are zero-copy RDMA on the core's
 * memory regions, atomics the core's (on devices that execute them on
 * host-order words), so osc rdma runs one-sided MPI over it. What the queue pair cannot take now waits, in order, on the
 * endpoint and is posted from progress: nothing is dropped and no operation
 * depends on ob1 retrying it.
 *
 * Units: sizes in bytes, times in microseconds unless a name says otherwise.
 */
#ifndef MCA_BTL_DOORBELL_H
#define MCA_BTL_DOORBELL_H

#include "opal_config.h"

#include "opal/class/opal_free_list.h"
#include "opal/class/opal_list.h"
#include "opal/mca/btl/base/base.h"
#include "opal/mca/btl/btl.h"
#include "opal/mca/rcache/rcache.h"
#include "opal/threads/mutex.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "core/doorbell_core.h"

#include <pthread.h>

BEGIN_C_DECLS

/* Header bytes a user fragment carries before the user's data (ob1's
 * largest header fits). */
#define MCA_BTL_DOORBELL_USER_HDR_MAX  128
#define MCA_BTL_DOORBELL_MAX_MODULES   16
#define MCA_BTL_DOORBELL_ADDR_MAX      32 /* bytes of a device or iface address */
#define MCA_BTL_DOORBELL_MODEX_MAGIC   0x4442544cu /* "LTBD" */
#define MCA_BTL_DOORBELL_MODEX_VERSION 1

#define MCA_BTL_DOORBELL_CONTAINER(_ptr, _type, _member) \
    ((_type *)((char *)(_ptr)-offsetof(_type, _member)))

/* What a process publishes for each of its modules (the modex): fixed-size
 * entries after a header, so a peer's blob is checked by its length alone. */
typedef struct mca_btl_doorbell_modex_entry {
    uint8_t kind;            /* doorbell_device_kind_t */
    uint8_t device_addr_len; /* bytes of device_addr used */
    uint8_t iface_addr_len;  /* bytes of iface_addr used */
    uint8_t reserved;
    uint8_t device_addr[MCA_BTL_DOORBELL_ADDR_MAX];
    uint8_t iface_addr[MCA_BTL_DOORBELL_ADDR_MAX];
} mca_btl_doorbell_modex_entry_t;

typedef struct mca_btl_doorbell_modex {
    uint32_t                       magic;
    uint16_t                       version;
    uint16_t                       count;
    mca_btl_doorbell_modex_entry_t entries[];
} mca_btl_doorbell_modex_t;

/* Completion of a cookie the core hands back (put, get, flush). */
typedef struct mca_btl_doorbell_comp {
    void (*func)(struct mca_btl_doorbell_comp *comp, doorbell_status_t status);
} mca_btl_doorbell_comp_t;

/* Operation counters of a module (the core's device counters come with). */
typedef struct mca_btl_doorbell_stats {
    uint64_t sends;      /* fragments sent through btl_send */
    uint64_t sendis;     /* messages sent through btl_sendi */
    uint64_t send_bytes; /* bytes of both */
    uint64_t queued;     /* sends and RDMA operations that waited */
    uint64_t recvs;      /* fragments delivered to a callback */
    uint64_t recv_bytes;
    uint64_t puts;
    uint64_t put_bytes;
    uint64_t gets;
    uint64_t get_bytes;
    uint64_t atomics; /* atomic operations (fetching or not) */
    uint64_t dropped; /* fragments with a tag nobody registered */
    /* the background thread (btl_doorbell_progress.c) */
    uint64_t background; /* passes it made for an application away */
    uint64_t wakeups;    /* times the device's event fd woke it */
} mca_btl_doorbell_stats_t;

struct mca_btl_doorbell_module_t {
    mca_btl_base_module_t super;

    doorbell_iface_t       *iface;
    doorbell_device_info_t  device;
    doorbell_iface_limits_t limits;
    int                     loopback;    /* the device reaches this host only */
    opal_list_t             endpoints;   /* every endpoint of the module */
    opal_list_t             pending_eps; /* endpoints with queued work */
    opal_free_list_t        eager_frags; /* buffers of btl_eager_limit */
    opal_free_list_t        max_frags;   /* buffers of btl_max_send_size */
    opal_free_list_t        user_frags;  /* header room, data in place */
    opal_free_list_t        rdma_ops;    /* put/get/atomic contexts */
    /* The core's calls on one iface are serialized by this lock, taken when
     * a second thread may call: the background progress thread, or
     * MPI_THREAD_MULTIPLE. Callbacks into the upper layer never run on the
     * background thread, nor under the lock with MPI_THREAD_MULTIPLE: they
     * wait in `deferred` for the next foreground progress. */
    opal_recursive_mutex_t lock;
    int                    locking;       /* take the lock */
    int                    defer_always;  /* MPI_THREAD_MULTIPLE */
    volatile int           in_background; /* the background thread progresses */
    volatile uint64_t      progress_calls; /* foreground progress calls */
    uint64_t               progress_seen;  /* ... the background thread saw */
    opal_list_t            deferred;       /* callbacks waiting */
    opal_free_list_t       deferred_items;
    mca_btl_base_module_error_cb_fn_t error_cb;
    mca_btl_doorbell_stats_t          stats;
};
typedef struct mca_btl_doorbell_module_t mca_btl_doorbell_module_t;

typedef struct mca_btl_doorbell_component_t {
    mca_btl_base_component_3_0_0_t super;

    int                        num_modules;
    mca_btl_doorbell_module_t *modules[MCA_BTL_DOORBELL_MAX_MODULES];
    doorbell_pd_t             *pd; /* regions of every module */
    int                        progress_registered; /* with opal_progress */
    int                        output;              /* opal_output stream */
    int                        mpi_threads;         /* MPI_THREAD_MULTIPLE */
    pthread_t                  async_thread;        /* background progress */
    int                        async_running;
    volatile int               async_stop;

    /* MCA parameters (btl_doorbell_<name>) */
    int          verbose;
    char        *if_include;
    char        *if_exclude;
    int          local;
    int          stats;
    unsigned int seg_size;
    unsigned int mtu;
    unsigned int tx_queue_len;
    unsigned int rx_queue_len;
    unsigned int am_credits;
    unsigned int rto_min;
    unsigned int rto_max;
    unsigned int retry_count;
    char        *cc;
    unsigned int paths;
    unsigned int async_interval;
    unsigned int rcache_max;

    /* the registration cache (btl_doorbell_rcache.c); NULL: none */
    struct mca_rcache_base_module_t *rcache;
    int                              memory_opened;  /* the memory framework */
    unsigned int                     rcache_regions; /* registered through it */
    uint64_t rcache_lookups; /* registrations it served */
    uint64_t rcache_misses;  /* ... that registered */
    uint64_t rcache_full;    /* made outside it */
    uint64_t registrations;  /* made without it */
} mca_btl_doorbell_component_t;

OPAL_MODULE_DECLSPEC extern mca_btl_doorbell_component_t
                                 mca_btl_doorbell_component;
extern mca_btl_doorbell_module_t mca_btl_doorbell_module_template;

enum {
    MCA_BTL_DOORBELL_EP_OK     = 0,
    MCA_BTL_DOORBELL_EP_FAILED = 1 /* the QP failed: every operation fails */
};

struct mca_btl_base_endpoint_t {
    opal_list_item_t           super;        /* in module->endpoints */
    opal_list_item_t           pending_item; /* in module->pending_eps */
    mca_btl_doorbell_module_t *module;
    opal_proc_t               *proc;
    doorbell_qp_t             *qp; /* created on first use */
    int                        state;
    int                        in_pending;    /* pending_item is linked */
    opal_list_t                pending_sends; /* fragments, in order */
    opal_list_t                pending_rdma;  /* put/get operations */
    uint8_t                    device_addr[MCA_BTL_DOORBELL_ADDR_MAX];
    uint8_t                    iface_addr[MCA_BTL_DOORBELL_ADDR_MAX];
    char peer_name[64]; /* "<host> (<address>)" for messages */
};
typedef struct mca_btl_base_endpoint_t mca_btl_base_endpoint_t;
typedef struct mca_btl_base_endpoint_t mca_btl_doorbell_endpoint_t;
OBJ_CLASS_DECLARATION(mca_btl_doorbell_endpoint_t);

/* A send descriptor: segments[0] in the fragment's own buffer (the whole
 * message, or the upper layer's header before user data in segments[1]). */
typedef struct mca_btl_doorbell_frag_t {
    mca_btl_base_descriptor_t    base;
    mca_btl_base_segment_t       segments[2];
    mca_btl_doorbell_endpoint_t *endpoint;
    opal_free_list_t            *free_list;
    mca_btl_base_tag_t           tag;
    size_t                       size; /* bytes of the buffer */
    uint8_t                     *data; /* the buffer (after the fragment) */
} mca_btl_doorbell_frag_t;
OBJ_CLASS_DECLARATION(mca_btl_doorbell_frag_t);

enum {
    MCA_BTL_DOORBELL_OP_PUT,
    MCA_BTL_DOORBELL_OP_GET,
    MCA_BTL_DOORBELL_OP_ATOMIC
};

/* A put, get or atomic: the core's cookie while in flight, a queue entry
 * before. */
typedef struct mca_btl_doorbell_rdma_op_t {
    opal_free_list_item_t               super;
    mca_btl_doorbell_comp_t             comp;
    int                                 kind; /* MCA_BTL_DOORBELL_OP_* */
    mca_btl_doorbell_endpoint_t        *endpoint;
    void                               *local_address;
    uint64_t                            remote_address;
    uint32_t                            rkey;
    size_t                              size;
    mca_btl_base_registration_handle_t *local_handle;
    mca_btl_base_rdma_completion_fn_t   cbfunc;
    void                               *cbcontext;
    void                               *cbdata;
    /* atomics: size is the word's (4 or 8); a fetching one has a
     * local_address, where the old value's size bytes go */
    doorbell_atomic_op_t atomic_op;
    uint64_t             operand;
    uint64_t             compare;
    uint64_t             result; /* the core writes the old value here */
} mca_btl_doorbell_rdma_op_t;
OBJ_CLASS_DECLARATION(mca_btl_doorbell_rdma_op_t);

/* A callback the foreground owes the upper layer (see the module's lock). */
enum {
    MCA_BTL_DOORBELL_DEFER_AM,   /* a received message, its buffer held */
    MCA_BTL_DOORBELL_DEFER_COMP, /* a put/get/flush completion */
    MCA_BTL_DOORBELL_DEFER_SEND, /* a queued send that was posted */
    MCA_BTL_DOORBELL_DEFER_ERROR /* a queue pair failed */
};

typedef struct mca_btl_doorbell_deferred_t {
    opal_free_list_item_t    super;
    int                      kind;
    uint8_t                  am_id;
    void                    *data;
    size_t                   length;
    mca_btl_doorbell_comp_t *comp;
    mca_btl_doorbell_frag_t *frag;
    doorbell_qp_t           *qp;
    doorbell_status_t        status;
    int                      rc;
    char                     message[256];
} mca_btl_doorbell_deferred_t;
OBJ_CLASS_DECLARATION(mca_btl_doorbell_deferred_t);

#define BTL_DOORBELL_LOCK(_m)             \
    do {                                  \
        if ((_m)->locking) {              \
            opal_mutex_lock(&(_m)->lock); \
        }                                 \
    } while (0)
#define BTL_DOORBELL_UNLOCK(_m)             \
    do {                                    \
        if ((_m)->locking) {                \
            opal_mutex_unlock(&(_m)->lock); \
        }                                   \
    } while (0)

/* Whether a callback of the core must wait for the foreground. */
static inline int mca_btl_doorbell_defers(const mca_btl_doorbell_module_t *m)
{
    return m->in_background || m->defer_always;
}

/* What peers need to reach a region: its remote key. */
struct mca_btl_base_registration_handle_t {
    uint32_t rkey;
    uint32_t reserved;
};

typedef struct mca_btl_doorbell_reg_t {
    doorbell_mr_t                     *mr;
    mca_btl_base_registration_handle_t handle;
} mca_btl_doorbell_reg_t;

/* A registration of the cache (btl_doorbell_rcache.c): its handle's
 * reserved word says so (peers read only the key). */
#define MCA_BTL_DOORBELL_HANDLE_CACHED 1u
typedef struct mca_btl_doorbell_rcache_reg_t {
    mca_rcache_base_registration_t     super;
    doorbell_mr_t                     *mr;
    mca_btl_base_registration_handle_t handle;
} mca_btl_doorbell_rcache_reg_t;

/* Verbose output: 1 modules and devices, 5 reachability decisions, 10 each
 * queued operation. Errors are printed whatever the verbosity. */
#define BTL_DOORBELL_VERBOSE(_lvl, _fmt, ...)                    \
    opal_output_verbose(_lvl, mca_btl_doorbell_component.output, \
                        "btl:doorbell %s: " _fmt,                \
                        OPAL_NAME_PRINT(OPAL_PROC_MY_NAME), ##__VA_ARGS__)
#define BTL_DOORBELL_ERROR(_fmt, ...)               \
    opal_output(0, "btl:doorbell %s on %s: " _fmt,  \
                OPAL_NAME_PRINT(OPAL_PROC_MY_NAME), \
                opal_process_info.nodename, ##__VA_ARGS__)

/* btl_doorbell_component.c */
int  mca_btl_doorbell_component_progress(void);
void mca_btl_doorbell_register_progress(void);

/* btl_doorbell_progress.c */
int mca_btl_doorbell_module_progress(mca_btl_doorbell_module_t *module);
mca_btl_doorbell_deferred_t *mca_btl_doorbell_defer(
    mca_btl_doorbell_module_t *module, int kind);
void mca_btl_doorbell_async_start(void);
void mca_btl_doorbell_async_stop(void);

/* btl_doorbell_module.c */
int      mca_btl_doorbell_module_init(mca_btl_doorbell_module_t *module);
int      mca_btl_doorbell_status_to_opal(doorbell_status_t status);
unsigned mca_btl_doorbell_module_drain(mca_btl_doorbell_module_t *module);

/* btl_doorbell_endpoint.c */
mca_btl_doorbell_endpoint_t *mca_btl_doorbell_endpoint_create(
    mca_btl_doorbell_module_t *module, opal_proc_t *proc,
    const mca_btl_doorbell_modex_entry_t *entry);
int      mca_btl_doorbell_endpoint_qp(mca_btl_doorbell_endpoint_t *endpoint);
void     mca_btl_doorbell_endpoint_queue(mca_btl_doorbell_endpoint_t *endpoint);
unsigned mca_btl_doorbell_endpoint_drain(mca_btl_doorbell_endpoint_t *endpoint);
void     mca_btl_doorbell_endpoint_fail(mca_btl_doorbell_endpoint_t *endpoint,
                                        doorbell_status_t            status,
                                        const char                  *message);
void     mca_btl_doorbell_qp_error(void *arg, doorbell_qp_t *qp,
                                   doorbell_status_t status, const char *message);

/* btl_doorbell_frag.c */
int  mca_btl_doorbell_frag_lists_init(mca_btl_doorbell_module_t *module);
void mca_btl_doorbell_frag_lists_fini(mca_btl_doorbell_module_t *module);
mca_btl_doorbell_frag_t *mca_btl_doorbell_frag_alloc(
    mca_btl_doorbell_module_t *module, mca_btl_doorbell_endpoint_t *endpoint,
    size_t size);
void mca_btl_doorbell_frag_return(mca_btl_doorbell_frag_t *frag);
void mca_btl_doorbell_frag_complete(mca_btl_doorbell_frag_t *frag, int status);

/* btl_doorbell_send.c */
mca_btl_base_descriptor_t *mca_btl_doorbell_alloc(
    mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
    uint8_t order, size_t size, uint32_t flags);
int                        mca_btl_doorbell_free(mca_btl_base_module_t     *btl,
                                                 mca_btl_base_descriptor_t *des);
mca_btl_base_descriptor_t *mca_btl_doorbell_prepare_src(
    mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
    opal_convertor_t *convertor, uint8_t order, size_t reserve, size_t *size,
    uint32_t flags);
int               mca_btl_doorbell_send(mca_btl_base_module_t     *btl,
                                        mca_btl_base_endpoint_t   *endpoint,
                                        mca_btl_base_descriptor_t *des,
                                        mca_btl_base_tag_t         tag);
int               mca_btl_doorbell_sendi(mca_btl_base_module_t   *btl,
                                         mca_btl_base_endpoint_t *endpoint,
                                         opal_convertor_t *convertor, void *header,
                                         size_t header_size, size_t payload_size,
                                         uint8_t order, uint32_t flags,
                                         mca_btl_base_tag_t          tag,
                                         mca_btl_base_descriptor_t **descriptor);
int               mca_btl_doorbell_post_frag(mca_btl_doorbell_frag_t *frag);
doorbell_status_t mca_btl_doorbell_am_handler(void *arg, uint8_t am_id,
                                              void *data, size_t length);

/* btl_doorbell_rdma.c */
int  mca_btl_doorbell_put(mca_btl_base_module_t   *btl,
                          mca_btl_base_endpoint_t *endpoint, void *local_address,
                          uint64_t                            remote_address,
                          mca_btl_base_registration_handle_t *local_handle,
                          mca_btl_base_registration_handle_t *remote_handle,
                          size_t size, int flags, int order,
                          mca_btl_base_rdma_completion_fn_t cbfunc,
                          void *cbcontext, void *cbdata);
int  mca_btl_doorbell_get(mca_btl_base_module_t   *btl,
                          mca_btl_base_endpoint_t *endpoint, void *local_address,
                          uint64_t                            remote_address,
                          mca_btl_base_registration_handle_t *local_handle,
                          mca_btl_base_registration_handle_t *remote_handle,
                          size_t size, int flags, int order,
                          mca_btl_base_rdma_completion_fn_t cbfunc,
                          void *cbcontext, void *cbdata);
int  mca_btl_doorbell_post_rdma(mca_btl_doorbell_rdma_op_t *op);
int  mca_btl_doorbell_start_rdma(mca_btl_doorbell_rdma_op_t *op);
int  mca_btl_doorbell_flush(mca_btl_base_module_t   *btl,
                            mca_btl_base_endpoint_t *endpoint);
void mca_btl_doorbell_completion(void *arg, void *cookie,
                                 doorbell_status_t status);
mca_btl_base_registration_handle_t *mca_btl_doorbell_register_mem(
    mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint, void *base,
    size_t size, uint32_t flags);
int mca_btl_doorbell_deregister_mem(mca_btl_base_module_t              *btl,
                                    mca_btl_base_registration_handle_t *handle);

/* btl_doorbell_atomic.c */
/* the registration cache (btl_doorbell_rcache.c) */
void                                mca_btl_doorbell_rcache_init(void);
void                                mca_btl_doorbell_rcache_fini(void);
mca_btl_base_registration_handle_t *mca_btl_doorbell_rcache_register(
    void *base, size_t size, uint32_t flags);
int mca_btl_doorbell_rcache_deregister(
    mca_btl_base_registration_handle_t *handle);

void mca_btl_doorbell_atomic_flags(mca_btl_doorbell_module_t *module);
int  mca_btl_doorbell_aop(
     mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
     uint64_t remote_address, mca_btl_base_registration_handle_t *remote_handle,
     mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
     mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata);
int mca_btl_doorbell_afop(mca_btl_base_module_t   *btl,
                          mca_btl_base_endpoint_t *endpoint,
                          void *local_address, uint64_t remote_address,
                          mca_btl_base_registration_handle_t *local_handle,
                          mca_btl_base_registration_handle_t *remote_handle,
                          mca_btl_base_atomic_op_t op, uint64_t operand,
                          int flags, int order,
                          mca_btl_base_rdma_completion_fn_t cbfunc,
                          void *cbcontext, void *cbdata);
int mca_btl_doorbell_acswap(mca_btl_base_module_t   *btl,
                            mca_btl_base_endpoint_t *endpoint,
                            void *local_address, uint64_t remote_address,
                            mca_btl_base_registration_handle_t *local_handle,
                            mca_btl_base_registration_handle_t *remote_handle,
                            uint64_t compare, uint64_t value, int flags,
                            int order, mca_btl_base_rdma_completion_fn_t cbfunc,
                            void *cbcontext, void *cbdata);

END_C_DECLS

#endif
