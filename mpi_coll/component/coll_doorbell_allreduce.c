/*
 * MPI_Allreduce: predefined op on a predefined contiguous type in host
 * memory runs the doorbell schedules; anything else goes to the previous
 * module, with the reason at verbose level 5.
 */
#include "coll_doorbell.h"
#include "coll_doorbell_debug.h"

#include "ompi/constants.h"
#include "ompi/datatype/ompi_datatype.h"

int mca_coll_doorbell_allreduce(const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t     *dtype,
                                struct ompi_op_t           *op,
                                struct ompi_communicator_t *comm,
                                mca_coll_base_module_t     *base)
{
    mca_coll_doorbell_module_t    *module = (mca_coll_doorbell_module_t *)base;
    mca_coll_doorbell_component_t *cm     = &mca_coll_doorbell_component;
    doorbell_coll_dtype_t          dt;
    doorbell_coll_op_t             dop;
    doorbell_coll_algorithm_t      alg;
    char                           err[512];
    int                            rc;

    if (module->failed) {
        DOORBELL_ERROR("comm %s: an earlier allreduce failed; the communicator "
                       "cannot be used for allreduce any more",
                       comm->c_name);
        return MPI_ERR_OTHER;
    }
    if (module->delegate) {
        goto fallback;
    }
    if (mca_coll_doorbell_op(op, &dop) != OMPI_SUCCESS) {
        DOORBELL_VERBOSE(5, "comm %s: user-defined (or non-commutative) op",
                         comm->c_name);
        goto fallback;
    }
    if (mca_coll_doorbell_dtype(dtype, &dt) != OMPI_SUCCESS) {
        DOORBELL_VERBOSE(5, "comm %s: datatype %s is derived or not handled",
                         comm->c_name, dtype->name);
        goto fallback;
    }
    if (!doorbell_coll_supported(dt, dop)) {
        DOORBELL_VERBOSE(5, "comm %s: %s is not defined on %s", comm->c_name,
                         doorbell_coll_op_name(dop), dtype->name);
        goto fallback;
    }
    if (mca_coll_doorbell_is_device_buffer(sbuf) ||
        mca_coll_doorbell_is_device_buffer(rbuf)) {
        DOORBELL_VERBOSE(5, "comm %s: GPU buffer", comm->c_name);
        goto fallback;
    }
    if (module->team == NULL) {
        rc = mca_coll_doorbell_team_create(module, &module->team);
        if (rc == OMPI_ERR_NOT_AVAILABLE) {
            /* Every rank saw the same failed exchange: stop trying here. */
            module->delegate = 1;
            DOORBELL_VERBOSE(1,
                             "comm %s: setup failed on some rank; "
                             "delegating every allreduce",
                             comm->c_name);
            goto fallback;
        }
        if (rc != OMPI_SUCCESS) {
            module->failed = 1;
            DOORBELL_ERROR("comm %s: team setup failed (%d)", comm->c_name, rc);
            return MPI_ERR_OTHER;
        }
    }

    alg = doorbell_coll_select(&module->team->super, &module->tuning,
                               cm->algorithm,
                               (size_t)count * doorbell_coll_dtype_size(dt));
    if (alg == DOORBELL_COLL_ALG_PREVIOUS) {
        /* Below coll_doorbell_previous_max (one node) or
         * net_previous_max the module below is faster: every rank takes
         * the same decision from the same sizes and team. */
        DOORBELL_VERBOSE(3, "comm %s: allreduce of %d x %s, %s, previous",
                         comm->c_name, count, dtype->name,
                         doorbell_coll_op_name(dop));
        return module->previous_allreduce(sbuf, rbuf, count, dtype, op, comm,
                                          module->previous_allreduce_module);
    }
    DOORBELL_VERBOSE(3, "comm %s: allreduce of %d x %s, %s, %s%s", comm->c_name,
                     count, dtype->name, doorbell_coll_op_name(dop),
                     doorbell_coll_algorithm_name(alg),
                     sbuf == MPI_IN_PLACE ? ", in place" : "");
    rc = doorbell_coll_allreduce(&module->team->super, &module->tuning, alg,
                                 sbuf == MPI_IN_PLACE ? NULL : sbuf, rbuf,
                                 (size_t)count, dt, dop, err, sizeof(err));
    mca_coll_doorbell_ucp_busy();
    if (rc != DOORBELL_COLL_OK) {
        module->failed = 1;
        DOORBELL_ERROR("comm %s: %s", comm->c_name, err);
        return MPI_ERR_OTHER;
    }
    return OMPI_SUCCESS;

fallback:
    DOORBELL_VERBOSE(3, "comm %s: running fallback allreduce", comm->c_name);
    return module->previous_allreduce(sbuf, rbuf, count, dtype, op, comm,
                                      module->previous_allreduce_module);
}
