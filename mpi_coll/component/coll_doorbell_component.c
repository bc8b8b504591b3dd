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
    .super = {
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
    /* Named fields: a new member cannot shift the values of the others.
     * The size thresholds stay 0 here; doorbell_coll_tuning_default() sets
     * them when the parameters are registered. */
    .priority               = 0, /* used only when raised */
    .verbose                = 0,
    .enable                 = 1,
    .np                     = 2,
    .algorithm_str          = NULL,
    .algorithm              = DOORBELL_COLL_ALG_AUTO,
    .scratch_size           = 1048576, /* two halves stay in cache */
    .am_max                 = 8192,
    .tls                    = NULL,
    .timeout_ms             = 30000,
    .mapped_wait_ucp_every  = 8,
    .leaves                 = NULL,
    .topology_file          = NULL,
    .emulate_ranks_per_node = 0,
    .output                 = -1,
    .config_error           = 0,
    /* .ucp: zero, set up on first use */
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
