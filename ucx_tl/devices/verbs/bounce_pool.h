/*
 * Pre-registered bounce buffers: one mapping, registered once, cut into
 * fixed-size buffers (receive buffers of active messages and of the
 * connection handshake). The mapping uses 2 MiB huge pages when the system
 * has them (fewer TLB and IOMMU/MTT entries for the NIC), else normal pages;
 * the fallback is reported at debug level only.
 */
#pragma once

#include "doorbell_core.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace doorbell::verbs {

class BouncePool {
public:
    /// Registers [base, base+length); returns the lkey and a handle.
    using RegisterFn =
        std::function<doorbell_status_t(void *base, size_t length, uint32_t *lkey, void **handle)>;
    using DeregisterFn = std::function<void(void *handle)>;

    BouncePool()                              = default;
    BouncePool(const BouncePool &)            = delete;
    BouncePool &operator=(const BouncePool &) = delete;
    ~BouncePool();

    /// count buffers of buf_size bytes (rounded up to 64). name: for messages.
    doorbell_status_t init(const std::string &name, size_t count, size_t buf_size, RegisterFn reg,
                           DeregisterFn dereg);

    /// Deregisters and unmaps (before the owner's protection domain goes).
    void     reset();
    uint8_t *get(); ///< nullptr when exhausted
    /// Returns a buffer; a buffer already free is ignored (a completion
    /// that arrives after its QP was torn down must not free it twice).
    void     put(uint8_t *buf);
    bool     owns(const void *p) const;
    uint32_t lkey() const { return lkey_; }
    size_t   buf_size() const { return buf_size_; }
    size_t   available() const { return free_.size(); }
    bool     huge_pages() const { return huge_; }

private:
    uint8_t               *base_     = nullptr;
    size_t                 length_   = 0;
    size_t                 buf_size_ = 0;
    bool                   huge_     = false;
    uint32_t               lkey_     = 0;
    void                  *handle_   = nullptr;
    DeregisterFn           dereg_;
    std::vector<uint8_t *> free_;
    std::vector<bool>      is_free_; ///< per buffer
};

} // namespace doorbell::verbs
