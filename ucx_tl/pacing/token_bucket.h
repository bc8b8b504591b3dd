// Token bucket: turns a rate (bytes/s) into send permission.
//
// Tokens are bytes; they refill at the current rate up to `depth` bytes. A
// send of n bytes is allowed once n tokens are there (or the bucket is full
// and n is larger than the depth, so large sends are not blocked forever).
// Time is passed in (ns) so virtual time can drive it.
#pragma once

#include <algorithm>
#include <cstdint>

namespace doorbell::pacing {

class TokenBucket {
public:
    TokenBucket() = default;
    // Starts with `initial_bytes` of tokens (at most the depth).
    TokenBucket(double rate_Bps, double depth_bytes, double initial_bytes) :
        rate_(rate_Bps), depth_(depth_bytes), tokens_(std::min(depth_bytes, initial_bytes))
    {
    }
    TokenBucket(double rate_Bps, double depth_bytes) :
        TokenBucket(rate_Bps, depth_bytes, depth_bytes)
    {
    }

    // Refills up to now at the old rate, then switches to the new rate.
    void set_rate(uint64_t now_ns, double rate_Bps)
    {
        refill(now_ns);
        rate_ = rate_Bps;
    }

    // Earliest time (ns) at which `bytes` may be sent; <= now_ns means now.
    uint64_t next_send_ns(uint64_t now_ns, uint32_t bytes)
    {
        refill(now_ns);
        double need = std::min<double>(bytes, depth_);
        if (tokens_ >= need)
            return now_ns;
        double wait_ns = (need - tokens_) / rate_ * 1e9;
        return now_ns + static_cast<uint64_t>(wait_ns) + 1;
    }

    // Consumes tokens for a send; a send that was not permitted runs a debt
    // that later refills pay off.
    void consume(uint64_t now_ns, uint32_t bytes)
    {
        refill(now_ns);
        tokens_ -= bytes;
    }

    // A new depth; tokens above it are dropped.
    void set_depth(double depth_bytes)
    {
        depth_  = depth_bytes;
        tokens_ = std::min(tokens_, depth_);
    }

    // Keeps at most `bytes` of tokens (refilled up to now first).
    void cap(uint64_t now_ns, double bytes)
    {
        refill(now_ns);
        tokens_ = std::min(tokens_, bytes);
    }

    double rate() const { return rate_; }
    double tokens() const { return tokens_; }
    double depth() const { return depth_; }

private:
    void refill(uint64_t now_ns)
    {
        if (now_ns > last_ns_) {
            tokens_  = std::min(depth_, tokens_ + rate_ * (now_ns - last_ns_) * 1e-9);
            last_ns_ = now_ns;
        }
    }

    double   rate_    = 1; // bytes/s
    double   depth_   = 0; // bytes
    double   tokens_  = 0; // bytes, negative = debt
    uint64_t last_ns_ = 0; // time of the last refill
};

} // namespace doorbell::pacing
