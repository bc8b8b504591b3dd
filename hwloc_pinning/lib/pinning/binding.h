// Binding this process to a rank's core and NUMA node, and reading back the
// current binding. Both survive exec(2): the CPU affinity mask and the
// memory policy are inherited by the program `doorbell-pin exec` starts.
#pragma once

#include <string>
#include <vector>

#include "pinning/plan.h"
#include "pinning/status.h"

namespace doorbell::pin {

struct MemBinding {
    bool             bound = false; ///< a BIND policy restricted to some nodes
    std::vector<int> nodes;         ///< OS indexes
    std::string      policy;        ///< "bind", "default", "interleave", ...
};

// Binds the whole process to `pus` (OS indexes). Error names the PUs and cause.
Status bind_cpus(const std::vector<int> &pus);

// Binds the process's memory to NUMA node `numa` (MPOL_BIND). Error when the
// kernel or a seccomp filter refuses set_mempolicy.
Status bind_memory(int numa);

Result<std::vector<int>> current_cpus();
Result<MemBinding>       current_memory();

} // namespace doorbell::pin
