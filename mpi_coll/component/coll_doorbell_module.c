/*
 * Module lifecycle: construct/destruct, init_query, comm_query and enable.
 * Resources (UCP endpoints, scratch, rkeys) are created on a communicator's
 * first allreduce, not here: comm_query runs inside communicator creation,
 * where a collective would recurse.
 */
#include "coll_doorbell.h"
#include "coll_doorbell_debug.h"

#include "ompi/constants.h"
#include "ompi/runtime/mpiruntime.h"
#include "opal/util/info.h"

#include <string.h>

/* Save the lower module's function and retain it (released in destruct). */
#define SAVE_PREV_COLL_API(__api)                              \
    do {                                                       \
        module->previous_##__api = comm->c_coll->coll_##__api; \
        module->previous_##__api##_module =                    \
            comm->c_coll->coll_##__api##_module;               \
        if (!comm->c_coll->coll_##__api ||                     \
            !comm->c_coll->coll_##__api##_module) {            \
            return OMPI_ERROR;                                 \
        }                                                      \
        OBJ_RETAIN(module->previous_##__api##_module);         \
    } while (0)

static void mca_coll_doorbell_module_construct(
    mca_coll_doorbell_module_t *module)
{
    module->comm                      = NULL;
    module->failed                    = 0;
    module->delegate                  = 0;
    module->team                      = NULL;
    module->previous_allreduce        = NULL;
    module->previous_allreduce_module = NULL;
    module->previous_allgather        = NULL;
    module->previous_allgather_module = NULL;
}

static void mca_coll_doorbell_module_destruct(mca_coll_doorbell_module_t *module)
{
    if (module->team != NULL) {
        DOORBELL_VERBOSE(2,
                         "freeing team of comm %s (cid %u): slept %llu "
                         "times waiting for peers, %llu sleeps ran to the "
                         "bound",
                         module->comm->c_name, module->comm->c_contextid,
                         (unsigned long long)module->team->sleeps,
                         (unsigned long long)module->team->sleeps_bounded);
        mca_coll_doorbell_team_destroy(module->team);
        module->team = NULL;
    }
    if (module->previous_allreduce_module != NULL) {
        OBJ_RELEASE(module->previous_allreduce_module);
    }
    if (module->previous_allgather_module != NULL) {
        OBJ_RELEASE(module->previous_allgather_module);
    }
}

OBJ_CLASS_INSTANCE(mca_coll_doorbell_module_t, mca_coll_base_module_t,
                   mca_coll_doorbell_module_construct,
                   mca_coll_doorbell_module_destruct);

int mca_coll_doorbell_init_query(bool enable_progress_threads,
                                 bool enable_mpi_threads)
{
    (void)enable_progress_threads;
    (void)enable_mpi_threads;
    return OMPI_SUCCESS;
}

static int mca_coll_doorbell_module_enable(mca_coll_base_module_t     *base,
                                           struct ompi_communicator_t *comm)
{
    mca_coll_doorbell_module_t *module = (mca_coll_doorbell_module_t *)base;

    SAVE_PREV_COLL_API(allreduce);
    SAVE_PREV_COLL_API(allgather);
    DOORBELL_VERBOSE(2, "enabled on comm %s (cid %u, size %d)", comm->c_name,
                     comm->c_contextid, ompi_comm_size(comm));
    return OMPI_SUCCESS;
}

/* The info key "doorbell_coll" = "off" (MPI_Comm_dup_with_info) keeps the
 * component off one communicator, e.g. to compare against the stock
 * collectives in the same run. */
static int mca_coll_doorbell_info_off(struct ompi_communicator_t *comm)
{
    char value[16];
    int  flag = 0;

    if (comm->super.s_info == NULL ||
        opal_info_get(comm->super.s_info, "doorbell_coll", sizeof(value) - 1,
                      value, &flag) != OPAL_SUCCESS ||
        !flag) {
        return 0;
    }
    return strcmp(value, "off") == 0 || strcmp(value, "false") == 0 ||
           strcmp(value, "0") == 0;
}

mca_coll_base_module_t *mca_coll_doorbell_comm_query(
    struct ompi_communicator_t *comm, int *priority)
{
    mca_coll_doorbell_component_t *cm = &mca_coll_doorbell_component;
    mca_coll_doorbell_module_t    *module;

    if (cm->config_error) {
        /* A parameter was out of its range (named at open). The job does
         * not run with other settings than those asked for, and Open MPI
         * 4.1 gives a coll component no way to make MPI_Init return an
         * error (a module that refuses to be enabled is skipped): end it as
         * MPI_Init's default error handler (MPI_ERRORS_ARE_FATAL) would. */
        DOORBELL_ERROR(
            "comm %s: a coll_doorbell MCA parameter is out of its range (above); "
            "ending the job",
            comm->c_name);
        ompi_mpi_abort(comm, OMPI_ERR_BAD_PARAM);
        return NULL;
    }
    if (!cm->enable) {
        return NULL;
    }
    if (OMPI_COMM_IS_INTER(comm)) {
        DOORBELL_VERBOSE(5, "comm %s: intercommunicator, not served",
                         comm->c_name);
        return NULL;
    }
    if (ompi_comm_size(comm) < cm->np) {
        DOORBELL_VERBOSE(5, "comm %s: size %d below coll_doorbell_np %d",
                         comm->c_name, ompi_comm_size(comm), cm->np);
        return NULL;
    }
    if (mca_coll_doorbell_info_off(comm)) {
        DOORBELL_VERBOSE(5, "comm %s: info doorbell_coll=off", comm->c_name);
        return NULL;
    }
    if (ompi_mpi_thread_multiple) {
        DOORBELL_VERBOSE(5, "comm %s: MPI_THREAD_MULTIPLE is not supported",
                         comm->c_name);
        return NULL;
    }
    if (cm->ucp.init_failed) {
        return NULL;
    }

    module = OBJ_NEW(mca_coll_doorbell_module_t);
    if (module == NULL) {
        return NULL;
    }
    module->comm                     = comm;
    module->tuning.small_max         = cm->small_max;
    module->tuning.net_small_max     = cm->net_small_max;
    module->tuning.direct_max_ranks  = cm->direct_max_ranks;
    module->tuning.hier_max          = cm->hier_max;
    module->tuning.hier_slice_min    = cm->hier_slice_min;
    module->tuning.hier_slice_max    = cm->hier_slice_max;
    module->tuning.ring_min          = cm->ring_min;
    module->tuning.net_ring_min      = cm->net_ring_min;
    module->tuning.pipeline_block    = cm->pipeline_block;
    module->tuning.previous_max      = cm->previous_max;
    module->tuning.net_previous_max  = cm->net_previous_max;
    module->tuning.net_leaf_hier_min = cm->net_leaf_hier_min;
    module->tuning.net_leaf_hier_max = cm->net_leaf_hier_max;
    module->super.coll_module_enable = mca_coll_doorbell_module_enable;
    module->super.coll_allreduce     = mca_coll_doorbell_allreduce;
    *priority                        = cm->priority;
    return &module->super;
}
