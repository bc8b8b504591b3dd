/*
 * Errors at the C boundary: a status plus a message (device, peer, cause)
 * kept per thread for doorbell_last_error(). Diagnostics below errors
 * (fallbacks a device takes, capabilities it found) go to the process's
 * debug handler (doorbell_set_debug_handler), or nowhere.
 */
#pragma once

#include "doorbell_core.h"

namespace doorbell {

/// Records the message for doorbell_last_error() and returns status.
[[gnu::format(printf, 2, 3)]] doorbell_status_t set_error(doorbell_status_t status, const char *fmt,
                                                          ...);

/// A diagnostic line for the debug handler; formats nothing without one.
[[gnu::format(printf, 1, 2)]] void debug(const char *fmt, ...);

} // namespace doorbell
