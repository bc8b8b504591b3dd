// The table of checks, in the order a person debugging a slow job would look:
// is the hardware there, is its firmware right, can GPUs be reached, are the
// links and interrupts placed well, is it hot, is the fabric congested.
#include "doctor.h"

namespace doorbell::doctor {

// clang-format off
const CheckInfo kChecks[] = {
    {"rdma", "RDMA devices, port state and rate", check_rdma, false},
    {"firmware", "HCA firmware per device; with --mpi, the same across the job", check_firmware, false},
    {"gpudirect", "nvidia_peermem or dmabuf, nvidia_uvm, PeerMappingOverride, large BAR1", check_gpudirect, false},
    {"pcie", "PCIe link of every NIC and GPU: current vs max speed and width", check_pcie, false},
    {"irq", "NIC completion interrupts on the NIC's NUMA node, not piled on one CPU", check_irq, false},
    {"irqbalance", "irqbalance stopped, or told to leave the NIC IRQs alone (--banirq)", check_irqbalance, false},
    {"pinplan", "NIC interrupts where the doorbell-pin plan puts them (hwloc topology)", check_pinplan, false},
    {"thermal", "NIC and GPU temperatures vs the throttling threshold (hwmon)", check_thermal, false},
    {"congestion", "RoCE ECN/CNP counters and their rate (DCQCN working, fabric not congested)", check_congestion, true},
    {"retransmit", "RDMA transport retransmit counters and TCP RetransSegs", check_retransmit, true},
};
// clang-format on
const size_t kNumChecks = sizeof(kChecks) / sizeof(kChecks[0]);

const CheckInfo *find_check(const std::string &name)
{
    for (const CheckInfo &c : kChecks)
        if (name == c.name)
            return &c;
    return nullptr;
}

} // namespace doorbell::doctor
