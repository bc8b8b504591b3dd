/*
 * A plain UDP socket on lo for tests that speak the wire format themselves:
 * a QP can be connected to it, it reads datagrams exactly as sent, and it
 * sends hand-made ones to an iface.
 */
#pragma once

#include "core/doorbell_core.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <vector>

namespace doorbell::test {

/// Answers nothing on its own.
class RawPeer {
public:
    RawPeer()
    {
        fd_ = socket(AF_INET, SOCK_DGRAM, 0);
        sockaddr_in a{};
        a.sin_family      = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        EXPECT_EQ(0, bind(fd_, reinterpret_cast<sockaddr *>(&a), sizeof(a)));
        socklen_t len = sizeof(addr_);
        EXPECT_EQ(0, getsockname(fd_, reinterpret_cast<sockaddr *>(&addr_), &len));
    }
    ~RawPeer() { close(fd_); }

    doorbell_qp_t *connect_from(doorbell_iface_t *iface) const
    {
        doorbell_qp_t *qp = nullptr;
        EXPECT_EQ(DOORBELL_OK, doorbell_qp_create(iface, &addr_.sin_addr, &addr_.sin_port, &qp))
            << doorbell_last_error();
        return qp;
    }

    void send_to(doorbell_iface_t *iface, const void *data, size_t len) const
    {
        sockaddr_in dst{};
        dst.sin_family = AF_INET;
        doorbell_iface_get_device_address(iface, &dst.sin_addr);
        doorbell_iface_get_address(iface, &dst.sin_port);
        ASSERT_EQ(ssize_t(len),
                  sendto(fd_, data, len, 0, reinterpret_cast<sockaddr *>(&dst), sizeof(dst)));
    }

    /// The next datagram, progressing the sender until it comes (a busy
    /// queue rings its doorbell from progress); empty after 90 s.
    std::vector<uint8_t> next(doorbell_iface_t *sender)
    {
        std::vector<uint8_t> d(65536);
        auto                 deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
        ssize_t              n;
        while ((n = recv(fd_, d.data(), d.size(), MSG_DONTWAIT)) < 0 &&
               std::chrono::steady_clock::now() < deadline) {
            doorbell_iface_progress(sender);
        }
        d.resize(n > 0 ? size_t(n) : 0);
        return d;
    }

private:
    int         fd_;
    sockaddr_in addr_{};
};

} // namespace doorbell::test
