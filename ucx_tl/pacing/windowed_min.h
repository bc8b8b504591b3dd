// Windowed minimum of RTT samples: the base (propagation) RTT of a path.
//
// Two overlapping windows (Nichols' rotating minimum): the current minimum
// is kept until a full window has passed, then replaced by the minimum seen
// since the previous rotation, so a path whose route lengthens is re-learnt
// within two windows while a standing queue never erases the true base.
#pragma once

#include <cstdint>
#include <limits>

namespace doorbell::pacing {

class WindowedMin {
public:
    explicit WindowedMin(uint64_t window_ns = 0) : window_ns_(window_ns) {}

    void update(uint64_t now_ns, uint64_t sample)
    {
        if (sample < best_)
            best_ = sample;
        if (sample < next_)
            next_ = sample;
        if (window_ns_ && now_ns - start_ns_ >= window_ns_) {
            best_     = next_;
            next_     = sample;
            start_ns_ = now_ns;
        }
    }

    bool     valid() const { return best_ != kNone; }
    uint64_t get() const { return best_; }

private:
    static constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();
    uint64_t                  window_ns_;
    uint64_t                  start_ns_ = 0;
    uint64_t                  best_     = kNone;
    uint64_t                  next_     = kNone;
};

} // namespace doorbell::pacing
