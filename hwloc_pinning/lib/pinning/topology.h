// Loading a machine with hwloc: the live one, or a recorded XML file.
#pragma once

#include <string>

#include "pinning/machine.h"
#include "pinning/status.h"

namespace doorbell::pin {

// Loads `xml_path` (hwloc XML), or this machine when it is empty, with I/O
// objects kept (HWLOC_TYPE_FILTER_KEEP_IMPORTANT) so NICs appear.
Result<Machine> load_machine(const std::string &xml_path);

} // namespace doorbell::pin
