// Two-hop aggregation: reduce inside each node to its leader (lowest rank),
// then inside each leaf to the leaf leader (lowest node leader), allreduce
// across the spine between leaf leaders, then broadcast back down the same
// tree. Leaders fold their members in rank order, so each element has one
// fixed order. Without leaf information the node leaders form the spine.
//
// Scratch: node members' inputs (max_node - 1 vectors), leaf members' inputs
// (max_leaf - 1), the spine schedule's area, one vector each for the leaf and
// node broadcasts.
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
    std::map<int, int> leaf_ids;
    for (const Group &node : h.nodes) {
        int leader       = node.ranks[0];
        int id           = team.leaf_of ? team.leaf_of[leader] : 0;
        auto [it, fresh] = leaf_ids.try_emplace(id, static_cast<int>(h.leaves.size()));
        if (fresh)
            h.leaves.emplace_back();
        h.leaves[it->second].push_back(leader);
    }
    // No leaf level: every node leader is on the spine.
    if (!team.leaf_of) {
        std::vector<int> leaders = h.leaves[0];
        h.leaves.clear();
        for (int l : leaders)
            h.leaves.push_back({l});
    }
    for (const auto &leaf : h.leaves) {
        if (leaf[0] == team.rank)
            h.spine.me = h.spine.size();
        h.spine.ranks.push_back(leaf[0]);
        h.max_leaf = std::max(h.max_leaf, static_cast<int>(leaf.size()));
    }
    for (const Group &node : h.nodes)
        h.max_node = std::max(h.max_node, node.size());
    return h;
}

namespace {

struct Layout {
    size_t   node_off, leaf_off, spine_off, leaf_bcast_off, node_bcast_off, end;
    uint32_t node_flag, leaf_flag, spine_flag, leaf_bcast_flag, node_bcast_flag, flags;
};

Layout layout(const Hierarchy &h, const Segment &seg, bool spine_ring, int pipeline)
{
    const size_t m = seg.bytes();
    const int    s = h.spine.size();
    Layout       l;
    l.node_off       = 0;
    l.leaf_off       = l.node_off + static_cast<size_t>(h.max_node - 1) * m;
    l.spine_off      = l.leaf_off + static_cast<size_t>(h.max_leaf - 1) * m;
    l.leaf_bcast_off = l.spine_off +
                       (spine_ring ? ring_scratch(s, seg) : recursive_doubling_scratch(s, m));
    l.node_bcast_off  = l.leaf_bcast_off + m;
    l.end             = l.node_bcast_off + m;
    l.node_flag       = 0;
    l.leaf_flag       = l.node_flag + static_cast<uint32_t>(h.max_node - 1);
    l.spine_flag      = l.leaf_flag + static_cast<uint32_t>(h.max_leaf - 1);
    l.leaf_bcast_flag = l.spine_flag +
                        (spine_ring ? ring_flags(s, pipeline) : recursive_doubling_flags(s));
    l.node_bcast_flag = l.leaf_bcast_flag + 1;
    l.flags           = l.node_bcast_flag + 1;
    return l;
}

// Leader side of a reduce: fold members 1..n-1 (ascending) into seg.
Status gather_reduce(Round &r, const std::vector<int> &members, size_t off, uint32_t flag,
                     const Segment &seg)
{
    Status st;
    for (size_t i = 1; i < members.size(); i++) {
        if (!(st = r.wait(members[i], flag + static_cast<uint32_t>(i - 1))).ok())
            return st;
        reduce(seg.dtype, seg.op, seg.buf, r.at(off + (i - 1) * seg.bytes()), seg.buf, seg.count);
    }
    return {};
}

// Member side of a level: the i-th member (i >= 1) puts its vector into the
// leader's slot i-1, then waits for the leader's result and takes it.
Status member_of(Round &r, int leader, size_t i, size_t off, uint32_t flag, size_t bcast_off,
                 uint32_t bcast_flag, const Segment &seg)
{
    const size_t m = seg.bytes();
    Status       st;
    if (!(st = r.put(leader, seg.buf, m, off + (i - 1) * m, flag + static_cast<uint32_t>(i - 1)))
             .ok())
        return st;
    if (!(st = r.wait(leader, bcast_flag)).ok())
        return st;
    if (!(st = r.quiet()).ok())
        return st;
    std::memcpy(seg.buf, r.at(bcast_off), m);
    return {};
}

} // namespace

size_t hierarchical_scratch(const Hierarchy &h, const Segment &seg, bool spine_ring, int pipeline)
{
    return layout(h, seg, spine_ring, pipeline).end;
}

uint32_t hierarchical_flags(const Hierarchy &h, bool spine_ring, int pipeline)
{
    Segment none{};
    return layout(h, none, spine_ring, pipeline).flags;
}

Status hierarchical(Round &r, const Hierarchy &h, const Segment &seg, bool spine_ring, int pipeline)
{
    const Layout            l           = layout(h, seg, spine_ring, pipeline);
    const size_t            m           = seg.bytes();
    const int               me          = r.rank();
    const Group            &node        = h.nodes[h.node_index[me]];
    const int               node_leader = node.ranks[0];
    const std::vector<int> *leaf        = nullptr;
    for (const auto &lf : h.leaves)
        if (std::find(lf.begin(), lf.end(), node_leader) != lf.end())
            leaf = &lf;
    const int leaf_leader = (*leaf)[0];
    Status    st;

    // Up: node, then leaf.
    if (me != node_leader)
        return member_of(r, node_leader, static_cast<size_t>(node.me), l.node_off, l.node_flag,
                         l.node_bcast_off, l.node_bcast_flag, seg);
    if (!(st = gather_reduce(r, node.ranks, l.node_off, l.node_flag, seg)).ok())
        return st;
    if (me != leaf_leader) {
        size_t i = static_cast<size_t>(std::find(leaf->begin(), leaf->end(), me) - leaf->begin());
        if (!(st = member_of(r, leaf_leader, i, l.leaf_off, l.leaf_flag, l.leaf_bcast_off,
                             l.leaf_bcast_flag, seg))
                 .ok())
            return st;
    } else {
        if (!(st = gather_reduce(r, *leaf, l.leaf_off, l.leaf_flag, seg)).ok())
            return st;
        // Across the spine.
        Base spine{l.spine_off, l.spine_flag};
        st = spine_ring ? ring(r, h.spine, spine, seg, pipeline) :
                          recursive_doubling(r, h.spine, spine, seg);
        if (!st.ok())
            return st;
        if (!(st = r.quiet()).ok())
            return st;
        // Down to the leaf's node leaders.
        for (size_t i = 1; i < leaf->size(); i++)
            if (!(st = r.put((*leaf)[i], seg.buf, m, l.leaf_bcast_off, l.leaf_bcast_flag)).ok())
                return st;
    }
    // Down to the node's members.
    for (int i = 1; i < node.size(); i++)
        if (!(st = r.put(node.ranks[i], seg.buf, m, l.node_bcast_off, l.node_bcast_flag)).ok())
            return st;
    return {};
}

} // namespace doorbell::coll
