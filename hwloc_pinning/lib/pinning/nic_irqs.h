// A NIC's interrupts under a procfs/sysfs root ("/" on a live machine, a
// fake tree in tests): its PCI address from /sys/class/infiniband/<dev>/device
// or /sys/class/net/<if>/device, its vectors from
// /sys/bus/pci/devices/<bdf>/msi_irqs, their names from /proc/interrupts.
// Completion vectors (the ones worth spreading) are told apart from the
// async/control ones (command, page and event queues).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pinning/interrupts.h"
#include "pinning/machine.h"
#include "pinning/status.h"

namespace doorbell::pin {

enum class IrqKind {
    completion,
    async
};

struct NicIrq {
    int         irq = -1;
    std::string name; ///< action name, "" when /proc/interrupts does not list it
    IrqKind     kind   = IrqKind::completion;
    int         vector = -1; ///< completion queue index (mlx5_comp<N>), -1 when unknown
};

struct MsiIrq {
    int         irq = -1;
    std::string mode; ///< "msi" / "msix"
};

struct NicIrqs {
    std::string              bdf;        ///< the address the interrupts were matched on
    std::vector<NicIrq>      irqs;       ///< completion first (by vector), then async
    std::string              msi_layout; ///< "file", "directory" or "absent"
    std::vector<std::string> notes;      ///< how they were found, what was guessed
    int                      completion_count() const;
};

// Lower-case, four-digit-domain form of a PCI address ("0000:01:00.0");
// accepts "01:00.0" (domain 0) and "8b76:00:02.0". Empty when malformed.
std::string normalize_bdf(std::string_view bdf);

// Classifies one /proc/interrupts action name for the device at `bdf`
// (normalized) with network interfaces `netdevs`; nullopt when the name is
// not this device's. Knows mlx5 (new and 3.x names), mlx4 and
// "<netdev>-<queue>" names.
std::optional<NicIrq> classify_irq_name(std::string_view action, const std::string &bdf,
                                        const std::vector<std::string> &netdevs);

// Entries of <root>/sys/bus/pci/devices/<bdf>/msi_irqs: a file per IRQ holding
// "msi"/"msix" on new kernels, a directory with a "mode" file on old ones.
// Sorted by IRQ number. An absent folder gives an empty list.
Result<std::vector<MsiIrq>> read_msi_irqs(const std::string &root, const std::string &bdf,
                                          std::string *layout_p);

// The PCI address of `nic` under `root`: the basename of the sysfs device
// link of its IB device or netdev when present, else hwloc's address.
std::string resolve_bdf(const std::string &root, const Nic &nic);

// All interrupts of `nic` under `root`.
Result<NicIrqs> find_nic_irqs(const std::string &root, const Nic &nic);

} // namespace doorbell::pin
