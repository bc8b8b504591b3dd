/*
 * The component's MCA parameters: each registered with its documented
 * range, read as the string the user wrote and checked whole. Open MPI's own
 * integer parsing reads "abc" as 0, so "priority abc" or "enable abc" used to
 * turn the component off and "timeout abc" meant "wait forever", without a
 * word; here a value that is not a number in range is refused at start-up,
 * naming the parameter, the value and the range, and MPI_Init fails
 * (mca_coll_doorbell_comm_query).
 */
#include "coll_doorbell.h"
#include "coll_doorbell_debug.h"

#include "ompi/constants.h"
#include "opal/mca/base/mca_base_var.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
    PARAM_INT,  /* an integer in [min, max] */
    PARAM_SIZE, /* bytes, with an optional k, m or g (binary) */
    PARAM_TLS,  /* a UCX_TLS list: not empty, no blanks */
    PARAM_ALG,  /* one of the algorithm names */
    PARAM_TEXT  /* free text (checked where it is used) */
} param_kind_t;

typedef struct {
    const char  *name;
    const char  *desc;
    param_kind_t kind;
    long long    min, max;
    void        *out;     /* int *, size_t *, char ** */
    char         def[32]; /* the default, as text */
    char        *raw;     /* the value as registered (MCA string storage) */
    int          inf_ok;  /* PARAM_SIZE: "inf" means no limit (SIZE_MAX) */
} param_t;

#define KIB 1024LL
#define MIB (1024LL * KIB)
#define GIB (1024LL * MIB)

static char algorithm_list[128];
/* Room for every parameter registered below; add() refuses one more. */
static param_t params[40];
static int     num_params;

static param_t *add(const char *name, const char *desc, param_kind_t kind,
                    long long min, long long max, void *out, const char *def)
{
    param_t *p;

    if (num_params >= (int)(sizeof(params) / sizeof(params[0]))) {
        DOORBELL_ERROR("coll_doorbell_%s is not registered: no room for it in "
                       "the parameter table",
                       name);
        return NULL;
    }
    p = &params[num_params++];

    p->name   = name;
    p->desc   = desc;
    p->kind   = kind;
    p->min    = min;
    p->max    = max;
    p->out    = out;
    p->inf_ok = 0;
    snprintf(p->def, sizeof(p->def), "%s", def);
    return p;
}

static void add_int(const char *name, const char *desc, long long min,
                    long long max, int *out)
{
    char def[32];

    snprintf(def, sizeof(def), "%d", *out);
    add(name, desc, PARAM_INT, min, max, out, def);
}

static void add_size(const char *name, const char *desc, long long min,
                     long long max, size_t *out)
{
    char def[32];

    snprintf(def, sizeof(def), "%zu", *out);
    add(name, desc, PARAM_SIZE, min, max, out, def);
}

/* A size whose default may be "no limit": "inf" stands for SIZE_MAX, which
 * no number in the range can spell. */
static void add_size_or_inf(const char *name, const char *desc, long long min,
                            long long max, size_t *out)
{
    char     def[32];
    param_t *p;

    if (*out == SIZE_MAX) {
        snprintf(def, sizeof(def), "inf");
    } else {
        snprintf(def, sizeof(def), "%zu", *out);
    }
    p = add(name, desc, PARAM_SIZE, min, max, out, def);
    if (p != NULL) {
        p->inf_ok = 1;
    }
}

/* "[min, max]" of a parameter, as its description and its errors show it. */
static const char *range_text(const param_t *p, char *buf, size_t len)
{
    switch (p->kind) {
    case PARAM_INT:
        snprintf(buf, len, "an integer in [%lld, %lld]", p->min, p->max);
        break;
    case PARAM_SIZE:
        snprintf(buf, len, "bytes in [%lld, %lld] (k, m, g: binary units)%s",
                 p->min, p->max, p->inf_ok ? " or inf (no limit)" : "");
        break;
    case PARAM_TLS:
        snprintf(buf, len, "a UCX_TLS list, not empty, without blanks");
        break;
    case PARAM_ALG:
        snprintf(buf, len, "one of %s", algorithm_list);
        break;
    case PARAM_TEXT:
        snprintf(buf, len, "any text");
        break;
    }
    return buf;
}

/* Parses an integer, a size with a binary unit, whole: 0 on success. */
static int parse_number(const char *text, int with_unit, long long *value)
{
    char     *end;
    long long v;

    if (text == NULL || *text == '\0') {
        return -1;
    }
    errno = 0;
    v     = strtoll(text, &end, 10);
    if (errno != 0 || end == text) {
        return -1;
    }
    if (with_unit && *end != '\0' && end[1] == '\0') {
        long long unit = (*end == 'k' || *end == 'K') ? KIB :
                         (*end == 'm' || *end == 'M') ? MIB :
                         (*end == 'g' || *end == 'G') ? GIB :
                                                        0;
        if (unit == 0 || v > INT64_MAX / unit || v < -(INT64_MAX / unit)) {
            return -1;
        }
        v *= unit;
        ++end;
    }
    if (*end != '\0') {
        return -1;
    }
    *value = v;
    return 0;
}

static int check_one(param_t *p)
{
    mca_coll_doorbell_component_t *cm = &mca_coll_doorbell_component;
    char                           range[192];
    long long                      v;
    int                            i;

    switch (p->kind) {
    case PARAM_INT:
    case PARAM_SIZE:
        if (p->kind == PARAM_SIZE && p->inf_ok && p->raw != NULL &&
            strcmp(p->raw, "inf") == 0) {
            *(size_t *)p->out = SIZE_MAX;
            return 0;
        }
        if (parse_number(p->raw, p->kind == PARAM_SIZE, &v) != 0 ||
            v < p->min || v > p->max) {
            break;
        }
        if (p->kind == PARAM_INT) {
            *(int *)p->out = (int)v;
        } else {
            *(size_t *)p->out = (size_t)v;
        }
        return 0;
    case PARAM_TLS:
        if (p->raw != NULL && p->raw[0] != '\0' &&
            strpbrk(p->raw, " \t\n") == NULL && p->raw[0] != ',' &&
            p->raw[strlen(p->raw) - 1] != ',' && strstr(p->raw, ",,") == NULL) {
            *(char **)p->out = p->raw;
            return 0;
        }
        break;
    case PARAM_ALG:
        for (i = 0; p->raw != NULL && i < DOORBELL_COLL_ALG_COUNT; i++) {
            if (strcmp(p->raw, doorbell_coll_algorithm_name(
                                   (doorbell_coll_algorithm_t)i)) == 0) {
                *(char **)p->out = p->raw;
                cm->algorithm    = (doorbell_coll_algorithm_t)i;
                return 0;
            }
        }
        break;
    case PARAM_TEXT:
        *(char **)p->out = p->raw != NULL ? p->raw : "";
        return 0;
    }
    DOORBELL_ERROR("coll_doorbell_%s = \"%s\" is out of range: %s", p->name,
                   p->raw != NULL ? p->raw : "",
                   range_text(p, range, sizeof(range)));
    return -1;
}

void mca_coll_doorbell_params_register(void)
{
    mca_coll_doorbell_component_t *cm = &mca_coll_doorbell_component;
    doorbell_coll_tuning_t         d;
    char                           range[192];
    int                            i;

    doorbell_coll_tuning_default(&d);
    cm->small_max         = d.small_max;
    cm->net_small_max     = d.net_small_max;
    cm->direct_max_ranks  = d.direct_max_ranks;
    cm->hier_max          = d.hier_max;
    cm->hier_slice_min    = d.hier_slice_min;
    cm->hier_slice_max    = d.hier_slice_max;
    cm->ring_min          = d.ring_min;
    cm->net_ring_min      = d.net_ring_min;
    cm->pipeline_block    = d.pipeline_block;
    cm->previous_max      = d.previous_max;
    cm->net_previous_max  = d.net_previous_max;
    cm->net_leaf_hier_min = d.net_leaf_hier_min;
    cm->net_leaf_hier_max = d.net_leaf_hier_max;
    cm->algorithm         = DOORBELL_COLL_ALG_AUTO;
    algorithm_list[0]     = '\0';
    for (i = 0; i < DOORBELL_COLL_ALG_COUNT; i++) {
        size_t used = strlen(algorithm_list);
        snprintf(algorithm_list + used, sizeof(algorithm_list) - used, "%s%s",
                 i ? "|" : "",
                 doorbell_coll_algorithm_name((doorbell_coll_algorithm_t)i));
    }

    num_params = 0;
    add_int(
        "priority",
        "Priority of the doorbell coll component (it provides MPI_Allreduce when higher "
        "than the others)",
        0, 100, &cm->priority);
    add_int(
        "verbose",
        "Verbosity: 1 lifecycle, 2 teams, 3 each call, 5 reasons for falling back",
        0, 100, &cm->verbose);
    add_int("enable", "Enable the doorbell coll component (0 or 1)", 0, 1,
            &cm->enable);
    add_int("np", "Smallest communicator the component serves", 1, 1 << 24,
            &cm->np);
    add("allreduce_algorithm", "Allreduce algorithm", PARAM_ALG, 0, 0,
        &cm->algorithm_str, "auto");
    add_size(
        "small_max",
        "auto, peers read in place (one node): messages up to this many bytes use the direct "
        "exchange (up to direct_max_ranks ranks) or recursive doubling; larger ones two-step "
        "(up to direct_max_ranks ranks), Rabenseifner or the ring",
        0, GIB, &cm->small_max);
    add_size(
        "net_small_max",
        "auto, peers reached over the network: messages up to this many bytes use recursive "
        "doubling, larger ones Rabenseifner (2^k ranks, below net_ring_min) or the ring",
        0, GIB, &cm->net_small_max);
    add_int(
        "direct_max_ranks",
        "auto: largest communicator that uses the one-step direct exchange (small messages) "
        "and the two-step all-to-all reduce-scatter + allgather (larger ones)",
        0, 1 << 24, &cm->direct_max_ranks);
    add_size_or_inf(
        "hier_max",
        "auto: messages up to this many bytes use the hierarchical algorithm when ranks "
        "share nodes and span several (default: every size)",
        0, GIB, &cm->hier_max);
    add_size(
        "hier_slice_min",
        "Hierarchical algorithm: messages of at least this many bytes are cut into a slice "
        "per rank of the smallest node, each reduced and exchanged between nodes by its "
        "owner; smaller ones go through one leader per node",
        0, GIB, &cm->hier_slice_min);
    add_size_or_inf(
        "hier_slice_max",
        "Hierarchical algorithm: messages of at least this many bytes go through one leader "
        "per node again (inf: slices at every size from hier_slice_min)",
        0, GIB, &cm->hier_slice_max);
    add_size(
        "ring_min",
        "auto, peers read in place (one node), more than direct_max_ranks ranks: messages "
        "of at least this many bytes use the ring (Rabenseifner below, on 2^k ranks)",
        0, GIB, &cm->ring_min);
    add_size_or_inf(
        "net_ring_min",
        "auto, some peer reached over the network: messages of at least this many bytes use "
        "the ring (Rabenseifner below, on 2^k ranks; default: never)",
        0, GIB, &cm->net_ring_min);
    add_size("pipeline_block",
             "Ring and two-step sub-block size in bytes (0: no pipelining)", 0,
             GIB, &cm->pipeline_block);
    add_size(
        "previous_max",
        "auto, every peer read in place (one node): messages up to this many bytes go to the "
        "coll module below this one (tuned by default), where it is faster; 0: never",
        0, GIB, &cm->previous_max);
    add_size(
        "net_previous_max",
        "auto, some peer reached over the network: messages up to this many bytes go to the "
        "coll module below this one; 0: never",
        0, GIB, &cm->net_previous_max);
    add_size(
        "net_leaf_hier_min",
        "auto, every rank on a node of its own and some leaf holding several nodes (a leaf "
        "map given): messages from this many bytes up to net_leaf_hier_max use the "
        "hierarchical algorithm (the leaf's nodes reduce under the leaf, one flow per leaf "
        "crosses the spine)",
        0, GIB, &cm->net_leaf_hier_min);
    add_size(
        "net_leaf_hier_max",
        "auto: the largest message of net_leaf_hier_min's rule (below net_leaf_hier_min: the "
        "rule is off)",
        0, GIB, &cm->net_leaf_hier_max);
    add_size(
        "am_max",
        "Puts to a peer reached over the network of up to this many bytes travel with their "
        "flag as one active message (the target's handler writes them), larger ones as a "
        "put, a fence and a flag put; 0: always the latter. Over the doorbell transport the "
        "component's UCP context asks for DOORBELL_SEG_SIZE = this + 2048 (unless "
        "UCX_DOORBELL_SEG_SIZE is set), so that such a message is not cut into fragments",
        0, 64 * KIB, &cm->am_max);
    add_size(
        "scratch_size",
        "Pre-registered scratch bytes per half per communicator (two halves; used rounded "
        "up to a multiple of 64); larger messages go in rounds",
        4 * KIB, GIB, &cm->scratch_size);
    add("tls",
        "UCX transports of the component's UCP context (UCX_TLS syntax): shared memory "
        "(sm: posix, sysv, cma) for the ranks of this host, which then write each other's "
        "scratch through mappings, doorbell for the others",
        PARAM_TLS, 0, 0, &cm->tls, "doorbell,sm,self");
    add_int(
        "timeout",
        "Milliseconds a rank waits for a peer's data before the allreduce fails with "
        "MPI_ERR_OTHER (0: forever)",
        0, 86400000, &cm->timeout_ms);
    add_int(
        "mapped_wait_ucp_every",
        "A wait for a rank that writes this rank's scratch through a mapping (same host) "
        "runs the UCP worker on every this-many-th pass while no put of this rank is in "
        "flight (1: on every pass); the shorter passes hand the core to that rank sooner",
        1, 1 << 20, &cm->mapped_wait_ucp_every);
    add("leaves",
        "Host names to leaf switches, \"hostA:leaf1,hostB:leaf1,hostC:leaf2\", for two-hop "
        "aggregation; every rank must see the same map. Takes precedence over topology_file",
        PARAM_TEXT, 0, 0, &cm->leaves, "");
    add("topology_file",
        "File mapping host names to leaf switches, one \"<host> <leaf>\" per line (# comments), "
        "when coll_doorbell_leaves is empty",
        PARAM_TEXT, 0, 0, &cm->topology_file, "");
    add_int(
        "emulate_ranks_per_node",
        "Testing: treat every k consecutive ranks as one node (0: nodes from host names)",
        0, 1 << 24, &cm->emulate_ranks_per_node);

    for (i = 0; i < num_params; i++) {
        param_t *p = &params[i];
        char     desc[1024];

        snprintf(desc, sizeof(desc), "%s. Range: %s", p->desc,
                 range_text(p, range, sizeof(range)));
        p->raw = p->def;
        (void)mca_base_component_var_register(&cm->super.collm_version, p->name,
                                              desc, MCA_BASE_VAR_TYPE_STRING,
                                              NULL, 0, 0, OPAL_INFO_LVL_9,
                                              MCA_BASE_VAR_SCOPE_READONLY,
                                              &p->raw);
    }
}

int mca_coll_doorbell_params_check(void)
{
    int bad = 0;
    int i;

    for (i = 0; i < num_params; i++) {
        bad |= check_one(&params[i]);
    }
    return bad ? OMPI_ERR_BAD_PARAM : OMPI_SUCCESS;
}
