/*
 * The component instance, its MCA parameters, open and close.
 */
#include "coll_doorbell.h"
#include "coll_doorbell_debug.h"

#include "ompi/constants.h"
#include "opal/mca/base/mca_base_var.h"

#include <string.h>

static int mca_coll_doorbell_register(void);
static int mca_coll_doorbell_open(void);
static int mca_coll_doorbell_close(void);

/* clang-format off */
mca_coll_doorbell_component_t mca_coll_doorbell_component = {
    {
        .collm_version = {
            MCA_COLL_BASE_VERSION_2_0_0,
            .mca_component_name            = "doorbell",
            MCA_BASE_MAKE_VERSION(component, OMPI_MAJOR_VERSION,
                                  OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION),
            .mca_open_component            = mca_coll_doorbell_open,
            .mca_close_component           = mca_coll_doorbell_close,
            .mca_register_component_params = mca_coll_doorbell_register,
        },
        .collm_data = {
            MCA_BASE_METADATA_PARAM_CHECKPOINT
        },
        .collm_init_query = mca_coll_doorbell_init_query,
        .collm_comm_query = mca_coll_doorbell_comm_query,
    },
    0,          /* doorbell_priority: used only when raised */
    0,          /* doorbell_verbose */
    1,          /* doorbell_enable */
    2,          /* doorbell_np */
    NULL,       /* doorbell_allreduce_algorithm */
    DOORBELL_COLL_ALG_AUTO,
    0, 0, 0, 0, 0, 0, 0, /* thresholds: from doorbell_coll_tuning_default() */
    1048576,    /* doorbell_scratch_size: two halves stay in cache */
    2048,       /* doorbell_am_max */
    NULL,       /* doorbell_tls */
    30000,      /* doorbell_timeout (ms) */
    NULL,       /* doorbell_leaves */
    NULL,       /* doorbell_topology_file */
    0,          /* doorbell_emulate_ranks_per_node */
    -1,         /* output */
    {0},        /* ucp: set up on first use */
};
/* clang-format on */

static const char *algorithm_names =
    "auto|recursive_doubling|ring|rabenseifner|hierarchical|direct|two_step";

static void reg_int(const char *name, const char *desc, int *storage)
{
    (void)mca_base_component_var_register(
        &mca_coll_doorbell_component.super.collm_version, name, desc,
        MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_9,
        MCA_BASE_VAR_SCOPE_READONLY, storage);
}

static void reg_size(const char *name, const char *desc, size_t *storage)
{
    (void)mca_base_component_var_register(
        &mca_coll_doorbell_component.super.collm_version, name, desc,
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, 0, OPAL_INFO_LVL_9,
        MCA_BASE_VAR_SCOPE_READONLY, storage);
}

static void reg_string(const char *name, const char *desc, char **storage)
{
    (void)mca_base_component_var_register(
        &mca_coll_doorbell_component.super.collm_version, name, desc,
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_9,
        MCA_BASE_VAR_SCOPE_READONLY, storage);
}

static int mca_coll_doorbell_register(void)
{
    mca_coll_doorbell_component_t *cm = &mca_coll_doorbell_component;
    doorbell_coll_tuning_t         defaults;

    doorbell_coll_tuning_default(&defaults);
    cm->small_max        = defaults.small_max;
    cm->net_small_max    = defaults.net_small_max;
    cm->direct_max_ranks = defaults.direct_max_ranks;
    cm->hier_max         = defaults.hier_max;
    cm->hier_slice_min   = defaults.hier_slice_min;
    cm->ring_min         = defaults.ring_min;
    cm->pipeline_block   = defaults.pipeline_block;
    cm->algorithm_str    = "auto";
    cm->tls              = "doorbell,sm,self";
    cm->leaves           = "";
    cm->topology_file    = "";

    reg_int("priority",
            "Priority of the doorbell coll component "
            "(it provides MPI_Allreduce when higher than the others)",
            &cm->priority);
    reg_int("verbose",
            "Verbosity: 1 lifecycle, 2 teams, 3 each call, "
            "5 reasons for falling back",
            &cm->verbose);
    reg_int("enable", "Enable the doorbell coll component (0 or 1)",
            &cm->enable);
    reg_int("np", "Smallest communicator the component serves", &cm->np);
    reg_string(
        "allreduce_algorithm",
        "Allreduce algorithm: "
        "auto|recursive_doubling|ring|rabenseifner|hierarchical|direct|two_step",
        &cm->algorithm_str);
    reg_size("small_max",
             "auto, peers read in place (one node): messages "
             "up to this many bytes use the direct exchange (up to "
             "direct_max_ranks ranks) or recursive doubling; larger ones "
             "two-step (up to direct_max_ranks ranks), Rabenseifner or the "
             "ring",
             &cm->small_max);
    reg_size("net_small_max",
             "auto, peers reached over the network: "
             "messages up to this many bytes use recursive doubling, larger "
             "ones Rabenseifner (2^k ranks, below ring_min) or the ring",
             &cm->net_small_max);
    reg_int("direct_max_ranks",
            "auto: largest communicator that uses the "
            "one-step direct exchange (small messages) and the two-step "
            "all-to-all reduce-scatter + allgather (larger ones)",
            &cm->direct_max_ranks);
    reg_size("hier_max",
             "auto: messages up to this many bytes use the "
             "hierarchical algorithm when ranks share nodes and span "
             "several (default: every size)",
             &cm->hier_max);
    reg_size("hier_slice_min",
             "Hierarchical algorithm: messages of at least this many bytes "
             "are cut into a slice per rank of the smallest node, each "
             "reduced and exchanged between nodes by its owner; smaller "
             "ones go through one leader per node",
             &cm->hier_slice_min);
    reg_size("ring_min",
             "auto: messages of at least this many bytes use "
             "the ring (Rabenseifner below, on 2^k ranks)",
             &cm->ring_min);
    reg_size("pipeline_block",
             "Ring and two-step sub-block size in bytes "
             "(0: no pipelining)",
             &cm->pipeline_block);
    reg_size("am_max",
             "Puts to a peer reached over the network of up to "
             "this many bytes travel with their flag as one active message "
             "(the target's handler writes them), larger ones as a put, a "
             "fence and a flag put; 0: always the latter",
             &cm->am_max);
    reg_size("scratch_size",
             "Pre-registered scratch bytes per half per "
             "communicator (two halves); larger messages go in rounds",
             &cm->scratch_size);
    reg_string("tls",
               "UCX transports of the component's UCP context "
               "(UCX_TLS syntax): shared memory (posix, sysv) for the "
               "ranks of this host, which then write each other's "
               "scratch through mappings, doorbell for the others",
               &cm->tls);
    reg_int("timeout",
            "Milliseconds a rank waits for a peer's data "
            "before the allreduce fails with MPI_ERR_OTHER (0: forever)",
            &cm->timeout_ms);
    reg_string("leaves",
               "Host names to leaf switches, \"hostA:leaf1,hostB:leaf1,"
               "hostC:leaf2\", for two-hop aggregation; every rank must "
               "see the same map. Takes precedence over topology_file",
               &cm->leaves);
    reg_string("topology_file",
               "File mapping host names to leaf switches, one \"<host> "
               "<leaf>\" per line (# comments), when coll_doorbell_leaves "
               "is empty",
               &cm->topology_file);
    reg_int("emulate_ranks_per_node",
            "Testing: treat every k consecutive "
            "ranks as one node (0: nodes from host names)",
            &cm->emulate_ranks_per_node);
    return OMPI_SUCCESS;
}

static int mca_coll_doorbell_open(void)
{
    mca_coll_doorbell_component_t *cm = &mca_coll_doorbell_component;
    int                            i;

    cm->output = opal_output_open(NULL);
    opal_output_set_verbosity(cm->output, cm->verbose);
    cm->algorithm = DOORBELL_COLL_ALG_COUNT;
    for (i = 0; i < DOORBELL_COLL_ALG_COUNT; i++) {
        if (strcmp(cm->algorithm_str, doorbell_coll_algorithm_name(
                                          (doorbell_coll_algorithm_t)i)) == 0) {
            cm->algorithm = (doorbell_coll_algorithm_t)i;
        }
    }
    if (cm->algorithm == DOORBELL_COLL_ALG_COUNT) {
        DOORBELL_ERROR("coll_doorbell_allreduce_algorithm \"%s\" is not one "
                       "of %s; using auto",
                       cm->algorithm_str, algorithm_names);
        cm->algorithm = DOORBELL_COLL_ALG_AUTO;
    }
    if (cm->scratch_size < 4096) {
        cm->scratch_size = 4096;
    }
    cm->scratch_size = (cm->scratch_size + 63) & ~(size_t)63;
    memset(&cm->ucp, 0, sizeof(cm->ucp));
    return OMPI_SUCCESS;
}

static int mca_coll_doorbell_close(void)
{
    mca_coll_doorbell_ucp_finalize();
    opal_output_close(mca_coll_doorbell_component.output);
    return OMPI_SUCCESS;
}
