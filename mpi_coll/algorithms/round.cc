// A round: the transport calls of one segment, on this round's half of the
// scratch and flags, with bounds checks and a bounded wait.
#include "schedules.h"

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <thread>

namespace doorbell::coll {

static constexpr unsigned kIdlePollsBeforeYield = 1; ///< polls with no event

Status make_error(int code, const char *fmt, ...)
{
    char    buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return Status{code, buf};
}

Round::Round(doorbell_coll_team_t &team, uint64_t seq) :
    team_(team),
    seq_(seq),
    scratch_(team.scratch + (seq & 1) * team.scratch_half),
    flags_(team.flags + (seq & 1) * team.flag_half)
{
}

Status Round::put(int peer, const void *src, size_t len, size_t off, uint32_t slot)
{
    if (off > team_.scratch_half || len > team_.scratch_half - off)
        return make_error(DOORBELL_COLL_ERR_NO_SPACE,
                          "rank %d: put of %zu bytes at offset %zu to rank %d exceeds "
                          "the %zu-byte scratch half",
                          team_.rank, len, off, peer, team_.scratch_half);
    if (slot >= team_.flag_half)
        return make_error(DOORBELL_COLL_ERR_NO_SPACE,
                          "rank %d: flag slot %u for rank %d beyond the %u slots", team_.rank, slot,
                          peer, team_.flag_half);
    uint32_t abs_slot = slot + static_cast<uint32_t>((seq_ & 1) * team_.flag_half);
    size_t   abs_off  = off + (seq_ & 1) * team_.scratch_half;
    if (team_.ops->put_signal(team_.ctx, peer, src, len, abs_off, abs_slot, seq_) != 0)
        return make_error(DOORBELL_COLL_ERR_TRANSPORT,
                          "rank %d: put of %zu bytes to rank %d failed (round %llu)", team_.rank,
                          len, peer, static_cast<unsigned long long>(seq_));
    return {};
}

Status Round::wait(int peer, uint32_t slot)
{
    if (slot >= team_.flag_half)
        return make_error(DOORBELL_COLL_ERR_NO_SPACE,
                          "rank %d: flag slot %u for rank %d beyond the %u slots", team_.rank, slot,
                          peer, team_.flag_half);
    uint64_t *flag = &flags_[slot];
    if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) >= seq_)
        return {};
    using clock    = std::chrono::steady_clock;
    auto     start = clock::now();
    unsigned idle  = 0;
    for (unsigned spins = 1;; spins++) {
        int events = team_.ops->progress(team_.ctx, peer);
        if (events < 0)
            return make_error(DOORBELL_COLL_ERR_TRANSPORT,
                              "rank %d: transport failed while waiting for rank %d (round %llu)",
                              team_.rank, peer, static_cast<unsigned long long>(seq_));
        if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) >= seq_)
            return {};
        // Oversubscribed: the peer we wait for may need this core; give it
        // away as soon as a poll finds nothing (as opal_progress does), or let
        // the transport put this rank to sleep until a peer signals it.
        idle = events > 0 ? 0 : idle + 1;
        if (team_.yield && idle >= kIdlePollsBeforeYield) {
            if (team_.ops->idle == nullptr) {
                std::this_thread::yield();
                idle = 0;
            } else if (team_.ops->idle(team_.ctx, peer, flag, seq_, idle) != 0) {
                return make_error(DOORBELL_COLL_ERR_TRANSPORT,
                                  "rank %d: transport failed while idle, waiting for rank %d "
                                  "(round %llu)",
                                  team_.rank, peer, static_cast<unsigned long long>(seq_));
            }
        }
        if (team_.timeout_ns != 0 && spins % 64 == 0) {
            auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() -
                                                                               start);
            if (static_cast<uint64_t>(waited.count()) > team_.timeout_ns)
                return make_error(
                    DOORBELL_COLL_ERR_TIMED_OUT,
                    "rank %d: no signal from rank %d within %.3f s (flag %u, round %llu; the "
                    "flag holds round %llu): peer dead or stuck",
                    team_.rank, peer, team_.timeout_ns / 1e9, slot,
                    static_cast<unsigned long long>(seq_),
                    static_cast<unsigned long long>(__atomic_load_n(flag, __ATOMIC_ACQUIRE)));
        }
    }
}

Status Round::quiet()
{
    if (team_.ops->quiet(team_.ctx) != 0)
        return make_error(DOORBELL_COLL_ERR_TRANSPORT,
                          "rank %d: completing outstanding puts failed (round %llu)", team_.rank,
                          static_cast<unsigned long long>(seq_));
    return {};
}

} // namespace doorbell::coll
