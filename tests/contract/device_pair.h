/*
 * The contract every device keeps, as UCX's uct_test instantiates one test
 * per transport: a DevicePair is two ifaces of one device kind and a
 * connected QP from a to b, and each backend (backends.cc) makes one. The
 * contract tests are TEST_P over the backends' names; device-specific tests
 * stay beside their device (tests/udp, tests/verbs).
 */
#pragma once

#include "../common/core_callbacks.h"
#include "../common/progress_wait.h"
#include "../udp/loopback_pair.h"
#include "core/doorbell_core.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace doorbell::test {

/// An active message as b's handler received it.
struct ReceivedAm {
    uint8_t              id;
    std::vector<uint8_t> data;
};

class DevicePair {
public:
    virtual ~DevicePair() = default;

    /// One progress call on each side.
    virtual void progress() = 0;
    /// A second QP from a to b, owned by the pair.
    virtual doorbell_qp_t *another_qp() = 0;
    /// Destroys qa now (its outstanding operations complete CANCELED).
    virtual void destroy_qa() = 0;

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

    doorbell_iface_limits_t limits() const
    {
        doorbell_iface_limits_t l;
        doorbell_iface_query_limits(a, &l);
        return l;
    }

    doorbell_pd_t          *target_pd = nullptr; ///< b's domain: targets live here
    doorbell_iface_t       *a         = nullptr;
    doorbell_iface_t       *b         = nullptr;
    doorbell_qp_t          *qa        = nullptr; ///< a -> b, connected
    QpError                *error_a   = nullptr; ///< a's QP errors
    std::string             device_a;            ///< a's device name
    std::vector<ReceivedAm> ams_b;               ///< b's active messages, in order
};

/// A device kind the contract runs on.
struct Backend {
    std::string name; ///< test name suffix: "udp", "verbs"
    /// The parameters its pairs open with (device names are the backend's).
    std::function<doorbell_iface_params_t()> params;
    /// A connected pair whose ifaces open with p.
    std::function<std::unique_ptr<DevicePair>(const doorbell_iface_params_t &p)> make;
};

/// Every backend this build has (verbs: against the fake provider).
const std::vector<Backend> &backends();
std::vector<std::string>    backend_names();
const Backend              &backend(const std::string &name);

/// The fixture of the contract tests: the pair of the backend in GetParam().
class DeviceContract : public ::testing::TestWithParam<std::string> {
protected:
    const Backend              &be() const { return backend(GetParam()); }
    std::unique_ptr<DevicePair> make_pair() const { return be().make(be().params()); }
};

} // namespace doorbell::test
