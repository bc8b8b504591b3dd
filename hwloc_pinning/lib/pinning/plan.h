// The placement plan: which whole cores take each NIC's interrupts and which
// core, PUs and NUMA node each local MPI rank gets.
//
// Policy:
//  - interrupt cores come from the NIC's NUMA node, one completion vector
//    per core round-robin (async vectors on the first one);
//  - everything is placed in whole cores, so SMT siblings are never split
//    between interrupts and ranks;
//  - ranks are spread over the NICs in blocks (local ranks 0..k-1 use the
//    first NIC, ...) and each takes the free core nearest its NIC: the NIC's
//    NUMA node, then the other nodes by NUMA distance (same package first
//    when the topology has no distances);
//  - memory is bound to the NUMA node of the rank's core;
//  - when there are not enough cores, interrupt cores shrink to one per NIC,
//    then ranks share interrupt cores, then ranks share cores; every such
//    step is written to Plan::notes and Plan::separated turns false.
#pragma once

#include <string>
#include <vector>

#include "pinning/machine.h"
#include "pinning/nic_irqs.h"

namespace doorbell::pin {

struct PlanOptions {
    int ranks     = -1; ///< local ranks to place; -1: one per core left after interrupts
    int irq_cores = 0;  ///< interrupt cores per NIC; 0: chosen from vectors and cores
};

struct NicInput {
    Nic     nic;
    NicIrqs irqs; ///< may be empty (a recorded topology without procfs)
};

struct IrqAssignment {
    int              irq = -1;
    std::string      name;
    IrqKind          kind = IrqKind::completion;
    int              core = -1; ///< position in Machine::cores
    std::vector<int> cpus;      ///< smp_affinity_list: every PU of that core
};

struct NicPlan {
    std::string                nic;
    std::string                bdf;
    int                        numa = -1; ///< NUMA node the interrupt cores were taken from
    std::vector<int>           irq_cores; ///< positions in Machine::cores
    std::vector<IrqAssignment> irqs;
};

struct RankPlan {
    int              local_rank = 0;
    std::string      nic;                  ///< "" when the machine has no NIC
    int              core = -1;            ///< position in Machine::cores
    std::vector<int> pus;                  ///< every PU of the core
    int              numa            = -1; ///< memory binding
    bool             shares_irq_core = false;
    int              sharing         = 1; ///< ranks on this core (1 unless oversubscribed)
};

struct Plan {
    std::vector<NicPlan>     nics;
    std::vector<RankPlan>    ranks;
    bool                     separated = true; ///< no core holds both interrupts and a rank
    std::vector<std::string> notes;

    std::vector<int> irq_cpus() const; ///< every PU of every interrupt core
    std::vector<int> irq_numbers() const;
    const RankPlan  *rank(int local_rank) const;
};

// Builds the plan. `nics` are the NICs in use (none: ranks only).
Plan make_plan(const Machine &m, const std::vector<NicInput> &nics, const PlanOptions &opt);

} // namespace doorbell::pin
