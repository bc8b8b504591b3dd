// Writing a plan's interrupt affinities to <root>/proc/irq/<N>/smp_affinity_list.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "pinning/plan.h"

namespace doorbell::pin {

// Writes `text` to `path` in one write(2) (procfs takes one write per value)
// and returns 0 or the errno of the open, write or close. The seam for tests.
using WriteFn = std::function<int(const std::string &path, const std::string &text)>;
int write_whole_file(const std::string &path, const std::string &text);

struct ApplyResult {
    std::vector<std::string> done;   ///< "IRQ 99 (mlx5_comp0@...) -> 7" lines, written or planned
    std::vector<std::string> errors; ///< one message per failed IRQ
    bool                     ok() const { return errors.empty(); }
};

// The message for a failed write: EIO (kernel-managed interrupt), EINVAL (no
// online CPU in the list), ENOSPC (no free vectors on those CPUs), EACCES /
// EPERM (not root), ENOENT (no such IRQ).
std::string describe_irq_write_error(int err, int irq, const std::string &name,
                                     const std::string &path, const std::string &cpus);

// Applies every IRQ assignment of `plan` under `root`. With `dry_run` nothing
// is written and `done` lists what would be. Keeps going after a failure.
ApplyResult apply_irqs(const Plan &plan, const std::string &root, bool dry_run,
                       const WriteFn &write = write_whole_file);

} // namespace doorbell::pin
