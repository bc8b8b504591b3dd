/* UDP device: the probes that tell a connection's ports apart by the spine
 * they reach (udp_path_classes.h), and the ICMP answers they draw.
 *
 * A probe is the connection's own ACK request (as a tail-loss probe: the
 * peer answers for what it has, below the oldest unacknowledged PSN) sent
 * from one of the iface's sending ports with an IP TTL that expires at the
 * spine. The spine's ICMP Time Exceeded quotes the probe; the kernel queues
 * it on that port's socket (IP_RECVERR) with the spine's address. An
 * answer counts only if it quotes a probe of a connection of this iface:
 * its header's source QP, that QP's token and the peer's address. A probe
 * that reaches the peer instead (a peer under the same leaf) is a valid ACK
 * request and is answered as one; its aux names the TTL it left with, so
 * the peer learns that fewer routers than that lie between: no spine, only
 * the two hosts' own links to their leaf (near_path()).
 *
 * IP_RECVERR makes an ICMP error pending on its socket as well: the next
 * send there fails once with its errno (EHOSTUNREACH for an expired TTL).
 * The senders, probes included, read the queue and send again
 * (send_again): QPs made together probe the same ports, and the
 * answers to the first QP's probes failed the next QP's.
 */
#include "udp_device.h"

#include <linux/errqueue.h>
#include <netinet/ip_icmp.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace doorbell::udp {

/// The port of a QP's next packet: a spine in turn once two are known,
/// else the port table's home or probe.
uint8_t UdpIface::data_path(UdpQp &qp, bool stamped)
{
    if (qp.classes.ready()) {
        return qp.classes.next();
    }
    return qp.path.pick(paths_, stamped);
}

/// Our QP to the requester's iface that knows two spines, if any: the ports
/// it learned them for reach that socket, whatever the connection. Found
/// once and remembered; a search that finds none waits kClassWatchNs (an
/// answer takes a round trip), as a read request may come every few us.
UdpQp *UdpIface::spines_to(const Responder &r)
{
    if (paths_ <= 1) {
        return nullptr;
    }
    auto knows = [&r](const UdpQp *qp) {
        return qp->classes.ready() && same_peer(qp->peer, r.peer);
    };
    if (r.spines_qpn != 0) {
        auto it = qp_by_num_.find(r.spines_qpn);
        if (it != qp_by_num_.end() && knows(it->second)) {
            return it->second;
        }
        r.spines_qpn = 0; /* destroyed, or its number taken by another */
    }
    if (now_ < r.spines_look_ns) {
        return nullptr;
    }
    r.spines_look_ns = now_ + kClassWatchNs;
    for (QpCore *q : qps) {
        auto *qp = static_cast<UdpQp *>(q);
        if (knows(qp)) {
            r.spines_qpn = qp->qpn;
            return qp;
        }
    }
    return nullptr;
}

/// A spine probe of the requester of connection r reached us (an ACK
/// request whose aux is the TTL it left with, at most kClassTtl): no spine
/// lies between its iface and ours. Our QPs to that iface, those there are
/// and those made later, learn it (mark_near()). Only a peer that holds the
/// connection's token can say so, and all it gains is that we burst more
/// towards itself.
void UdpIface::near_path(const Responder &r, const WireHeader &h)
{
    if (h.aux == 0 || h.aux > uint32_t(kClassTtl)) {
        return;
    }
    if (near_peer(r.peer)) {
        return; /* known: its QPs were marked then, later ones at creation */
    }
    near_peers_.push_back(r.peer); /* one per peer iface: authenticated peers */
    for (QpCore *q : qps) {
        auto *qp = static_cast<UdpQp *>(q);
        if (same_peer(qp->peer, r.peer)) {
            mark_near(*qp);
        }
    }
}

/// Whether the peer iface at `peer` was shown to be under our leaf
/// (near_path()).
bool UdpIface::near_peer(const sockaddr_in &peer) const
{
    return std::any_of(near_peers_.begin(), near_peers_.end(),
                       [&](const sockaddr_in &p) { return same_peer(p, peer); });
}

/// A QP whose path crosses no spine: its pacer's bucket keeps
/// kHostNearBurstNs of its rate, up to kHostIdleBurstSegments segments, and
/// its rate stays at or above half what its idle bursts were delivered at.
void UdpIface::mark_near(UdpQp &qp)
{
    if (qp.near) {
        return;
    }
    qp.near = true;
    ++counters.near_paths;
    if (qp.gate) {
        qp.gate->set_time_burst(kHostNearBurstNs, host_burst_bytes());
        qp.gate->set_delivery_floor(true);
    }
}

/// Sends the probes a QP's class table asks for.
void UdpIface::probe_classes(UdpQp &qp)
{
    uint32_t mask = qp.classes.due(now_, ports_);
    if (mask == 0) {
        return;
    }
    WireHeader h = make_header(Opcode::kAckReq);
    h.token      = qp.token;
    h.dst_qp     = qp.remote_qpn;
    h.src_qp     = qp.qpn;
    h.psn        = qp.una;
    h.ts_send    = 0; /* no round trip to sample from an answer */
    h.aux        = uint32_t(kClassTtl);
    alignas(cmsghdr) uint8_t ctl[CMSG_SPACE(sizeof(int))]{};
    iovec                    iov{&h, sizeof(h)};
    msghdr                   m = one_iov_msg(qp.peer, iov, ctl, sizeof(ctl));
    cmsghdr                 *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level              = IPPROTO_IP;
    c->cmsg_type               = IP_TTL;
    c->cmsg_len                = CMSG_LEN(sizeof(int));
    int ttl                    = kClassTtl;
    std::memcpy(CMSG_DATA(c), &ttl, sizeof(ttl));
    for (uint32_t p = 1; p < ports_; ++p) {
        if ((mask & (1u << p)) == 0) {
            continue;
        }
        /* an answer to another QP's probe from this port, not read yet,
         * fails the send once (IP_RECVERR): read it and send again, or
         * this QP keeps to one port for a retry's second */
        ssize_t  rc;
        unsigned icmp = 0;
        do {
            rc = sendmsg(path_fd_[p], &m, 0);
        } while (rc < 0 && send_again(uint8_t(p), icmp));
        if (rc >= 0) {
            ++counters.spine_probes;
        }
    }
    if (now_ >= class_watch_until_ns_) {
        class_watch_mask_ = 0;
    }
    class_watch_mask_ |= mask;
    class_watch_until_ns_ = now_ + kClassWatchNs;
}

/// Reads the ICMP errors queued on the ports probed lately, once per
/// kClassReadEveryNs: a read is a system call per port, and an answer
/// waits for it at no cost but a later start of the connection's spraying.
void UdpIface::read_path_errors()
{
    if (now_ < class_read_next_ns_) {
        return;
    }
    class_read_next_ns_ = now_ + kClassReadEveryNs;
    for (uint32_t p = 1; p < ports_; ++p) {
        if (class_watch_mask_ & (1u << p)) {
            read_path_errors(uint8_t(p));
        }
    }
}

void UdpIface::read_path_errors(uint8_t path)
{
    for (unsigned n = 0; n < 64; ++n) {
        uint8_t                  quoted[sizeof(WireHeader)];
        alignas(cmsghdr) uint8_t ctl[256];
        sockaddr_in              dst{};
        iovec                    iov{quoted, sizeof(quoted)};
        msghdr                   m   = one_iov_msg(dst, iov, ctl, sizeof(ctl));
        ssize_t                  len = recvmsg(path_fd_[path], &m, MSG_ERRQUEUE | MSG_DONTWAIT);
        if (len < 0) {
            return; /* empty (EAGAIN) */
        }
        const sock_extended_err *ee = nullptr;
        for (cmsghdr *c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
            if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_RECVERR &&
                c->cmsg_len >= CMSG_LEN(sizeof(sock_extended_err) + sizeof(sockaddr_in))) {
                ee = reinterpret_cast<const sock_extended_err *>(CMSG_DATA(c));
            }
        }
        if (ee == nullptr || ee->ee_origin != SO_EE_ORIGIN_ICMP ||
            ee->ee_type != ICMP_TIME_EXCEEDED || size_t(len) < sizeof(WireHeader)) {
            ++counters.path_errors; /* a port unreachable, a quote too short */
            continue;
        }
        sockaddr_in hop;
        std::memcpy(&hop, SO_EE_OFFENDER(ee), sizeof(hop));
        WireHeader h;
        std::memcpy(&h, quoted, sizeof(h));
        auto it = qp_by_num_.find(h.src_qp);
        if (hop.sin_family != AF_INET || Opcode(h.opcode) != Opcode::kAckReq ||
            it == qp_by_num_.end() || !tokens_equal(h.token, it->second->token) ||
            !same_peer(dst, it->second->peer)) {
            ++counters.path_errors;
            continue;
        }
        ++counters.spine_answers;
        it->second->classes.answered(path, hop.sin_addr.s_addr);
    }
}

/// Whether a send on `path` that just failed (errno) may go again: it was
/// interrupted, or it failed for an ICMP error pending on its socket
/// (IP_RECVERR), at most twice per send (icmp_tries), and the queue is read.
bool UdpIface::send_again(uint8_t path, unsigned &icmp_tries)
{
    int err = errno;
    if (err == EINTR) {
        return true;
    }
    if (path == 0 || icmp_tries++ >= 2 ||
        !(err == EHOSTUNREACH || err == ENETUNREACH || err == ECONNREFUSED || err == EHOSTDOWN ||
          err == EPROTO)) {
        return false;
    }
    read_path_errors(path);
    return true;
}

} // namespace doorbell::udp
