// /proc/interrupts, parsed by tokens (never by columns).
//
// Row format (kernel/irq/proc.c): "IRQ:", one count per online CPU, the chip
// name (may hold spaces: "Hyper-V PCIe MSI"), an optional hwirq joined to the
// flow handler ("1-edge"; old kernels join chip and flow: "PCI-MSI-edge"),
// then the action names joined by ", " (possibly empty).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pinning/status.h"

namespace doorbell::pin {

struct IrqLine {
    int                      irq = -1;
    std::vector<uint64_t>    counts;  ///< interrupts per CPU column
    std::string              chip;    ///< "IR-PCI-MSIX-0000:01:00.0", "Hyper-V PCIe MSI"
    std::string              hwirq;   ///< "" on old kernels
    std::string              flow;    ///< "edge", "fasteoi", ...; "" when not recognised
    std::vector<std::string> actions; ///< action names; empty for an unnamed IRQ
};

struct InterruptsTable {
    std::vector<int>     cpus; ///< CPU ids from the header; empty when the header is missing
    std::vector<IrqLine> irqs;
};

// Parses the text of /proc/interrupts (or a grep of it without header).
// Rows that are not numbered IRQs (NMI, LOC, ERR...) are skipped; a
// malformed numbered row is an error naming its line.
Result<InterruptsTable> parse_interrupts(std::string_view text);

} // namespace doorbell::pin
