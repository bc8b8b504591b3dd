/*
 * Errors at the C boundary: a status plus a message (device, peer, cause)
 * kept per thread for doorbell_last_error().
 */
#pragma once

#include "doorbell_core.h"

namespace doorbell {

/// Records the message for doorbell_last_error() and returns status.
[[gnu::format(printf, 2, 3)]] doorbell_status_t set_error(doorbell_status_t status, const char *fmt,
                                                          ...);

} // namespace doorbell
