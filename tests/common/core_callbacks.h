/*
 * Recorders for the core's callbacks, shared by the device test pairs (UDP on
 * lo, verbs on the fake provider): a completion cookie and a QP error log.
 */
#pragma once

#include "core/doorbell_core.h"

#include <string>

namespace doorbell::test {

/// A completion cookie.
struct Completion {
    int               count  = 0;
    doorbell_status_t status = DOORBELL_OK;
};

inline void on_completion(void *cookie, doorbell_status_t status)
{
    auto *c = static_cast<Completion *>(cookie);
    ++c->count;
    c->status = status;
}

struct QpError {
    int               count  = 0;
    doorbell_status_t status = DOORBELL_OK;
    std::string       message;
};

inline void on_qp_error(void *arg, doorbell_qp_t *, doorbell_status_t status, const char *message)
{
    auto *e = static_cast<QpError *>(arg);
    ++e->count;
    e->status  = status;
    e->message = message;
}

} // namespace doorbell::test
