/* libFuzzer target for the UDP device's whole receive path (built with Clang
 * only, the device compiled in with coverage): the token check, the
 * handshake (CONNECT, ACCEPT, DISCONNECT), the responder's PSN and access
 * checks and the requester's response handling, against two live ifaces on
 * lo whose connection is in the dictionary of every run.
 *   build/tests/udp/doorbell_udp_receive_fuzz -max_total_time=60
 *
 * Input: byte 0 picks the receiving iface and the claimed source (bit 0: a
 * or b; bits 1-2: the peer's address, its own, a stranger's), byte 1 which
 * of the live connection's values to splice over the datagram's (bit 0: the
 * connection token at offset 8, bit 1: the receiver's QP at 16, bit 2: the
 * iface token, for a CONNECT; bit 3: the token and QP number of the
 * receiver's own connection the other way over the last 32 bytes, where an
 * ACK riding on a request is; bit 4: the receiver's QP at 4, where a pack
 * names it), the rest is the datagram. Bits 3-7 of byte 0, when not 0,
 * make it a merged buffer (GRO) of datagrams of 8 times that many bytes,
 * each spliced as above. */
#include "core/doorbell_core.h"
#include "devices/udp/udp_device.h"
#include "devices/udp/wire.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <vector>

using namespace doorbell::udp;

namespace {

struct World {
    doorbell_pd_t       *pd = nullptr;
    doorbell_iface_t    *a = nullptr, *b = nullptr;
    doorbell_qp_t       *qa = nullptr, *qb = nullptr;
    doorbell_mr_t       *mr     = nullptr;
    std::vector<uint8_t> memory = std::vector<uint8_t>(1 << 16);
    uint32_t             rkey   = 0;
    sockaddr_in          addr_a{}, addr_b{};
    IfaceAddress         ia{}, ib{};
};

doorbell_status_t take_am(void *, uint8_t, void *, size_t)
{
    return DOORBELL_OK;
}

void ignore_error(void *, doorbell_qp_t *, doorbell_status_t, const char *) {}

sockaddr_in address_of(doorbell_iface_t *iface, IfaceAddress &ia)
{
    sockaddr_in a{};
    a.sin_family = AF_INET;
    doorbell_iface_get_device_address(iface, &a.sin_addr);
    doorbell_iface_get_address(iface, &ia);
    a.sin_port = ia.port;
    return a;
}

World &world()
{
    static World *w = [] {
        auto                   *w = new World;
        doorbell_iface_params_t p;
        doorbell_iface_params_init(&p);
        p.device      = "lo";
        p.rto_min_ns  = 1000000;
        p.rto_max_ns  = 2000000;
        p.retry_count = 1000;
        if (doorbell_pd_create(&w->pd) != DOORBELL_OK ||
            doorbell_iface_open(w->pd, &p, &w->a) != DOORBELL_OK ||
            doorbell_iface_open(w->pd, &p, &w->b) != DOORBELL_OK ||
            doorbell_mr_register(w->pd, w->memory.data(), w->memory.size(),
                                 DOORBELL_ACCESS_REMOTE_READ | DOORBELL_ACCESS_REMOTE_WRITE, &w->mr,
                                 &w->rkey) != DOORBELL_OK) {
            abort();
        }
        w->addr_a = address_of(w->a, w->ia);
        w->addr_b = address_of(w->b, w->ib);
        for (doorbell_iface_t *i : {w->a, w->b}) {
            doorbell_iface_set_am_handler(i, take_am, nullptr);
            doorbell_iface_set_error_handler(i, ignore_error, nullptr);
        }
        if (doorbell_qp_create(w->a, &w->addr_b.sin_addr, &w->ib, &w->qa) != DOORBELL_OK ||
            doorbell_qp_create(w->b, &w->addr_a.sin_addr, &w->ia, &w->qb) != DOORBELL_OK) {
            abort();
        }
        connect_now(w->qa);
        connect_now(w->qb);
        uint64_t t;
        uint32_t q, n;
        for (int i = 0;
             i < 100000 && !(connection_of(w->qa, &t, &q, &n) && connection_of(w->qb, &t, &q, &n));
             ++i) {
            doorbell_iface_progress(w->a);
            doorbell_iface_progress(w->b);
        }
        return w;
    }();
    return *w;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) {
        return 0;
    }
    World &w = world();
    /* a connection the last input broke (a forged NAK with its token can
     * fail it, as it should) is made again, so every input meets a live one */
    for (auto [qp, from, to, ia] :
         {std::tuple{&w.qa, w.a, w.b, &w.ib}, std::tuple{&w.qb, w.b, w.a, &w.ia}}) {
        if (doorbell_qp_check(*qp) == DOORBELL_ERR_CANCELED) {
            doorbell_qp_destroy(*qp);
            sockaddr_in to_addr = address_of(to, *ia);
            if (doorbell_qp_create(from, &to_addr.sin_addr, ia, qp) != DOORBELL_OK) {
                abort();
            }
            connect_now(*qp);
        }
    }
    bool                 to_b    = data[0] & 1;
    doorbell_iface_t    *rx      = to_b ? w.b : w.a;
    doorbell_qp_t       *peer_qp = to_b ? w.qa : w.qb; /* the connection arriving at rx */
    std::vector<uint8_t> d(data + 2, data + size);
    uint64_t             token  = 0;
    uint32_t             remote = 0, psn = 0;
    connection_of(peer_qp, &token, &remote, &psn);
    /* the splices, at the start (and end) of each datagram of the buffer */
    auto splice = [&](uint8_t *p, size_t n) {
        if ((data[1] & 1) && n >= 16) {
            std::memcpy(p + 8, &token, 8);
        }
        if ((data[1] & 2) && n >= 20) {
            std::memcpy(p + 16, &remote, 4);
        }
        if ((data[1] & 4) && n >= 16) {
            uint64_t it = to_b ? w.ib.token : w.ia.token;
            std::memcpy(p + 8, &it, 8);
        }
        if ((data[1] & 16) && n >= 8) {
            std::memcpy(p + offsetof(PackHeader, dst_qp), &remote, 4);
        }
        if ((data[1] & 8) && n >= sizeof(PackHeader) + sizeof(RideAck)) {
            doorbell_qp_t *own        = to_b ? w.qb : w.qa; /* acknowledged by a rider */
            uint64_t       own_token  = 0;
            uint32_t       own_remote = 0, own_psn = 0;
            connection_of(own, &own_token, &own_remote, &own_psn);
            uint32_t qpn = static_cast<doorbell::QpCore *>(own)->qpn;
            size_t   at  = n - sizeof(RideAck);
            std::memcpy(p + at + offsetof(RideAck, token), &own_token, 8);
            std::memcpy(p + at + offsetof(RideAck, qp), &qpn, 4);
        }
    };
    size_t segment = size_t(data[0] >> 3) * 8;
    size_t step    = segment != 0 ? segment : d.size();
    for (size_t at = 0; at < d.size(); at += step) {
        splice(d.data() + at, std::min(step, d.size() - at));
    }
    sockaddr_in from = to_b ? w.addr_a : w.addr_b;
    switch ((data[0] >> 1) & 3) {
    case 1:
        from = to_b ? w.addr_b : w.addr_a;
        break;
    case 2:
        from.sin_addr.s_addr = htonl(0x7f000009);
        from.sin_port        = htons(9);
        break;
    default:
        break;
    }
    inject_datagram(rx, d.data(), d.size(), from, segment);
    doorbell_iface_progress(w.a);
    doorbell_iface_progress(w.b);
    return 0;
}
