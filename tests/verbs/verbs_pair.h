/*
 * Two verbs ifaces on two fake HCAs in one process (a protection domain
 * each, as two processes would have), a QP from a to b, progressed in turn.
 * wait() spins progress until a predicate holds; the deadline only turns a
 * hang into a failure.
 */
#pragma once

#include "core/doorbell_core.h"
#include "../common/core_callbacks.h"
#include "devices/verbs/verbs_device.h"
#include "fake_verbs.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace doorbell::test {

struct Am {
    uint8_t              id;
    std::vector<uint8_t> data;
};

inline doorbell_status_t on_am(void *arg, uint8_t id, void *data, size_t len)
{
    auto *v = static_cast<std::vector<Am> *>(arg);
    auto *p = static_cast<uint8_t *>(data);
    v->push_back({id, std::vector<uint8_t>(p, p + len)});
    return DOORBELL_OK;
}

inline doorbell_iface_params_t verbs_params(const char *device)
{
    doorbell_iface_params_t p;
    doorbell_iface_params_init(&p);
    p.device       = device;
    p.cc           = "none"; /* unpaced: the pacing tests choose a policy */
    p.rto_min_ns   = 100000; /* handshake retry after 100 us */
    p.retry_count  = 4;
    p.rx_queue_len = 64;
    p.am_credits   = 16;
    return p;
}

/// The iface behind a handle (for device-level inspection).
inline verbs::VerbsIface &device(doorbell_iface_t *i)
{
    return static_cast<verbs::VerbsIface &>(*i);
}

class VerbsPair {
public:
    explicit VerbsPair(verbs::fake::HcaConfig ca = {}, verbs::fake::HcaConfig cb = {},
                       doorbell_iface_params_t pa = verbs_params("mlx5_0:1"),
                       doorbell_iface_params_t pb = verbs_params("mlx5_1:1"))
    {
        ca.name = "mlx5_0";
        cb.name = "mlx5_1";
        fabric.add_hca(ca);
        fabric.add_hca(cb);
        fabric.install();
        EXPECT_EQ(DOORBELL_OK, doorbell_pd_create(&pda));
        EXPECT_EQ(DOORBELL_OK, doorbell_pd_create(&pdb));
        EXPECT_EQ(DOORBELL_OK, doorbell_iface_open(pda, &pa, &a)) << doorbell_last_error();
        EXPECT_EQ(DOORBELL_OK, doorbell_iface_open(pdb, &pb, &b)) << doorbell_last_error();
        for (doorbell_iface_t *i : {a, b}) {
            doorbell_iface_set_completion_handler(i, on_completion);
        }
        doorbell_iface_set_error_handler(a, on_qp_error, &error_a);
        doorbell_iface_set_error_handler(b, on_qp_error, &error_b);
        doorbell_iface_set_am_handler(b, on_am, &ams_b);
    }

    ~VerbsPair()
    {
        for (doorbell_qp_t *q : extra)
            doorbell_qp_destroy(q);
        if (qa)
            doorbell_qp_destroy(qa);
        doorbell_iface_close(a);
        doorbell_iface_close(b);
        doorbell_pd_destroy(pda);
        doorbell_pd_destroy(pdb);
    }

    /// A QP from one iface to another, not yet connected.
    doorbell_qp_t *create(doorbell_iface_t *from, doorbell_iface_t *to)
    {
        std::vector<uint8_t> dev(doorbell_iface_device_address_length(to));
        std::vector<uint8_t> ifa(doorbell_iface_address_length(to));
        doorbell_iface_get_device_address(to, dev.data());
        doorbell_iface_get_address(to, ifa.data());
        doorbell_qp_t *q = nullptr;
        EXPECT_EQ(DOORBELL_OK, doorbell_qp_create(from, dev.data(), ifa.data(), &q))
            << doorbell_last_error();
        return q;
    }

    void progress()
    {
        doorbell_iface_progress(a);
        doorbell_iface_progress(b);
    }

    bool wait(const std::function<bool()> &done, int seconds = 10)
    {
        auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
        while (!done()) {
            if (std::chrono::steady_clock::now() > end) {
                return false;
            }
            progress();
        }
        return true;
    }

    static verbs::VerbsQp &vqp(doorbell_qp_t *q)
    {
        return static_cast<verbs::VerbsQp &>(*static_cast<QpCore *>(q));
    }

    /// Creates qa and waits for the handshake.
    void connect()
    {
        qa = create(a, b);
        ASSERT_TRUE(wait([&] { return vqp(qa).state == verbs::VerbsQp::State::kConnected; }));
        fabric.clear_posts();
    }

    /// Registers a buffer on b (the target) and returns its key.
    uint32_t expose(void *buf, size_t len, unsigned access)
    {
        doorbell_mr_t *mr;
        uint32_t       rkey = 0;
        EXPECT_EQ(DOORBELL_OK, doorbell_mr_register(pdb, buf, len, access, &mr, &rkey))
            << doorbell_last_error();
        return rkey;
    }

    verbs::fake::Fabric          fabric;
    doorbell_pd_t               *pda = nullptr, *pdb = nullptr;
    doorbell_iface_t            *a = nullptr, *b = nullptr;
    doorbell_qp_t               *qa = nullptr;
    std::vector<doorbell_qp_t *> extra;
    QpError                      error_a, error_b;
    std::vector<Am>              ams_b;
};

} // namespace doorbell::test
