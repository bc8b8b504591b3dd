/*
 * Congestion counters of a RoCE port, read from
 * <root>/<hca>/ports/<port>/hw_counters/ (mlx5 names). The root is the
 * provider's sysfs_root so tests point it at a folder of their own.
 */
#pragma once

#include <cstdint>
#include <string>

namespace doorbell::verbs {

struct CongestionCounters {
    uint64_t ecn_marked  = 0;     ///< np_ecn_marked_roce_packets: CE packets received
    uint64_t cnp_sent    = 0;     ///< np_cnp_sent: CNPs this port sent
    uint64_t cnp_handled = 0;     ///< rp_cnp_handled: CNPs this port reacted to
    bool     present     = false; ///< the folder exists and was readable
};

CongestionCounters read_congestion_counters(const std::string &root, const std::string &hca,
                                            unsigned port);

} // namespace doorbell::verbs
