#include "reg_cache.h"

#include <algorithm>
#include <vector>

namespace doorbell::verbs {

RegCache::RegCache(RegisterFn reg, DeregisterFn dereg, size_t capacity, size_t page_size) :
    reg_(std::move(reg)),
    dereg_(std::move(dereg)),
    capacity_(capacity),
    page_mask_(~uintptr_t(page_size - 1))
{
}

RegCache::~RegCache()
{
    /* the owner released everything it held before destroying the cache */
    for (auto &[start, r] : by_start_) {
        destroy(r);
    }
}

CachedRegion *RegCache::find(uintptr_t start, uintptr_t end)
{
    /* regions are mostly disjoint: the covering one, if any, starts at or
     * just before start; a few overlapping held regions are scanned too */
    auto     it  = by_start_.upper_bound(start);
    unsigned max = 8;
    while (it != by_start_.begin() && max-- > 0) {
        --it;
        if (it->second->end >= end) {
            return it->second;
        }
    }
    return nullptr;
}

doorbell_status_t RegCache::acquire(const void *addr, size_t length, CachedRegion **region_p)
{
    uintptr_t a     = reinterpret_cast<uintptr_t>(addr);
    uintptr_t start = a & page_mask_;
    uintptr_t end   = (a + std::max<size_t>(length, 1) + ~page_mask_) & page_mask_;
    if (capacity_ != 0) {
        if (CachedRegion *r = find(start, end)) {
            ++stats_.hits;
            if (r->refs++ == 0) {
                lru_.erase(r->lru);
            }
            *region_p = r;
            return DOORBELL_OK;
        }
    }
    ++stats_.misses;
    /* merge the unheld regions that overlap or touch the new range */
    std::vector<CachedRegion *> fold;
    for (auto it = by_start_.begin(); it != by_start_.end() && it->first <= end; ++it) {
        CachedRegion *r = it->second;
        if (r->end >= start && r->refs == 0) {
            fold.push_back(r);
        }
    }
    for (CachedRegion *r : fold) {
        start = std::min(start, r->start);
        end   = std::max(end, r->end);
    }
    auto *region             = new CachedRegion;
    region->start            = start;
    region->end              = end;
    doorbell_status_t status = reg_(*region);
    if (status != DOORBELL_OK) {
        delete region;
        return status;
    }
    for (CachedRegion *r : fold) {
        ++stats_.merges;
        drop(r);
    }
    region->refs = 1;
    by_start_.emplace(start, region);
    *region_p = region;
    return DOORBELL_OK;
}

void RegCache::release(CachedRegion *r)
{
    if (--r->refs != 0) {
        return;
    }
    if (r->stale) {
        destroy(r);
        return;
    }
    if (capacity_ == 0) {
        drop(r);
        return;
    }
    r->lru = lru_.insert(lru_.end(), r);
    evict();
}

void RegCache::invalidate(const void *addr, size_t length)
{
    uintptr_t                   start = reinterpret_cast<uintptr_t>(addr);
    uintptr_t                   end   = start + length;
    std::vector<CachedRegion *> hit;
    for (auto &[s, r] : by_start_) {
        if (s >= end) {
            break;
        }
        if (r->end > start) {
            hit.push_back(r);
        }
    }
    for (CachedRegion *r : hit) {
        ++stats_.invalidations;
        drop(r);
    }
}

void RegCache::drop(CachedRegion *r)
{
    auto range = by_start_.equal_range(r->start);
    for (auto it = range.first; it != range.second; ++it) {
        if (it->second == r) {
            by_start_.erase(it);
            break;
        }
    }
    if (r->refs == 0) {
        if (capacity_ != 0 && !r->stale) {
            lru_.erase(r->lru);
        }
        destroy(r);
    } else {
        r->stale = true; /* the last release deregisters it */
    }
}

void RegCache::destroy(CachedRegion *r)
{
    dereg_(*r);
    delete r;
}

void RegCache::evict()
{
    while (lru_.size() > capacity_) {
        CachedRegion *r = lru_.front();
        ++stats_.evictions;
        drop(r);
    }
}

} // namespace doorbell::verbs
