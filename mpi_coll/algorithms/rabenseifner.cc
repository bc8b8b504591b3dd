// Rabenseifner's allreduce (Rabenseifner 2004; Thakur et al. 2005):
// reduce-scatter by recursive halving (step k: exchange half of the current
// range with rank i ^ 2^k, keep the other half reduced), then an allgather by
// recursive doubling that retraces the steps. Each element is reduced once,
// by the rank that keeps it. Ranks beyond the largest power of two fold in
// first and get the result back last, as in recursive doubling.
//
// Nearest partner first, as MPICH does: the first step moves half the
// message, the last 1/n of it, and ranks placed by slot are nearest their
// neighbours (one host, one leaf). Farthest first sent the half across the
// spine of a 2-leaf fabric and doubled the bytes on it (4 hosts x 1 rank:
// 2m per direction instead of m).
//
// Scratch: pre (m), halving step k (ceil(count / 2^(k+1)) elements), the same
// again for the allgather steps, post (m).
#include "reduce.h"
#include "schedules.h"

#include <cstring>

namespace doorbell::coll {
namespace {

size_t half_cap(size_t count, int k)
{
    size_t d = size_t{1} << (k + 1);
    return (count + d - 1) / d;
}

} // namespace

size_t rabenseifner_scratch(int n, const Segment &seg)
{
    size_t caps = 0;
    for (int k = 0; k < log2_floor(n); k++)
        caps += half_cap(seg.count, k);
    return 2 * seg.bytes() + 2 * caps * seg.esize;
}

uint32_t rabenseifner_flags(int n)
{
    return static_cast<uint32_t>(2 * log2_floor(n) + 2);
}

Status rabenseifner(Round &r, const Group &g, Base base, const Segment &seg)
{
    const int n = g.size(), me = g.me;
    if (n <= 1 || seg.count == 0)
        return {};
    const int    p2 = pow2_floor(n), rem = n - p2, steps = log2_floor(n);
    const size_t m = seg.bytes(), e = seg.esize;
    auto         real = [&](int nr) { return g.ranks[nr < rem ? 2 * nr + 1 : nr + rem]; };
    // Scratch offsets: pre, halving steps, allgather steps, post.
    std::vector<size_t> rs_off(steps), ag_off(steps);
    size_t              at = base.off + m;
    for (int k = 0; k < steps; k++) {
        rs_off[k] = at;
        at += half_cap(seg.count, k) * e;
    }
    for (int k = 0; k < steps; k++) {
        ag_off[k] = at;
        at += half_cap(seg.count, k) * e;
    }
    const size_t   post_off = at;
    const uint32_t pre_flag = base.slot, post_flag = base.slot + 2 * steps + 1;
    auto           rs_flag = [&](int k) { return base.slot + 1 + static_cast<uint32_t>(k); };
    auto   ag_flag = [&](int k) { return base.slot + 1 + static_cast<uint32_t>(steps + k); };
    Status st;

    int nr;
    if (me < 2 * rem) {
        if (me % 2 == 0) {
            if (!(st = r.put(g.ranks[me + 1], seg.buf, m, base.off, pre_flag)).ok())
                return st;
            if (!(st = r.wait(g.ranks[me + 1], post_flag)).ok())
                return st;
            if (!(st = r.quiet()).ok())
                return st;
            std::memcpy(seg.buf, r.at(post_off), m);
            return {};
        }
        if (!(st = r.wait(g.ranks[me - 1], pre_flag)).ok())
            return st;
        reduce(seg.dtype, seg.op, r.at(base.off), seg.buf, seg.buf, seg.count);
        nr = me / 2;
    } else {
        nr = me - rem;
    }

    // Reduce-scatter by recursive halving; remember each level's range.
    std::vector<size_t> lo_at(steps), hi_at(steps);
    size_t              lo = 0, hi = seg.count;
    for (int k = 0; k < steps; k++) {
        int pnr = nr ^ (1 << k), peer = real(pnr);
        lo_at[k]       = lo;
        hi_at[k]       = hi;
        size_t mid     = lo + (hi - lo) / 2;
        size_t keep_lo = nr < pnr ? lo : mid, keep_hi = nr < pnr ? mid : hi;
        size_t send_lo = nr < pnr ? mid : lo, send_hi = nr < pnr ? hi : mid;
        if (send_hi > send_lo &&
            !(st = r.put(peer, seg.at(send_lo), (send_hi - send_lo) * e, rs_off[k], rs_flag(k)))
                 .ok())
            return st;
        if (keep_hi > keep_lo) {
            if (!(st = r.wait(peer, rs_flag(k))).ok())
                return st;
            const unsigned char *in   = r.at(rs_off[k]);
            unsigned char       *kept = seg.at(keep_lo);
            if (pnr < nr)
                reduce(seg.dtype, seg.op, in, kept, kept, keep_hi - keep_lo);
            else
                reduce(seg.dtype, seg.op, kept, in, kept, keep_hi - keep_lo);
        }
        lo = keep_lo;
        hi = keep_hi;
    }
    // The allgather writes ranges that were put sources above.
    if (!(st = r.quiet()).ok())
        return st;
    // Allgather: retrace the levels, swapping finished ranges with the partner.
    for (int k = steps - 1; k >= 0; k--) {
        int    pnr = nr ^ (1 << k), peer = real(pnr);
        size_t plo = lo == lo_at[k] ? hi : lo_at[k];
        size_t phi = lo == lo_at[k] ? hi_at[k] : lo;
        if (hi > lo && !(st = r.put(peer, seg.at(lo), (hi - lo) * e, ag_off[k], ag_flag(k))).ok())
            return st;
        if (phi > plo) {
            if (!(st = r.wait(peer, ag_flag(k))).ok())
                return st;
            std::memcpy(seg.at(plo), r.at(ag_off[k]), (phi - plo) * e);
        }
        lo = lo_at[k];
        hi = hi_at[k];
    }

    if (me < 2 * rem)
        return r.put(g.ranks[me - 1], seg.buf, m, post_off, post_flag);
    return {};
}

} // namespace doorbell::coll
