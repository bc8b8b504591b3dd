/*
 * The component instance, its MCA parameters, open and close.
 */
#include "coll_doorbell.h"
#include "coll_doorbell_debug.h"

#include "ompi/constants.h"

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
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* thresholds: from doorbell_coll_tuning_default() */
    1048576,    /* doorbell_scratch_size: two halves stay in cache */
    2048,       /* doorbell_am_max */
    NULL,       /* doorbell_tls */
    30000,      /* doorbell_timeout (ms) */
    NULL,       /* doorbell_leaves */
    NULL,       /* doorbell_topology_file */
    0,          /* doorbell_emulate_ranks_per_node */
    -1,         /* output */
    0,          /* config_error */
    {0},        /* ucp: set up on first use */
};
/* clang-format on */

static int mca_coll_doorbell_register(void)
{
    mca_coll_doorbell_params_register(); /* coll_doorbell_params.c */
    return OMPI_SUCCESS;
}

static int mca_coll_doorbell_open(void)
{
    mca_coll_doorbell_component_t *cm = &mca_coll_doorbell_component;

    cm->output = opal_output_open(NULL);
    /* a value out of its range was named; MPI_Init fails (comm_query) */
    cm->config_error = mca_coll_doorbell_params_check() != OMPI_SUCCESS;
    opal_output_set_verbosity(cm->output, cm->verbose);
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
