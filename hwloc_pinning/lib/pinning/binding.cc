// Binding through hwloc on the live machine. CPUs: HWLOC_CPUBIND_PROCESS
// (sched_setaffinity on every thread). Memory: Linux memory policy is per
// thread (set_mempolicy), so hwloc refuses HWLOC_MEMBIND_PROCESS with ENOSYS;
// doorbell-pin is single-threaded when it binds, and the calling thread's
// policy is what exec(2) hands to the program.
#include "pinning/binding.h"

#include <hwloc.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "pinning/cpu_list.h"

namespace doorbell::pin {

namespace {

struct Live {
    hwloc_topology_t topo = nullptr;
    ~Live()
    {
        if (topo)
            hwloc_topology_destroy(topo);
    }
};

Status load_live(Live *live)
{
    if (hwloc_topology_init(&live->topo) != 0 || hwloc_topology_load(live->topo) != 0)
        return Error{std::string("hwloc cannot load this machine's topology: ") + strerror(errno)};
    return ok_status();
}

struct Bitmap {
    hwloc_bitmap_t b = hwloc_bitmap_alloc();
    ~Bitmap() { hwloc_bitmap_free(b); }
};

std::vector<int> to_vector(hwloc_const_bitmap_t set)
{
    std::vector<int> out;
    unsigned         id;
    hwloc_bitmap_foreach_begin(id, set) out.push_back(static_cast<int>(id));
    hwloc_bitmap_foreach_end();
    return out;
}

} // namespace

Status bind_cpus(const std::vector<int> &pus)
{
    Live live;
    if (Status s = load_live(&live); !s.ok())
        return s;
    Bitmap set;
    for (int p : pus)
        hwloc_bitmap_set(set.b, static_cast<unsigned>(p));
    hwloc_bitmap_and(set.b, set.b, hwloc_topology_get_allowed_cpuset(live.topo));
    if (hwloc_bitmap_iszero(set.b))
        return Error{"cannot bind to PUs " + format_cpu_list(pus) +
                     ": none of them exists or is allowed on this machine (a plan from another "
                     "machine's topology?)"};
    if (hwloc_set_cpubind(live.topo, set.b, HWLOC_CPUBIND_PROCESS | HWLOC_CPUBIND_STRICT) != 0)
        return Error{"binding to PUs " + format_cpu_list(pus) + " failed: " + strerror(errno)};
    return ok_status();
}

Status bind_memory(int numa)
{
    Live live;
    if (Status s = load_live(&live); !s.ok())
        return s;
    Bitmap nodes;
    hwloc_bitmap_set(nodes.b, static_cast<unsigned>(numa));
    if (hwloc_get_numanode_obj_by_os_index(live.topo, static_cast<unsigned>(numa)) == nullptr)
        return Error{"cannot bind memory to NUMA node " + std::to_string(numa) +
                     ": this machine has no such node"};
    if (hwloc_set_membind(live.topo, nodes.b, HWLOC_MEMBIND_BIND,
                          HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET) != 0)
        return Error{"binding memory to NUMA node " + std::to_string(numa) +
                     " failed: " + strerror(errno)};
    return ok_status();
}

Result<std::vector<int>> current_cpus()
{
    Live live;
    if (Status s = load_live(&live); !s.ok())
        return Error{s.error()};
    Bitmap set;
    if (hwloc_get_cpubind(live.topo, set.b, HWLOC_CPUBIND_PROCESS) != 0)
        return Error{std::string("reading this process's CPU binding failed: ") + strerror(errno)};
    return to_vector(set.b);
}

Result<MemBinding> current_memory()
{
    Live live;
    if (Status s = load_live(&live); !s.ok())
        return Error{s.error()};
    Bitmap                 nodes;
    hwloc_membind_policy_t pol;
    if (hwloc_get_membind(live.topo, nodes.b, &pol,
                          HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET) != 0)
        return Error{std::string("reading this process's memory policy failed: ") +
                     strerror(errno)};
    MemBinding mb;
    mb.nodes = to_vector(nodes.b);
    switch (pol) {
    case HWLOC_MEMBIND_BIND:
        mb.policy = "bind";
        mb.bound  = true;
        break;
    case HWLOC_MEMBIND_INTERLEAVE:
        mb.policy = "interleave";
        break;
    case HWLOC_MEMBIND_FIRSTTOUCH:
        mb.policy = "default";
        break;
    default:
        mb.policy = "other";
        break;
    }
    return mb;
}

} // namespace doorbell::pin
