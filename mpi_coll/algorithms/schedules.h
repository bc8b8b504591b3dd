// The allreduce schedules and what they share: a Round (one segment of one
// allreduce, with its half of the scratch and flags), a Group (the ranks a
// schedule runs over, sorted) and each schedule's scratch and flag needs.
// Schedules run the same code on every rank of a group; they never put to
// themselves.
#pragma once

#include "doorbell_coll.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace doorbell::coll {

struct Status {
    int         code = DOORBELL_COLL_OK;
    std::string msg;
    bool        ok() const { return code == DOORBELL_COLL_OK; }
};

Status make_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// The data of one round: `count` elements at `buf` (the caller's recvbuf),
// reduced in place. `in` is this rank's input: `buf` itself, except for
// schedules that read the send buffer directly (the ring), which saves the
// copy into recvbuf.
struct Segment {
    unsigned char        *buf;
    size_t                count;
    size_t                esize;
    doorbell_coll_dtype_t dtype;
    doorbell_coll_op_t    op;
    const unsigned char  *in = nullptr;
    size_t                bytes() const { return count * esize; }
    unsigned char        *at(size_t elem) const { return buf + elem * esize; }
    const unsigned char  *in_at(size_t elem) const { return (in ? in : buf) + elem * esize; }
};

// Ranks taking part in one schedule, ascending; `me` indexes this rank.
struct Group {
    std::vector<int> ranks;
    int              me = -1;
    int              size() const { return static_cast<int>(ranks.size()); }
};

// Where a schedule's scratch (bytes) and flags (slots) start in the half.
struct Base {
    size_t   off  = 0;
    uint32_t slot = 0;
};

class Round {
public:
    Round(doorbell_coll_team_t &team, uint64_t seq);

    // Put len bytes from src to `peer` at scratch offset `off` of this round's
    // half, then raise its flag `slot` (also relative to the half).
    Status put(int peer, const void *src, size_t len, size_t off, uint32_t slot);
    // Wait for our flag `slot` of this round, set by `peer`.
    Status         wait(int peer, uint32_t slot);
    Status         quiet();
    unsigned char *at(size_t off) const { return scratch_ + off; }
    // Can this rank read every peer's scratch in place (peer_at)?
    bool peers_readable() const { return team_.peer_scratch != nullptr; }
    // `peer`'s scratch at offset `off` of this round's half (peers_readable).
    const unsigned char *peer_at(int peer, size_t off) const
    {
        return team_.peer_scratch[peer] + (seq_ & 1) * team_.scratch_half + off;
    }
    // Can this rank read the scratch of the ranks of its node in place
    // (node_at)?
    bool node_readable() const { return team_.node_scratch != nullptr; }
    // `peer`'s scratch at offset `off` of this round's half; `peer` is on
    // this rank's node (node_readable).
    const unsigned char *node_at(int peer, size_t off) const
    {
        return team_.node_scratch[peer] + (seq_ & 1) * team_.scratch_half + off;
    }
    int      rank() const { return team_.rank; }
    uint64_t seq() const { return seq_; }

private:
    doorbell_coll_team_t &team_;
    uint64_t              seq_;
    unsigned char        *scratch_; ///< this round's half of the scratch
    uint64_t             *flags_;   ///< this round's half of the flags
};

// Largest power of two <= n.
inline int pow2_floor(int n)
{
    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    return p;
}
inline int log2_floor(int n)
{
    int l = 0;
    while ((2 << l) <= n)
        l++;
    return l;
}

static constexpr int kMaxPipeline = 8; ///< ring sub-blocks per chunk, at most

// The chunked schedules (ring, two-step) cut the vector into n chunks and a
// chunk into `pipeline` sub-blocks.
struct Span {
    size_t start, count; ///< elements
};
// Part i of `count` elements cut into `parts` (the first count % parts get
// one more).
inline Span part(size_t count, size_t parts, size_t i)
{
    size_t q = count / parts, rest = count % parts;
    return {i * q + (i < rest ? i : rest), q + (i < rest ? 1 : 0)};
}
// Bytes of the largest of n chunks.
inline size_t chunk_max_bytes(int n, const Segment &seg)
{
    return (seg.count + n - 1) / n * seg.esize;
}
// Sub-blocks per chunk for a target sub-block of `block` bytes (0: no
// pipelining), at most kMaxPipeline.
int chunk_pipeline(int n, const Segment &seg, size_t block);

// Recursive doubling: log2(n) exchanges of the whole vector (+1 before and
// after for the ranks beyond the largest power of two).
size_t   recursive_doubling_scratch(int n, size_t bytes);
uint32_t recursive_doubling_flags(int n);
Status   recursive_doubling(Round &r, const Group &g, Base base, const Segment &seg);

// Direct exchange: one step, every rank writes to every other and folds
// all inputs in rank order.
size_t   direct_scratch(int n, size_t bytes);
uint32_t direct_flags(int n);
Status   direct(Round &r, const Group &g, Base base, const Segment &seg);

// Two-step: reduce-scatter and allgather, each one all-to-all step; chunks
// split into `pipeline` sub-blocks.
size_t   two_step_scratch(int n, const Segment &seg, bool peers_readable);
uint32_t two_step_flags(int n, int pipeline);
Status   two_step(Round &r, const Group &g, Base base, const Segment &seg, int pipeline);

// Ring: reduce-scatter then allgather in n-1 steps each, chunks split into
// `pipeline` sub-blocks that move on as soon as they are reduced.
size_t   ring_scratch(int n, const Segment &seg);
uint32_t ring_flags(int n, int pipeline);
Status   ring(Round &r, const Group &g, Base base, const Segment &seg, int pipeline);

// Rabenseifner: recursive-halving reduce-scatter, recursive-doubling
// allgather.
size_t   rabenseifner_scratch(int n, const Segment &seg);
uint32_t rabenseifner_flags(int n);
Status   rabenseifner(Round &r, const Group &g, Base base, const Segment &seg);

// Two-hop aggregation: inside each node (shared memory), then between
// nodes (the network) by the ranks owning a slice, leaf-aware, then back
// inside each node. hierarchical.cc says how.
struct Hierarchy {
    std::vector<Group>            nodes; ///< every node, ranks ascending, in order of first rank
    std::vector<int>              node_index; ///< rank -> index into nodes
    std::vector<std::vector<int>> leaves;     ///< node indices per leaf, ascending; a leaf per
                                              ///< node when the team has no leaf map
    std::vector<int> leaf_of_node;            ///< node index -> index into leaves
    std::vector<int> pos_in_leaf;             ///< node index -> its place in its leaf
    int              max_node = 1;            ///< ranks in the largest node
    int              min_node = 1;            ///< ranks in the smallest node
    int              max_leaf = 1;            ///< nodes in the largest leaf
};
Hierarchy make_hierarchy(const doorbell_coll_team_t &team);

// How one allreduce runs on the hierarchy (the same on every rank and every
// round: it depends on the whole message).
struct HierPlan {
    int  slices          = 1;     ///< slices per node: 1 (node leaders only) or min_node
    int  pipeline        = 1;     ///< sub-blocks per slice, set per round
    bool spine_tree_high = false; ///< spine of more than 2 leaves: Rabenseifner
                                  ///< (sliced) rather than recursive doubling
};
HierPlan hierarchical_plan(const Hierarchy &h, size_t bytes, const doorbell_coll_tuning_t &tuning);
// Sub-blocks per slice for one round of `seg`.
int      hierarchical_pipeline(const HierPlan &p, const Segment &seg, size_t block);
size_t   hierarchical_scratch(const Hierarchy &h, const HierPlan &p, const Segment &seg,
                              bool node_readable);
uint32_t hierarchical_flags(const Hierarchy &h, const HierPlan &p);
Status   hierarchical(Round &r, const Hierarchy &h, const HierPlan &p, const Segment &seg);

} // namespace doorbell::coll
