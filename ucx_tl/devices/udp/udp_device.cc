/* UDP device, the iface's set-up: devices, the socket, QPs, addresses, wake-up. */
#include "udp_device.h"

#include "core/clock.h"
#include "core/error.h"
#include "core/protection_domain.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace doorbell::udp {

namespace {

struct NetDevice {
    std::string name;
    sockaddr_in addr;
    uint32_t    if_mtu;
    bool        loopback;
};

uint32_t interface_mtu(const char *name)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) {
        return 1500;
    }
    ifreq ifr{};
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
    uint32_t mtu = 1500;
    if (ioctl(fd, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0) {
        mtu = uint32_t(ifr.ifr_mtu);
    }
    close(fd);
    return mtu;
}

long read_sys_long(const std::string &path, long fallback)
{
    std::ifstream in(path);
    long          v;
    return (in >> v) ? v : fallback;
}

/// Interfaces that are up and have an IPv4 address, first address each.
std::vector<NetDevice> list_net_devices()
{
    std::vector<NetDevice> devs;
    ifaddrs               *ifa_list;
    if (getifaddrs(&ifa_list) != 0) {
        return devs;
    }
    for (ifaddrs *ifa = ifa_list; ifa != nullptr; ifa = ifa->ifa_next) {
        if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET ||
            !(ifa->ifa_flags & IFF_UP)) {
            continue;
        }
        bool seen = std::any_of(devs.begin(), devs.end(),
                                [&](auto &d) { return d.name == ifa->ifa_name; });
        if (seen || strlen(ifa->ifa_name) >= 64) {
            continue;
        }
        NetDevice d;
        d.name = ifa->ifa_name;
        std::memcpy(&d.addr, ifa->ifa_addr, sizeof(d.addr));
        d.addr.sin_port = 0;
        d.if_mtu        = interface_mtu(ifa->ifa_name);
        d.loopback      = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
        devs.push_back(d);
    }
    freeifaddrs(ifa_list);
    return devs;
}

/// Payload bytes per packet for an interface MTU (IPv4 + UDP + our header),
/// capped so a datagram never exceeds kMaxDatagram.
uint32_t payload_mtu_for(uint32_t if_mtu)
{
    uint32_t datagram = std::min<uint32_t>(if_mtu > 28 ? if_mtu - 28 : 0, kMaxDatagram);
    return datagram > sizeof(WireHeader) + 64 ? datagram - sizeof(WireHeader) : 64;
}

double line_rate_of(const NetDevice &d)
{
    if (d.loopback) {
        return 10e9; /* bytes/s: loopback is memory-bound */
    }
    long mbps = read_sys_long("/sys/class/net/" + d.name + "/speed", -1);
    return mbps > 0 ? double(mbps) * 1e6 / 8 : 1.25e9;
}

} // namespace

int query_devices(doorbell_device_info_t *devices, int max)
{
    std::vector<NetDevice> devs = list_net_devices();
    for (int i = 0; i < int(devs.size()) && i < max; ++i) {
        doorbell_device_info_t &info = devices[i];
        info                         = {};
        snprintf(info.name, sizeof(info.name), "%s", devs[i].name.c_str());
        info.kind       = DOORBELL_DEVICE_UDP;
        info.mtu        = payload_mtu_for(devs[i].if_mtu);
        info.bandwidth  = line_rate_of(devs[i]);
        info.latency_ns = devs[i].loopback ? 4000 : 10000;
        info.numa_node  = int(
            read_sys_long("/sys/class/net/" + devs[i].name + "/device/numa_node", -1));
    }
    return int(devs.size());
}

UdpQp::UdpQp(UdpIface &iface, uint32_t qpn_, const sockaddr_in &peer_, uint64_t peer_token_) :
    QpCore(iface, qpn_),
    peer(peer_),
    peer_token(peer_token_),
    token(random_u64()),
    isn(random_u32()),
    next_psn(isn),
    una(isn),
    tx_psn(isn),
    max_sent(isn),
    rto_ns(iface.params.rto_min_ns),
    probed_psn(isn)
{
    path.seed(isn);
    peer_path.seed(isn ^ 0x5bd1e995u);
}

UdpIface::UdpIface(ProtectionDomain &pd_, const doorbell_iface_params_t &p, std::string name_) :
    IfaceCore(DOORBELL_DEVICE_UDP, pd_, p, std::move(name_))
{
}

doorbell_status_t UdpIface::open(ProtectionDomain &pd, const doorbell_iface_params_t &params,
                                 UdpIface **iface_p)
{
    if (params.device == nullptr) {
        return set_error(DOORBELL_ERR_INVALID_PARAM, "iface_open: no device name given");
    }
    for (const NetDevice &d : list_net_devices()) {
        if (d.name != params.device) {
            continue;
        }
        std::unique_ptr<UdpIface> iface(new UdpIface(pd, params, d.name));
        iface->line_rate_        = line_rate_of(d);
        doorbell_status_t status = iface->init(d.addr, d.if_mtu, d.loopback);
        if (status != DOORBELL_OK) {
            return status;
        }
        *iface_p = iface.release();
        return DOORBELL_OK;
    }
    return set_error(DOORBELL_ERR_NO_DEVICE,
                     "iface_open: %s is not an interface with an IPv4 address", params.device);
}

/// The iface's sockets: fd_ on an ephemeral port of addr (its address),
/// and for multipath paths - 1 more on the ports right after it, then the
/// spare ones (spare_ports()), which peers then accept a connection's
/// packets from. A port after it that is taken means another try with a
/// fresh one.
doorbell_status_t UdpIface::bind_sockets(const sockaddr_in &addr, uint32_t paths)
{
    const uint32_t ports = paths + spare_ports(paths);
    char           ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof(ip));
    auto close_all = [&](uint32_t n) {
        for (uint32_t i = 0; i < n; ++i) {
            close(path_fd_[i]);
        }
        fd_ = -1;
    };
    for (int attempt = 0; attempt < 64; ++attempt) {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            return set_error(DOORBELL_ERR_IO, "%s: socket() failed: %s", name.c_str(),
                             strerror(errno));
        }
        sockaddr_in a = addr;
        a.sin_port    = 0;
        if (bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
            int err = errno;
            close(fd);
            return set_error(DOORBELL_ERR_IO, "%s: bind(%s) failed: %s", name.c_str(), ip,
                             strerror(err));
        }
        socklen_t len = sizeof(a);
        getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
        fd_         = fd;
        path_fd_[0] = fd;
        local_      = a;
        uint32_t n  = 1;
        for (; n < ports; ++n) {
            unsigned port = ntohs(a.sin_port) + n;
            int s = port <= 65535 ? socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0) :
                                    -1;
            if (s < 0 && port <= 65535) {
                int err = errno;
                close_all(n);
                return set_error(DOORBELL_ERR_IO, "%s: socket() failed: %s", name.c_str(),
                                 strerror(err));
            }
            sockaddr_in b = a;
            b.sin_port    = htons(uint16_t(port));
            if (s < 0 || bind(s, reinterpret_cast<sockaddr *>(&b), sizeof(b)) != 0) {
                int err = s < 0 ? EADDRINUSE : errno;
                if (s >= 0) {
                    close(s);
                }
                if (err != EADDRINUSE) {
                    close_all(n);
                    return set_error(DOORBELL_ERR_IO, "%s: bind(%s:%u) failed: %s", name.c_str(),
                                     ip, port, strerror(err));
                }
                break; /* taken: try again on another port */
            }
            path_fd_[n] = s;
        }
        if (n == ports) {
            paths_ = paths;
            ports_ = ports;
            return DOORBELL_OK;
        }
        close_all(n);
    }
    return set_error(DOORBELL_ERR_IO,
                     "%s: no %u consecutive free UDP ports on %s in 64 tries (PATHS = %u and "
                     "%u spare)",
                     name.c_str(), ports, ip, paths, ports - paths);
}

doorbell_status_t UdpIface::init(const sockaddr_in &addr, uint32_t if_mtu, bool loopback)
{
    /* PATHS 0: automatic, one path on loopback (it has no other), else
     * DOORBELL_AUTO_PATHS, or half as many while that many consecutive ports
     * cannot be had, down to one */
    uint32_t          paths = params.paths != 0 ? params.paths : loopback ? 1 : DOORBELL_AUTO_PATHS;
    doorbell_status_t status = bind_sockets(addr, paths);
    while (status != DOORBELL_OK && params.paths == 0 && paths > 1) {
        paths /= 2;
        status = bind_sockets(addr, paths);
    }
    if (status != DOORBELL_OK) {
        return status;
    }

    /* ECT(0) on every packet; CE marks of received ones come as cmsg once
     * bulk traffic arrives (enable_bulk_receive) */
    int tos = 0x02, off = 0;
    if (setsockopt(fd_, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) != 0 ||
        setsockopt(fd_, IPPROTO_IP, IP_RECVTOS, &off, sizeof(off)) != 0) {
        return set_error(DOORBELL_ERR_IO, "%s: setsockopt(IP_TOS) failed: %s", name.c_str(),
                         strerror(errno));
    }
    /* large socket buffers: the window below follows what the kernel grants
     * (FORCE works with CAP_NET_ADMIN, else rmem_max caps the request) */
    int want = 16 << 20;
    for (int opt : {SO_RCVBUF, SO_SNDBUF}) {
        int force = opt == SO_RCVBUF ? SO_RCVBUFFORCE : SO_SNDBUFFORCE;
        if (setsockopt(fd_, SOL_SOCKET, force, &want, sizeof(want)) != 0) {
            setsockopt(fd_, SOL_SOCKET, opt, &want, sizeof(want));
        }
    }
    /* the other paths' sockets only send (peers send to fd_'s port): the
     * same marking and send buffer, a receive buffer for their error queue
     * alone (ICMP answers are charged to it) */
    for (uint32_t i = 1; i < ports_; ++i) {
        int least = 64 << 10, on = 1;
        setsockopt(path_fd_[i], IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
        if (setsockopt(path_fd_[i], SOL_SOCKET, SO_SNDBUFFORCE, &want, sizeof(want)) != 0) {
            setsockopt(path_fd_[i], SOL_SOCKET, SO_SNDBUF, &want, sizeof(want));
        }
        setsockopt(path_fd_[i], SOL_SOCKET, SO_RCVBUF, &least, sizeof(least));
        /* the ICMP answers to the ports' probes (udp_path_probe.cc) */
        setsockopt(path_fd_[i], IPPROTO_IP, IP_RECVERR, &on, sizeof(on));
    }
    int       granted = 0;
    socklen_t len     = sizeof(granted);
    getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &granted, &len);

    mtu_ = payload_mtu_for(if_mtu);
    if (params.mtu != 0) {
        mtu_ = params.mtu; /* within [DOORBELL_MIN_MTU, DOORBELL_MAX_MTU]: checked */
    }
    /* the kernel reports twice the bytes it lets queue; a peer configured
     * alike absorbs a quarter of that per sender without drops */
    window_ = std::max<uint64_t>(uint64_t(granted) / 4, 2ull * mtu_);

    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (epoll_fd_ < 0 || timer_fd_ < 0) {
        return set_error(DOORBELL_ERR_IO, "%s: epoll/timerfd failed: %s", name.c_str(),
                         strerror(errno));
    }
    /* the socket joins the set when armed (arm): while it is in, every
     * arriving datagram also runs the epoll callback under a lock */
    epoll_event ev{};
    ev.events  = EPOLLIN;
    ev.data.fd = timer_fd_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, timer_fd_, &ev);

    for (unsigned i = 0; i < kRxBatch; ++i) {
        rx_slots_.push_back(take_buffer());
    }
    rearm_rx(kRxBatch);
    token_    = random_u64();
    next_qpn_ = random_u32() | 1u;
    next_rid_ = random_u32() | 1u;
    /* an ACK nobody asked for may wait an eighth of the first retransmit
     * timeout: well before the sender gives up on it */
    ack_delay_ = params.rto_min_ns / 8;
    cc_        = pacing::resolve_pacing_policy(params.cc, loopback);
    pacing_    = pacing::find_pacing_policy(cc_);
    set_gso(true);
    if (!pacing_ && cc_ != "none") {
        return set_error(DOORBELL_ERR_INVALID_PARAM,
                         "%s: CC = %s is not a pacing policy (auto, ibrc, dcqcn, timely, none)",
                         name.c_str(), cc_.c_str());
    }
    if (pacing_) {
        /* a paced iface times from the kernel's arrivals from its first
         * datagram: a pacer whose first samples held both ends' scheduling
         * (a job's start, more ranks than cores) took milliseconds of it for
         * a queue and began at its floor */
        enable_rx_timestamps();
    }
    return DOORBELL_OK;
}

UdpIface::~UdpIface()
{
    if (fd_ >= 0) {
        now_ = now_ns(); /* ACKs still owed: spare the peers a timeout */
        flush_deferred_acks(true);
        for (auto &qp : owned_) {
            send_disconnect(*qp); /* and their connection state */
        }
        flush_tx();
    }
    for (auto &qp : owned_) {
        if (stats) {
            dump_qp(*qp);
        }
        qp->cancel_all();
    }
    owned_.clear();
    graveyard_.clear();
    for (auto &[id, r] : responders_) {
        drop_reassembly(r);
        release_held(r);
    }
    for (auto &[data, held] : held_) {
        if (!held.rx_buffer) {
            delete[] held.alloc; /* a copied AM the handler never released */
        }
    }
    for (uint32_t i = 1; i < ports_; ++i) {
        close(path_fd_[i]);
    }
    if (fd_ >= 0)
        close(fd_);
    if (epoll_fd_ >= 0)
        close(epoll_fd_);
    if (timer_fd_ >= 0)
        close(timer_fd_);
}

uint8_t *UdpIface::take_buffer()
{
    if (free_bufs_.empty()) {
        all_bufs_.emplace_back(new uint8_t[kBufSize]);
        return all_bufs_.back().get();
    }
    uint8_t *buf = free_bufs_.back();
    free_bufs_.pop_back();
    return buf;
}

void UdpIface::give_buffer(uint8_t *buf)
{
    free_bufs_.push_back(buf);
}

doorbell_status_t UdpIface::create_qp(const void *device_addr, const void *iface_addr, UdpQp **qp_p)
{
    if (device_addr == nullptr || iface_addr == nullptr) {
        return set_error(DOORBELL_ERR_INVALID_PARAM, "%s: qp_create without an address",
                         name.c_str());
    }
    IfaceAddress remote;
    std::memcpy(&remote, iface_addr, sizeof(remote));
    sockaddr_in peer{};
    peer.sin_family = AF_INET;
    std::memcpy(&peer.sin_addr, device_addr, 4);
    peer.sin_port = remote.port;
    if (remote.token == 0 || remote.port == 0) {
        return set_error(DOORBELL_ERR_INVALID_PARAM,
                         "%s: the peer's iface address has no port or no token (not an address "
                         "of this device's version)",
                         name.c_str());
    }
    if (!is_reachable(device_addr, iface_addr)) {
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof(ip));
        return set_error(DOORBELL_ERR_UNREACHABLE, "%s: peer %s:%u is not reachable from %s",
                         name.c_str(), ip, ntohs(peer.sin_port), name.c_str());
    }
    uint32_t qpn;
    do {
        qpn = next_qpn_++;
    } while (qpn == 0 || qp_by_num_.count(qpn) != 0);
    uint64_t peer_token = remote.token; /* (a packed field binds to no reference) */
    auto     qp         = std::make_unique<UdpQp>(*this, qpn, peer, peer_token);
    if (pacing_) {
        pacing::PacingContext ctx;
        ctx.device              = name;
        ctx.policy              = cc_;
        ctx.gain                = params.ibrc_gain;
        ctx.line_rate           = line_rate_;
        ctx.mtu                 = mtu_;
        ctx.target_delay_ns     = params.cc_target_delay_ns;
        ctx.target_floor_ns     = kHostPathDelayNs;
        ctx.ce_gain             = kHostCeGain;
        ctx.ce_beta             = kHostCeBeta;
        ctx.probe_step          = kHostProbeStep;
        ctx.idle_burst_bytes    = host_burst_bytes();
        ctx.min_window_segments = kHostMinWindowSegments;
        ctx.min_rate            = params.cc_min_rate;
        ctx.max_rate            = params.cc_max_rate;
        qp->gate                = pacing_(ctx);
    }
    if (near_peer(qp->peer)) {
        mark_near(*qp); /* its peer's probe came before it */
    }
    *qp_p           = qp.get();
    qp_by_num_[qpn] = qp.get();
    qps.push_back(qp.get());
    /* no handshake yet: the first operation posted (or doorbell_qp_check)
     * starts it, and posts wait in the ring until the peer accepts; a QP
     * never used sends nothing (UCP creates endpoints it may never use) */
    owned_.push_back(std::move(qp));
    return DOORBELL_OK;
}

/// One line per QP with the iface's stats: where its pacer stood and how
/// often it waited, timed out or was told the receiver is busy.
void UdpIface::dump_qp(const UdpQp &qp) const
{
    char ip[INET_ADDRSTRLEN], own[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &qp.peer.sin_addr, ip, sizeof(ip));
    inet_ntop(AF_INET, &local_.sin_addr, own, sizeof(own));
    /* the port each spine is reached from; one of paths_ or more is spare */
    char spine_ports[4 * kClassMax + 2] = "-";
    for (uint32_t c = 0, at = 0; c < qp.classes.classes(); ++c) {
        at += uint32_t(snprintf(spine_ports + at, sizeof(spine_ports) - at, c ? ",%u" : "%u",
                                qp.classes.port(c)));
    }
    fprintf(stderr,
            "%s qp 0x%x local %s:%u peer %s:%u rate_MBps %.3f min_rate_MBps %.3f "
            "base_rtt_us %.1f srtt_us %.1f paced_waits %llu timeouts %llu "
            "busy_naks %llu tail_probes %llu home %u moves %u peer_home %u peer_moves %u "
            "spines %u spine_ports %s spine_unanswered %u near %d\n",
            name.c_str(), qp.qpn, own, ntohs(local_.sin_port), ip, ntohs(qp.peer.sin_port),
            qp.gate ? qp.gate->rate() / 1e6 : 0.0, qp.min_rate / 1e6,
            qp.gate ? qp.gate->base_rtt_ns() / 1e3 : 0.0, qp.srtt_ns / 1e3,
            static_cast<unsigned long long>(qp.paced_waits),
            static_cast<unsigned long long>(qp.timeouts),
            static_cast<unsigned long long>(qp.busy_naks),
            static_cast<unsigned long long>(qp.tail_probes), qp.path.home(), qp.path.moves(),
            qp.peer_path.home(), qp.peer_path.moves(), qp.classes.classes(), spine_ports,
            qp.classes.failed(), int(qp.near));
}

void UdpIface::destroy_qp(UdpQp &qp)
{
    if (stats) {
        dump_qp(qp);
    }
    if (depth_ == 0) {
        now_ = now_ns();
    }
    send_disconnect(qp);
    if (depth_ == 0) {
        flush_tx();
    }
    qp.cancel_all();
    qp_by_num_.erase(qp.qpn);
    qps.erase(std::find(qps.begin(), qps.end(), &qp));
    auto it = std::find_if(owned_.begin(), owned_.end(), [&](auto &p) { return p.get() == &qp; });
    /* destroyed from a callback inside progress: free after it returns */
    graveyard_.push_back(std::move(*it));
    owned_.erase(it);
    if (depth_ == 0) {
        graveyard_.clear();
    }
}

void UdpIface::get_device_address(void *addr) const
{
    std::memcpy(addr, &local_.sin_addr, 4);
}

void UdpIface::get_address(void *addr) const
{
    IfaceAddress a{local_.sin_port, token_};
    std::memcpy(addr, &a, sizeof(a));
}

bool UdpIface::is_reachable(const void *device_addr, const void *) const
{
    in_addr remote;
    std::memcpy(&remote, device_addr, 4);
    bool remote_lo = (ntohl(remote.s_addr) >> 24) == 127;
    bool local_lo  = (ntohl(local_.sin_addr.s_addr) >> 24) == 127;
    /* loopback reaches only loopback; other addresses route to each other */
    return remote_lo == local_lo && remote.s_addr != 0;
}

void UdpIface::query_limits(doorbell_iface_limits_t &l) const
{
    l               = {};
    l.max_short     = std::min<size_t>(kMaxShort, params.seg_size);
    l.max_bcopy     = params.seg_size;
    l.max_zcopy     = kMaxZcopy;
    l.max_iov       = 8;
    l.max_am_header = DOORBELL_WQE_INLINE_MAX;
    /* An active message of several packets fills whole segments: UCP cuts
     * a long message into fragments of this size, and 8 KiB over 1440-byte
     * segments left a sixth packet two-thirds empty (on a 1500-byte MTU,
     * 90.2 % of the link as payload instead of 95.1 %). Counted as if every
     * segment were stamped, so a stamp never spills a message into one
     * packet more. */
    uint32_t am_max = params.seg_size;
    uint32_t first  = segment_payload(Opcode::kSend, true, true);
    uint32_t seg    = segment_payload(Opcode::kSend, false, true);
    if (am_max > mtu_ && am_max >= first) {
        am_max = first + (am_max - first) / seg * seg; /* as if every one were stamped */
    }
    l.max_am_bcopy = am_max;
    l.max_am_zcopy = am_max;
    /* the responder executes them with the CPU's atomics (udp_atomic.cc) */
    l.atomic_ops        = (1u << DOORBELL_ATOMIC_LAST) - 1;
    l.atomic_sizes      = 4 | 8;
    l.atomic_big_endian = 0;
}

doorbell_status_t UdpIface::arm()
{
    polls_since_arm_ = 0;
    if (!fd_in_epoll_) {
        epoll_event ev{};
        ev.events  = EPOLLIN;
        ev.data.fd = fd_;
        if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd_, &ev) != 0) {
            return set_error(DOORBELL_ERR_IO, "%s: epoll_ctl(ADD) failed: %s", name.c_str(),
                             strerror(errno));
        }
        fd_in_epoll_ = true; /* level-triggered: data already queued wakes */
    }
    uint64_t deadline = 0;
    for (const Responder *r : deferred_acks_) {
        if (r->ack_deferred && (deadline == 0 || r->ack_deadline < deadline)) {
            deadline = r->ack_deadline;
        }
    }
    const uint64_t now     = now_ns();
    auto           wake_at = [&deadline](uint64_t at) {
        if (at != 0 && (deadline == 0 || at < deadline)) {
            deadline = at;
        }
    };
    for (QpCore *core : qps) {
        auto *qp = static_cast<UdpQp *>(core);
        if (!qp->cq.empty() || qp->in_error() || qp->ring.unrung() != 0) {
            return DOORBELL_ERR_NO_RESOURCE;
        }
        if (qp->tx_psn != qp->next_psn) {
            /* Packets cut but not sent: sleep only if the pacer holds them
             * (a paced sender then sleeps until its departure time instead
             * of spinning; on a shared core the spin starves the others). */
            if (now < qp->hold_until_ns) {
                wake_at(qp->hold_until_ns);
            } else {
                const TxPacket &pkt = qp->unacked[qp->tx_psn - qp->una];
                uint64_t        at = qp->gate ? qp->gate->next_send_ns(now, path_bytes(pkt, 0)) : 0;
                if (at <= now) {
                    return DOORBELL_ERR_NO_RESOURCE;
                }
                wake_at(at);
            }
        }
        wake_at(std::max(qp->deadline_ns, qp->hold_until_ns));
        if (qp->connected && qp->unacked.empty() && qp->reads.empty()) {
            /* an idle connection's keepalive: the next probe, or the end of
             * the peer's time to answer one */
            wake_at(qp->ka_next_ns);
            if (qp->ka_since_ns != 0) {
                wake_at(qp->ka_since_ns + params.keepalive_timeout_ns);
            }
        }
        if (qp->deadline_ns != 0 && qp->tlp_at_ns != 0 && qp->tlp_at_ns < qp->deadline_ns) {
            if (qp->tlp_at_ns <= now) {
                return DOORBELL_ERR_NO_RESOURCE; /* a tail-loss probe is due */
            }
            wake_at(qp->tlp_at_ns);
        }
    }
    pollfd pfd{fd_, POLLIN, 0};
    if (poll(&pfd, 1, 0) > 0) {
        return DOORBELL_ERR_NO_RESOURCE;
    }
    /* setting the timer (or disarming it: deadline 0) also clears an
     * expiry nobody read, so no read() drains it first: one system call
     * per arm instead of two or three, on a path a paced sender takes per
     * departure */
    itimerspec its{};
    its.it_value.tv_sec  = time_t(deadline / 1000000000ull);
    its.it_value.tv_nsec = long(deadline % 1000000000ull);
    timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &its, nullptr);
    return DOORBELL_OK;
}

void UdpIface::set_faults(const FaultConfig *config)
{
    faults_.reset(config ? new FaultInjector(*config) : nullptr);
}

void set_fault_injection(doorbell_iface_t *iface, const FaultConfig *config)
{
    if (UdpIface *udp = udp_iface(iface)) {
        udp->set_faults(config);
    }
}

} // namespace doorbell::udp
