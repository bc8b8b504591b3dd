#include "protection_domain.h"

#include "error.h"

#include <mutex>

namespace doorbell {

doorbell_status_t ProtectionDomain::register_region(void *address, size_t length, unsigned access,
                                                    doorbell_mr **mr_p, uint32_t *rkey_p)
{
    if ((access & ~unsigned(DOORBELL_ACCESS_REMOTE_READ | DOORBELL_ACCESS_REMOTE_WRITE |
                            DOORBELL_ACCESS_REMOTE_ATOMIC)) != 0) {
        return set_error(DOORBELL_ERR_INVALID_PARAM, "mr_register: unknown access flags 0x%x",
                         access);
    }
    auto addr = reinterpret_cast<uintptr_t>(address);
    if ((address == nullptr && length != 0) || addr + length < addr) {
        return set_error(DOORBELL_ERR_INVALID_PARAM, "mr_register: bad region %p+%zu", address,
                         length);
    }
    auto mr     = std::make_unique<doorbell_mr>();
    mr->address = static_cast<uint8_t *>(address);
    mr->length  = length;
    mr->access  = access;
    mr->hw      = nullptr;

    std::unique_lock lock(mu_);
    if (hw_ != nullptr) {
        doorbell_status_t status = hw_->register_region(*mr);
        if (status != DOORBELL_OK) {
            return status;
        }
        if (by_key_.count(mr->rkey) != 0) {
            hw_->deregister_region(*mr);
            return set_error(DOORBELL_ERR_IO, "mr_register: device key 0x%x is already in use",
                             mr->rkey);
        }
    } else {
        do {
            mr->rkey = random_u32();
        } while (by_key_.count(mr->rkey) != 0);
    }
    *rkey_p = mr->rkey;
    *mr_p   = mr.get();
    by_key_.emplace(mr->rkey, std::move(mr));
    return DOORBELL_OK;
}

doorbell_status_t ProtectionDomain::deregister_region(doorbell_mr *mr)
{
    std::unique_lock lock(mu_);
    auto             it = (mr == nullptr) ? by_key_.end() : by_key_.find(mr->rkey);
    if (it == by_key_.end() || it->second.get() != mr) {
        return set_error(DOORBELL_ERR_INVALID_PARAM,
                         "mr_deregister: %p is not a region of this domain",
                         static_cast<void *>(mr));
    }
    if (mr->hw != nullptr && hw_ != nullptr) {
        hw_->deregister_region(*mr);
    }
    by_key_.erase(it);
    return DOORBELL_OK;
}

bool ProtectionDomain::set_hardware_keys(HardwareKeys *keys)
{
    std::unique_lock lock(mu_);
    if (keys != nullptr) {
        if (hw_ != nullptr && hw_ != keys) {
            return false;
        }
        hw_ = keys;
        return true;
    }
    if (hw_ != nullptr) {
        for (auto &[key, mr] : by_key_) {
            if (mr->hw != nullptr) {
                hw_->deregister_region(*mr);
                mr->hw = nullptr;
            }
        }
    }
    hw_ = nullptr;
    return true;
}

size_t ProtectionDomain::region_count() const
{
    std::shared_lock lock(mu_);
    return by_key_.size();
}

const doorbell_mr *ProtectionDomain::find(uint32_t rkey, uint64_t addr, uint64_t length,
                                          unsigned need, AccessDenial &why) const
{
    auto it = by_key_.find(rkey);
    if (it == by_key_.end()) {
        why = AccessDenial::kUnknownKey;
        return nullptr;
    }
    const doorbell_mr *mr    = it->second.get();
    uint64_t           start = reinterpret_cast<uintptr_t>(mr->address);
    /* overflow-safe: addr >= start and (addr - start) + length <= mr->length */
    if (addr < start || addr - start > mr->length || length > mr->length - (addr - start)) {
        why = AccessDenial::kOutOfRange;
        return nullptr;
    }
    if ((mr->access & need) != need) {
        why = AccessDenial::kNotGranted;
        return nullptr;
    }
    why = AccessDenial::kNone;
    return mr;
}

} // namespace doorbell
