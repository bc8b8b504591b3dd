#include "random.h"

#include <random>
#include <sys/random.h>

namespace doorbell {

namespace {

template <class T>
T random_nonzero()
{
    T v = 0;
    while (v == 0) {
        if (getrandom(&v, sizeof(v), 0) != sizeof(v)) {
            /* getrandom() cannot fail for up to 256 bytes once the pool is
             * up; fall back to random_device rather than return a constant */
            std::random_device rd;
            v = T(rd());
            if constexpr (sizeof(T) > 4) {
                v = (v << 32) ^ T(rd());
            }
        }
    }
    return v;
}

} // namespace

uint32_t random_u32()
{
    return random_nonzero<uint32_t>();
}

uint64_t random_u64()
{
    return random_nonzero<uint64_t>();
}

} // namespace doorbell
