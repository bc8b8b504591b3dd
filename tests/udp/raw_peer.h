/*
 * A plain UDP socket on lo for tests that speak the wire format themselves.
 * It can play either end of a connection, holding its token as a member of
 * the job would: accept a QP's connection (connect_from), or connect to an
 * iface as a requester (connect_to) and then send hand-made requests on that
 * connection. It can also send anything at all (send_to) and reads
 * datagrams exactly as sent.
 */
#pragma once

#include "core/doorbell_core.h"
#include "devices/udp/parser.h"
#include "devices/udp/udp_device.h"
#include "devices/udp/wire.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

namespace doorbell::test {

/// The iface address of an iface, as a peer gets it out of band.
inline udp::IfaceAddress iface_address(doorbell_iface_t *iface)
{
    udp::IfaceAddress a{};
    EXPECT_EQ(sizeof(a), doorbell_iface_address_length(iface));
    doorbell_iface_get_address(iface, &a);
    return a;
}

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
    RawPeer(const RawPeer &)            = delete;
    RawPeer &operator=(const RawPeer &) = delete;

    const sockaddr_in &address() const { return addr_; }

    /* ---- as the responder of a QP the iface connects to us ---- */

    /// A QP of iface connected to this socket: answers its CONNECT with an
    /// ACCEPT and progresses until the QP knows it.
    doorbell_qp_t *connect_from(doorbell_iface_t *iface)
    {
        udp::IfaceAddress ours{addr_.sin_port, kIfaceToken};
        doorbell_qp_t    *qp = nullptr;
        EXPECT_EQ(DOORBELL_OK, doorbell_qp_create(iface, &addr_.sin_addr, &ours, &qp))
            << doorbell_last_error();
        udp::connect_now(qp); /* the handshake now, as a first post */
        auto d = next(iface);
        EXPECT_GE(d.size(), sizeof(udp::WireHeader) + sizeof(udp::ConnectPayload));
        if (d.size() < sizeof(udp::WireHeader) + sizeof(udp::ConnectPayload)) {
            return qp;
        }
        udp::WireHeader     c;
        udp::ConnectPayload p;
        std::memcpy(&c, d.data(), sizeof(c));
        std::memcpy(&p, d.data() + sizeof(c), sizeof(p));
        EXPECT_EQ(uint8_t(udp::Opcode::kConnect), c.opcode);
        EXPECT_EQ(kIfaceToken, c.token);
        connect_seen      = c;
        udp::WireHeader a = header(udp::Opcode::kAccept);
        a.token           = p.conn_token;
        a.dst_qp          = c.src_qp;
        a.src_qp          = kRawQp;
        a.psn             = c.psn;
        a.aux             = 1; /* one sending port */
        a.ts_echo         = c.ts_send;
        send_to(iface, &a, sizeof(a));
        uint64_t token;
        uint32_t rq, psn;
        auto     deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
        while (!udp::connection_of(qp, &token, &rq, &psn) &&
               std::chrono::steady_clock::now() < deadline) {
            doorbell_iface_progress(iface);
        }
        return qp;
    }

    /* ---- as a requester connected to an iface ---- */

    /// Connects to iface as a member of the job would (it has the iface's
    /// address, token included), saying it sends from `paths` steered ports
    /// (this socket's and the next) and `spare` more after them; the
    /// connection's requests are sent with request(). Returns false if no
    /// ACCEPT came.
    bool connect_to(doorbell_iface_t *iface, uint32_t qpn = 77, uint32_t isn = 1000,
                    uint32_t paths = 1, uint8_t spare = 0)
    {
        udp::IfaceAddress   target = iface_address(iface);
        udp::WireHeader     h      = header(udp::Opcode::kConnect);
        udp::ConnectPayload p{conn_token, kIfaceToken};
        h.token  = target.token;
        h.src_qp = qpn;
        h.psn    = isn;
        h.length = sizeof(p);
        h.aux    = paths;
        h.am_id  = spare;
        std::vector<uint8_t> d(sizeof(h) + sizeof(p));
        std::memcpy(d.data(), &h, sizeof(h));
        std::memcpy(d.data() + sizeof(h), &p, sizeof(p));
        send_to(iface, d.data(), d.size());
        auto reply = next(iface);
        if (reply.size() != sizeof(udp::WireHeader)) {
            return false;
        }
        udp::WireHeader a;
        std::memcpy(&a, reply.data(), sizeof(a));
        if (a.opcode != uint8_t(udp::Opcode::kAccept) || a.token != conn_token) {
            return false;
        }
        my_qp     = qpn;
        remote_qp = a.src_qp;
        next_psn  = isn;
        return true;
    }

    /// A request on the connection: token, QP numbers and (unless psn is
    /// given) the next PSN filled in; the header's other fields as given.
    std::vector<uint8_t> request(udp::WireHeader h, const std::vector<uint8_t> &payload,
                                 int64_t psn = -1)
    {
        h.magic   = udp::kMagic;
        h.version = udp::kVersion;
        h.token   = conn_token;
        h.dst_qp  = remote_qp;
        h.src_qp  = my_qp;
        h.psn     = psn >= 0 ? uint32_t(psn) : next_psn++;
        h.length  = uint32_t(payload.size());
        std::vector<uint8_t> d(sizeof(h));
        std::memcpy(d.data(), &h, sizeof(h));
        d.insert(d.end(), payload.begin(), payload.end());
        return d;
    }

    /// A segment (SegHeader) on the connection: token, QP and the next PSN
    /// filled in, the header's other fields as given, then the payload.
    std::vector<uint8_t> segment(udp::WireHeader h, const std::vector<uint8_t> &payload)
    {
        h.token  = conn_token;
        h.dst_qp = remote_qp;
        h.psn    = next_psn++;
        std::vector<uint8_t> d(sizeof(h));
        d.resize(udp::encode_seg_header(h, d.data()));
        d.insert(d.end(), payload.begin(), payload.end());
        return d;
    }

    /* ---- raw ---- */

    void send_to(doorbell_iface_t *iface, const void *data, size_t len) const
    {
        sockaddr_in dst{};
        dst.sin_family = AF_INET;
        doorbell_iface_get_device_address(iface, &dst.sin_addr);
        dst.sin_port = iface_address(iface).port;
        ASSERT_EQ(ssize_t(len),
                  sendto(fd_, data, len, 0, reinterpret_cast<sockaddr *>(&dst), sizeof(dst)));
    }

    void send_to(doorbell_iface_t *iface, const std::vector<uint8_t> &d) const
    {
        send_to(iface, d.data(), d.size());
    }

    /// The next datagram, progressing the sender until it comes (a busy
    /// queue rings its doorbell from progress); empty after 90 s. Its
    /// source in *from, when asked.
    std::vector<uint8_t> next(doorbell_iface_t *sender, sockaddr_in *from = nullptr)
    {
        std::vector<uint8_t> d(65536);
        auto                 deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
        ssize_t              n;
        sockaddr_in          src{};
        socklen_t            len = sizeof(src);
        while ((n = recvfrom(fd_, d.data(), d.size(), MSG_DONTWAIT,
                             reinterpret_cast<sockaddr *>(&src), &len)) < 0 &&
               std::chrono::steady_clock::now() < deadline) {
            doorbell_iface_progress(sender);
            len = sizeof(src);
        }
        if (from != nullptr) {
            *from = src;
        }
        d.resize(n > 0 ? size_t(n) : 0);
        return d;
    }

    /// The header of the next datagram of opcode op, skipping others (each
    /// must parse); an empty header, and a test failure, if none comes.
    udp::WireHeader next_of(doorbell_iface_t *sender, udp::Opcode op)
    {
        for (;;) {
            std::vector<uint8_t> d = next(sender);
            if (d.empty()) {
                ADD_FAILURE() << "no answer";
                return {};
            }
            udp::ParseResult r = udp::parse(d.data(), d.size());
            EXPECT_EQ(udp::ParseStatus::kOk, r.status);
            if (r.status == udp::ParseStatus::kOk && udp::Opcode(r.header.opcode) == op) {
                return r.header;
            }
        }
    }

    /// Throws away every datagram waiting.
    void drain()
    {
        uint8_t d[65536];
        while (recv(fd_, d, sizeof(d), MSG_DONTWAIT) >= 0) {
        }
    }

    /// A header of op with magic and version.
    static udp::WireHeader header(udp::Opcode op) { return udp::make_header(op); }

    static constexpr uint64_t kIfaceToken = 0x5eed5eed5eed5eedull; ///< "our" iface's
    static constexpr uint32_t kRawQp      = 0x5151;                ///< "our" QP number

    uint64_t        conn_token = 0x1234567887654321ull; ///< connect_to's connection
    udp::WireHeader connect_seen{};                     ///< connect_from's CONNECT
    uint32_t        my_qp     = 0;
    uint32_t        remote_qp = 0; ///< the iface's QP for our connection
    uint32_t        next_psn  = 0;

private:
    int         fd_;
    sockaddr_in addr_{};
};

} // namespace doorbell::test
