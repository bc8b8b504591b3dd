/* Random values from the kernel's generator: remote keys, connection
 * tokens, initial PSNs. None is 0 (0 means "none" on the wire and in keys). */
#pragma once

#include <cstdint>

namespace doorbell {

/// A random 32-bit value (never 0).
uint32_t random_u32();

/// A random 64-bit value (never 0).
uint64_t random_u64();

} // namespace doorbell
