// The machine as the planner sees it: cores (SMT siblings grouped), NUMA
// nodes, packages and RDMA NICs with their locality. Plain data, filled from
// hwloc by topology.cc, so the policy can be tested on recorded machines.
// All CPU and NUMA numbers are OS indexes (what the kernel and
// smp_affinity_list use); core numbers are hwloc logical indexes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace doorbell::pin {

struct Core {
    int              index = 0;    ///< hwloc logical index ("L#")
    std::vector<int> pus;          ///< OS indexes of its hardware threads (SMT siblings)
    int              numa    = -1; ///< OS index of its NUMA node
    int              package = -1; ///< OS index of its package, -1 when unknown
};

struct NumaNode {
    int              os_index = 0;
    int              package  = -1; ///< -1 when the node spans packages or has none
    std::vector<int> cores;         ///< positions in Machine::cores
};

struct Nic {
    std::string              name;         ///< IB device when there is one, else a netdev
    std::vector<std::string> ib_devices;   ///< OpenFabrics OS devices ("mlx5_0")
    std::vector<std::string> netdevs;      ///< network OS devices ("ib0", "enp193s0f0")
    std::string              bdf;          ///< PCI address "dddd:bb:dd.f" as hwloc reports it
    std::vector<int>         local_pus;    ///< PUs of its non-I/O parent
    std::vector<int>         numa_nodes;   ///< NUMA nodes that hold its local PUs
    int                      package = -1; ///< -1 when the locality spans packages
    std::string              attached_to;  ///< type of its non-I/O parent ("Package", "Machine"...)
};

struct Machine {
    std::string           source; ///< "this machine" or the XML file
    int                   packages = 0;
    std::vector<Core>     cores;
    std::vector<NumaNode> numa_nodes;
    std::vector<Nic>      nics; ///< RDMA NICs only (PCI functions with an OpenFabrics device)
    /// Relative NUMA latencies, distances[i][j] between numa_nodes[i] and [j];
    /// empty when the topology has none.
    std::vector<std::vector<uint64_t>> distances;

    // The NIC whose IB device or netdev is `name`, or nullptr.
    const Nic *find_nic(std::string_view name) const
    {
        for (const Nic &n : nics) {
            for (const std::string &d : n.ib_devices)
                if (d == name)
                    return &n;
            for (const std::string &d : n.netdevs)
                if (d == name)
                    return &n;
        }
        return nullptr;
    }

    // Position of NUMA node `os_index` in numa_nodes, or -1.
    int numa_position(int os_index) const
    {
        for (size_t i = 0; i < numa_nodes.size(); i++)
            if (numa_nodes[i].os_index == os_index)
                return static_cast<int>(i);
        return -1;
    }

    int pu_count() const
    {
        int n = 0;
        for (const Core &c : cores)
            n += static_cast<int>(c.pus.size());
        return n;
    }
};

} // namespace doorbell::pin
