#include "bounce_pool.h"

#include "core/error.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace doorbell::verbs {

BouncePool::~BouncePool()
{
    reset();
}

void BouncePool::reset()
{
    if (handle_ != nullptr && dereg_) {
        dereg_(handle_);
    }
    if (base_ != nullptr) {
        munmap(base_, length_);
    }
    handle_ = nullptr;
    base_   = nullptr;
    free_.clear();
    is_free_.clear();
}

doorbell_status_t BouncePool::init(const std::string &name, size_t count, size_t buf_size,
                                   RegisterFn reg, DeregisterFn dereg)
{
    constexpr size_t kHuge = size_t(2) << 20;
    buf_size_              = (buf_size + 63) & ~size_t(63);
    size_t want            = count * buf_size_;
    length_                = (want + kHuge - 1) & ~(kHuge - 1);
    void *p                = mmap(nullptr, length_, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    if (p == MAP_FAILED) {
        debug("%s: no huge pages for %zu bounce bytes (%s), using normal pages", name.c_str(),
              length_, strerror(errno));
        length_ = (want + 4095) & ~size_t(4095);
        p = mmap(nullptr, length_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            length_ = 0;
            return set_error(DOORBELL_ERR_NO_MEMORY, "%s: mmap of %zu bounce bytes failed: %s",
                             name.c_str(), want, strerror(errno));
        }
    } else {
        huge_ = true;
    }
    base_                    = static_cast<uint8_t *>(p);
    doorbell_status_t status = reg(base_, length_, &lkey_, &handle_);
    if (status != DOORBELL_OK) {
        return status;
    }
    dereg_ = std::move(dereg);
    free_.reserve(count);
    is_free_.assign(count, true);
    for (size_t i = count; i-- > 0;) {
        free_.push_back(base_ + i * buf_size_);
    }
    return DOORBELL_OK;
}

uint8_t *BouncePool::get()
{
    if (free_.empty()) {
        return nullptr;
    }
    uint8_t *b = free_.back();
    free_.pop_back();
    is_free_[size_t(b - base_) / buf_size_] = false;
    return b;
}

void BouncePool::put(uint8_t *buf)
{
    if (!owns(buf)) {
        return;
    }
    size_t i = size_t(buf - base_) / buf_size_;
    if (i >= is_free_.size() || is_free_[i]) {
        return;
    }
    is_free_[i] = true;
    free_.push_back(buf);
}

bool BouncePool::owns(const void *p) const
{
    auto *b = static_cast<const uint8_t *>(p);
    return base_ != nullptr && b >= base_ && b < base_ + length_;
}

} // namespace doorbell::verbs
