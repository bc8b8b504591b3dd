/*
 * Protection domain: the memory regions of one UCT memory domain and their
 * remote keys. Every remote access names a key; the access is allowed only if
 * the key exists, [addr, addr+length) lies inside the region and the region
 * grants the access. Keys are random 32-bit values (0 is never a key), so a
 * stale or guessed key is very unlikely to name a live region.
 *
 * Thread-safe: registration takes the lock exclusively, remote accesses share
 * it for the duration of the copy, so a region cannot be deregistered while a
 * packet is being written into it.
 */
#pragma once

#include "doorbell_core.h"
#include "random.h"

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <unordered_map>

struct doorbell_mr {
    uint8_t *address; /* first byte of the region */
    size_t   length;  /* bytes */
    unsigned access;  /* enum doorbell_access */
    uint32_t rkey;
    void    *hw; /* device registration (HardwareKeys), or NULL */
};

struct doorbell_pd {};

namespace doorbell {

/// Why a remote access was refused: a device that can tell its requester
/// says which check failed (the UDP device's NAK does), so the error names it.
enum class AccessDenial : uint8_t {
    kNone       = 0, ///< allowed
    kUnknownKey = 1, ///< no region under the key (a stale or wrong key)
    kOutOfRange = 2, ///< [addr, addr+length) leaves the key's region
    kNotGranted = 3, ///< the region does not grant the access (read, write, atomic)
};

/// A device whose hardware checks remote keys itself (verbs) registers
/// every region with the hardware; the region's key is then the hardware's.
class HardwareKeys {
public:
    virtual ~HardwareKeys() = default;
    /// Registers mr (address, length, access set); sets mr.rkey and mr.hw.
    virtual doorbell_status_t register_region(doorbell_mr &mr)   = 0;
    virtual void              deregister_region(doorbell_mr &mr) = 0;
};

class ProtectionDomain : public doorbell_pd {
public:
    ProtectionDomain()                                    = default;
    ProtectionDomain(const ProtectionDomain &)            = delete;
    ProtectionDomain &operator=(const ProtectionDomain &) = delete;

    /// Registers a region under a fresh random key.
    doorbell_status_t register_region(void *address, size_t length, unsigned access,
                                      doorbell_mr **mr_p, uint32_t *rkey_p);
    doorbell_status_t deregister_region(doorbell_mr *mr);

    /// Checks a remote access and, if allowed, calls fn(uint8_t *target)
    /// while the region cannot go away. Returns OK or ERR_REMOTE_ACCESS;
    /// why (if given) is set to the check that failed, or kNone.
    template <class Fn>
    doorbell_status_t access(uint32_t rkey, uint64_t addr, uint64_t length, unsigned need, Fn &&fn,
                             AccessDenial *why = nullptr) const
    {
        std::shared_lock   lock(mu_);
        AccessDenial       denial = AccessDenial::kNone;
        const doorbell_mr *mr     = find(rkey, addr, length, need, denial);
        if (why != nullptr) {
            *why = denial;
        }
        if (mr == nullptr) {
            return DOORBELL_ERR_REMOTE_ACCESS;
        }
        fn(reinterpret_cast<uint8_t *>(addr));
        return DOORBELL_OK;
    }

    /// Key, bounds and access check only: kNone if allowed, else the check
    /// that failed.
    AccessDenial check(uint32_t rkey, uint64_t addr, uint64_t length, unsigned need) const
    {
        std::shared_lock lock(mu_);
        AccessDenial     denial = AccessDenial::kNone;
        find(rkey, addr, length, need, denial);
        return denial;
    }

    /// Key, bounds and access check only.
    bool allows(uint32_t rkey, uint64_t addr, uint64_t length, unsigned need) const
    {
        return check(rkey, addr, length, need) == AccessDenial::kNone;
    }

    size_t region_count() const;

    /// Attaches the hardware key source (one per domain; nullptr detaches
    /// and deregisters what it registered). Regions registered before keep
    /// software keys. Returns false if another source is attached.
    bool set_hardware_keys(HardwareKeys *keys);

private:
    // REQUIRES: mu_ held (shared or exclusive). nullptr, and why set, if
    // the access is refused.
    const doorbell_mr *find(uint32_t rkey, uint64_t addr, uint64_t length, unsigned need,
                            AccessDenial &why) const;

    mutable std::shared_mutex                                  mu_;
    std::unordered_map<uint32_t, std::unique_ptr<doorbell_mr>> by_key_;
    HardwareKeys                                              *hw_ = nullptr;
};

} // namespace doorbell
