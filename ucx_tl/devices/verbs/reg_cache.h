/*
 * Registration cache: an interval cache of memory registrations, so that a
 * zero-copy buffer used again is not registered again (ibv_reg_mr pins pages
 * and costs microseconds). Independent of verbs: the device passes the
 * register / deregister functions.
 *
 * A lookup hits when one cached region covers [addr, addr+length). A miss
 * registers the page-aligned range, merged with the overlapping and adjacent
 * regions nobody holds (so the cache stays mostly disjoint). Regions are held
 * by the WQEs that reference them (acquire / release) and are deregistered
 * only when unheld: on LRU eviction past the capacity, or on invalidate()
 * (the memory is going away).
 *
 * Not thread-safe: one cache per iface, used under the iface's serialization.
 */
#pragma once

#include "doorbell_core.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>

namespace doorbell::verbs {

struct CachedRegion {
    uintptr_t                           start  = 0;       ///< page-aligned first byte
    uintptr_t                           end    = 0;       ///< one past the last byte (page-aligned)
    void                               *handle = nullptr; ///< the registration (ibv_mr *)
    uint32_t                            lkey   = 0;
    unsigned                            refs   = 0;     ///< WQEs in flight that use it
    bool                                stale  = false; ///< invalidated: deregister when unheld
    std::list<CachedRegion *>::iterator lru;
};

struct RegCacheStats {
    uint64_t hits          = 0;
    uint64_t misses        = 0;
    uint64_t merges        = 0; ///< regions folded into a new one
    uint64_t evictions     = 0;
    uint64_t invalidations = 0;
};

class RegCache {
public:
    /// Registers [start, end); fills handle and lkey. Returns a status with
    /// the message set on failure.
    using RegisterFn   = std::function<doorbell_status_t(CachedRegion &)>;
    using DeregisterFn = std::function<void(CachedRegion &)>;

    /// capacity: regions kept unheld before LRU eviction; 0 disables caching
    /// (every acquire registers, every release deregisters).
    RegCache(RegisterFn reg, DeregisterFn dereg, size_t capacity, size_t page_size = 4096);
    RegCache(const RegCache &)            = delete;
    RegCache &operator=(const RegCache &) = delete;
    ~RegCache();

    /// A held region covering [addr, addr+length); release it when the
    /// operation using it has completed.
    doorbell_status_t acquire(const void *addr, size_t length, CachedRegion **region_p);
    void              release(CachedRegion *region);
    /// The memory [addr, addr+length) is going away: no later acquire
    /// returns a region overlapping it.
    void invalidate(const void *addr, size_t length);

    size_t               size() const { return by_start_.size(); }
    const RegCacheStats &stats() const { return stats_; }

private:
    CachedRegion *find(uintptr_t start, uintptr_t end);
    void          drop(CachedRegion *r); ///< out of the map; deregistered if unheld
    void          destroy(CachedRegion *r);
    void          evict();

    RegisterFn                               reg_;
    DeregisterFn                             dereg_;
    size_t                                   capacity_;
    uintptr_t                                page_mask_;
    std::multimap<uintptr_t, CachedRegion *> by_start_;
    std::list<CachedRegion *>                lru_; ///< unheld cached regions, oldest first
    RegCacheStats                            stats_;
};

} // namespace doorbell::verbs
