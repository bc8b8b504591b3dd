// Ring allreduce (Patarasuk and Yuan 2009): reduce-scatter in n-1 steps, each
// rank passing a chunk to its right neighbour, which adds its own; then an
// allgather in n-1 steps passes the finished chunks on. Chunk j is reduced in
// the order j, j+1, ..., j-1 (mod n), once, by one rank.
//
// Pipelining: each chunk is cut into `pipeline` sub-blocks; a sub-block is
// forwarded as soon as it is reduced, so the transfers of step s+1 overlap
// the reduction of step s. All puts of a step go out back to back.
//
// Scratch: 2(n-1) chunk slots (reduce-scatter steps, then allgather steps);
// partial sums are reduced into the receive slot and forwarded from there,
// so this rank's vector is only a put source for its own chunk at step 0.
#include "reduce.h"
#include "schedules.h"

#include <algorithm>
#include <cstring>

namespace doorbell::coll {
size_t ring_scratch(int n, const Segment &seg)
{
    return 2 * static_cast<size_t>(n - 1) * chunk_max_bytes(n, seg);
}

uint32_t ring_flags(int n, int pipeline)
{
    return 2 * static_cast<uint32_t>(n - 1) * static_cast<uint32_t>(pipeline);
}

int chunk_pipeline(int n, const Segment &seg, size_t block)
{
    if (block == 0)
        return 1;
    size_t p = (chunk_max_bytes(n, seg) + block - 1) / block;
    return static_cast<int>(std::clamp<size_t>(p, 1, kMaxPipeline));
}

Status ring(Round &r, const Group &g, Base base, const Segment &seg, int pipeline)
{
    const int n = g.size(), me = g.me;
    if (n <= 1 || seg.count == 0)
        return {};
    const size_t P = static_cast<size_t>(pipeline), cmax = chunk_max_bytes(n, seg);
    const int    right = g.ranks[(me + 1) % n], left = g.ranks[(me - 1 + n) % n];
    // Step s of the whole ring (0..2n-3): its scratch slot and flags.
    auto off = [&](int step, const Span &chunk, const Span &sub) {
        return base.off + static_cast<size_t>(step) * cmax + (sub.start - chunk.start) * seg.esize;
    };
    auto flag = [&](int step, size_t b) {
        return base.slot + static_cast<uint32_t>(static_cast<size_t>(step) * P + b);
    };
    // Sub-block b of a chunk, at its place in the vector (empty: skipped).
    auto sub_block = [&](const Span &chunk, size_t b) {
        Span sub = part(chunk.count, P, b);
        sub.start += chunk.start;
        return sub;
    };
    // For each sub-block of the chunk the left neighbour sends at a step,
    // once its flag says it is in: fn(b, sub, where it landed).
    auto receive = [&](int step, const Span &chunk, auto &&fn) -> Status {
        for (size_t b = 0; b < P; b++) {
            Span sub = sub_block(chunk, b);
            if (sub.count == 0)
                continue;
            Status st = r.wait(left, flag(step, b));
            if (st.ok())
                st = fn(b, sub, r.at(off(step, chunk, sub)));
            if (!st.ok())
                return st;
        }
        return {};
    };
    Status st;

    // Reduce-scatter step 0: send our own chunk.
    Span own = part(seg.count, n, me);
    for (size_t b = 0; b < P; b++) {
        Span sub = sub_block(own, b);
        if (sub.count == 0)
            continue;
        if (!(st = r.put(right, seg.in_at(sub.start), sub.count * seg.esize, off(0, own, sub),
                         flag(0, b)))
                 .ok())
            return st;
    }
    // Steps 0..n-2: receive chunk me-s-1, add ours, forward (the last step
    // finishes chunk me+1 in place and starts the allgather with it).
    for (int s = 0; s < n - 1; s++) {
        Span chunk = part(seg.count, n, (me - s - 1 + n) % n);
        st         = receive(s, chunk, [&](size_t b, const Span &sub, unsigned char *in) {
            const unsigned char *mine = seg.in_at(sub.start);
            size_t               len  = sub.count * seg.esize;
            if (s < n - 2) {
                reduce(seg.dtype, seg.op, in, mine, in, sub.count);
                return r.put(right, in, len, off(s + 1, chunk, sub), flag(s + 1, b));
            }
            unsigned char *out = seg.at(sub.start);
            reduce(seg.dtype, seg.op, in, mine, out, sub.count);
            return r.put(right, out, len, off(n - 1, chunk, sub), flag(n - 1, b));
        });
        if (!st.ok())
            return st;
    }
    // Our own chunk was the step-0 source; the allgather overwrites it.
    if (!(st = r.quiet()).ok())
        return st;
    // Allgather steps 0..n-2: receive finished chunk me-s, keep it, forward.
    for (int s = 0; s < n - 1; s++) {
        Span chunk = part(seg.count, n, (me - s + n) % n);
        int  step  = n - 1 + s;
        st         = receive(step, chunk, [&](size_t b, const Span &sub, unsigned char *in) {
            size_t len = sub.count * seg.esize;
            std::memcpy(seg.at(sub.start), in, len);
            if (s < n - 2)
                return r.put(right, in, len, off(step + 1, chunk, sub), flag(step + 1, b));
            return Status{};
        });
        if (!st.ok())
            return st;
    }
    return {};
}

} // namespace doorbell::coll
