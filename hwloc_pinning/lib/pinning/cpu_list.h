// Linux CPU lists ("0-3,8,10-11"), the format of smp_affinity_list,
// local_cpulist and IRQBALANCE_BANNED_CPULIST. CPUs are OS indexes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pinning/status.h"

namespace doorbell::pin {

static constexpr int kMaxCpu = 1 << 16; ///< larger indexes are rejected as garbage

// Parses a CPU list; surrounding whitespace and a trailing newline are
// accepted. Returns the CPUs sorted and without duplicates.
Result<std::vector<int>> parse_cpu_list(std::string_view text);

// Formats sorted or unsorted CPUs as a compact list ("" for none).
std::string format_cpu_list(std::vector<int> cpus);

} // namespace doorbell::pin
