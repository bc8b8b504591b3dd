// Two-hop aggregation: each byte crosses the network once per node, and the
// spine once per leaf.
//
//   1. Node (shared memory): the vector is cut into S slices; the j-th rank
//      of every node owns slice j. Every rank puts slice j of its input to
//      the owner, which folds the node's inputs in rank order. S = 1 (small
//      messages): the lowest rank of the node owns everything, the node
//      leader. S = ranks of the smallest node (large messages): every rank
//      owns a slice, and the slices of a node travel in parallel.
//   2. Leaf (network): the owners of slice j in the nodes of one leaf put
//      their partial result to the owner in the leaf's first node, which
//      folds them in node order. Without a leaf map every node is its own
//      leaf.
//   3. Spine (network): the leaf leaders of slice j allreduce it: two leaves
//      exchange partial results and each folds them in leaf order; more
//      leaves run recursive doubling (S = 1) or Rabenseifner (sliced).
//      The leaf leader then puts the result to the leaf's other owners.
//   4. Node again: every owner raises the flags of its node's ranks, which
//      copy the finished slice straight out of the owner's scratch when they
//      can read it in place (mapped shared memory); otherwise the owner puts
//      the slice to each of them.
// Each element is folded in one fixed order (node order inside a node, then
// node order inside a leaf, then leaves), by one rank per step, and copied
// everywhere else: every rank gets the same bits.
//
// Slices are cut into `pipeline` sub-blocks, and steps 1-4 run sub-block by
// sub-block: a sub-block moves to the next level as soon as it is folded.
//
// Scratch (per round half, each slot one slice rounded up to 64 bytes):
//   node_in  max_node - 1 slots  step 1 inputs, one per sender
//   part     1 slot              this owner's partial result
//   leaf_in  max_leaf - 1 slots  step 2 inputs (leaf leaders)
//   spine    the spine's area    step 3 (two leaves: 1 slot)
//   fin      1 slot              the finished slice (two leaves; leaf members)
//   node_out the whole vector    step 4 when the node's scratch is not readable
// The finished slice of an owner is `fin`, or `part` for a leaf leader whose
// spine reduces in place (one leaf, or more than two).
//
// A node peer's `part` or `fin` read in place in step 4 stays valid long
// enough: the owner rewrites this half two rounds later, after every rank of
// its node has put its input of that round, so after they finished this one.
#include "reduce.h"
#include "schedules.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace doorbell::coll {

Hierarchy make_hierarchy(const doorbell_coll_team_t &team)
{
    Hierarchy          h;
    std::map<int, int> node_ids; // node id -> index, in order of first rank
    h.node_index.resize(team.size);
    for (int i = 0; i < team.size; i++) {
        int id           = team.node_of ? team.node_of[i] : i;
        auto [it, fresh] = node_ids.try_emplace(id, static_cast<int>(h.nodes.size()));
        if (fresh)
            h.nodes.emplace_back();
        Group &node = h.nodes[it->second];
        if (i == team.rank)
            node.me = node.size();
        node.ranks.push_back(i);
        h.node_index[i] = it->second;
    }
    std::map<int, int> leaf_ids; // leaf id -> index, in order of first node
    for (int x = 0; x < static_cast<int>(h.nodes.size()); x++) {
        int id           = team.leaf_of ? team.leaf_of[h.nodes[x].ranks[0]] : x;
        auto [it, fresh] = leaf_ids.try_emplace(id, static_cast<int>(h.leaves.size()));
        if (fresh)
            h.leaves.emplace_back();
        h.leaf_of_node.push_back(it->second);
        h.pos_in_leaf.push_back(static_cast<int>(h.leaves[it->second].size()));
        h.leaves[it->second].push_back(x);
    }
    h.max_node = h.min_node = h.nodes.empty() ? 1 : h.nodes[0].size();
    for (const Group &node : h.nodes) {
        h.max_node = std::max(h.max_node, node.size());
        h.min_node = std::min(h.min_node, node.size());
    }
    for (const auto &leaf : h.leaves)
        h.max_leaf = std::max(h.max_leaf, static_cast<int>(leaf.size()));
    return h;
}

HierPlan hierarchical_plan(const Hierarchy &h, size_t bytes, const doorbell_coll_tuning_t &tuning)
{
    HierPlan p;
    bool     large    = bytes >= tuning.hier_slice_min && bytes < tuning.hier_slice_max;
    p.slices          = large ? h.min_node : 1;
    p.spine_tree_high = large;
    return p;
}

namespace {

static constexpr size_t kFoldTileBytes = 16384; ///< the inputs of a tile stay in L2

// Slot that `sender` uses at `receiver` (the receiver's own is skipped).
int slot_of(int sender, int receiver)
{
    return sender < receiver ? sender : sender - 1;
}

enum class Spine {
    kNone,
    kExchange,
    kRecursiveDoubling,
    kRabenseifner
};

Spine spine_kind(const Hierarchy &h, const HierPlan &p)
{
    size_t leaves = h.leaves.size();
    if (leaves <= 1)
        return Spine::kNone;
    if (leaves == 2)
        return Spine::kExchange;
    return p.spine_tree_high ? Spine::kRabenseifner : Spine::kRecursiveDoubling;
}

struct Layout {
    size_t   stride; ///< bytes per slice slot
    size_t   node_in, part, leaf_in, spine, fin, node_out, end;
    uint32_t f_node_in, f_leaf_in, f_spine, f_fin, f_node_out, flags;
};

Layout layout(const Hierarchy &h, const HierPlan &p, const Segment &seg, bool node_readable)
{
    const size_t   slice_count = (seg.count + p.slices - 1) / p.slices;
    const size_t   slice_bytes = slice_count * seg.esize;
    const int      leaves      = static_cast<int>(h.leaves.size());
    const uint32_t P           = static_cast<uint32_t>(p.pipeline);
    Layout         l;
    l.stride             = (slice_bytes + 63) / 64 * 64;
    l.node_in            = 0;
    l.part               = l.node_in + static_cast<size_t>(h.max_node - 1) * l.stride;
    l.leaf_in            = l.part + l.stride;
    l.spine              = l.leaf_in + static_cast<size_t>(h.max_leaf - 1) * l.stride;
    size_t   spine_bytes = 0;
    uint32_t spine_flags = 0;
    Segment  slice       = seg;
    slice.count          = slice_count;
    switch (spine_kind(h, p)) {
    case Spine::kNone:
        break;
    case Spine::kExchange:
        spine_bytes = l.stride;
        spine_flags = P;
        break;
    case Spine::kRecursiveDoubling:
        spine_bytes = recursive_doubling_scratch(leaves, slice_bytes);
        spine_flags = recursive_doubling_flags(leaves);
        break;
    case Spine::kRabenseifner:
        spine_bytes = rabenseifner_scratch(leaves, slice);
        spine_flags = rabenseifner_flags(leaves);
        break;
    }
    l.fin        = l.spine + spine_bytes;
    l.node_out   = l.fin + l.stride;
    l.end        = l.node_out + (node_readable ? 0 : seg.bytes());
    l.f_node_in  = 0;
    l.f_leaf_in  = l.f_node_in + static_cast<uint32_t>(h.max_node - 1) * P;
    l.f_spine    = l.f_leaf_in + static_cast<uint32_t>(h.max_leaf - 1) * P;
    l.f_fin      = l.f_spine + spine_flags;
    l.f_node_out = l.f_fin + P;
    l.flags      = l.f_node_out + static_cast<uint32_t>(p.slices) * P;
    return l;
}

// One rank's part of the allreduce on the hierarchy.
class Hier {
public:
    Hier(Round &r, const Hierarchy &h, const HierPlan &p, const Segment &seg) :
        r_(r),
        h_(h),
        p_(p),
        seg_(seg),
        l_(layout(h, p, seg, r.node_readable())),
        x_(h.node_index[r.rank()]),
        node_(h.nodes[x_]),
        i_(node_.me),
        k_(node_.size()),
        spine_(spine_kind(h, p))
    {
    }

    Status run()
    {
        Status st;
        if (!(st = contribute()).ok())
            return st;
        if (i_ < p_.slices && !(st = own_slice()).ok())
            return st;
        return collect();
    }

private:
    Span slice(int j) const { return part(seg_.count, static_cast<size_t>(p_.slices), j); }
    Span sub(int j, int b) const
    {
        return part(slice(j).count, static_cast<size_t>(p_.pipeline), b);
    }
    uint32_t sub_flag(uint32_t base, int slot, int b) const
    {
        return base + static_cast<uint32_t>(slot * p_.pipeline + b);
    }
    // The owner of slice j in node `x`.
    int owner(int x, int j) const { return h_.nodes[x].ranks[j]; }
    // Where the owners of this node keep their finished slice.
    size_t final_off() const
    {
        bool in_part = h_.pos_in_leaf[x_] == 0 && spine_ != Spine::kExchange;
        return in_part ? l_.part : l_.fin;
    }

    // Step 1: slice j of our input to the node's j-th rank, peers in turn
    // from our right neighbour on, so that no owner is everyone's first.
    Status contribute()
    {
        Status st;
        for (int b = 0; b < p_.pipeline; b++)
            for (int t = 1; t < k_; t++) {
                int j = (i_ + t) % k_;
                if (j >= p_.slices)
                    continue;
                Span sl = slice(j), sb = sub(j, b);
                if (sb.count == 0)
                    continue;
                int s = slot_of(i_, j);
                if (!(st = r_.put(node_.ranks[j], seg_.in_at(sl.start + sb.start),
                                  sb.count * seg_.esize,
                                  l_.node_in + s * l_.stride + sb.start * seg_.esize,
                                  sub_flag(l_.f_node_in, s, b)))
                         .ok())
                    return st;
            }
        return {};
    }

    // Steps 1-4 for the slice we own.
    Status own_slice()
    {
        const int    j = i_, lf = h_.leaf_of_node[x_], pos = h_.pos_in_leaf[x_];
        const auto  &leaf = h_.leaves[lf];
        const size_t es   = seg_.esize;
        const Span   sl   = slice(j);
        if (sl.count == 0)
            return {};
        unsigned char *part        = r_.at(l_.part);
        const int      leaf_leader = owner(leaf[0], j);
        int            other       = -1; // the other leaf's leader (two leaves)
        if (spine_ == Spine::kExchange && pos == 0)
            other = owner(h_.leaves[1 - lf][0], j);
        Status st;

        for (int b = 0; b < p_.pipeline; b++) {
            Span sb = sub(j, b);
            if (sb.count == 0)
                continue;
            // Step 1: fold the node's inputs in rank order.
            for (int t = 1; t < k_; t++) {
                int q = (i_ - t + k_) % k_;
                if (!(st = r_.wait(node_.ranks[q], sub_flag(l_.f_node_in, slot_of(q, i_), b))).ok())
                    return st;
            }
            unsigned char *out = part + sb.start * es;
            fold_node(out, sl.start + sb.start, sb.start, sb.count);
            const size_t len = sb.count * es;
            if (pos > 0) {
                // Step 2, leaf member: the partial to the leaf leader.
                if (!(st = r_.put(leaf_leader, out, len,
                                  l_.leaf_in + (pos - 1) * l_.stride + sb.start * es,
                                  sub_flag(l_.f_leaf_in, pos - 1, b)))
                         .ok())
                    return st;
                continue;
            }
            // Step 2, leaf leader: fold the leaf's partials in node order.
            for (size_t q = 1; q < leaf.size(); q++) {
                int s = static_cast<int>(q) - 1;
                if (!(st = r_.wait(owner(leaf[q], j), sub_flag(l_.f_leaf_in, s, b))).ok())
                    return st;
                reduce(seg_.dtype, seg_.op, out, r_.at(l_.leaf_in + s * l_.stride + sb.start * es),
                       out, sb.count);
            }
            // Step 3, two leaves: our partial to the other leaf's leader.
            if (other >= 0 && !(st = r_.put(other, out, len, l_.spine + sb.start * es,
                                            sub_flag(l_.f_spine, 0, b)))
                                   .ok())
                return st;
        }

        if (pos > 0) {
            // Step 3 ends with the leaf leader's result in our `fin`.
            for (int b = 0; b < p_.pipeline; b++) {
                if (sub(j, b).count == 0)
                    continue;
                if (!(st = r_.wait(leaf_leader, sub_flag(l_.f_fin, 0, b))).ok())
                    return st;
                if (!(st = publish(b, l_.fin)).ok())
                    return st;
            }
            return {};
        }
        if (spine_ == Spine::kExchange) {
            // Fold the two leaves' partials in leaf order into `fin` (`part`
            // may still be read by the put to the other leaf).
            unsigned char *fin = r_.at(l_.fin);
            for (int b = 0; b < p_.pipeline; b++) {
                Span sb = sub(j, b);
                if (sb.count == 0)
                    continue;
                if (!(st = r_.wait(other, sub_flag(l_.f_spine, 0, b))).ok())
                    return st;
                const size_t         o     = sb.start * es;
                const unsigned char *mine  = part + o;
                const unsigned char *their = r_.at(l_.spine + o);
                reduce(seg_.dtype, seg_.op, lf == 0 ? mine : their, lf == 0 ? their : mine, fin + o,
                       sb.count);
                if (!(st = leaf_bcast(b, l_.fin)).ok() || !(st = publish(b, l_.fin)).ok())
                    return st;
            }
            return {};
        }
        if (spine_ != Spine::kNone) {
            Group spine;
            spine.me = lf;
            for (const auto &other_leaf : h_.leaves)
                spine.ranks.push_back(owner(other_leaf[0], j));
            Segment whole{part, sl.count, es, seg_.dtype, seg_.op};
            Base    base{l_.spine, l_.f_spine};
            st = spine_ == Spine::kRabenseifner ? rabenseifner(r_, spine, base, whole) :
                                                  recursive_doubling(r_, spine, base, whole);
            if (!st.ok())
                return st;
        }
        for (int b = 0; b < p_.pipeline; b++) {
            if (sub(j, b).count == 0)
                continue;
            if (!(st = leaf_bcast(b, l_.part)).ok() || !(st = publish(b, l_.part)).ok())
                return st;
        }
        return {};
    }

    // Fold the node's inputs for `count` elements from element `elem` of the
    // vector (`at` within the slice) into out, in rank order, tile by tile
    // so that the partial result stays in cache.
    void fold_node(unsigned char *out, size_t elem, size_t at, size_t count)
    {
        const size_t es   = seg_.esize;
        const size_t tile = std::max<size_t>(1, kFoldTileBytes / es);
        for (size_t t = 0; t < count; t += tile) {
            const size_t tc  = std::min(tile, count - t);
            auto         src = [&](int q) -> const unsigned char         *{
                if (q == i_)
                    return seg_.in_at(elem + t);
                return r_.at(l_.node_in + slot_of(q, i_) * l_.stride + (at + t) * es);
            };
            unsigned char *o = out + t * es;
            if (k_ == 1) {
                std::memcpy(o, src(0), tc * es);
                continue;
            }
            reduce(seg_.dtype, seg_.op, src(0), src(1), o, tc);
            for (int q = 2; q < k_; q++)
                reduce(seg_.dtype, seg_.op, o, src(q), o, tc);
        }
    }

    // Step 3, leaf leader: sub-block b of the finished slice (at scratch
    // offset `from`) to the leaf's other owners, into their `fin`.
    Status leaf_bcast(int b, size_t from)
    {
        const int    j    = i_;
        const auto  &leaf = h_.leaves[h_.leaf_of_node[x_]];
        const Span   sb   = sub(j, b);
        const size_t o    = sb.start * seg_.esize;
        Status       st;
        for (size_t q = 1; q < leaf.size(); q++)
            if (!(st = r_.put(owner(leaf[q], j), r_.at(from + o), sb.count * seg_.esize, l_.fin + o,
                              sub_flag(l_.f_fin, 0, b)))
                     .ok())
                return st;
        return {};
    }

    // Step 4, owner: sub-block b of our finished slice (at scratch offset
    // `from`) to the node's other ranks (a flag when they read it in place),
    // and into our result.
    Status publish(int b, size_t from)
    {
        const int            j  = i_;
        const Span           sl = slice(j), sb = sub(j, b);
        const size_t         es   = seg_.esize;
        const unsigned char *src  = r_.at(from + sb.start * es);
        const bool           read = r_.node_readable();
        Status               st;
        for (int t = 1; t < k_; t++) {
            int q = (i_ + t) % k_;
            if (!(st = r_.put(node_.ranks[q], src, read ? 0 : sb.count * es,
                              read ? l_.part : l_.node_out + (sl.start + sb.start) * es,
                              sub_flag(l_.f_node_out, j, b)))
                     .ok())
                return st;
        }
        std::memcpy(seg_.at(sl.start + sb.start), src, sb.count * es);
        return {};
    }

    // Step 4, every rank: the other owners' finished slices into our result.
    Status collect()
    {
        const size_t es = seg_.esize;
        // In place, the result overwrites step 1's put sources.
        bool   quiet = seg_.in != nullptr;
        Status st;
        for (int j = 0; j < std::min(k_, p_.slices); j++) {
            if (j == i_)
                continue;
            const Span sl = slice(j);
            for (int b = 0; b < p_.pipeline; b++) {
                Span sb = sub(j, b);
                if (sb.count == 0)
                    continue;
                if (!(st = r_.wait(node_.ranks[j], sub_flag(l_.f_node_out, j, b))).ok())
                    return st;
                if (!quiet && !(st = r_.quiet()).ok())
                    return st;
                quiet                    = true;
                const size_t         o   = (sl.start + sb.start) * es;
                const unsigned char *src = r_.node_readable() ?
                                               r_.node_at(node_.ranks[j],
                                                          final_off() + sb.start * es) :
                                               r_.at(l_.node_out + o);
                std::memcpy(seg_.at(sl.start + sb.start), src, sb.count * es);
            }
        }
        return {};
    }

    Round           &r_;
    const Hierarchy &h_;
    const HierPlan  &p_;
    const Segment   &seg_;
    const Layout     l_;
    const int        x_; ///< our node
    const Group     &node_;
    const int        i_, k_; ///< our place in the node, its size
    const Spine      spine_;
};

} // namespace

int hierarchical_pipeline(const HierPlan &p, const Segment &seg, size_t block)
{
    const size_t slice = (seg.count + p.slices - 1) / p.slices * seg.esize;
    if (block == 0 || slice <= block)
        return 1;
    return static_cast<int>(std::min<size_t>(kMaxPipeline, (slice + block - 1) / block));
}

size_t hierarchical_scratch(const Hierarchy &h, const HierPlan &p, const Segment &seg,
                            bool node_readable)
{
    return layout(h, p, seg, node_readable).end;
}

uint32_t hierarchical_flags(const Hierarchy &h, const HierPlan &p)
{
    Segment none{};
    none.esize = 1;
    return layout(h, p, none, true).flags;
}

Status hierarchical(Round &r, const Hierarchy &h, const HierPlan &p, const Segment &seg)
{
    if (seg.count == 0)
        return {};
    return Hier(r, h, p, seg).run();
}

} // namespace doorbell::coll
