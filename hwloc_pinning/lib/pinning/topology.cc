// hwloc -> Machine.
//
// Cores are hwloc Core objects (a PU stands in for its core on topologies
// without Core objects). A NIC is a PCI function carrying an OpenFabrics OS
// device; we walk OS devices, never bus ids, because recorded topologies can
// hold the same bus id twice (a SAS controller and an HCA in
// 32em64t-2n8c2t-pci-normalio.xml). Its locality is the cpuset of its first
// non-I/O ancestor, which is Machine on older files: then it spans every
// NUMA node and has no package.
#include "pinning/topology.h"

#include <hwloc.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace doorbell::pin {

namespace {

struct TopologyDeleter {
    void operator()(hwloc_topology *t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

struct BitmapDeleter {
    void operator()(hwloc_bitmap_s *b) const { hwloc_bitmap_free(b); }
};

std::vector<int> bitmap_to_vector(hwloc_const_bitmap_t set)
{
    std::vector<int> out;
    if (set == nullptr || hwloc_bitmap_iszero(set))
        return out;
    unsigned id;
    hwloc_bitmap_foreach_begin(id, set) out.push_back(static_cast<int>(id));
    hwloc_bitmap_foreach_end();
    return out;
}

int package_of(hwloc_topology_t topo, hwloc_obj_t obj)
{
    if (obj->type == HWLOC_OBJ_PACKAGE)
        return static_cast<int>(obj->os_index);
    hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, obj);
    return pkg ? static_cast<int>(pkg->os_index) : -1;
}

// NUMA node holding `cpuset`, or -1 when none or several do.
int numa_of(const Machine &m, hwloc_topology_t topo, hwloc_const_cpuset_t cpuset)
{
    int         found = -1;
    hwloc_obj_t node  = nullptr;
    while ((node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node)) != nullptr) {
        if (node->cpuset && hwloc_bitmap_intersects(node->cpuset, cpuset)) {
            if (found >= 0)
                return -1;
            found = static_cast<int>(node->os_index);
        }
    }
    (void)m;
    return found;
}

void collect_cores(Machine &m, hwloc_topology_t topo)
{
    hwloc_obj_type_t type = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE :
                                                                                 HWLOC_OBJ_PU;
    hwloc_obj_t      obj  = nullptr;
    while ((obj = hwloc_get_next_obj_by_type(topo, type, obj)) != nullptr) {
        Core c;
        c.index = static_cast<int>(obj->logical_index);
        c.pus   = bitmap_to_vector(obj->cpuset);
        if (c.pus.empty())
            continue; // a core with no allowed PU (offline or outside our cgroup)
        c.numa    = numa_of(m, topo, obj->cpuset);
        c.package = package_of(topo, obj);
        m.cores.push_back(std::move(c));
    }
}

void collect_numa(Machine &m, hwloc_topology_t topo)
{
    hwloc_obj_t node = nullptr;
    while ((node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node)) != nullptr) {
        NumaNode n;
        n.os_index = static_cast<int>(node->os_index);
        n.package  = package_of(topo, node);
        for (size_t i = 0; i < m.cores.size(); i++)
            if (m.cores[i].numa == n.os_index)
                n.cores.push_back(static_cast<int>(i));
        m.numa_nodes.push_back(std::move(n));
    }
    // Cores no single node claims (no nodesets recorded): give them to the
    // first node so every core has one.
    if (m.numa_nodes.empty())
        m.numa_nodes.push_back(NumaNode{0, -1, {}});
    for (size_t i = 0; i < m.cores.size(); i++) {
        if (m.cores[i].numa < 0 || m.numa_position(m.cores[i].numa) < 0) {
            m.cores[i].numa = m.numa_nodes[0].os_index;
            m.numa_nodes[0].cores.push_back(static_cast<int>(i));
        }
    }
}

void collect_distances(Machine &m, hwloc_topology_t topo)
{
    unsigned           nr   = 1;
    hwloc_distances_s *dist = nullptr;
    if (hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &nr, &dist,
                                    HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) != 0 ||
        nr == 0)
        return;
    size_t                             n = m.numa_nodes.size();
    std::vector<std::vector<uint64_t>> d(n, std::vector<uint64_t>(n, 0));
    bool                               complete = true;
    for (size_t i = 0; i < n && complete; i++) {
        for (size_t j = 0; j < n && complete; j++) {
            hwloc_obj_t    a = hwloc_get_numanode_obj_by_os_index(topo, m.numa_nodes[i].os_index);
            hwloc_obj_t    b = hwloc_get_numanode_obj_by_os_index(topo, m.numa_nodes[j].os_index);
            hwloc_uint64_t v1, v2;
            if (a == nullptr || b == nullptr ||
                hwloc_distances_obj_pair_values(dist, a, b, &v1, &v2) != 0)
                complete = false;
            else
                d[i][j] = v1;
        }
    }
    hwloc_distances_release(topo, dist);
    if (complete)
        m.distances = std::move(d);
}

void collect_nics(Machine &m, hwloc_topology_t topo)
{
    hwloc_obj_t              os = nullptr;
    std::vector<hwloc_obj_t> pci_of_nic;
    while ((os = hwloc_get_next_osdev(topo, os)) != nullptr) {
        if (os->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || os->name == nullptr)
            continue;
        hwloc_obj_t pci = os->parent;
        if (pci == nullptr || pci->type != HWLOC_OBJ_PCI_DEVICE)
            continue; // a software device (rxe, siw) has no PCI locality
        auto   it  = std::find(pci_of_nic.begin(), pci_of_nic.end(), pci);
        size_t idx = it - pci_of_nic.begin();
        if (it == pci_of_nic.end()) {
            pci_of_nic.push_back(pci);
            Nic  nic;
            char bdf[32];
            snprintf(bdf, sizeof(bdf), "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain,
                     pci->attr->pcidev.bus, pci->attr->pcidev.dev, pci->attr->pcidev.func);
            nic.bdf = bdf;
            for (hwloc_obj_t child = pci->io_first_child; child; child = child->next_sibling)
                if (child->type == HWLOC_OBJ_OS_DEVICE && child->name &&
                    child->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK)
                    nic.netdevs.push_back(child->name);
            hwloc_obj_t anc  = hwloc_get_non_io_ancestor_obj(topo, pci);
            nic.attached_to  = hwloc_obj_type_string(anc->type);
            nic.local_pus    = bitmap_to_vector(anc->cpuset);
            nic.package      = package_of(topo, anc);
            hwloc_obj_t node = nullptr;
            while ((node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node)) != nullptr)
                if (node->cpuset && hwloc_bitmap_intersects(node->cpuset, anc->cpuset))
                    nic.numa_nodes.push_back(static_cast<int>(node->os_index));
            if (nic.numa_nodes.empty() && !m.numa_nodes.empty())
                for (const NumaNode &n : m.numa_nodes)
                    nic.numa_nodes.push_back(n.os_index);
            m.nics.push_back(std::move(nic));
        }
        m.nics[idx].ib_devices.push_back(os->name);
    }
    for (Nic &nic : m.nics) {
        std::sort(nic.ib_devices.begin(), nic.ib_devices.end());
        nic.name = nic.ib_devices.front();
    }
}

} // namespace

Result<Machine> load_machine(const std::string &xml_path)
{
    hwloc_topology_t raw;
    if (hwloc_topology_init(&raw) != 0)
        return Error{"hwloc_topology_init failed: " + std::string(strerror(errno))};
    TopologyPtr topo(raw);
    hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    // Linux's own sysfs PCI discovery finds every device and OS device we
    // need; the libpciaccess component only adds vendor names, parses pci.ids
    // on every run and leaks it.
    hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
    if (!xml_path.empty() && hwloc_topology_set_xml(raw, xml_path.c_str()) != 0)
        return Error{"cannot read topology " + xml_path + ": " + strerror(errno) +
                     " (expected an hwloc XML file, e.g. from `lstopo-no-graphics --of xml`)"};
    if (hwloc_topology_load(raw) != 0)
        return Error{
            "hwloc cannot load " +
            (xml_path.empty() ? std::string("this machine's topology") : "topology " + xml_path) +
            ": " + strerror(errno)};
    Machine m;
    m.source   = xml_path.empty() ? "this machine" : xml_path;
    m.packages = std::max(0, hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PACKAGE));
    collect_cores(m, raw);
    if (m.cores.empty())
        return Error{"topology " + m.source + " has no usable cores"};
    collect_numa(m, raw);
    collect_distances(m, raw);
    collect_nics(m, raw);
    return m;
}

} // namespace doorbell::pin
