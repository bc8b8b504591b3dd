// The port of an RDMA NIC that UCX should be told to use
// (UCX_NET_DEVICES=<nic>:<port>), read under a sysfs root ("/" on a live
// machine, a fake tree in tests).
#pragma once

#include <string>

namespace doorbell::pin {

struct NicPort {
    int         port = 1; ///< 1-based, as ibv and UCX number ports
    std::string why;      ///< how it was chosen, for the exec line
};

// The lowest-numbered port whose /sys/class/infiniband/<nic>/ports/<n>/state
// says ACTIVE; without one, the lowest port listed; without any (a netdev, or
// no sysfs), port 1.
NicPort ucx_port_for(const std::string &root, const std::string &nic);

} // namespace doorbell::pin
