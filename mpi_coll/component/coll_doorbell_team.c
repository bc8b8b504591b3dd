/* Teams: a communicator's pre-registered region (two scratch halves, the
 * flags, the bell), the exchange of worker addresses and rkeys through the
 * lower module's allgather, and the topology the schedules see.
 */
#include "coll_doorbell.h"
#include "coll_doorbell_debug.h"

#include "ompi/constants.h"
#include "ompi/datatype/ompi_datatype.h"
#include "opal/runtime/opal_progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DOORBELL_HOSTNAME_LEN 64
#define DOORBELL_MAX_BLOB     (1 << 20) /* bytes; larger is hostile */

/* What each rank contributes to the exchange, followed by the worker
 * address and the packed rkey. */
typedef struct mca_coll_doorbell_blob {
    uint64_t address_len;
    uint64_t rkey_len;
    uint64_t base; /* region address */
    uint64_t region_len;
    char     host[DOORBELL_HOSTNAME_LEN];
} mca_coll_doorbell_blob_t;

void mca_coll_doorbell_team_destroy(mca_coll_doorbell_team_t *team)
{
    mca_coll_doorbell_ucp_t *u = &mca_coll_doorbell_component.ucp;
    int                      i;

    mca_coll_doorbell_ucp_unregister_team(team);
    while (team->am_blocks != NULL) {
        mca_coll_doorbell_am_block_t *next = team->am_blocks->next;

        free(team->am_blocks);
        team->am_blocks = next;
    }
    if (team->counted) {
        u->ucp_teams--;
    }
    if (team->rkeys != NULL) {
        for (i = 0; i < team->super.size; i++) {
            if (team->rkeys[i] != NULL) {
                ucp_rkey_destroy(team->rkeys[i]);
            }
        }
    }
    if (team->memh != NULL) {
        ucp_mem_unmap(u->context, team->memh); /* frees a UCP allocation */
    }
    if (team->own_region) {
        free(team->region);
    }
    free(team->rptr);
    free(team->node_scratch); /* peer_scratch is the same array or NULL */
    free(team->eps);
    free(team->rkeys);
    free(team->remote_base);
    free(team->node_of);
    free(team->leaf_of);
    free(team);
}

/* Builds the local blob: header, worker address, packed rkey. */
static int mca_coll_doorbell_local_blob(mca_coll_doorbell_team_t *team,
                                        void **blob_p, size_t *len_p)
{
    mca_coll_doorbell_ucp_t *u = &mca_coll_doorbell_component.ucp;
    mca_coll_doorbell_blob_t hdr;
    void                    *rkey_buf;
    size_t                   rkey_len;
    char                    *blob;

    if (ucp_rkey_pack(u->context, team->memh, &rkey_buf, &rkey_len) != UCS_OK) {
        DOORBELL_ERROR("ucp_rkey_pack() failed");
        return OMPI_ERROR;
    }
    memset(&hdr, 0, sizeof(hdr));
    hdr.address_len = u->address_len;
    hdr.rkey_len    = rkey_len;
    hdr.base        = (uint64_t)(uintptr_t)team->region;
    hdr.region_len  = team->region_len;
    gethostname(hdr.host, sizeof(hdr.host) - 1);
    blob = malloc(sizeof(hdr) + u->address_len + rkey_len);
    if (blob == NULL) {
        ucp_rkey_buffer_release(rkey_buf);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    memcpy(blob, &hdr, sizeof(hdr));
    memcpy(blob + sizeof(hdr), u->address, u->address_len);
    memcpy(blob + sizeof(hdr) + u->address_len, rkey_buf, rkey_len);
    ucp_rkey_buffer_release(rkey_buf);
    *blob_p = blob;
    *len_p  = sizeof(hdr) + u->address_len + rkey_len;
    return OMPI_SUCCESS;
}

/* Local part: UCP up, region allocated and registered. */
static int mca_coll_doorbell_team_local(mca_coll_doorbell_team_t *team, int n)
{
    mca_coll_doorbell_component_t *cm = &mca_coll_doorbell_component;
    ucp_mem_map_params_t           mp;
    ucs_status_t                   status;

    if (mca_coll_doorbell_ucp_init() != OMPI_SUCCESS) {
        return OMPI_ERROR;
    }
    team->super.flag_half    = doorbell_coll_flags_needed(n);
    team->super.scratch_half = cm->scratch_size;
    team->bell_off           = 2 * cm->scratch_size +
                     2 * (size_t)team->super.flag_half * sizeof(uint64_t);
    team->region_len = team->bell_off + DOORBELL_BELL_BYTES;
    /* Let UCP allocate the region (shared memory when a shared-memory
     * transport is enabled): peers on this node then map it and write with
     * plain stores (ucp_rkey_ptr), no protocol in the way. */
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                    UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                    UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.address = NULL;
    mp.length  = team->region_len;
    mp.flags   = UCP_MEM_MAP_ALLOCATE;
    status     = ucp_mem_map(cm->ucp.context, &mp, &team->memh);
    if (status == UCS_OK) {
        ucp_mem_attr_t attr;

        attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
        if (ucp_mem_query(team->memh, &attr) == UCS_OK) {
            team->region = attr.address;
            memset(team->region, 0, team->region_len);
            return OMPI_SUCCESS;
        }
        ucp_mem_unmap(cm->ucp.context, team->memh);
        team->memh = NULL;
    }
    /* Plain memory, registered. */
    if (posix_memalign(&team->region, 4096, team->region_len) != 0) {
        team->region = NULL;
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    team->own_region = 1;
    memset(team->region, 0, team->region_len);
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                    UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = team->region;
    mp.length  = team->region_len;
    status     = ucp_mem_map(cm->ucp.context, &mp, &team->memh);
    if (status != UCS_OK) {
        DOORBELL_ERROR("ucp_mem_map() of %zu bytes failed: %s",
                       team->region_len, ucs_status_string(status));
        team->memh = NULL;
        return OMPI_ERROR;
    }
    return OMPI_SUCCESS;
}

/* UCP's lanes to a peer as "tl/dev(roles)" separated by spaces, e.g.
 * "sysv/memory(am am_bw#0) cma/memory(rma_bw#0) doorbell/fab0", from the
 * endpoint's configuration: what UCP chose by UCX's own reachability (shared
 * memory needs the same boot id and IPC namespace). A lane without a role
 * only serves UCP puts and gets with the peer's rkey. */
static void mca_coll_doorbell_ep_lanes(ucp_ep_h ep, char *buf, size_t len)
{
    char  *dump     = NULL, *line, *next, *p, *dot, *roles;
    size_t dump_len = 0, used = 0;
    FILE  *f = open_memstream(&dump, &dump_len);

    buf[0] = '\0';
    if (f == NULL) {
        return;
    }
    ucp_ep_print_info(ep, f);
    fclose(f);
    /* "#  lane[1]:  1:sysv/memory.0 md[1] -> md[1]/sysv/sysdev[255] am am_bw#0" */
    for (line = dump; line != NULL && *line != '\0'; line = next) {
        next = strchr(line, '\n');
        if (next != NULL) {
            *next++ = '\0';
        }
        if ((p = strstr(line, "lane[")) == NULL ||
            (p = strchr(p, ':')) == NULL || (p = strchr(p + 1, ':')) == NULL ||
            (dot = strchr(++p, '.')) == NULL) {
            continue;
        }
        *dot  = '\0';
        roles = strstr(dot + 1, "sysdev[");
        roles = roles != NULL ? strchr(roles, ']') : NULL;
        roles = roles != NULL ? roles + 1 + strspn(roles + 1, " ") : "";
        used += snprintf(buf + used, used < len ? len - used : 0, "%s%s%s%s%s",
                         used ? " " : "", p, *roles ? "(" : "", roles,
                         *roles ? ")" : "");
    }
    if (used >= len && len > 4) {
        strcpy(buf + len - 4, "...");
    }
    free(dump);
}

/* At verbose 2: how this rank reaches `peer` (its host, the UCP lanes, and
 * whether it writes through a mapping). */
static void mca_coll_doorbell_team_report_peer(mca_coll_doorbell_team_t *team,
                                               ompi_communicator_t      *comm,
                                               int peer, const char *hosts)
{
    char lanes[512];

    if (mca_coll_doorbell_component.verbose < 2) {
        return;
    }
    mca_coll_doorbell_ep_lanes(team->eps[peer], lanes, sizeof(lanes));
    DOORBELL_VERBOSE(2,
                     "comm %s: rank %d -> rank %d (%s node, host %s): lanes "
                     "[%s], %s",
                     comm->c_name, team->super.rank, peer,
                     team->node_of[peer] == team->node_of[team->super.rank] ?
                         "same" :
                         "other",
                     hosts + (size_t)peer * DOORBELL_HOSTNAME_LEN, lanes,
                     team->rptr[peer] != NULL ? "mapped" : "UCP puts");
}

int mca_coll_doorbell_team_create(mca_coll_doorbell_module_t *module,
                                  mca_coll_doorbell_team_t  **team_p)
{
    mca_coll_doorbell_component_t *cm   = &mca_coll_doorbell_component;
    ompi_communicator_t           *comm = module->comm;
    int n = ompi_comm_size(comm), me = ompi_comm_rank(comm);
    mca_coll_doorbell_team_t *team;
    uint64_t                  my_len = 0, max_len = 0, *lens = NULL;
    char                     *blobs = NULL, *hosts = NULL, *mine;
    void                     *blob     = NULL;
    size_t                    blob_len = 0;
    int          i, rc, local_ok, have_leaves = 0, mapped = 0, all_mapped;
    int          node_peers = 0, node_mapped = 0, reached = 1, agreed[3];
    ucs_status_t status;

    team = calloc(1, sizeof(*team));
    if (team == NULL) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    team->super.size = n;
    team->super.rank = me;
    /* Registered before any peer learns the region: a put_signal message
     * that arrives as soon as a peer is done setting up finds its team. */
    local_ok = mca_coll_doorbell_team_local(team, n) == OMPI_SUCCESS &&
               mca_coll_doorbell_ucp_register_team(team) == OMPI_SUCCESS &&
               mca_coll_doorbell_local_blob(team, &blob, &blob_len) ==
                   OMPI_SUCCESS;
    my_len = local_ok ? blob_len : 0;

    /* Round 1: blob lengths; a 0 says that rank could not set up, and then
     * every rank falls back (the decision must be collective). */
    lens = calloc(n, sizeof(uint64_t));
    if (lens == NULL) {
        rc = OMPI_ERR_OUT_OF_RESOURCE;
        goto err;
    }
    rc = module->previous_allgather(&my_len, 1, MPI_UINT64_T, lens, 1,
                                    MPI_UINT64_T, comm,
                                    module->previous_allgather_module);
    if (rc != OMPI_SUCCESS) {
        goto err;
    }
    for (i = 0; i < n; i++) {
        if (lens[i] < sizeof(mca_coll_doorbell_blob_t) ||
            lens[i] > DOORBELL_MAX_BLOB) {
            DOORBELL_VERBOSE(1,
                             "comm %s: rank %d could not set up (blob %llu "
                             "bytes); falling back",
                             comm->c_name, i, (unsigned long long)lens[i]);
            rc = OMPI_ERR_NOT_AVAILABLE;
            goto err;
        }
        if (lens[i] > max_len) {
            max_len = lens[i];
        }
    }

    /* Round 2: the blobs, padded to the longest. */
    blobs             = calloc(n + 1, max_len);
    hosts             = calloc(n, DOORBELL_HOSTNAME_LEN);
    team->eps         = calloc(n, sizeof(*team->eps));
    team->rkeys       = calloc(n, sizeof(*team->rkeys));
    team->remote_base = calloc(n, sizeof(*team->remote_base));
    team->node_of     = calloc(n, sizeof(int));
    team->leaf_of     = calloc(n, sizeof(int));
    team->rptr        = calloc(n, sizeof(*team->rptr));
    if (!blobs || !hosts || !team->eps || !team->rkeys || !team->remote_base ||
        !team->rptr || !team->node_of || !team->leaf_of) {
        rc = OMPI_ERR_OUT_OF_RESOURCE;
        goto err;
    }
    mine = blobs + (size_t)n * max_len;
    memcpy(mine, blob, blob_len);
    rc = module->previous_allgather(mine, (int)max_len, MPI_BYTE, blobs,
                                    (int)max_len, MPI_BYTE, comm,
                                    module->previous_allgather_module);
    if (rc != OMPI_SUCCESS) {
        goto err;
    }
    for (i = 0; i < n; i++) {
        mca_coll_doorbell_blob_t hdr;

        memcpy(&hdr, blobs + (size_t)i * max_len, sizeof(hdr));
        hdr.host[DOORBELL_HOSTNAME_LEN - 1] = '\0';
        memcpy(hosts + (size_t)i * DOORBELL_HOSTNAME_LEN, hdr.host,
               DOORBELL_HOSTNAME_LEN);
        /* Remote input: the lengths must add up to what was announced. */
        if (hdr.address_len > lens[i] || hdr.rkey_len > lens[i] ||
            sizeof(hdr) + hdr.address_len + hdr.rkey_len != lens[i] ||
            hdr.region_len != team->region_len) {
            DOORBELL_ERROR("comm %s: rank %d sent an inconsistent blob "
                           "(address %llu, rkey %llu, region %llu bytes; "
                           "coll_doorbell_scratch_size must match on all ranks)",
                           comm->c_name, i, (unsigned long long)hdr.address_len,
                           (unsigned long long)hdr.rkey_len,
                           (unsigned long long)hdr.region_len);
            rc = OMPI_ERROR;
            goto err;
        }
    }
    rc = mca_coll_doorbell_topology(module, hosts, DOORBELL_HOSTNAME_LEN,
                                    team->node_of, team->leaf_of, &have_leaves);
    if (rc != OMPI_SUCCESS) {
        goto err;
    }
    for (i = 0; i < n; i++) {
        mca_coll_doorbell_blob_t hdr;
        const char              *b = blobs + (size_t)i * max_len;

        if (i == me) {
            continue;
        }
        memcpy(&hdr, b, sizeof(hdr));
        /* A peer this rank cannot reach (say, on another host with no
         * network transport among coll_doorbell_tls) makes every rank fall
         * back, together, in round 3. */
        status = mca_coll_doorbell_ucp_get_ep(ompi_comm_peer_lookup(comm, i),
                                              b + sizeof(hdr), &team->eps[i]);
        if (status == UCS_OK) {
            status = ucp_ep_rkey_unpack(team->eps[i],
                                        b + sizeof(hdr) + hdr.address_len,
                                        &team->rkeys[i]);
        }
        if (status != UCS_OK) {
            DOORBELL_ERROR("comm %s: rank %d cannot reach rank %d (host %s) "
                           "on transports \"%s\" (coll_doorbell_tls): %s; "
                           "falling back",
                           comm->c_name, me, i,
                           hosts + (size_t)i * DOORBELL_HOSTNAME_LEN, cm->tls,
                           ucs_status_string(status));
            reached = 0;
            break;
        }
        team->remote_base[i] = hdr.base;
        /* Same node and shared memory: write through a mapping. Emulated
         * nodes (tests on one host) map only their own node's ranks, so
         * that the others are reached as over a network. */
        if ((cm->emulate_ranks_per_node > 0 &&
             team->node_of[i] != team->node_of[me]) ||
            ucp_rkey_ptr(team->rkeys[i], hdr.base, &team->rptr[i]) != UCS_OK) {
            team->rptr[i] = NULL;
        } else {
            mapped++;
        }
        if (team->node_of[i] == team->node_of[me]) {
            node_peers++;
            node_mapped += team->rptr[i] != NULL;
        }
        mca_coll_doorbell_team_report_peer(team, comm, i, hosts);
    }
    /* Round 3: do all ranks reach all peers, map all peers, and map the
     * peers of their node? Only then may the schedules read peers' scratch in place (the
     * choice must be the same everywhere). */
    agreed[0] = mapped == n - 1;
    agreed[1] = node_mapped == node_peers;
    agreed[2] = reached;
    rc = module->previous_allreduce(MPI_IN_PLACE, agreed, 3, MPI_INT, MPI_MIN,
                                    comm, module->previous_allreduce_module);
    if (rc != OMPI_SUCCESS) {
        goto err;
    }
    if (!agreed[2]) {
        DOORBELL_VERBOSE(1,
                         "comm %s: some rank cannot reach a peer; falling back",
                         comm->c_name);
        rc = OMPI_ERR_NOT_AVAILABLE;
        goto err;
    }
    all_mapped = agreed[0];
    if (agreed[1]) {
        team->node_scratch = calloc(n, sizeof(*team->node_scratch));
        if (team->node_scratch == NULL) {
            rc = OMPI_ERR_OUT_OF_RESOURCE;
            goto err;
        }
        for (i = 0; i < n; i++) {
            team->node_scratch[i] = i == me ? team->region : team->rptr[i];
        }
        if (all_mapped) {
            team->peer_scratch = team->node_scratch;
        }
    }

    team->ucp_peers = n - 1 - mapped;
    if (team->ucp_peers > 0) {
        cm->ucp.ucp_teams++;
        team->counted = 1;
    }
    team->super.ops     = &mca_coll_doorbell_ops;
    team->super.ctx     = team;
    team->super.node_of = team->node_of; /* scratch, flags: at registration */
    team->super.leaf_of = have_leaves ? team->leaf_of : NULL;
    team->super.seq     = 0;
    team->super.timeout_ns   = (uint64_t)cm->timeout_ms * 1000000ull;
    team->super.yield        = opal_progress_yield_when_idle ? 1 : 0;
    team->super.peer_scratch = (const unsigned char *const *)team->peer_scratch;
    team->super.node_scratch = (const unsigned char *const *)team->node_scratch;
    doorbell_coll_mapped_wait_init(&team->mapped_wait,
                                   (unsigned)cm->mapped_wait_ucp_every);
    doorbell_coll_team_layout(&team->super); /* once, not per call */
    DOORBELL_VERBOSE(2,
                     "comm %s (cid %u): team of %d ready, %zu scratch bytes "
                     "per half, %u flags, leaves %s, %d peers mapped, %d by "
                     "UCP puts%s",
                     comm->c_name, comm->c_contextid, n,
                     team->super.scratch_half, team->super.flag_half,
                     have_leaves ? "yes" : "no", mapped, n - 1 - mapped,
                     all_mapped ?
                         ", all ranks read peers in place" :
                     team->node_scratch ?
                         ", all ranks read their node's peers in place" :
                         "");
    free(lens);
    free(blobs);
    free(hosts);
    free(blob);
    *team_p = team;
    return OMPI_SUCCESS;

err:
    free(lens);
    free(blobs);
    free(hosts);
    free(blob);
    mca_coll_doorbell_team_destroy(team);
    return rc;
}
