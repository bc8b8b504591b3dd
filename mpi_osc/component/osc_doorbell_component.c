/*
 * osc doorbell: chooses the one-sided component of a window whose group
 * spans hosts. It creates no module of its own: it claims such a window
 * above osc rdma's priority and hands it to osc pt2pt, whose operations are
 * messages of pml ob1 (over the doorbell btl between hosts, vader inside a
 * host). A window inside one host, a shared-memory window, or any window
 * under MPI_THREAD_MULTIPLE (which osc pt2pt refuses) is declined and goes
 * where plain mpirun sends it (osc rdma or osc sm).
 *
 * Why: over the software RDMA NIC every RDMA operation is executed by the
 * target's process anyway, and osc rdma runs an accumulate of more than one
 * element as four round trips (the accumulate lock's compare-and-swap, a
 * get, a put and flush, the lock's release; docs/btl.md), where osc pt2pt
 * sends the data once and the target applies the operation. Measured across
 * the emulated spine (docs/btl.md): 8 B accumulate 70-84 us on osc rdma,
 * 29-33 us on osc pt2pt over the doorbell btl. osc rdma's puts are faster
 * (one round trip, no matching): `osc_doorbell_across_hosts rdma` keeps
 * them for a program that does not accumulate.
 */
#include "ompi_config.h"

#include "ompi/communicator/communicator.h"
#include "ompi/mca/osc/base/base.h"
#include "ompi/mca/osc/osc.h"
#include "ompi/proc/proc.h"
#include "ompi/runtime/mpiruntime.h"
#include "opal/mca/base/base.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

#include <string.h>

typedef enum {
    OSC_DOORBELL_ACROSS_HOSTS_PT2PT, /* claim the window for osc pt2pt */
    OSC_DOORBELL_ACROSS_HOSTS_RDMA,  /* decline: osc rdma, plain mpirun's choice */
} osc_doorbell_across_hosts_t;

typedef struct {
    ompi_osc_base_component_t   super;
    int                         priority;
    char                       *across_hosts_text; /* the registered string */
    osc_doorbell_across_hosts_t across_hosts;
    bool                        enabled; /* false after a bad parameter */
} osc_doorbell_component_t;

static int osc_doorbell_register(void);
static int osc_doorbell_open(void);
static int osc_doorbell_init(bool enable_progress_threads, bool enable_mpi_threads);
static int osc_doorbell_query(struct ompi_win_t *win, void **base, size_t size, int disp_unit,
                              struct ompi_communicator_t *comm, struct opal_info_t *info,
                              int flavor);
static int osc_doorbell_select(struct ompi_win_t *win, void **base, size_t size, int disp_unit,
                               struct ompi_communicator_t *comm, struct opal_info_t *info,
                               int flavor, int *model);
static int osc_doorbell_finalize(void);

/* clang-format off */
OMPI_MODULE_DECLSPEC osc_doorbell_component_t mca_osc_doorbell_component = {
    .super = {
        .osc_version = {
            OMPI_OSC_BASE_VERSION_3_0_0,
            .mca_component_name            = "doorbell",
            MCA_BASE_MAKE_VERSION(component, OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION,
                                  OMPI_RELEASE_VERSION),
            .mca_open_component            = osc_doorbell_open,
            .mca_register_component_params = osc_doorbell_register,
        },
        .osc_data = {
            MCA_BASE_METADATA_PARAM_CHECKPOINT
        },
        .osc_init     = osc_doorbell_init,
        .osc_query    = osc_doorbell_query,
        .osc_select   = osc_doorbell_select,
        .osc_finalize = osc_doorbell_finalize,
    },
    /* above osc rdma (101) and osc sm (100); only ever returned for a
     * window this component claims */
    .priority          = 110,
    .across_hosts_text = NULL,
    .across_hosts      = OSC_DOORBELL_ACROSS_HOSTS_PT2PT,
    .enabled           = true,
};
/* clang-format on */

#define OSC_DOORBELL_VERBOSE(_fmt, ...)                                                     \
    opal_output_verbose(10, ompi_osc_base_framework.framework_output,                       \
                        "osc:doorbell %s on %s: " _fmt, OPAL_NAME_PRINT(OPAL_PROC_MY_NAME), \
                        opal_process_info.nodename, ##__VA_ARGS__)
#define OSC_DOORBELL_ERROR(_fmt, ...)                                                  \
    opal_output(0, "osc:doorbell %s on %s: " _fmt, OPAL_NAME_PRINT(OPAL_PROC_MY_NAME), \
                opal_process_info.nodename, ##__VA_ARGS__)

static int osc_doorbell_register(void)
{
    osc_doorbell_component_t *cm = &mca_osc_doorbell_component;

    cm->across_hosts_text = "pt2pt";
    (void)mca_base_component_var_register(
        &cm->super.osc_version, "across_hosts",
        "Which one-sided component serves a window whose group spans hosts: \"pt2pt\" "
        "(osc pt2pt over pml ob1, so over the doorbell btl between hosts: an accumulate "
        "is one message) or \"rdma\" (osc rdma over the doorbell btl's RDMA and atomics, "
        "plain mpirun's choice: faster puts and gets, an accumulate of several elements "
        "is four round trips)",
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_3, MCA_BASE_VAR_SCOPE_READONLY,
        &cm->across_hosts_text);
    (void)mca_base_component_var_register(
        &cm->super.osc_version, "priority",
        "Priority of the doorbell osc component for a window it claims (one that spans "
        "hosts); above osc rdma's (101) to take effect",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_3, MCA_BASE_VAR_SCOPE_GROUP,
        &cm->priority);
    return OMPI_SUCCESS;
}

static int osc_doorbell_open(void)
{
    osc_doorbell_component_t *cm   = &mca_osc_doorbell_component;
    const char               *text = cm->across_hosts_text ? cm->across_hosts_text : "";

    if (0 == strcmp(text, "pt2pt")) {
        cm->across_hosts = OSC_DOORBELL_ACROSS_HOSTS_PT2PT;
    } else if (0 == strcmp(text, "rdma")) {
        cm->across_hosts = OSC_DOORBELL_ACROSS_HOSTS_RDMA;
    } else {
        OSC_DOORBELL_ERROR("osc_doorbell_across_hosts = \"%s\" is neither \"pt2pt\" nor "
                           "\"rdma\"; the doorbell osc component is disabled and windows "
                           "across hosts go to osc rdma",
                           text);
        cm->enabled = false;
    }
    return OMPI_SUCCESS;
}

static int osc_doorbell_init(bool enable_progress_threads, bool enable_mpi_threads)
{
    return OMPI_SUCCESS;
}

static int osc_doorbell_finalize(void)
{
    return OMPI_SUCCESS;
}

/* The osc component named `name` among those the framework opened and
 * initialised, or NULL (excluded by the `osc` parameter, or its init failed). */
static ompi_osc_base_component_t *osc_doorbell_find(const char *name)
{
    mca_base_component_list_item_t *cli;

    OPAL_LIST_FOREACH (cli, &ompi_osc_base_framework.framework_components,
                       mca_base_component_list_item_t) {
        if (0 == strcmp(cli->cli_component->mca_component_name, name)) {
            return (ompi_osc_base_component_t *)cli->cli_component;
        }
    }
    return NULL;
}

/* Whether a rank of `comm` lives on another host. Every rank of a group that
 * spans hosts sees such a peer, so every rank of the window decides alike. */
static bool osc_doorbell_spans_hosts(struct ompi_communicator_t *comm)
{
    ompi_proc_t *self = ompi_proc_local();
    int          n    = ompi_comm_size(comm);

    for (int i = 0; i < n; ++i) {
        ompi_proc_t *proc = ompi_comm_peer_lookup(comm, i);
        if (proc != self && !OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags)) {
            return true;
        }
    }
    return false;
}

static int osc_doorbell_query(struct ompi_win_t *win, void **base, size_t size, int disp_unit,
                              struct ompi_communicator_t *comm, struct opal_info_t *info,
                              int flavor)
{
    osc_doorbell_component_t *cm = &mca_osc_doorbell_component;

    if (!cm->enabled || OSC_DOORBELL_ACROSS_HOSTS_PT2PT != cm->across_hosts ||
        MPI_WIN_FLAVOR_SHARED == flavor || ompi_mpi_thread_multiple) {
        return -1;
    }
    if (!osc_doorbell_spans_hosts(comm)) {
        OSC_DOORBELL_VERBOSE("window over %d ranks of %s is inside one host: left to the "
                             "other components",
                             ompi_comm_size(comm), comm->c_name);
        return -1;
    }
    if (NULL == osc_doorbell_find("pt2pt")) {
        /* the same on every rank: the `osc` parameter is the job's */
        OSC_DOORBELL_VERBOSE("osc pt2pt is not available (the `osc` parameter excludes it?); "
                             "window on %s left to the other components",
                             comm->c_name);
        return -1;
    }
    return cm->priority;
}

static int osc_doorbell_select(struct ompi_win_t *win, void **base, size_t size, int disp_unit,
                               struct ompi_communicator_t *comm, struct opal_info_t *info,
                               int flavor, int *model)
{
    ompi_osc_base_component_t *pt2pt = osc_doorbell_find("pt2pt");
    int                        ret;

    if (NULL == pt2pt) {
        return OMPI_ERR_NOT_AVAILABLE; /* query checked it; not reached */
    }
    OSC_DOORBELL_VERBOSE("window over %d ranks of %s spans hosts: osc pt2pt", ompi_comm_size(comm),
                         comm->c_name);
    ret = pt2pt->osc_select(win, base, size, disp_unit, comm, info, flavor, model);
    if (OMPI_SUCCESS != ret) {
        OSC_DOORBELL_ERROR("osc pt2pt could not create the window over %d ranks of %s: %s",
                           ompi_comm_size(comm), comm->c_name, opal_strerror(ret));
    }
    return ret;
}
