// Recursive doubling (Thakur, Rabenseifner, Gropp 2005): at step k rank i
// exchanges its whole partial result with rank i ^ 2^k; both compute
// (lower half) op (higher half), so both hold the same bits. For n not a power
// of two, the first 2*rem ranks pair up first (even -> odd), the odd ones
// stand in for both, and hand the result back at the end.
//
// Scratch: slot 0 (pre), 1..L (steps), L+1 (post), one vector each.
#include "reduce.h"
#include "schedules.h"

#include <cstring>

namespace doorbell::coll {

size_t recursive_doubling_scratch(int n, size_t bytes)
{
    return static_cast<size_t>(log2_floor(n) + 2) * bytes;
}

uint32_t recursive_doubling_flags(int n)
{
    return static_cast<uint32_t>(log2_floor(n) + 2);
}

Status recursive_doubling(Round &r, const Group &g, Base base, const Segment &seg)
{
    const int n = g.size(), me = g.me;
    if (n <= 1 || seg.count == 0)
        return {};
    const int    p2 = pow2_floor(n), rem = n - p2, steps = log2_floor(n);
    const size_t m    = seg.bytes();
    auto         real = [&](int nr) { return g.ranks[nr < rem ? 2 * nr + 1 : nr + rem]; };
    auto         off  = [&](int slot) { return base.off + static_cast<size_t>(slot) * m; };
    auto         flag = [&](int slot) { return base.slot + static_cast<uint32_t>(slot); };
    Status       st;

    int nr;
    if (me < 2 * rem) {
        if (me % 2 == 0) {
            // Extra rank: hand the input to the odd neighbour, get the result back.
            if (!(st = r.put(g.ranks[me + 1], seg.buf, m, off(0), flag(0))).ok())
                return st;
            if (!(st = r.wait(g.ranks[me + 1], flag(steps + 1))).ok())
                return st;
            if (!(st = r.quiet()).ok())
                return st;
            std::memcpy(seg.buf, r.at(off(steps + 1)), m);
            return {};
        }
        if (!(st = r.wait(g.ranks[me - 1], flag(0))).ok())
            return st;
        reduce(seg.dtype, seg.op, r.at(off(0)), seg.buf, seg.buf, seg.count);
        nr = me / 2;
    } else {
        nr = me - rem;
    }

    for (int k = 0; k < steps; k++) {
        int pnr = nr ^ (1 << k), peer = real(pnr);
        if (!(st = r.put(peer, seg.buf, m, off(1 + k), flag(1 + k))).ok())
            return st;
        if (!(st = r.wait(peer, flag(1 + k))).ok())
            return st;
        if (!(st = r.quiet()).ok())
            return st; // seg.buf is rewritten below
        const unsigned char *in = r.at(off(1 + k));
        if (pnr < nr)
            reduce(seg.dtype, seg.op, in, seg.buf, seg.buf, seg.count);
        else
            reduce(seg.dtype, seg.op, seg.buf, in, seg.buf, seg.count);
    }

    if (me < 2 * rem)
        return r.put(g.ranks[me - 1], seg.buf, m, off(steps + 1), flag(steps + 1));
    return {};
}

} // namespace doorbell::coll
