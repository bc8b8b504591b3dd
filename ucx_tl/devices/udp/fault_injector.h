/*
 * Test seam: seeded packet faults on the UDP device (not a production knob,
 * not reachable from UCX configuration). Drop applies on transmit or on
 * receive; duplication and reordering (a packet swapped with the next one of
 * the same sendmmsg batch) apply on transmit; ce pretends a received packet
 * carried a CE mark.
 */
#pragma once

#include "core/doorbell_core.h"

#include <cstdint>
#include <random>

namespace doorbell::udp {

struct FaultConfig {
    double   tx_drop   = 0; ///< probability a transmitted packet is lost
    double   rx_drop   = 0; ///< probability a received packet is ignored
    double   duplicate = 0; ///< probability a packet is sent twice
    double   reorder   = 0; ///< probability a packet swaps with the next
    double   ce        = 0; ///< probability a received packet counts as CE
    uint64_t seed      = 1;
};

class FaultInjector {
public:
    explicit FaultInjector(const FaultConfig &config) : config_(config), rng_(config.seed) {}

    bool tx_drop() { return roll(config_.tx_drop); }
    bool rx_drop() { return roll(config_.rx_drop); }
    bool duplicate() { return roll(config_.duplicate); }
    bool reorder() { return roll(config_.reorder); }
    bool ce() { return roll(config_.ce); }

private:
    bool roll(double p) { return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

    FaultConfig     config_;
    std::mt19937_64 rng_;
};

/// Installs (or with nullptr config removes) fault injection on a UDP iface.
void set_fault_injection(doorbell_iface_t *iface, const FaultConfig *config);

} // namespace doorbell::udp
