/*
 * The component: MCA parameters and their ranges, open/close, init (one
 * module per selected device, addresses published through the modex) and
 * progress.
 */
#include "btl_doorbell.h"

#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/pmix/pmix.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/argv.h"
#include "opal/util/show_help.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int                     mca_btl_doorbell_component_register(void);
static int                     mca_btl_doorbell_component_open(void);
static int                     mca_btl_doorbell_component_close(void);
static mca_btl_base_module_t **mca_btl_doorbell_component_init(
    int *num_btls, bool enable_progress_threads, bool enable_mpi_threads);

/* clang-format off */
mca_btl_doorbell_component_t mca_btl_doorbell_component = {
    .super = {
        .btl_version = {
            MCA_BTL_DEFAULT_VERSION("doorbell"),
            .mca_open_component            = mca_btl_doorbell_component_open,
            .mca_close_component           = mca_btl_doorbell_component_close,
            .mca_register_component_params = mca_btl_doorbell_component_register,
        },
        .btl_data = {
            MCA_BASE_METADATA_PARAM_CHECKPOINT
        },
        .btl_init     = mca_btl_doorbell_component_init,
        /* registered with opal_progress once a peer uses the btl: a job
         * whose peers are all on this host never polls a socket for it */
        .btl_progress = NULL,
    },
    .output = -1,
};
/* clang-format on */

static const char *mca_btl_doorbell_cc_names[] = {"auto",   "ibrc", "dcqcn",
                                                  "timely", "none", NULL};

/* The numeric parameters are registered as text and read whole
 * (mca_btl_doorbell_parse_numbers): Open MPI's own integer parsing reads
 * "abc" as 0, which would mean the device's MTU, no background progress or
 * "off" without a word. */
typedef struct {
    const char   *name;
    char         *text;    /* the registered string */
    char          def[24]; /* the default, as text */
    int          *as_int;  /* where the value goes: one of these two */
    unsigned int *as_uint;
} mca_btl_doorbell_number_t;

static mca_btl_doorbell_number_t mca_btl_doorbell_numbers[16];
static int                       mca_btl_doorbell_num_numbers;

static void reg_number(const char *name, const char *desc, int level,
                       int *as_int, unsigned int *as_uint)
{
    mca_btl_doorbell_number_t *n;

    if (mca_btl_doorbell_num_numbers ==
        (int)(sizeof(mca_btl_doorbell_numbers) /
              sizeof(mca_btl_doorbell_numbers[0]))) {
        return; /* (a programming error, caught by the tests) */
    }
    n          = &mca_btl_doorbell_numbers[mca_btl_doorbell_num_numbers++];
    n->name    = name;
    n->as_int  = as_int;
    n->as_uint = as_uint;
    snprintf(n->def, sizeof(n->def), "%u",
             as_int != NULL ? (unsigned)*as_int : *as_uint);
    n->text = n->def;
    (void)mca_base_component_var_register(
        &mca_btl_doorbell_component.super.btl_version, name, desc,
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, level,
        MCA_BASE_VAR_SCOPE_READONLY, &n->text);
}

static void reg_int(const char *name, const char *desc, int *storage)
{
    reg_number(name, desc, OPAL_INFO_LVL_5, storage, NULL);
}

static void reg_uint(const char *name, const char *desc, unsigned int *storage)
{
    reg_number(name, desc, OPAL_INFO_LVL_5, NULL, storage);
}

/* Each numeric parameter's text as a decimal integer, whole; one that is
 * not is named and the btl is disabled. The ranges are checked after. */
static int mca_btl_doorbell_parse_numbers(void)
{
    int bad = 0;

    for (int i = 0; i < mca_btl_doorbell_num_numbers; i++) {
        mca_btl_doorbell_number_t *n    = &mca_btl_doorbell_numbers[i];
        const char                *text = n->text != NULL ? n->text : "";
        unsigned long              max = n->as_int != NULL ? INT_MAX : UINT_MAX;
        unsigned long              value;
        char                      *end;

        errno = 0;
        value = strtoul(text, &end, 10);
        if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno != 0 ||
            value > max) {
            BTL_DOORBELL_ERROR("btl_doorbell_%s = \"%s\" is not a decimal "
                               "integer in [0, %lu]; the doorbell btl is "
                               "disabled",
                               n->name, text, max);
            bad = -1;
        } else if (n->as_int != NULL) {
            *n->as_int = (int)value;
        } else {
            *n->as_uint = (unsigned int)value;
        }
    }
    return bad;
}

static void reg_string(const char *name, const char *desc, char **storage)
{
    (void)mca_base_component_var_register(
        &mca_btl_doorbell_component.super.btl_version, name, desc,
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_1,
        MCA_BASE_VAR_SCOPE_READONLY, storage);
}

static int mca_btl_doorbell_component_register(void)
{
    mca_btl_doorbell_component_t *cm  = &mca_btl_doorbell_component;
    mca_btl_base_module_t        *btl = &mca_btl_doorbell_module_template.super;

    mca_btl_doorbell_num_numbers = 0;
    cm->verbose                  = 0;
    cm->if_include               = "";
    cm->if_exclude               = "";
    cm->local                    = 0;
    cm->stats                    = 0;
    cm->seg_size                 = 40960;
    cm->mtu                      = 0;
    cm->tx_queue_len             = 256;
    cm->rx_queue_len             = 256;
    cm->am_credits               = 64;
    cm->rto_min                  = 50000;
    cm->rto_max                  = 1000000;
    cm->retry_count              = 35;
    cm->cc                       = "auto";
    cm->paths                    = 0;
    cm->async_interval           = 10000;
    cm->rcache_max               = 256;

    reg_int("verbose",
            "Verbosity 0-100: 1 modules and devices, 5 reachability of "
            "each peer, 10 every operation that waits for resources",
            &cm->verbose);
    reg_string("if_include",
               "Comma-separated devices to use (netdev names such as eth0, "
               "or verbs ports such as mlx5_0:1); default: every device but "
               "loopback (loopback too when btl_doorbell_local is 1). "
               "Mutually exclusive with btl_doorbell_if_exclude",
               &cm->if_include);
    reg_string("if_exclude",
               "Comma-separated devices not to use; mutually exclusive with "
               "btl_doorbell_if_include",
               &cm->if_exclude);
    reg_int("local",
            "0: open only in a job that spans hosts, where peers on this "
            "host and this process itself are reached for one-sided MPI "
            "only (sends to them go over vader and self); 1: open in a job "
            "on one host too and reach its peers over the loopback device "
            "(for tests on one host; without vader and self in the btl "
            "list, sends too)",
            &cm->local);
    reg_int("stats",
            "1: print the counters of each module at finalize, one line per "
            "device and process (operations, bytes, packets, retransmits), "
            "to prove which traffic went over doorbell",
            &cm->stats);
    reg_uint("seg_size",
             "Largest active message in bytes (1024-65472): the largest "
             "eager message and send fragment (btl_doorbell_eager_limit and "
             "max_send_size are at most this); each send slot holds one",
             &cm->seg_size);
    reg_uint("mtu",
             "Largest packet payload on the wire in bytes (0: the device's "
             "largest; else 576-64936, a 65000-byte datagram)",
             &cm->mtu);
    reg_uint("tx_queue_len",
             "Send slots of each queue pair, a power of two (16-65536); "
             "what does not fit waits on the endpoint",
             &cm->tx_queue_len);
    reg_uint("rx_queue_len", "Receive buffers of each device (16-65536)",
             &cm->rx_queue_len);
    reg_uint("am_credits",
             "Active messages a queue pair may have in flight before the "
             "peer returns credits (1-tx_queue_len); never dropped",
             &cm->am_credits);
    reg_uint("rto_min",
             "First retransmit timeout in microseconds (100-10000000); it "
             "doubles per retry up to btl_doorbell_rto_max",
             &cm->rto_min);
    reg_uint("rto_max",
             "Ceiling of the retransmit timeout in microseconds "
             "(btl_doorbell_rto_min-60000000)",
             &cm->rto_max);
    reg_uint("retry_count",
             "Retransmits of one packet without an answer before the peer "
             "is declared failed (1-1000); the defaults allow about 30 "
             "seconds of silence",
             &cm->retry_count);
    reg_string("cc",
               "Pacing policy of each queue pair: auto (ibrc, none on "
               "loopback), ibrc, dcqcn, timely or none",
               &cm->cc);
    reg_uint("paths",
             "Source ports (a socket each) of a UDP device, so that the "
             "fabric's ECMP hash offers a connection several paths: each "
             "connection sends from one and moves to another when its path "
             "is shared, or, where the fabric answers an expired TTL, sends "
             "on the spines in turn (0: automatic, 8, or 1 on loopback; "
             "else 1-16); as many spare ports again are bound after them "
             "(16 in all at most) for a connection whose ports all reach "
             "one spine",
             &cm->paths);
    reg_uint("async_interval",
             "Longest wait in microseconds of background progress "
             "(1000-1000000; 0: none): while the application does not "
             "progress a device, a thread acknowledges, retransmits and "
             "answers RDMA reads for it, as a NIC would, woken by the "
             "device's data and deadlines and at least this often; it never "
             "calls into MPI",
             &cm->async_interval);
    reg_uint("rcache_max",
             "Regions the registration cache keeps registered (0-65536; 0: "
             "no cache, every btl_register_mem registers and every "
             "deregistration drops it); Open MPI's grdma cache, invalidated "
             "by its memory hooks when memory goes back to the system",
             &cm->rcache_max);

    /* The btl's standard knobs. Eager up to 40 KiB: above it ob1 takes the
     * RDMA-read rendezvous, four one-way trips (RGET, read request, data,
     * FIN) instead of one; on lo, eager against rendezvous, median one-way:
     * 16 KiB 8.6 against 19.2 us, 32 KiB 13.1 against 21.1 us, 64 KiB 19.9
     * against 24.4 us. 40 KiB, not 32: a 32 KiB message plus ob1's header
     * stays eager on every MTU once the device rounds its active messages
     * down to whole packets (1500: 40320 B, 9000: 35760 B); a 256-slot send
     * ring spans 10 MiB of address space, touched as messages need it.
     * min_rdma_pipeline_size unbounded: ob1 would otherwise send contiguous
     * messages above eager_limit + rdma_pipeline_send_length through its
     * pipelined put protocol instead of one zero-copy read. */
    btl->btl_exclusivity               = MCA_BTL_EXCLUSIVITY_DEFAULT;
    btl->btl_eager_limit               = 40960;
    btl->btl_rndv_eager_limit          = 40960;
    btl->btl_max_send_size             = 40960;
    btl->btl_rdma_pipeline_send_length = 8192;
    btl->btl_rdma_pipeline_frag_size   = 1 << 20;
    btl->btl_min_rdma_pipeline_size    = SIZE_MAX;
    btl->btl_latency                   = 10;
    btl->btl_bandwidth                 = 0; /* from the device */
    /* atomics where the device has them (btl_doorbell_atomic.c): osc rdma
     * selects a btl with RDMA and fetching atomics for one-sided MPI */
    btl->btl_flags = MCA_BTL_FLAGS_SEND | MCA_BTL_FLAGS_RDMA |
                     MCA_BTL_FLAGS_RDMA_FLUSH | MCA_BTL_FLAGS_ATOMIC_OPS |
                     MCA_BTL_FLAGS_ATOMIC_FOPS;
    btl->btl_get_limit = 1 << 30;
    btl->btl_put_limit = 1 << 30;
    /* local buffers need no registration: the core reads and writes them by
     * address (the verbs device keys them itself) */
    btl->btl_get_local_registration_threshold = SIZE_MAX;
    btl->btl_put_local_registration_threshold = SIZE_MAX;
    return mca_btl_base_param_register(
        &mca_btl_doorbell_component.super.btl_version, btl);
}

/* A value outside its documented range is refused with the parameter, the
 * value and the range: the component then offers no module. */
static int check_range(const char *name, unsigned long value, unsigned long min,
                       unsigned long max)
{
    if (value >= min && value <= max) {
        return 0;
    }
    BTL_DOORBELL_ERROR("btl_doorbell_%s = %lu is out of range [%lu, %lu]; "
                       "the doorbell btl is disabled",
                       name, value, min, max);
    return -1;
}

static int mca_btl_doorbell_check_params(void)
{
    mca_btl_doorbell_component_t *cm  = &mca_btl_doorbell_component;
    mca_btl_base_module_t        *btl = &mca_btl_doorbell_module_template.super;
    uint32_t supported = MCA_BTL_FLAGS_SEND | MCA_BTL_FLAGS_RDMA |
                         MCA_BTL_FLAGS_RDMA_FLUSH | MCA_BTL_FLAGS_ATOMIC_OPS |
                         MCA_BTL_FLAGS_ATOMIC_FOPS;
    int bad = 0;
    int i;

    bad |= check_range("verbose", (unsigned)cm->verbose, 0, 100);
    bad |= check_range("local", (unsigned)cm->local, 0, 1);
    bad |= check_range("stats", (unsigned)cm->stats, 0, 1);
    bad |= check_range("seg_size", cm->seg_size, 1024, 65472);
    if (cm->mtu != 0) {
        bad |= check_range("mtu", cm->mtu, DOORBELL_MIN_MTU, DOORBELL_MAX_MTU);
    }
    bad |= check_range("tx_queue_len", cm->tx_queue_len, 16, 65536);
    if (cm->tx_queue_len & (cm->tx_queue_len - 1)) {
        BTL_DOORBELL_ERROR("btl_doorbell_tx_queue_len = %u is not a power of "
                           "two; the doorbell btl is disabled",
                           cm->tx_queue_len);
        bad = -1;
    }
    bad |= check_range("rx_queue_len", cm->rx_queue_len, 16, 65536);
    bad |= check_range("am_credits", cm->am_credits, 1, cm->tx_queue_len);
    bad |= check_range("rto_min", cm->rto_min, 100, 10000000);
    bad |= check_range("rto_max", cm->rto_max, cm->rto_min, 60000000);
    bad |= check_range("retry_count", cm->retry_count, 1, 1000);
    bad |= check_range("rcache_max", cm->rcache_max, 0, 65536);
    bad |= check_range("paths", cm->paths, 0, DOORBELL_MAX_PATHS);
    if (cm->async_interval != 0) {
        bad |= check_range("async_interval", cm->async_interval, 1000, 1000000);
    }
    for (i = 0; mca_btl_doorbell_cc_names[i] != NULL; i++) {
        if (strcmp(cm->cc, mca_btl_doorbell_cc_names[i]) == 0) {
            break;
        }
    }
    if (mca_btl_doorbell_cc_names[i] == NULL) {
        BTL_DOORBELL_ERROR("btl_doorbell_cc = \"%s\" is not one of auto, ibrc, "
                           "dcqcn, timely, none; the doorbell btl is disabled",
                           cm->cc);
        bad = -1;
    }
    /* ob1 subtracts its largest header (about 100 bytes) from the limits */
    bad |= check_range("eager_limit", btl->btl_eager_limit, 256, cm->seg_size);
    bad |= check_range("max_send_size", btl->btl_max_send_size, 256,
                       cm->seg_size);
    bad |= check_range("rndv_eager_limit", btl->btl_rndv_eager_limit, 0,
                       btl->btl_eager_limit);
    bad |= check_range("get_limit", btl->btl_get_limit, 1, 1ul << 30);
    bad |= check_range("put_limit", btl->btl_put_limit, 1, 1ul << 30);
    bad |= check_range("rdma_pipeline_frag_size",
                       btl->btl_rdma_pipeline_frag_size, 1, btl->btl_put_limit);
    if ((btl->btl_flags & ~supported) != 0 ||
        !(btl->btl_flags & MCA_BTL_FLAGS_SEND)) {
        BTL_DOORBELL_ERROR("btl_doorbell_flags = 0x%x: the btl offers send "
                           "(0x%x, required), put (0x%x), get (0x%x), flush "
                           "(0x%x), atomics (0x%x) and fetching atomics "
                           "(0x%x) only; the doorbell btl is disabled",
                           btl->btl_flags, MCA_BTL_FLAGS_SEND,
                           MCA_BTL_FLAGS_PUT, MCA_BTL_FLAGS_GET,
                           MCA_BTL_FLAGS_RDMA_FLUSH, MCA_BTL_FLAGS_ATOMIC_OPS,
                           MCA_BTL_FLAGS_ATOMIC_FOPS);
        bad = -1;
    }
    return bad ? OPAL_ERR_BAD_PARAM : OPAL_SUCCESS;
}

static int mca_btl_doorbell_component_open(void)
{
    mca_btl_doorbell_component_t *cm = &mca_btl_doorbell_component;

    cm->output = opal_output_open(NULL);
    if (mca_btl_doorbell_parse_numbers() != 0) {
        return OPAL_ERR_BAD_PARAM;
    }
    opal_output_set_verbosity(cm->output, cm->verbose);
    cm->num_modules         = 0;
    cm->pd                  = NULL;
    cm->progress_registered = 0;

    if (OPAL_SUCCESS !=
        mca_base_var_check_exclusive("opal", "btl", "doorbell", "if_include",
                                     "btl", "doorbell", "if_exclude")) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    return mca_btl_doorbell_check_params();
}

static int mca_btl_doorbell_component_close(void)
{
    mca_btl_doorbell_component_t *cm = &mca_btl_doorbell_component;

    mca_btl_doorbell_async_stop();
    if (cm->progress_registered) {
        opal_progress_unregister(mca_btl_doorbell_component_progress);
        cm->progress_registered = 0;
    }
    mca_btl_doorbell_rcache_fini();
    if (cm->pd != NULL) {
        doorbell_pd_destroy(cm->pd);
        cm->pd = NULL;
    }
    if (cm->output >= 0) {
        opal_output_close(cm->output);
        cm->output = -1;
    }
    return OPAL_SUCCESS;
}

static int in_list(char **list, const char *name)
{
    for (int i = 0; list != NULL && list[i] != NULL; i++) {
        if (strcmp(list[i], name) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Whether an open device reaches this host only (the UDP device on a
 * 127.0.0.0/8 address). */
static int mca_btl_doorbell_is_loopback(doorbell_iface_t             *iface,
                                        const doorbell_device_info_t *info)
{
    uint8_t addr[MCA_BTL_DOORBELL_ADDR_MAX];

    if (info->kind != DOORBELL_DEVICE_UDP ||
        doorbell_iface_device_address_length(iface) != 4) {
        return 0;
    }
    doorbell_iface_get_device_address(iface, addr);
    return addr[0] == 127;
}

static void mca_btl_doorbell_iface_params(doorbell_iface_params_t *params,
                                          const char              *device)
{
    mca_btl_doorbell_component_t *cm = &mca_btl_doorbell_component;

    doorbell_iface_params_init(params);
    params->device       = device;
    params->mtu          = cm->mtu;
    params->tx_queue_len = cm->tx_queue_len;
    params->rx_queue_len = cm->rx_queue_len;
    params->am_credits   = cm->am_credits;
    params->seg_size     = cm->seg_size;
    params->rto_min_ns   = (uint64_t)cm->rto_min * 1000;
    params->rto_max_ns   = (uint64_t)cm->rto_max * 1000;
    params->retry_count  = cm->retry_count;
    params->cc           = cm->cc;
    params->paths        = cm->paths;
}

/* Opens the device as a module, or leaves it (NULL) when it is excluded by
 * default (loopback without btl_doorbell_local) or fails to open. */
static mca_btl_doorbell_module_t *mca_btl_doorbell_open_device(
    const doorbell_device_info_t *info, int named)
{
    mca_btl_doorbell_component_t *cm = &mca_btl_doorbell_component;
    mca_btl_doorbell_module_t    *module;
    doorbell_iface_params_t       params;
    doorbell_iface_t             *iface;
    doorbell_status_t             status;

    mca_btl_doorbell_iface_params(&params, info->name);
    status = doorbell_iface_open(cm->pd, &params, &iface);
    if (status != DOORBELL_OK) {
        BTL_DOORBELL_ERROR("device %s: %s", info->name, doorbell_last_error());
        return NULL;
    }
    if (mca_btl_doorbell_is_loopback(iface, info) && !cm->local && !named) {
        BTL_DOORBELL_VERBOSE(1,
                             "device %s is loopback: not used without "
                             "btl_doorbell_local",
                             info->name);
        doorbell_iface_close(iface);
        return NULL;
    }

    module = malloc(sizeof(*module));
    if (module == NULL) {
        doorbell_iface_close(iface);
        return NULL;
    }
    *module              = mca_btl_doorbell_module_template;
    module->iface        = iface;
    module->device       = *info;
    module->loopback     = mca_btl_doorbell_is_loopback(iface, info);
    module->defer_always = cm->mpi_threads;
    module->locking      = cm->mpi_threads || cm->async_interval != 0;
    if (mca_btl_doorbell_module_init(module) != OPAL_SUCCESS) {
        doorbell_iface_close(iface);
        free(module);
        return NULL;
    }
    return module;
}

static int mca_btl_doorbell_modex_send(void)
{
    mca_btl_doorbell_component_t *cm = &mca_btl_doorbell_component;
    mca_btl_doorbell_modex_t     *modex;
    size_t                        size;
    int                           rc;

    size  = sizeof(*modex) + cm->num_modules * sizeof(modex->entries[0]);
    modex = calloc(1, size);
    if (modex == NULL) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    modex->magic   = MCA_BTL_DOORBELL_MODEX_MAGIC;
    modex->version = MCA_BTL_DOORBELL_MODEX_VERSION;
    modex->count   = (uint16_t)cm->num_modules;
    for (int i = 0; i < cm->num_modules; i++) {
        mca_btl_doorbell_modex_entry_t *e     = &modex->entries[i];
        doorbell_iface_t               *iface = cm->modules[i]->iface;

        e->kind            = (uint8_t)cm->modules[i]->device.kind;
        e->device_addr_len = (uint8_t)doorbell_iface_device_address_length(
            iface);
        e->iface_addr_len = (uint8_t)doorbell_iface_address_length(iface);
        doorbell_iface_get_device_address(iface, e->device_addr);
        doorbell_iface_get_address(iface, e->iface_addr);
    }
    OPAL_MODEX_SEND(rc, OPAL_PMIX_GLOBAL,
                    &mca_btl_doorbell_component.super.btl_version, modex, size);
    free(modex);
    return rc;
}

static void mca_btl_doorbell_close_modules(void)
{
    mca_btl_doorbell_component_t *cm = &mca_btl_doorbell_component;

    for (int i = 0; i < cm->num_modules; i++) {
        cm->modules[i]->super.btl_finalize(&cm->modules[i]->super);
    }
    cm->num_modules = 0;
}

/* Whether another process may reach this one over doorbell: one of the job
 * on another host, or one on this host when btl_doorbell_local is set. Peers
 * on other hosts are added to ob1 lazily, on first use, so a process must
 * poll its devices from the start: one that has not sent to a peer yet still
 * receives from it. A job on one host, even in an allocation of several
 * (the universe), pays nothing: its vader latency is a few tenths of a
 * microsecond, about what one empty poll of a socket costs. */
static int mca_btl_doorbell_peers_possible(void)
{
    uint32_t on_host = (uint32_t)opal_process_info.num_local_peers + 1;
    uint32_t job = 0, *u32 = &job;
    opal_process_name_t wildcard = OPAL_PROC_MY_NAME;
    int                 rc;

    if (mca_btl_doorbell_component.local && on_host > 1) {
        return 1;
    }
    /* job-level information is held under the job's wildcard rank */
    wildcard.vpid = OPAL_VPID_WILDCARD;
    OPAL_MODEX_RECV_VALUE(rc, OPAL_PMIX_JOB_SIZE, &wildcard, &u32, OPAL_UINT32);
    if (rc != OPAL_SUCCESS) {
        return 1; /* unknown: assume there are */
    }
    BTL_DOORBELL_VERBOSE(5, "%u of the job's %u processes on this host",
                         on_host, job);
    return job > on_host;
}

static mca_btl_base_module_t **mca_btl_doorbell_component_init(
    int *num_btls, bool enable_progress_threads, bool enable_mpi_threads)
{
    mca_btl_doorbell_component_t *cm      = &mca_btl_doorbell_component;
    doorbell_device_info_t       *devices = NULL;
    mca_btl_base_module_t       **btls;
    char **include = opal_argv_split(cm->if_include, ',');
    char **exclude = opal_argv_split(cm->if_exclude, ',');
    int    count, i;

    *num_btls       = 0;
    cm->mpi_threads = enable_mpi_threads;
    if (!mca_btl_doorbell_peers_possible()) {
        /* as vader without local peers: a job on one host opens no socket
         * and polls nothing for doorbell */
        BTL_DOORBELL_VERBOSE(1, "every process of the job is on this host: "
                                "the doorbell btl stays closed (peers on this "
                                "host use shared memory; btl_doorbell_local 1 "
                                "reaches them over doorbell)");
        goto out;
    }
    if (doorbell_pd_create(&cm->pd) != DOORBELL_OK) {
        BTL_DOORBELL_ERROR("protection domain: %s", doorbell_last_error());
        goto out;
    }
    mca_btl_doorbell_rcache_init();
    count = doorbell_query_devices(NULL, 0);
    if (count <= 0) {
        BTL_DOORBELL_VERBOSE(1, "no device");
        goto out;
    }
    devices = calloc(count, sizeof(*devices));
    if (devices == NULL) {
        goto out;
    }
    count = doorbell_query_devices(devices, count);
    for (i = 0; include != NULL && include[i] != NULL; i++) {
        int found = 0;
        for (int d = 0; d < count; d++) {
            found |= strcmp(devices[d].name, include[i]) == 0;
        }
        if (!found) {
            BTL_DOORBELL_ERROR("btl_doorbell_if_include names \"%s\", which "
                               "is not a device of this host (an interface "
                               "with an IPv4 address, or a verbs port)",
                               include[i]);
        }
    }
    for (i = 0; i < count && cm->num_modules < MCA_BTL_DOORBELL_MAX_MODULES;
         i++) {
        mca_btl_doorbell_module_t *module;
        int                        named = in_list(include, devices[i].name);

        if ((include != NULL && !named) || in_list(exclude, devices[i].name)) {
            continue;
        }
        module = mca_btl_doorbell_open_device(&devices[i], named);
        if (module != NULL) {
            BTL_DOORBELL_VERBOSE(
                1,
                "module on %s: eager_limit %zu, max_send_size %zu, "
                "bandwidth %u Mb/s%s",
                devices[i].name, module->super.btl_eager_limit,
                module->super.btl_max_send_size, module->super.btl_bandwidth,
                module->loopback ? ", loopback" : "");
            cm->modules[cm->num_modules++] = module;
        }
    }
    if (cm->num_modules == 0) {
        goto out;
    }
    if (mca_btl_doorbell_modex_send() != OPAL_SUCCESS) {
        BTL_DOORBELL_ERROR("publishing the addresses (modex) failed");
        mca_btl_doorbell_close_modules();
        goto out;
    }
    btls = malloc(cm->num_modules * sizeof(*btls));
    if (btls == NULL) {
        mca_btl_doorbell_close_modules();
        goto out;
    }
    for (i = 0; i < cm->num_modules; i++) {
        btls[i] = &cm->modules[i]->super;
    }
    *num_btls = cm->num_modules;
    /* peers may send before this process adds them (ob1 adds peers on
     * other hosts lazily): poll from now on */
    mca_btl_doorbell_register_progress();
    free(devices);
    opal_argv_free(include);
    opal_argv_free(exclude);
    return btls;

out:
    free(devices);
    opal_argv_free(include);
    opal_argv_free(exclude);
    mca_btl_doorbell_rcache_fini();
    if (cm->pd != NULL) {
        doorbell_pd_destroy(cm->pd);
        cm->pd = NULL;
    }
    return NULL;
}

void mca_btl_doorbell_register_progress(void)
{
    mca_btl_doorbell_component_t *cm = &mca_btl_doorbell_component;

    if (!cm->progress_registered) {
        cm->progress_registered = 1;
        opal_progress_register(mca_btl_doorbell_component_progress);
        BTL_DOORBELL_VERBOSE(1, "progress registered");
        mca_btl_doorbell_async_start();
    }
}

int mca_btl_doorbell_component_progress(void)
{
    mca_btl_doorbell_component_t *cm    = &mca_btl_doorbell_component;
    int                           count = 0;

    for (int i = 0; i < cm->num_modules; i++) {
        count += mca_btl_doorbell_module_progress(cm->modules[i]);
    }
    return count;
}
