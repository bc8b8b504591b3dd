/*
 * Two UDP ifaces on lo in one process, a QP each way, progressed in turn.
 * No sleeps: wait() spins progress until a predicate holds (the deadline
 * only turns a hang into a failure).
 */
#pragma once

#include "core/doorbell_core.h"
#include "devices/udp/udp_device.h"
#include "../common/core_callbacks.h"
#include "../common/progress_wait.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <functional>
#include <vector>

namespace doorbell::test {

inline doorbell_iface_params_t lo_params()
{
    doorbell_iface_params_t p;
    doorbell_iface_params_init(&p);
    p.device      = "lo";
    p.rto_min_ns  = 200000;   /* 200 us: loss tests recover quickly */
    p.rto_max_ns  = 20000000; /* 20 ms */
    p.retry_count = 12;
    return p;
}

/// For tests that count packets exactly: no retransmit timer can fire
/// however slowly the test runs.
inline doorbell_iface_params_t steady_params()
{
    doorbell_iface_params_t p = lo_params();
    p.rto_min_ns              = 5000000000ull;  /* 5 s */
    p.rto_max_ns              = 10000000000ull; /* 10 s */
    p.keepalive_interval_ns   = 0;              /* no probe of an idle QP */
    return p;
}

class LoopbackPair {
public:
    explicit LoopbackPair(const doorbell_iface_params_t &pa = lo_params(),
                          const doorbell_iface_params_t &pb = lo_params())
    {
        EXPECT_EQ(DOORBELL_OK, doorbell_pd_create(&pd));
        EXPECT_EQ(DOORBELL_OK, doorbell_iface_open(pd, &pa, &a)) << doorbell_last_error();
        EXPECT_EQ(DOORBELL_OK, doorbell_iface_open(pd, &pb, &b)) << doorbell_last_error();
        for (doorbell_iface_t *i : {a, b}) {
            doorbell_iface_set_completion_handler(i, on_completion);
        }
        doorbell_iface_set_error_handler(a, on_qp_error, &error_a);
        doorbell_iface_set_error_handler(b, on_qp_error, &error_b);
        qa = connect(a, b);
        qb = connect(b, a);
        /* the handshakes, so that posts leave at once; counters() counts
         * from here */
        EXPECT_TRUE(wait([&] { return connected(qa) && connected(qb); }));
        /* a CONNECT sent again while its ACCEPT was on the way (a slow run,
         * ASan: the timer is 200 us) is still in the peer's socket, and its
         * answer would count as a duplicate inside the test: take every
         * datagram already sent (lo queues it at the receiver at once)
         * until both sockets are empty */
        EXPECT_TRUE(wait([&] {
            return doorbell_iface_arm(a) == DOORBELL_OK && doorbell_iface_arm(b) == DOORBELL_OK;
        }));
        doorbell_iface_get_counters(a, &base_a_);
        doorbell_iface_get_counters(b, &base_b_);
    }

    /// Whether a UDP QP has its peer's ACCEPT.
    static bool connected(doorbell_qp_t *qp)
    {
        uint64_t token;
        uint32_t remote, psn;
        return udp::connection_of(qp, &token, &remote, &psn);
    }

    ~LoopbackPair()
    {
        if (qa)
            doorbell_qp_destroy(qa);
        if (qb)
            doorbell_qp_destroy(qb);
        if (a)
            doorbell_iface_close(a);
        if (b)
            doorbell_iface_close(b);
        doorbell_pd_destroy(pd);
    }

    static doorbell_qp_t *connect(doorbell_iface_t *from, doorbell_iface_t *to)
    {
        uint8_t dev[16], ifa[16];
        doorbell_iface_get_device_address(to, dev);
        doorbell_iface_get_address(to, ifa);
        EXPECT_TRUE(doorbell_iface_is_reachable(from, dev, ifa));
        doorbell_qp_t *qp = nullptr;
        EXPECT_EQ(DOORBELL_OK, doorbell_qp_create(from, dev, ifa, &qp)) << doorbell_last_error();
        /* the handshake now (it would start with the first post) */
        doorbell::udp::connect_now(qp);
        return qp;
    }

    /// The peer goes away (its QP and iface closed).
    void close_b()
    {
        doorbell_qp_destroy(qb);
        qb = nullptr;
        doorbell_iface_close(b);
        b = nullptr;
    }

    void progress()
    {
        if (a)
            doorbell_iface_progress(a);
        if (b)
            doorbell_iface_progress(b);
    }

    /// Progresses both until pred() holds; false after 90 s.
    bool wait(const std::function<bool()> &pred)
    {
        return wait_progressing([this] { progress(); }, pred);
    }

    /// Flushes qp and waits for the flush; returns its status.
    doorbell_status_t flush(doorbell_qp_t *qp)
    {
        return flush_progressing(qp, [this] { progress(); });
    }

    /// The counters of a or b since the pair connected (the gauges as they
    /// are).
    doorbell_counters_t counters(doorbell_iface_t *i)
    {
        doorbell_counters_t c;
        doorbell_iface_get_counters(i, &c);
        const doorbell_counters_t &base = i == a ? base_a_ : base_b_;
        static_assert(sizeof(c) % sizeof(uint64_t) == 0);
        auto       *now  = reinterpret_cast<uint64_t *>(&c);
        const auto *then = reinterpret_cast<const uint64_t *>(&base);
        for (size_t k = 0; k < sizeof(c) / sizeof(uint64_t); ++k) {
            if (k != offsetof(doorbell_counters_t, reasm_bytes) / sizeof(uint64_t) &&
                k != offsetof(doorbell_counters_t, reasm_peak) / sizeof(uint64_t)) {
                now[k] -= then[k];
            }
        }
        return c;
    }

    doorbell_pd_t    *pd = nullptr;
    doorbell_iface_t *a  = nullptr;
    doorbell_iface_t *b  = nullptr;
    doorbell_qp_t    *qa = nullptr; /* a -> b */
    doorbell_qp_t    *qb = nullptr; /* b -> a */
    QpError           error_a, error_b;

private:
    doorbell_counters_t base_a_{}, base_b_{};
};

/// Registered memory on the target side.
struct Region {
    Region(doorbell_pd_t *pd, size_t size, unsigned access, uint8_t fill = 0) :
        pd_(pd), bytes(size, fill)
    {
        EXPECT_EQ(DOORBELL_OK, doorbell_mr_register(pd, bytes.data(), size, access, &mr, &rkey));
    }
    ~Region() { doorbell_mr_deregister(pd_, mr); }
    uint64_t addr(size_t off = 0) const { return uint64_t(uintptr_t(bytes.data() + off)); }

    doorbell_pd_t       *pd_;
    std::vector<uint8_t> bytes;
    doorbell_mr_t       *mr   = nullptr;
    uint32_t             rkey = 0;
};

/// Posts data as one put_zcopy to the start of `to`, cookie c. The WQE
/// takes the iovec's contents; data must live until c completes.
inline doorbell_status_t put_zcopy(doorbell_qp_t *qp, const std::vector<uint8_t> &data,
                                   const Region &to, Completion &c)
{
    iovec iov{const_cast<uint8_t *>(data.data()), data.size()};
    return doorbell_qp_put_zcopy(qp, &iov, 1, to.addr(), to.rkey, &c);
}

/// Bytes an AM's pack callback copies (doorbell_qp_am_bcopy with pack_bytes).
struct Bytes {
    std::vector<uint8_t> v;
};

inline size_t pack_bytes(void *dest, void *arg)
{
    auto *b = static_cast<Bytes *>(arg);
    std::memcpy(dest, b->v.data(), b->v.size());
    return b->v.size();
}

/// A deterministic byte pattern.
inline std::vector<uint8_t> pattern(size_t size, uint32_t seed)
{
    std::vector<uint8_t> v(size);
    uint32_t             x = seed * 2654435761u + 1;
    for (auto &b : v) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b = uint8_t(x);
    }
    return v;
}

} // namespace doorbell::test
