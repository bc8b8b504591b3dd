// irqbalance rewrites smp_affinity every 10 s and would undo a plan. We do
// not stop it; we find it and say how to make it leave the NIC alone.
#pragma once

#include <string>
#include <vector>

namespace doorbell::pin {

struct IrqbalanceState {
    std::vector<int> pids; ///< processes whose /proc/<pid>/comm is "irqbalance"
    bool             running() const { return !pids.empty(); }
};

// Scans <root>/proc/<pid>/comm.
IrqbalanceState detect_irqbalance(const std::string &root);

// What to put in irqbalance's environment file so that it keeps other
// interrupts off `irq_cpus` (IRQBALANCE_BANNED_CPULIST) and leaves `irqs`
// where the plan put them (--banirq). Empty when there is nothing to ban.
std::string irqbalance_advice(const IrqbalanceState &state, const std::vector<int> &irq_cpus,
                              const std::vector<int> &irqs);

} // namespace doorbell::pin
