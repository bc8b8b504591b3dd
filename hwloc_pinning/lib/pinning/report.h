// Human and machine readable output of machines, interrupts and plans.
#pragma once

#include <string>
#include <vector>

#include "pinning/machine.h"
#include "pinning/nic_irqs.h"
#include "pinning/plan.h"

namespace doorbell::pin {

// Packages, NUMA nodes with their cores and PUs, and every RDMA NIC with its
// locality; says plainly when there is no RDMA NIC.
std::string format_machine(const Machine &m);

// One NIC's interrupts, one line each.
std::string format_nic_irqs(const std::string &nic, const NicIrqs &irqs);

// The plan as a table (interrupts, then ranks, then notes).
std::string format_plan_table(const Machine &m, const Plan &p);

// The plan as JSON (one object; CPU lists as arrays of OS indexes).
std::string format_plan_json(const Machine &m, const Plan &p);

} // namespace doorbell::pin
