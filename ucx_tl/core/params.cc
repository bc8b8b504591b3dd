/*
 * The iface parameters: their defaults and their ranges (doorbell_defaults.h).
 * A value outside its range is refused, never adjusted: a transport that
 * quietly runs with another value than the one asked for hides the mistake
 * (RETRY_COUNT=0 became 35, TX_QUEUE_LEN=99999999 became an 8 GiB ring).
 */
#include "doorbell_core.h"

#include "error.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <string>

namespace doorbell {

namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;
constexpr uint64_t kS  = 1000 * kMs;

/// A duration in the largest unit that shows it exactly: "50 ms", "0 ns".
std::string duration(uint64_t ns)
{
    char buf[48];
    if (ns != 0 && ns % kS == 0) {
        snprintf(buf, sizeof(buf), "%llu s", static_cast<unsigned long long>(ns / kS));
    } else if (ns != 0 && ns % kMs == 0) {
        snprintf(buf, sizeof(buf), "%llu ms", static_cast<unsigned long long>(ns / kMs));
    } else if (ns != 0 && ns % kUs == 0) {
        snprintf(buf, sizeof(buf), "%llu us", static_cast<unsigned long long>(ns / kUs));
    } else {
        snprintf(buf, sizeof(buf), "%llu ns", static_cast<unsigned long long>(ns));
    }
    return buf;
}

/// The checks of one parameter set, each refusing with the parameter's name
/// (prefixed), its value and its range.
class Checker {
public:
    explicit Checker(const char *prefix) : prefix_(prefix ? prefix : "") {}

    bool count(const char *name, uint64_t v, uint64_t min, uint64_t max, const char *what = "")
    {
        return v >= min && v <= max ? true :
                                      refuse("%s%s = %llu is out of range: %s[%llu, %llu]", prefix_,
                                             name, static_cast<unsigned long long>(v), what,
                                             static_cast<unsigned long long>(min),
                                             static_cast<unsigned long long>(max));
    }

    bool time(const char *name, uint64_t ns, uint64_t min, uint64_t max, const char *what = "")
    {
        return ns >= min && ns <= max ?
                   true :
                   refuse("%s%s = %s is out of range: %s[%s, %s]", prefix_, name,
                          duration(ns).c_str(), what, duration(min).c_str(), duration(max).c_str());
    }

    bool nonnegative(const char *name, double v, const char *what)
    {
        return std::isfinite(v) && v >= 0 ?
                   true :
                   refuse("%s%s = %g is out of range: %s", prefix_, name, v, what);
    }

    [[gnu::format(printf, 2, 3)]] bool refuse(const char *fmt, ...)
    {
        char    buf[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        set_error(DOORBELL_ERR_INVALID_PARAM, "%s", buf);
        return false;
    }

    const char *prefix() const { return prefix_; }

private:
    const char *prefix_;
};

bool check(const doorbell_iface_params_t &p, Checker &c)
{
    const char *pre = c.prefix();
    if (p.mtu != 0 &&
        !c.count("MTU", p.mtu, DOORBELL_MIN_MTU, DOORBELL_MAX_MTU, "0 (automatic) or bytes in ")) {
        return false;
    }
    if (!std::has_single_bit(p.tx_queue_len) && p.tx_queue_len >= DOORBELL_MIN_TX_QUEUE_LEN &&
        p.tx_queue_len <= DOORBELL_MAX_TX_QUEUE_LEN) {
        return c.refuse("%sTX_QUEUE_LEN = %u is out of range: a power of two in [%u, %u]", pre,
                        p.tx_queue_len, DOORBELL_MIN_TX_QUEUE_LEN, DOORBELL_MAX_TX_QUEUE_LEN);
    }
    if (!c.count("TX_QUEUE_LEN", p.tx_queue_len, DOORBELL_MIN_TX_QUEUE_LEN,
                 DOORBELL_MAX_TX_QUEUE_LEN, "a power of two in ")) {
        return false;
    }
    if (!c.count("TX_BATCH", p.tx_batch, DOORBELL_MIN_TX_BATCH, DOORBELL_MAX_TX_BATCH) ||
        !c.count("TX_MODERATION", p.tx_moderation, DOORBELL_MIN_TX_MODERATION,
                 DOORBELL_MAX_TX_MODERATION) ||
        !c.count("AM_CREDITS", p.am_credits, DOORBELL_MIN_AM_CREDITS, DOORBELL_MAX_AM_CREDITS) ||
        !c.count("SEG_SIZE", p.seg_size, DOORBELL_MIN_SEG_SIZE, DOORBELL_MAX_SEG_SIZE,
                 "bytes in ") ||
        !c.count("RX_QUEUE_LEN", p.rx_queue_len, DOORBELL_MIN_RX_QUEUE_LEN,
                 DOORBELL_MAX_RX_QUEUE_LEN) ||
        !c.time("RTO_MIN", p.rto_min_ns, DOORBELL_MIN_RTO_MIN_US * kUs,
                DOORBELL_MAX_RTO_MAX_S * kS) ||
        !c.time("RTO_MAX", p.rto_max_ns, p.rto_min_ns, DOORBELL_MAX_RTO_MAX_S * kS,
                "RTO_MIN or more, in ") ||
        !c.count("RETRY_COUNT", p.retry_count, DOORBELL_MIN_RETRY_COUNT,
                 DOORBELL_MAX_RETRY_COUNT)) {
        return false;
    }
    if (p.keepalive_interval_ns != 0 && !c.time("KEEPALIVE_INTERVAL", p.keepalive_interval_ns,
                                                DOORBELL_MIN_KEEPALIVE_INTERVAL_MS * kMs,
                                                DOORBELL_MAX_KEEPALIVE_S * kS, "0 (off) or ")) {
        return false;
    }
    uint64_t ka_min = std::max<uint64_t>(DOORBELL_MIN_KEEPALIVE_TIMEOUT_MS * kMs,
                                         2 * p.keepalive_interval_ns);
    if (!c.time("KEEPALIVE_TIMEOUT", p.keepalive_timeout_ns, ka_min, DOORBELL_MAX_KEEPALIVE_S * kS,
                "twice KEEPALIVE_INTERVAL or more, in ")) {
        return false;
    }
    uint64_t reasm_min = std::max<uint64_t>(uint64_t(DOORBELL_MIN_RX_REASSEMBLY_KB) << 10,
                                            p.seg_size);
    if (!c.count("RX_REASSEMBLY", p.rx_reassembly_bytes, reasm_min,
                 uint64_t(DOORBELL_MAX_RX_REASSEMBLY_MB) << 20, "SEG_SIZE or more, bytes in ")) {
        return false;
    }
    if (!c.count("PATHS", p.paths, 0, DOORBELL_MAX_PATHS, "sockets (0: automatic) in ")) {
        return false;
    }
    if (!c.nonnegative("IBRC_GAIN", p.ibrc_gain, "0 (derived) or a positive number") ||
        !c.time("CC_TARGET_DELAY", p.cc_target_delay_ns, 0, DOORBELL_MAX_CC_TARGET_DELAY_S * kS) ||
        !c.nonnegative("CC_MIN_RATE", p.cc_min_rate, "0 (automatic) or bytes/s") ||
        !c.nonnegative("CC_MAX_RATE", p.cc_max_rate, "0 (automatic) or bytes/s")) {
        return false;
    }
    if (p.cc_max_rate > 0 && p.cc_min_rate > p.cc_max_rate) {
        return c.refuse("%sCC_MIN_RATE = %g B/s is out of range: at most CC_MAX_RATE (%g B/s)", pre,
                        p.cc_min_rate, p.cc_max_rate);
    }
    return true;
}

} // namespace

} // namespace doorbell

extern "C" void doorbell_iface_params_init(doorbell_iface_params_t *params)
{
    *params                       = {};
    params->device                = nullptr;
    params->mtu                   = 0;
    params->tx_queue_len          = DOORBELL_DEFAULT_TX_QUEUE_LEN;
    params->tx_batch              = DOORBELL_DEFAULT_TX_BATCH;
    params->tx_moderation         = DOORBELL_DEFAULT_TX_MODERATION;
    params->am_credits            = DOORBELL_DEFAULT_AM_CREDITS;
    params->seg_size              = DOORBELL_DEFAULT_SEG_SIZE;
    params->rx_queue_len          = DOORBELL_DEFAULT_RX_QUEUE_LEN;
    params->rto_min_ns            = uint64_t(DOORBELL_DEFAULT_RTO_MIN_MS) * 1000000;
    params->rto_max_ns            = uint64_t(DOORBELL_DEFAULT_RTO_MAX_MS) * 1000000;
    params->retry_count           = DOORBELL_DEFAULT_RETRY_COUNT;
    params->cc                    = DOORBELL_DEFAULT_CC;
    params->ibrc_gain             = 0;
    params->keepalive_interval_ns = uint64_t(DOORBELL_DEFAULT_KEEPALIVE_INTERVAL_MS) * 1000000;
    params->keepalive_timeout_ns  = uint64_t(DOORBELL_DEFAULT_KEEPALIVE_TIMEOUT_S) * 1000000000;
    params->rx_reassembly_bytes   = size_t(DOORBELL_DEFAULT_RX_REASSEMBLY_MB) << 20;
    params->paths                 = DOORBELL_DEFAULT_PATHS;
}

extern "C" doorbell_status_t doorbell_iface_params_check(const doorbell_iface_params_t *params,
                                                         const char                    *prefix)
{
    if (params == nullptr) {
        return doorbell::set_error(DOORBELL_ERR_INVALID_PARAM, "no parameters to check");
    }
    doorbell::Checker c(prefix);
    return doorbell::check(*params, c) ? DOORBELL_OK : DOORBELL_ERR_INVALID_PARAM;
}
