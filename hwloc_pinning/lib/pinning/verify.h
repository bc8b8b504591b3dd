// Comparing what is in place with the plan: each planned IRQ's current
// smp_affinity_list under a root, and this process's CPU and memory binding.
#pragma once

#include <string>
#include <vector>

#include "pinning/binding.h"
#include "pinning/plan.h"

namespace doorbell::pin {

struct IrqCheck {
    int              irq = -1;
    std::string      name;
    std::vector<int> planned;
    std::vector<int> current;
    std::string      error; ///< unreadable or unparsable file
    bool             ok() const { return error.empty() && planned == current; }
};

// Reads <root>/proc/irq/<N>/smp_affinity_list for every planned IRQ.
std::vector<IrqCheck> check_irqs(const Plan &plan, const std::string &root);

struct BindingCheck {
    std::vector<int> planned_pus, current_pus;
    int              planned_numa = -1;
    MemBinding       memory;
    std::string      memory_error; ///< the memory policy could not be read
    bool             cpus_ok() const { return planned_pus == current_pus; }
    bool             memory_ok() const
    {
        return memory_error.empty() && memory.bound &&
               memory.nodes == std::vector<int>{planned_numa};
    }
};

// This process against `rank`.
Result<BindingCheck> check_binding(const RankPlan &rank);

} // namespace doorbell::pin
