/*
 * Waiting on a device pair: progress both sides until something holds, and
 * flush a QP to its completion. Shared by the device test pairs (UDP on lo,
 * verbs on the fake provider) so that both wait the same way.
 */
#pragma once

#include "core_callbacks.h"

#include "core/doorbell_core.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>

namespace doorbell::test {

/// Calls progress() until pred() holds; false after 90 s (a hang, not a slow
/// machine: ctest's own timeout is 120 s).
inline bool wait_progressing(const std::function<void()> &progress,
                             const std::function<bool()> &pred)
{
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    while (!pred()) {
        progress();
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
    }
    return true;
}

/// Flushes qp and progresses until the flush completes; returns its status.
inline doorbell_status_t flush_progressing(doorbell_qp_t *qp, const std::function<void()> &progress)
{
    Completion        c;
    doorbell_status_t s;
    while ((s = doorbell_qp_flush(qp, &c)) == DOORBELL_ERR_NO_RESOURCE) {
        progress();
    }
    if (s != DOORBELL_INPROGRESS) {
        return s;
    }
    EXPECT_TRUE(wait_progressing(progress, [&] { return c.count > 0; }));
    return c.status;
}

} // namespace doorbell::test
