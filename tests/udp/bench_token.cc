/*
 * The token check alone, per datagram (a benchmark, not a test: it prints
 * numbers). What the receive path does first with every datagram since
 * connections exist: read the prefix (magic, version, opcode, token, QP) of
 * the header, find the QP, compare the token and the source address. The
 * QP lookup existed before (responses named their QP; requests were found
 * by address and QP in a table of the same kind), so the added work is the
 * prefix and one compare; both are timed, against the lookup alone, over
 * 1000 live connections, in alternating rounds, median and range.
 *   build/tests/udp/doorbell_udp_token_bench [rounds]
 */
#include "devices/udp/wire.h"

#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <unordered_map>
#include <vector>

using namespace doorbell::udp;

namespace {

struct Conn {
    uint64_t    token;
    sockaddr_in peer;
};

constexpr int kPackets = 1 << 20;

/// The source check the receive path makes (udp_device.h: same_peer).
bool same_peer_address(const sockaddr_in &a, const sockaddr_in &b)
{
    return a.sin_addr.s_addr == b.sin_addr.s_addr && a.sin_port == b.sin_port;
}

/// Keeps a value alive for the optimizer.
template <class T>
void keep(T const &v)
{
    asm volatile("" : : "r,m"(v) : "memory");
}

} // namespace

int main(int argc, char **argv)
{
    int                                rounds = argc > 1 ? std::atoi(argv[1]) : 7;
    std::mt19937_64                    rng(7);
    std::unordered_map<uint32_t, Conn> conns;
    std::vector<uint32_t>              ids;
    for (int i = 0; i < 1000; ++i) {
        uint32_t    id = uint32_t(rng());
        sockaddr_in a{};
        a.sin_addr.s_addr = uint32_t(rng());
        a.sin_port        = uint16_t(rng());
        conns[id]         = Conn{rng() | 1, a};
        ids.push_back(id);
    }
    /* datagrams of live connections, in a random order, each with its
     * header's first bytes and the address it came from */
    std::vector<uint8_t>     bytes(size_t(kPackets) * 64);
    std::vector<sockaddr_in> from(kPackets);
    for (int i = 0; i < kPackets; ++i) {
        uint32_t   id = ids[rng() % ids.size()];
        WireHeader h  = make_header(Opcode::kWrite);
        h.token       = conns[id].token;
        h.dst_qp      = id;
        std::memcpy(&bytes[size_t(i) * 64], &h, sizeof(h));
        from[i] = conns[id].peer;
    }

    auto lookup_only = [&] {
        uint64_t found = 0;
        for (int i = 0; i < kPackets; ++i) {
            uint32_t qp;
            std::memcpy(&qp, &bytes[size_t(i) * 64 + 16], 4);
            auto it = conns.find(qp);
            found += it != conns.end() && same_peer_address(it->second.peer, from[i]);
        }
        return found;
    };
    auto with_token = [&] {
        uint64_t found = 0;
        for (int i = 0; i < kPackets; ++i) {
            Prefix p;
            if (!read_prefix(&bytes[size_t(i) * 64], 64, p) || p.magic != kMagic ||
                p.version != kVersion) {
                continue;
            }
            auto it = conns.find(p.dst_qp);
            found += it != conns.end() && tokens_equal(p.token, it->second.token) &&
                     same_peer_address(it->second.peer, from[i]);
        }
        return found;
    };

    std::vector<double> base, token;
    for (int r = 0; r < rounds; ++r) {
        for (int which = 0; which < 2; ++which) { /* alternating */
            auto     t0 = std::chrono::steady_clock::now();
            uint64_t n  = which == 0 ? lookup_only() : with_token();
            auto     t1 = std::chrono::steady_clock::now();
            keep(n);
            if (n != uint64_t(kPackets)) {
                std::fprintf(stderr, "a datagram was not found: %llu\n", (unsigned long long)n);
                return 1;
            }
            double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / kPackets;
            (which == 0 ? base : token).push_back(ns);
        }
    }
    auto report = [](const char *what, std::vector<double> v) {
        std::sort(v.begin(), v.end());
        std::printf("%-44s %6.2f ns per datagram (median; %.2f-%.2f over %zu rounds)\n", what,
                    v[v.size() / 2], v.front(), v.back(), v.size());
    };
    report("QP lookup + source address (before)", base);
    report("prefix + QP lookup + token + source (now)", token);
    std::vector<double> diff;
    for (size_t i = 0; i < base.size(); ++i) {
        diff.push_back(token[i] - base[i]);
    }
    report("the token check's share (paired rounds)", diff);
    return 0;
}
