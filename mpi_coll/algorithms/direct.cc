// Direct exchange for small vectors on few ranks: every rank writes its
// whole input to every other rank in one step, then folds all n inputs in
// rank order, ((x0 op x1) op x2) ..., which every rank computes identically.
// One step instead of log2(n); n-1 puts per rank, so only for small n.
//
// Scratch: n-1 vectors, one per sender (the receiver's own slot is skipped).
#include "reduce.h"
#include "schedules.h"

namespace doorbell::coll {
namespace {

// Slot that `sender` uses at `receiver`.
int slot_of(int sender, int receiver)
{
    return sender < receiver ? sender : sender - 1;
}

} // namespace

size_t direct_scratch(int n, size_t bytes)
{
    return static_cast<size_t>(n - 1) * bytes;
}

uint32_t direct_flags(int n)
{
    return static_cast<uint32_t>(n - 1);
}

Status direct(Round &r, const Group &g, Base base, const Segment &seg)
{
    const int n = g.size(), me = g.me;
    if (n <= 1 || seg.count == 0)
        return {};
    const size_t m   = seg.bytes();
    auto         off = [&](int slot) { return base.off + static_cast<size_t>(slot) * m; };
    Status       st;
    for (int j = 0; j < n; j++) {
        if (j == me)
            continue;
        int s = slot_of(me, j);
        if (!(st = r.put(g.ranks[j], seg.buf, m, off(s), base.slot + s)).ok())
            return st;
    }
    for (int j = 0; j < n; j++) {
        if (j == me)
            continue;
        if (!(st = r.wait(g.ranks[j], base.slot + slot_of(j, me))).ok())
            return st;
    }
    if (!(st = r.quiet()).ok())
        return st; // seg.buf is rewritten below
    // Ranks below us accumulate in rank 0's slot, then fold in our input and
    // the ranks above.
    unsigned char *acc = me == 0 ? seg.buf : r.at(off(slot_of(0, me)));
    for (int j = 1; j < n; j++) {
        if (j == me) {
            reduce(seg.dtype, seg.op, acc, seg.buf, seg.buf, seg.count);
            acc = seg.buf;
        } else {
            reduce(seg.dtype, seg.op, acc, r.at(off(slot_of(j, me))), acc, seg.count);
        }
    }
    return {};
}

} // namespace doorbell::coll
