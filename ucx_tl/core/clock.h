/* Monotonic time in nanoseconds (timestamps on the wire, timers). */
#pragma once

#include <cstdint>
#include <ctime>

namespace doorbell {

inline uint64_t now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

} // namespace doorbell
