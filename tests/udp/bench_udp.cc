/*
 * doorbell_udp_bench [-t] [--mtu BYTES] [--cc POLICY] [--paths N] [--no-gso] [--no-gro]
 * [device]: the UDP device
 * alone, two ifaces in one process. Default: one thread progresses both ends
 * in turn (the cost of the whole software path, both sides serialized;
 * immune to scheduling on a loaded machine). -t: one thread per iface, as
 * two processes would run. --mtu: payload bytes per packet (lo's 64 KiB
 * otherwise; 1472 is a 1500-byte network's). --no-gso: one datagram per
 * packet (udp_gso.h), for before/after; --no-gro: the receiving socket
 * takes no merged buffers (udp_gro.h), so the kernel cuts super-datagrams
 * into datagrams at its queue. --cc, --paths: the ifaces' pacing policy
 * (UCX_DOORBELL_CC; lo's default is none) and source ports (a paced,
 * multipath iface sends the super-datagrams a fabric's host does). The bulk
 * and rate lines add the
 * process's CPU time per byte moved (both ends, in one process).
 * Prints numbers; asserts none.
 *   am ping-pong latency (8 B, one way = round trip / 2)
 *   put_zcopy bandwidth (1 MiB messages, flushed)
 *   put_short message rate (8 B, batched doorbells)
 */
#include "core/doorbell_core.h"
#include "devices/udp/udp_gro.h"
#include "devices/udp/udp_gso.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

/// CPU time of the whole process (both ends, any threads), s.
double cpu_seconds()
{
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

struct Side {
    doorbell_iface_t     *iface = nullptr;
    doorbell_qp_t        *qp    = nullptr;
    std::atomic<uint64_t> received{0};
};

doorbell_status_t count_am(void *arg, uint8_t, void *, size_t)
{
    static_cast<Side *>(arg)->received.fetch_add(1, std::memory_order_relaxed);
    return DOORBELL_OK;
}

void on_done(void *cookie, doorbell_status_t)
{
    static_cast<std::atomic<int> *>(cookie)->fetch_add(1);
}

double seconds(Clock::time_point a, Clock::time_point b)
{
    return std::chrono::duration<double>(b - a).count();
}

} // namespace

int main(int argc, char **argv)
{
    bool        threads = false, gso = true, gro = true;
    uint32_t    mtu   = 0;
    long        paths = -1; /* the parameter's default */
    const char *dev   = "lo";
    const char *cc    = nullptr;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "-t") == 0) {
            threads = true;
        } else if (std::strcmp(argv[i], "--no-gso") == 0) {
            gso = false;
        } else if (std::strcmp(argv[i], "--no-gro") == 0) {
            gro = false;
        } else if (std::strcmp(argv[i], "--mtu") == 0 && i + 1 < argc) {
            mtu = uint32_t(std::strtoul(argv[++i], nullptr, 0));
        } else if (std::strcmp(argv[i], "--cc") == 0 && i + 1 < argc) {
            cc = argv[++i];
        } else if (std::strcmp(argv[i], "--paths") == 0 && i + 1 < argc) {
            paths = std::strtol(argv[++i], nullptr, 0);
        } else {
            dev = argv[i];
        }
    }
    doorbell_pd_t *pd;
    doorbell_pd_create(&pd);
    doorbell_iface_params_t p;
    doorbell_iface_params_init(&p);
    p.device = dev;
    p.mtu    = mtu;
    if (paths >= 0) {
        p.paths = uint32_t(paths);
    }
    if (cc != nullptr) {
        p.cc = cc;
    }
    Side a, b;
    if (doorbell_iface_open(pd, &p, &a.iface) != DOORBELL_OK ||
        doorbell_iface_open(pd, &p, &b.iface) != DOORBELL_OK) {
        fprintf(stderr, "open %s: %s\n", dev, doorbell_last_error());
        return 1;
    }
    doorbell::udp::set_gso(a.iface, gso);
    doorbell::udp::set_gso(b.iface, gso);
    if (!gro) { /* else on with the first bulk data, where the kernel takes it */
        doorbell::udp::set_gro(a.iface, false);
        doorbell::udp::set_gro(b.iface, false);
    }
    for (Side *s : {&a, &b}) {
        Side   *peer = s == &a ? &b : &a;
        uint8_t da[8], ia[8];
        doorbell_iface_get_device_address(peer->iface, da);
        doorbell_iface_get_address(peer->iface, ia);
        doorbell_qp_create(s->iface, da, ia, &s->qp);
        doorbell_iface_set_am_handler(s->iface, count_am, s);
        doorbell_iface_set_completion_handler(s->iface, on_done);
    }

    /* 0. the floor: raw UDP ping-pong between two sockets, same threading */
    {
        int         fa = socket(AF_INET, SOCK_DGRAM, 0), fb = socket(AF_INET, SOCK_DGRAM, 0);
        sockaddr_in sa{}, sb{};
        sa.sin_family = sb.sin_family = AF_INET;
        sa.sin_addr.s_addr = sb.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        bind(fa, reinterpret_cast<sockaddr *>(&sa), sizeof(sa));
        bind(fb, reinterpret_cast<sockaddr *>(&sb), sizeof(sb));
        socklen_t len = sizeof(sa);
        getsockname(fa, reinterpret_cast<sockaddr *>(&sa), &len);
        getsockname(fb, reinterpret_cast<sockaddr *>(&sb), &len);
        char        msg[8] = {};
        const int   n      = 20000;
        std::thread peer;
        auto        bounce = [&] {
            ssize_t r;
            while ((r = recv(fb, msg, sizeof(msg), MSG_DONTWAIT)) < 0) {
            }
            sendto(fb, msg, 8, 0, reinterpret_cast<sockaddr *>(&sa), sizeof(sa));
        };
        if (threads) {
            peer = std::thread([&] {
                for (int i = 0; i < n; ++i)
                    bounce();
            });
        }
        auto r0 = Clock::now();
        for (int i = 0; i < n; ++i) {
            sendto(fa, msg, 8, 0, reinterpret_cast<sockaddr *>(&sb), sizeof(sb));
            if (!threads)
                bounce();
            while (recv(fa, msg, sizeof(msg), MSG_DONTWAIT) < 0) {
            }
        }
        auto r1 = Clock::now();
        if (threads)
            peer.join();
        printf("raw udp %s 8B ping-pong: %.2f us one way\n", "lo", seconds(r0, r1) / n / 2 * 1e6);
        close(fa);
        close(fb);
    }

    /* 1. ping-pong: b echoes every AM it receives */
    const int         iters = 20000;
    std::atomic<bool> stop{false};
    uint64_t          answered  = 0;
    auto              echo_step = [&] {
        doorbell_iface_progress(b.iface);
        while (answered < b.received.load(std::memory_order_relaxed)) {
            if (doorbell_qp_am_short(b.qp, 1, 0, nullptr, 0) == DOORBELL_OK) {
                ++answered;
            } else {
                doorbell_iface_progress(b.iface);
            }
        }
    };
    std::thread echo;
    if (threads) {
        echo = std::thread([&] {
            while (!stop.load(std::memory_order_relaxed)) {
                echo_step();
            }
        });
    }
    auto a_step = [&] {
        doorbell_iface_progress(a.iface);
        if (!threads) {
            echo_step();
        }
    };
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) {
        while (doorbell_qp_am_short(a.qp, 1, uint64_t(i), nullptr, 0) != DOORBELL_OK) {
            a_step();
        }
        while (a.received.load(std::memory_order_relaxed) <= uint64_t(i)) {
            a_step();
        }
    }
    auto t1 = Clock::now();
    stop    = true;
    if (threads) {
        echo.join();
    }
    doorbell_counters_t ca;
    doorbell_iface_get_counters(a.iface, &ca);
    printf("udp-device %s am_short 8B ping-pong: %.2f us one way "
           "(%llu retransmits)\n",
           dev, seconds(t0, t1) / iters / 2 * 1e6, (unsigned long long)ca.retransmits);

    /* 2. bandwidth: 1 MiB put_zcopy, 8 in flight, b progresses */
    const size_t         size = 1 << 20;
    std::vector<uint8_t> src(size, 1), dst(size);
    doorbell_mr_t       *mr;
    uint32_t             rkey;
    doorbell_mr_register(pd, dst.data(), size, DOORBELL_ACCESS_REMOTE_WRITE, &mr, &rkey);
    stop = false;
    std::thread sink;
    if (threads) {
        sink = std::thread([&] {
            while (!stop.load(std::memory_order_relaxed)) {
                doorbell_iface_progress(b.iface);
            }
        });
    }
    auto progress_a = [&] {
        doorbell_iface_progress(a.iface);
        if (!threads) {
            doorbell_iface_progress(b.iface);
        }
    };
    const int        msgs = 2000;
    std::atomic<int> done{0};
    iovec            iov{src.data(), size};
    double           cpu0 = cpu_seconds();
    t0                    = Clock::now();
    for (int i = 0; i < msgs; ++i) {
        while (i - done.load() >= 8) {
            progress_a();
        }
        while (doorbell_qp_put_zcopy(a.qp, &iov, 1, uint64_t(uintptr_t(dst.data())), rkey, &done) !=
               DOORBELL_INPROGRESS) {
            progress_a();
        }
    }
    while (done.load() < msgs) {
        progress_a();
    }
    t1 = Clock::now();
    printf("udp-device %s put_zcopy 1MiB bandwidth: %.2f GB/s, %.3f CPU ns per byte\n", dev,
           double(size) * msgs / seconds(t0, t1) / 1e9,
           (cpu_seconds() - cpu0) * 1e9 / (double(size) * msgs));

    /* 2b. read bandwidth: 1 MiB get_zcopy, 8 in flight */
    {
        doorbell_mr_t *rmr;
        uint32_t       rrkey;
        doorbell_mr_register(pd, src.data(), size, DOORBELL_ACCESS_REMOTE_READ, &rmr, &rrkey);
        std::atomic<int> got{0};
        iovec            giov{dst.data(), size};
        t0 = Clock::now();
        for (int i = 0; i < msgs; ++i) {
            while (i - got.load() >= 8) {
                progress_a();
            }
            while (doorbell_qp_get_zcopy(a.qp, &giov, 1, uint64_t(uintptr_t(src.data())), rrkey,
                                         &got) != DOORBELL_INPROGRESS) {
                progress_a();
            }
        }
        while (got.load() < msgs) {
            progress_a();
        }
        t1 = Clock::now();
        printf("udp-device %s get_zcopy 1MiB bandwidth: %.2f GB/s\n", dev,
               double(size) * msgs / seconds(t0, t1) / 1e9);
        doorbell_mr_deregister(pd, rmr);
    }

    /* 3. message rate: 8-byte put_short, the batcher coalescing */
    doorbell_counters_t c0, c1;
    doorbell_iface_get_counters(a.iface, &c0);
    const int shorts = 200000;
    uint64_t  v      = 7;
    double    scpu0  = cpu_seconds();
    t0               = Clock::now();
    for (int i = 0; i < shorts; ++i) {
        while (doorbell_qp_put_short(a.qp, &v, 8, uint64_t(uintptr_t(dst.data())), rkey) !=
               DOORBELL_OK) {
            progress_a();
        }
    }
    std::atomic<int> flushed{0};
    if (doorbell_qp_flush(a.qp, &flushed) == DOORBELL_INPROGRESS) {
        while (flushed.load() == 0) {
            progress_a();
        }
    }
    t1          = Clock::now();
    double scpu = cpu_seconds() - scpu0;
    doorbell_iface_get_counters(a.iface, &c1);
    stop = true;
    if (threads) {
        sink.join();
    }
    printf("udp-device %s put_short 8B rate: %.2f M msg/s, %.1f WQEs per doorbell, "
           "%.1f WQEs per signaled completion, %.0f CPU ns and %.2f datagrams per message\n",
           dev, shorts / seconds(t0, t1) / 1e6,
           double(c1.wqes - c0.wqes) / double(c1.doorbells - c0.doorbells),
           double(c1.wqes - c0.wqes) / double(c1.signaled - c0.signaled), scpu * 1e9 / shorts,
           double(c1.tx_packets - c0.tx_packets) / shorts);
    doorbell::udp::GsoStats g = doorbell::udp::gso_stats(a.iface);
    printf("udp-device %s gso %s: %llu super-datagrams of %.1f datagrams on average\n", dev,
           g.enabled ? "on" : "off", (unsigned long long)g.sends,
           g.sends ? double(g.segments) / double(g.sends) : 0.0);
    doorbell::udp::GroStats r = doorbell::udp::gro_stats(b.iface);
    printf("udp-device %s gro %s: %llu merged buffers of %.1f datagrams on average received\n", dev,
           r.enabled ? "on" : "off", (unsigned long long)r.buffers,
           r.buffers ? double(r.segments) / double(r.buffers) : 0.0);

    doorbell_mr_deregister(pd, mr);
    doorbell_qp_destroy(a.qp);
    doorbell_qp_destroy(b.qp);
    doorbell_iface_close(a.iface);
    doorbell_iface_close(b.iface);
    doorbell_pd_destroy(pd);
    return 0;
}
