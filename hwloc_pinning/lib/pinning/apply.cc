// apply-irqs. Each IRQ is written separately and every failure is reported
// with its cause, because one kernel-managed vector must not hide the others.
#include "pinning/apply.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "pinning/cpu_list.h"

namespace doorbell::pin {

int write_whole_file(const std::string &path, const std::string &text)
{
    int fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0)
        return errno;
    ssize_t n   = write(fd, text.data(), text.size());
    int     err = n < 0 ? errno : (static_cast<size_t>(n) != text.size() ? EIO : 0);
    if (close(fd) != 0 && err == 0)
        err = errno;
    return err;
}

std::string describe_irq_write_error(int err, int irq, const std::string &name,
                                     const std::string &path, const std::string &cpus)
{
    std::string what = "IRQ " + std::to_string(irq) + (name.empty() ? "" : " (" + name + ")") +
                       ": writing '" + cpus + "' to " + path + " failed: ";
    switch (err) {
    case EIO:
        return what +
               "EIO: the kernel manages this interrupt's affinity (managed IRQ); it cannot be "
               "moved from user space";
    case EINVAL:
        return what + "EINVAL: none of CPUs " + cpus + " is online, or the list is not valid here";
    case ENOSPC:
        return what + "ENOSPC: CPUs " + cpus +
               " have no free interrupt vectors left; spread over "
               "more interrupt cores (--irq-cores) or fewer vectors";
    case EACCES:
    case EPERM:
        return what + strerror(err) + ": changing interrupt affinity needs root (CAP_SYS_ADMIN)";
    case ENOENT:
        return what + "no such IRQ (the device was reset or the IRQ list is stale)";
    default:
        return what + strerror(err);
    }
}

ApplyResult apply_irqs(const Plan &plan, const std::string &root, bool dry_run,
                       const WriteFn &write)
{
    ApplyResult r;
    for (const NicPlan &n : plan.nics) {
        for (const IrqAssignment &a : n.irqs) {
            std::string path = (std::filesystem::path(root) / "proc/irq" / std::to_string(a.irq) /
                                "smp_affinity_list")
                                   .string();
            std::string cpus = format_cpu_list(a.cpus);
            std::string line = "IRQ " + std::to_string(a.irq) + " (" +
                               (a.name.empty() ? "unnamed" : a.name) + ") -> " + cpus;
            if (dry_run) {
                r.done.push_back("would write " + line);
                continue;
            }
            int err = write(path, cpus + "\n");
            if (err != 0)
                r.errors.push_back(describe_irq_write_error(err, a.irq, a.name, path, cpus));
            else
                r.done.push_back("wrote " + line);
        }
    }
    return r;
}

} // namespace doorbell::pin
