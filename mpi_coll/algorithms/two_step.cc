// Two-step allreduce for few ranks: a reduce-scatter and an allgather, each
// done as one all-to-all step instead of the ring's n-1. Rank j owns chunk j:
//   step 1: every rank writes chunk j of its input to rank j; rank j folds
//           the n contributions in rank order, ((x0 op x1) op x2) ...
//   step 2: rank j writes its finished chunk to every other rank.
// Each rank sends 2m(n-1)/n bytes, as in the ring, but waits twice instead of
// 2(n-1) times; with more ranks than cores every wait can cost a scheduler
// slice, so the number of waits, not the bytes, sets the time. The puts of a
// step go to n-1 peers, so this is for small communicators (direct_max_ranks).
//
// Chunks are cut into `pipeline` sub-blocks, sent sub-block by sub-block:
// a sub-block is folded as soon as every peer delivered it, and forwarded.
//
// When every rank can read every other's scratch in place (one node, mapped
// memory), step 2 writes nothing to the peers: rank j folds into its own
// scratch, raises their flags, and each reads chunk j from there straight
// into its result. That saves one copy of m(n-1)/n per rank. The chunk stays
// valid long enough: rank j reuses this half two rounds later, and it cannot
// finish the round in between before every rank has finished this one.
//
// Scratch: n-1 chunk slots for step 1 and n-1 for step 2, one per sender
// (the receiver's own slot is skipped; with readable peers, step 2 uses only
// slot 0, for our own chunk). Reads the send buffer directly; the caller's
// recvbuf receives only finished data.
#include "reduce.h"
#include "schedules.h"

#include <algorithm>
#include <cstring>

namespace doorbell::coll {
namespace {

// Slot that `sender` uses at `receiver`.
int slot_of(int sender, int receiver)
{
    return sender < receiver ? sender : sender - 1;
}

static constexpr size_t kFoldTileBytes = 16384; ///< n inputs + result stay in L2

} // namespace

size_t two_step_scratch(int n, const Segment &seg, bool peers_readable)
{
    // Readable peers: step 2 needs only our own slot (phase 1, slot 0).
    size_t slots = peers_readable ? static_cast<size_t>(n) : 2 * static_cast<size_t>(n - 1);
    return slots * chunk_max_bytes(n, seg);
}

uint32_t two_step_flags(int n, int pipeline)
{
    return 2 * static_cast<uint32_t>(n - 1) * static_cast<uint32_t>(pipeline);
}

Status two_step(Round &r, const Group &g, Base base, const Segment &seg, int pipeline)
{
    const int n = g.size(), me = g.me;
    if (n <= 1 || seg.count == 0)
        return {};
    const size_t P = static_cast<size_t>(pipeline), cmax = chunk_max_bytes(n, seg);
    // Slot s of step `phase` (0: reduce-scatter, 1: allgather).
    auto off = [&](int phase, int s, size_t within) {
        return base.off + static_cast<size_t>(phase * (n - 1) + s) * cmax + within * seg.esize;
    };
    auto flag = [&](int phase, int s, size_t b) {
        return base.slot + static_cast<uint32_t>(static_cast<size_t>(phase * (n - 1) + s) * P + b);
    };
    const bool read = r.peers_readable();
    Status     st;

    // Step 1: sub-block b of chunk j to rank j, peers in turn from our right
    // neighbour on, so that no rank is every rank's first target.
    for (size_t b = 0; b < P; b++) {
        for (int k = 1; k < n; k++) {
            int  j     = (me + k) % n;
            Span chunk = part(seg.count, n, j), sub = part(chunk.count, P, b);
            if (sub.count == 0)
                continue;
            if (!(st = r.put(g.ranks[j], seg.in_at(chunk.start + sub.start), sub.count * seg.esize,
                             off(0, slot_of(me, j), sub.start), flag(0, slot_of(me, j), b)))
                     .ok())
                return st;
        }
    }
    // Fold our chunk in rank order, sub-block by sub-block, and send each on.
    // The fold runs tile by tile, all n inputs on one tile before the next,
    // so the partial result stays in cache instead of streaming through
    // memory n-1 times. Each element still sees the same operations in the
    // same order. When the output would overwrite our input before it is read
    // (in place, rank > 0, result in recvbuf), the ranks below us accumulate
    // in rank 0's slot first, then our input and the ranks above join.
    Span         own      = part(seg.count, n, me);
    const size_t tile     = std::max<size_t>(1, kFoldTileBytes / seg.esize);
    const bool   out_free = read || seg.in != nullptr || me == 0;
    for (size_t b = 0; b < P; b++) {
        Span sub = part(own.count, P, b);
        if (sub.count == 0)
            continue;
        for (int k = 1; k < n; k++) {
            int j = (me - k + n) % n;
            if (!(st = r.wait(g.ranks[j], flag(0, slot_of(j, me), b))).ok())
                return st;
        }
        unsigned char *result = seg.at(own.start + sub.start);
        unsigned char *out    = read ? r.at(off(1, 0, sub.start)) : result;
        for (size_t t = 0; t < sub.count; t += tile) {
            const size_t         tc = std::min(tile, sub.count - t), e = sub.start + t;
            const unsigned char *mine  = seg.in_at(own.start + e);
            unsigned char       *out_t = out + t * seg.esize;
            auto src = [&](int j) { return j == me ? mine : r.at(off(0, slot_of(j, me), e)); };
            if (out_free) {
                reduce(seg.dtype, seg.op, src(0), src(1), out_t, tc);
                for (int j = 2; j < n; j++)
                    reduce(seg.dtype, seg.op, out_t, src(j), out_t, tc);
            } else {
                unsigned char *acc = r.at(off(0, slot_of(0, me), e));
                for (int j = 1; j < n; j++) {
                    reduce(seg.dtype, seg.op, acc, src(j), j < me ? acc : out_t, tc);
                    if (j == me)
                        acc = out_t;
                }
            }
            if (read)
                std::memcpy(result + t * seg.esize, out_t, tc * seg.esize);
        }
        const size_t len = sub.count * seg.esize;
        for (int k = 1; k < n; k++) {
            int j = (me + k) % n;
            // Readable peers: the flag alone (no bytes, so any offset in range).
            if (!(st = r.put(g.ranks[j], out, read ? 0 : len,
                             read ? base.off : off(1, slot_of(me, j), sub.start),
                             flag(1, slot_of(me, j), b)))
                     .ok())
                return st;
        }
    }
    // In place, the chunks written below were step-1 put sources.
    if (seg.in == nullptr && !(st = r.quiet()).ok())
        return st;
    // Step 2: the finished chunks of the others, into place.
    for (size_t b = 0; b < P; b++) {
        for (int k = 1; k < n; k++) {
            int  j     = (me - k + n) % n;
            Span chunk = part(seg.count, n, j), sub = part(chunk.count, P, b);
            if (sub.count == 0)
                continue;
            if (!(st = r.wait(g.ranks[j], flag(1, slot_of(j, me), b))).ok())
                return st;
            const unsigned char *src = read ? r.peer_at(g.ranks[j], off(1, 0, sub.start)) :
                                              r.at(off(1, slot_of(j, me), sub.start));
            std::memcpy(seg.at(chunk.start + sub.start), src, sub.count * seg.esize);
        }
    }
    return {};
}

} // namespace doorbell::coll
