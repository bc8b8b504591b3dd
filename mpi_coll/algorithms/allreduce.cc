// The C entry point: validate, pick the algorithm, cut the message into
// rounds that fit the scratch half, run the schedule for each round.
#include "reduce.h"
#include "schedules.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

namespace doorbell::coll {
namespace {

// DOORBELL_COLL_LAYOUT_* of a team: node ids sorted, so a node holding
// several ranks shows as two equal neighbours (O(n log n); the select runs
// on every call and a team may have thousands of ranks).
unsigned layout_of(int size, const int *node_of, const int *leaf_of)
{
    unsigned layout = DOORBELL_COLL_LAYOUT_KNOWN;
    if (size <= 1)
        return layout;
    if (node_of != nullptr) { // else one node per rank: neither
        std::vector<int> ids(node_of, node_of + size);
        std::sort(ids.begin(), ids.end());
        if (ids.front() != ids.back())
            layout |= DOORBELL_COLL_LAYOUT_MULTI_NODE;
        if (std::adjacent_find(ids.begin(), ids.end()) != ids.end())
            layout |= DOORBELL_COLL_LAYOUT_SHARED_NODE;
    }
    if (leaf_of == nullptr)
        return layout;
    // (leaf, node) pairs, once each: a leaf with several nodes shows as two
    // neighbours with the same leaf.
    std::vector<std::pair<int, int>> at(static_cast<size_t>(size));
    for (int i = 0; i < size; i++)
        at[static_cast<size_t>(i)] = {leaf_of[i], node_of != nullptr ? node_of[i] : i};
    std::sort(at.begin(), at.end());
    at.erase(std::unique(at.begin(), at.end()), at.end());
    const bool several_leaves = at.front().first != at.back().first;
    const bool shared_leaf    = std::adjacent_find(at.begin(), at.end(), [](auto &x, auto &y) {
                                 return x.first == y.first;
                             }) != at.end();
    if (several_leaves && shared_leaf)
        layout |= DOORBELL_COLL_LAYOUT_SHARED_LEAF;
    return layout;
}

// The group of every rank, built once per thread and team shape rather than
// allocated on every call (a small allreduce is a few microseconds).
const Group &whole_team(const doorbell_coll_team_t &team)
{
    thread_local Group all;
    if (all.me != team.rank || all.size() != team.size) {
        all.ranks.resize(static_cast<size_t>(team.size));
        for (int i = 0; i < team.size; i++)
            all.ranks[static_cast<size_t>(i)] = i;
        all.me = team.rank;
    }
    return all;
}

bool is_pow2(int n)
{
    return n > 0 && (n & (n - 1)) == 0;
}

// Scratch and flags one round of `count` elements needs.
struct Need {
    size_t   bytes;
    uint32_t flags;
};

struct Plan {
    doorbell_coll_algorithm_t alg;
    Hierarchy                 hier;
    HierPlan                  hier_plan;
    int                       pipeline = 1;
};

Need need(const doorbell_coll_team_t &team, const doorbell_coll_tuning_t &tuning, Plan &p,
          const Segment &seg)
{
    const int n = team.size;
    switch (p.alg) {
    case DOORBELL_COLL_ALG_RING:
        p.pipeline = chunk_pipeline(n, seg, tuning.pipeline_block);
        return {ring_scratch(n, seg), ring_flags(n, p.pipeline)};
    case DOORBELL_COLL_ALG_RABENSEIFNER:
        return {rabenseifner_scratch(n, seg), rabenseifner_flags(n)};
    case DOORBELL_COLL_ALG_HIERARCHICAL:
        p.hier_plan.pipeline = hierarchical_pipeline(p.hier_plan, seg, tuning.pipeline_block);
        return {hierarchical_scratch(p.hier, p.hier_plan, seg, team.node_scratch != nullptr),
                hierarchical_flags(p.hier, p.hier_plan)};
    case DOORBELL_COLL_ALG_DIRECT:
        return {direct_scratch(n, seg.bytes()), direct_flags(n)};
    case DOORBELL_COLL_ALG_TWO_STEP:
        p.pipeline = chunk_pipeline(n, seg, tuning.pipeline_block);
        return {two_step_scratch(n, seg, team.peer_scratch != nullptr),
                two_step_flags(n, p.pipeline)};
    default:
        return {recursive_doubling_scratch(n, seg.bytes()), recursive_doubling_flags(n)};
    }
}

// Largest round (elements) whose scratch fits one half; the same on every
// rank because it depends only on sizes every rank shares.
size_t round_count(const doorbell_coll_team_t &team, const doorbell_coll_tuning_t &tuning, Plan &p,
                   Segment seg)
{
    for (;;) {
        size_t bytes = need(team, tuning, p, seg).bytes;
        if (bytes <= team.scratch_half || seg.count <= 1)
            return seg.count;
        // Needs grow about linearly with the count: shrink in proportion.
        size_t next = static_cast<size_t>(static_cast<double>(seg.count) *
                                          (static_cast<double>(team.scratch_half) / bytes));
        seg.count   = next < seg.count ? next : seg.count - 1;
        if (seg.count == 0)
            seg.count = 1;
    }
}

Status run(doorbell_coll_team_t &team, const doorbell_coll_tuning_t &tuning,
           doorbell_coll_algorithm_t requested, const void *sendbuf, void *recvbuf, size_t count,
           doorbell_coll_dtype_t dtype, doorbell_coll_op_t op)
{
    if (team.ops == nullptr || team.size < 1 || team.rank < 0 || team.rank >= team.size)
        return make_error(DOORBELL_COLL_ERR_INVALID, "invalid team (rank %d of %d)", team.rank,
                          team.size);
    if (!op_supported(dtype, op))
        return make_error(DOORBELL_COLL_ERR_UNSUPPORTED, "op %s is not defined on type %s",
                          doorbell_coll_op_name(op), doorbell_coll_dtype_name(dtype));
    if (count == 0)
        return {};
    const size_t esize = dtype_size(dtype);
    if (recvbuf == nullptr || count > std::numeric_limits<size_t>::max() / esize)
        return make_error(DOORBELL_COLL_ERR_INVALID, "rank %d: invalid buffer or count %zu",
                          team.rank, count);
    Plan p;
    p.alg = team.size == 1 ? DOORBELL_COLL_ALG_RECURSIVE_DOUBLING :
                             doorbell_coll_select(&team, &tuning, requested, count * esize);
    if (p.alg == DOORBELL_COLL_ALG_PREVIOUS)
        return make_error(DOORBELL_COLL_ERR_INVALID,
                          "rank %d: %zu bytes go to the caller's own allreduce (previous), "
                          "which this library does not run",
                          team.rank, count * esize);
    // The ring, two-step and hierarchical read the send buffer itself; the
    // others reduce in recvbuf.
    const bool read_send = (p.alg == DOORBELL_COLL_ALG_RING ||
                            p.alg == DOORBELL_COLL_ALG_TWO_STEP ||
                            p.alg == DOORBELL_COLL_ALG_HIERARCHICAL) &&
                           sendbuf != nullptr && sendbuf != recvbuf;
    if (sendbuf != nullptr && sendbuf != recvbuf && !read_send)
        std::memcpy(recvbuf, sendbuf, count * esize);
    if (team.size == 1)
        return {};

    if (p.alg == DOORBELL_COLL_ALG_HIERARCHICAL) {
        p.hier      = make_hierarchy(team);
        p.hier_plan = hierarchical_plan(p.hier, count * esize, tuning);
    }
    Segment      whole{static_cast<unsigned char *>(recvbuf), count, esize, dtype, op};
    const size_t per_round = round_count(team, tuning, p, whole);
    for (size_t done = 0; done < count; done += per_round) {
        Segment seg = whole;
        seg.buf     = whole.at(done);
        if (read_send)
            seg.in = static_cast<const unsigned char *>(sendbuf) + done * esize;
        seg.count = std::min(per_round, count - done);
        Need nd   = need(team, tuning, p, seg);
        if (nd.bytes > team.scratch_half || nd.flags > team.flag_half)
            return make_error(DOORBELL_COLL_ERR_NO_SPACE,
                              "rank %d: %s needs %zu scratch bytes and %u flags per round; the "
                              "team has %zu and %u",
                              team.rank, doorbell_coll_algorithm_name(p.alg), nd.bytes, nd.flags,
                              team.scratch_half, team.flag_half);
        Round        r(team, ++team.seq);
        const Group &all = whole_team(team);
        Status       st;
        switch (p.alg) {
        case DOORBELL_COLL_ALG_RING:
            st = ring(r, all, {}, seg, p.pipeline);
            break;
        case DOORBELL_COLL_ALG_RABENSEIFNER:
            st = rabenseifner(r, all, {}, seg);
            break;
        case DOORBELL_COLL_ALG_DIRECT:
            st = direct(r, all, {}, seg);
            break;
        case DOORBELL_COLL_ALG_TWO_STEP:
            st = two_step(r, all, {}, seg, p.pipeline);
            break;
        case DOORBELL_COLL_ALG_HIERARCHICAL:
            st = hierarchical(r, p.hier, p.hier_plan, seg);
            break;
        default:
            st = recursive_doubling(r, all, {}, seg);
            break;
        }
        if (!st.ok()) {
            // Best effort: let puts still reading the caller's buffers finish
            // (bounded by the transport's timeout) before the caller reuses them.
            (void)r.quiet();
            return st;
        }
        if (!(st = r.quiet()).ok())
            return st;
    }
    return {};
}

} // namespace
} // namespace doorbell::coll

using namespace doorbell::coll;

extern "C" {

void doorbell_coll_tuning_default(doorbell_coll_tuning_t *tuning_p)
{
    tuning_p->small_max = 8192;
    // Recursive doubling's log2 n steps against Rabenseifner's 2 log2 n,
    // which crosses a two-leaf spine with m bytes per direction where
    // recursive doubling crosses with 2m: 4 hosts x 1 rank on hosts with
    // CPUs of their own, alternating jobs, 1 KiB 45.5 against 49.9 us,
    // 2 KiB 89.1 against 51.3 (docs/fabric.md, twenty-first round).
    tuning_p->net_small_max    = 1024;
    tuning_p->direct_max_ranks = 8;
    // Hierarchical at every size: on the emulated fabric (2 hosts x 2 ranks,
    // 200 Mb/s spine links) the flat ring over mixed peers took 77 and 155 ms
    // at 512 KiB and 1 MiB, hierarchical 22 and 71 ms (ucx sm,tcp: 27, 75).
    tuning_p->hier_max = std::numeric_limits<size_t>::max();
    // Slices from 4 KiB to below 128 KiB: every rank of a node carries its
    // slice between nodes, a flow each. Chosen when a QP took one path of
    // the fabric (2 hosts x 2 ranks, OSU -c: 16 KiB 270-295 against 740-785
    // us); since a QP spreads over every port the two are within a few
    // percent at 4-64 KiB (16 KiB 353 against 380 us). Below 4 KiB the
    // leader's fewer steps win by 10-12 us (40-46 against 52-62 us).
    tuning_p->hier_slice_min = 4096;
    // From 128 KiB one leader per node: one flow per host meets fewer others
    // at the spines. Main job's loop, alternating rounds, 128 KiB-1 MiB:
    // 2 x 2 2796-23154 against 3106-25001 us with slices, 2 x 3 2930-23833
    // against 4778-25048.
    tuning_p->hier_slice_max = 131072;
    tuning_p->ring_min       = 131072;
    // Over the network Rabenseifner at every size on 2^k ranks: nearest
    // partner first, it crosses a two-leaf fabric's spine with m bytes per
    // direction in two flows, the ring with 1.5m in one (4 hosts x 1 rank,
    // 1 MiB: 47-54 ms against the ring's 72-87).
    tuning_p->net_ring_min     = std::numeric_limits<size_t>::max();
    tuning_p->pipeline_block   = 262144;
    tuning_p->previous_max     = 0;
    tuning_p->net_previous_max = 0;
    // 4 hosts x 1 rank under two leaves (OSU -c, alternating jobs, medians
    // of 3-4): 2-16 KiB hierarchical 96-303 against Rabenseifner 119-370 us;
    // 1 KiB and 32 KiB even (docs/fabric.md, twenty-fourth round).
    tuning_p->net_leaf_hier_min = 2048;
    tuning_p->net_leaf_hier_max = 16384;
}

int doorbell_coll_supported(doorbell_coll_dtype_t dtype, doorbell_coll_op_t op)
{
    return op_supported(dtype, op) ? 1 : 0;
}

size_t doorbell_coll_dtype_size(doorbell_coll_dtype_t dtype)
{
    return dtype_size(dtype);
}

int doorbell_coll_deliver_put_signal(doorbell_coll_team_t *team, const void *src, size_t len,
                                     uint64_t offset, uint32_t slot, uint64_t value)
{
    const uint64_t scratch = 2 * static_cast<uint64_t>(team->scratch_half);
    if (team->scratch == nullptr || team->flags == nullptr || offset > scratch ||
        len > scratch - offset || slot >= 2 * static_cast<uint64_t>(team->flag_half) ||
        (len != 0 && src == nullptr))
        return -1;
    if (len != 0)
        std::memcpy(team->scratch + offset, src, len);
    __atomic_store_n(&team->flags[slot], value, __ATOMIC_RELEASE);
    return 0;
}

uint32_t doorbell_coll_flags_needed(int size)
{
    // Worst cases: the pipelined ring, and hierarchical with a node or a
    // leaf of every rank, every rank a slice owner, pipelined sub-blocks and
    // the largest spine schedule.
    const int      n = size < 1 ? 1 : size;
    const uint32_t N = static_cast<uint32_t>(n), P = kMaxPipeline;
    const uint32_t spine = std::max({P, recursive_doubling_flags(n), rabenseifner_flags(n)});
    const uint32_t hier  = 2 * (N - 1) * P + spine + P + N * P;
    return std::max({ring_flags(n, kMaxPipeline), two_step_flags(n, kMaxPipeline),
                     rabenseifner_flags(n), recursive_doubling_flags(n), direct_flags(n), hier});
}

void doorbell_coll_team_layout(doorbell_coll_team_t *team)
{
    team->layout = layout_of(team->size, team->node_of, team->leaf_of);
}

doorbell_coll_algorithm_t doorbell_coll_select(const doorbell_coll_team_t   *team,
                                               const doorbell_coll_tuning_t *tuning,
                                               doorbell_coll_algorithm_t requested, size_t bytes)
{
    if (requested > DOORBELL_COLL_ALG_AUTO && requested < DOORBELL_COLL_ALG_COUNT)
        return requested;
    // Hierarchy pays when some node holds several ranks and there is more
    // than one node: one shared-memory hop replaces several network ones.
    const unsigned layout      = (team->layout & DOORBELL_COLL_LAYOUT_KNOWN) != 0 ?
                                     team->layout :
                                     layout_of(team->size, team->node_of, team->leaf_of);
    const bool     multi_node  = (layout & DOORBELL_COLL_LAYOUT_MULTI_NODE) != 0;
    const bool     shared_node = (layout & DOORBELL_COLL_LAYOUT_SHARED_NODE) != 0;
    const bool     shared_leaf = (layout & DOORBELL_COLL_LAYOUT_SHARED_LEAF) != 0;
    // Sizes where the caller's own allreduce (Open MPI's tuned, over vader
    // inside a host) is measured faster go back to it, as han and adapt
    // hand small messages to the module below them. One node: every peer
    // read in place; otherwise some peer is reached over the network.
    const size_t previous_max = team->peer_scratch != nullptr ? tuning->previous_max :
                                                                tuning->net_previous_max;
    if (bytes <= previous_max && previous_max != 0)
        return DOORBELL_COLL_ALG_PREVIOUS;
    if (multi_node && shared_node && bytes <= tuning->hier_max)
        return DOORBELL_COLL_ALG_HIERARCHICAL;
    // Over the network every byte crosses links, and the direct exchange
    // sends n-1 messages per rank where recursive doubling sends log2 n: on
    // the emulated leaf-spine fabric (4 hosts) it lost at every size, 8 B
    // 78-110 against 58-84 us, 8 KiB 785-888 against Rabenseifner's 415 us.
    // Recursive doubling to 1 KiB, then Rabenseifner (2^k ranks) or the ring.
    if (team->peer_scratch == nullptr) {
        // A node per rank, several under one leaf: the leaf's nodes reduce
        // through the leaf switch, and one flow per leaf crosses the spine
        // once, instead of a flat schedule's several flows in several
        // steps. (Several leaves mean several nodes.)
        if (shared_leaf && bytes >= tuning->net_leaf_hier_min && bytes <= tuning->net_leaf_hier_max)
            return DOORBELL_COLL_ALG_HIERARCHICAL;
        if (bytes <= tuning->net_small_max)
            return DOORBELL_COLL_ALG_RECURSIVE_DOUBLING;
        if (bytes >= tuning->net_ring_min || !is_pow2(team->size))
            return DOORBELL_COLL_ALG_RING;
        return DOORBELL_COLL_ALG_RABENSEIFNER;
    }
    // Peers read in place (one node), few ranks: one all-to-all step for
    // small messages, two steps above: fewer waits than any tree or ring,
    // which is what counts when ranks share cores.
    if (bytes <= tuning->small_max)
        return team->size <= tuning->direct_max_ranks ? DOORBELL_COLL_ALG_DIRECT :
                                                        DOORBELL_COLL_ALG_RECURSIVE_DOUBLING;
    if (team->size <= tuning->direct_max_ranks)
        return DOORBELL_COLL_ALG_TWO_STEP;
    if (bytes >= tuning->ring_min || !is_pow2(team->size))
        return DOORBELL_COLL_ALG_RING;
    return DOORBELL_COLL_ALG_RABENSEIFNER;
}

const char *doorbell_coll_algorithm_name(doorbell_coll_algorithm_t alg)
{
    static const char *names[] = {"auto",         "recursive_doubling",
                                  "ring",         "rabenseifner",
                                  "hierarchical", "direct",
                                  "two_step",     "previous"};
    static_assert(sizeof(names) / sizeof(names[0]) == DOORBELL_COLL_ALG_COUNT);
    return alg >= 0 && alg < DOORBELL_COLL_ALG_COUNT ? names[alg] : "unknown";
}

const char *doorbell_coll_op_name(doorbell_coll_op_t op)
{
    static const char *names[] = {"MPI_SUM",  "MPI_PROD", "MPI_MAX",    "MPI_MIN",
                                  "MPI_LAND", "MPI_LOR",  "MPI_LXOR",   "MPI_BAND",
                                  "MPI_BOR",  "MPI_BXOR", "MPI_MAXLOC", "MPI_MINLOC"};
    return op >= 0 && op < DOORBELL_COLL_OP_COUNT ? names[op] : "unknown";
}

const char *doorbell_coll_dtype_name(doorbell_coll_dtype_t dtype)
{
    static const char *names[] = {"int8",
                                  "uint8",
                                  "int16",
                                  "uint16",
                                  "int32",
                                  "uint32",
                                  "int64",
                                  "uint64",
                                  "float",
                                  "double",
                                  "long double",
                                  "float complex",
                                  "double complex",
                                  "long double complex",
                                  "bool",
                                  "logical",
                                  "byte",
                                  "float_int",
                                  "double_int",
                                  "long_int",
                                  "2int",
                                  "short_int",
                                  "long_double_int",
                                  "2float",
                                  "2double"};
    static_assert(sizeof(names) / sizeof(names[0]) == DOORBELL_COLL_DT_COUNT);
    return dtype >= 0 && dtype < DOORBELL_COLL_DT_COUNT ? names[dtype] : "unknown";
}

int doorbell_coll_allreduce(doorbell_coll_team_t *team, const doorbell_coll_tuning_t *tuning,
                            doorbell_coll_algorithm_t algorithm, const void *sendbuf, void *recvbuf,
                            size_t count, doorbell_coll_dtype_t dtype, doorbell_coll_op_t op,
                            char *err, size_t errlen)
{
    doorbell_coll_tuning_t defaults;
    if (tuning == nullptr) {
        doorbell_coll_tuning_default(&defaults);
        tuning = &defaults;
    }
    Status st = run(*team, *tuning, algorithm, sendbuf, recvbuf, count, dtype, op);
    if (!st.ok() && err != nullptr && errlen > 0)
        std::snprintf(err, errlen, "%s", st.msg.c_str());
    return st.code;
}

} // extern "C"
