/* UDP device, connections: the token check every datagram passes first, the
 * handshake (CONNECT, ACCEPT, DISCONNECT), the responder table, keepalive,
 * and the bound on reassembly memory. */
#include "udp_device.h"

#include "core/clock.h"
#include "core/error.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

namespace doorbell::udp {

namespace {

/// "127.0.0.1:4242" for messages.
std::string address_string(const sockaddr_in &a)
{
    char ip[INET_ADDRSTRLEN], buf[64];
    inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip));
    snprintf(buf, sizeof(buf), "%s:%u", ip, ntohs(a.sin_port));
    return buf;
}

} // namespace

void UdpIface::drop(uint64_t doorbell_counters_t::*reason)
{
    ++(counters.*reason);
    ++counters.rx_dropped;
}

/// The first look at a datagram: the connection it names (its receiver's
/// QP number, at the same offset in every header), the token compared with
/// the connection's (CONNECT: with this iface's), then the sender's address
/// with the one fixed at connect time. Nothing else of the packet has been
/// looked at yet, so a stranger's datagram costs a table lookup and a
/// compare, and creates nothing.
bool UdpIface::authenticate(const Prefix &p, const sockaddr_in &from, UdpQp **qp, Responder **r)
{
    if (p.opcode == uint8_t(Opcode::kConnect)) {
        if (!tokens_equal(p.token, token_)) {
            drop(&doorbell_counters_t::rx_drop_token);
            return false;
        }
        return true;
    }
    const sockaddr_in *peer;
    uint64_t           token;
    uint32_t           ports;
    if (is_response(p.opcode)) {
        auto it = qp_by_num_.find(p.dst_qp);
        if (it == qp_by_num_.end()) {
            drop(&doorbell_counters_t::rx_drop_no_conn);
            return false;
        }
        *qp   = it->second;
        peer  = &(*qp)->peer;
        token = (*qp)->token;
        ports = (*qp)->peer_ports;
    } else {
        auto it = responders_.find(p.dst_qp);
        if (it == responders_.end()) {
            drop(&doorbell_counters_t::rx_drop_no_conn);
            return false;
        }
        *r    = &it->second;
        peer  = &(*r)->peer;
        token = (*r)->token;
        ports = (*r)->peer_ports;
    }
    if (!tokens_equal(p.token, token)) {
        drop(&doorbell_counters_t::rx_drop_token);
    } else if (!from_peer(*peer, ports, from)) {
        drop(&doorbell_counters_t::rx_drop_source);
    } else {
        return true;
    }
    *qp = nullptr;
    *r  = nullptr;
    return false;
}

/* ------------------------------------------------------------ requester */

/// CONNECT: the target iface's token (its address), this QP, its initial
/// PSN and the connection's token. Resent with backoff until ACCEPT.
void UdpIface::send_connect(UdpQp &qp)
{
    WireHeader h = make_header(Opcode::kConnect);
    h.token      = qp.peer_token;
    h.src_qp     = qp.qpn;
    h.psn        = qp.isn;
    h.length     = sizeof(ConnectPayload);
    h.aux        = paths_;
    h.am_id      = uint8_t(ports_ - paths_);
    h.ts_send    = now_;
    qp.hello     = {qp.token, token_};
    stage(h, &qp.hello, sizeof(qp.hello), nullptr, 0, qp.peer);
    uint64_t backoff = params.rto_min_ns << std::min<uint32_t>(qp.connect_tries, 20);
    qp.deadline_ns   = now_ + std::min(backoff, params.rto_max_ns);
    ++qp.connect_tries;
}

/// The connect timer: false if the QP failed. A peer that never answers
/// (gone, or not holding the token we have) fails the QP after retry_count
/// handshakes, as a silent peer of a connected QP does.
bool UdpIface::check_connect(UdpQp &qp)
{
    if (qp.connect_tries == 0 || now_ < qp.deadline_ns) {
        return true;
    }
    if (qp.connect_tries > params.retry_count) {
        qp.deadline_ns = 0;
        qp.fail(DOORBELL_ERR_TIMED_OUT,
                name + ": peer " + address_string(qp.peer) +
                    " did not accept the connection of qp " + std::to_string(qp.qpn) + " (" +
                    std::to_string(qp.connect_tries) +
                    " handshakes unanswered: the peer is gone, or its address is stale)");
        return false;
    }
    send_connect(qp);
    return true;
}

void UdpIface::handle_accept(UdpQp &qp, const WireHeader &h)
{
    if (qp.connected) {
        if (h.src_qp == qp.remote_qpn) {
            ++counters.rx_duplicates; /* an answer to a CONNECT sent again */
        } else {
            drop(&doorbell_counters_t::rx_drop_state);
        }
        return;
    }
    if (h.psn != qp.isn) {
        drop(&doorbell_counters_t::rx_drop_psn);
        return;
    }
    qp.remote_qpn  = h.src_qp;
    qp.peer_paths  = h.aux; /* [1, kMaxPaths] with its spare ones: parse_header */
    qp.peer_ports  = h.aux + h.am_id;
    qp.connected   = true;
    qp.deadline_ns = 0;
    /* (no RTT sample: the timers learn the path from data, as before a
     * handshake existed; a responder that answered a CONNECT at once says
     * little about how it acknowledges data) */
    transmit(qp); /* what was posted meanwhile */
}

/// The peer hears from us no more: best effort (a lost DISCONNECT leaves
/// the connection until the peer's iface closes or sees us restart).
void UdpIface::send_disconnect(const UdpQp &qp)
{
    if (!qp.connected) {
        return;
    }
    WireHeader h = make_header(Opcode::kDisconnect);
    h.token      = qp.token;
    h.dst_qp     = qp.remote_qpn;
    h.src_qp     = qp.qpn;
    h.psn        = qp.next_psn;
    h.ts_send    = now_;
    stage(h, nullptr, 0, nullptr, 0, qp.peer);
}

/// Something authenticated came from the peer: it lives.
void UdpIface::heard(UdpQp &qp)
{
    qp.last_heard_ns = now_;
    qp.ka_since_ns   = 0;
    qp.ka_next_ns    = params.keepalive_interval_ns ? now_ + params.keepalive_interval_ns : 0;
}

void UdpIface::send_keepalive(UdpQp &qp)
{
    send_probe(qp, qp.next_psn); /* nothing outstanding: the peer ACKs */
    ++counters.keepalives;
    if (qp.ka_since_ns == 0) {
        qp.ka_since_ns = now_;
    }
    qp.ka_next_ns = params.keepalive_interval_ns ? now_ + params.keepalive_interval_ns : 0;
}

/// An idle connection: probes on the keepalive interval, and a peer silent
/// for keepalive_timeout after the first unanswered probe fails the QP
/// (false). A QP with packets or reads outstanding has its retransmit timer
/// instead.
bool UdpIface::check_keepalive(UdpQp &qp)
{
    if (!qp.unacked.empty() || !qp.reads.empty()) {
        return true;
    }
    if (qp.ka_since_ns != 0 && now_ - qp.ka_since_ns >= params.keepalive_timeout_ns) {
        qp.fail(DOORBELL_ERR_TIMED_OUT, name + ": peer " + address_string(qp.peer) + " (local qp " +
                                            std::to_string(qp.qpn) +
                                            ") answered no keepalive for " +
                                            std::to_string((now_ - qp.ka_since_ns) / 1000000) +
                                            " ms: it is gone (KEEPALIVE_TIMEOUT)");
        return false;
    }
    if (qp.ka_next_ns != 0 && now_ >= qp.ka_next_ns) {
        send_keepalive(qp);
    }
    return true;
}

doorbell_status_t UdpIface::check_qp(UdpQp &qp)
{
    if (qp.in_error()) {
        return set_error(DOORBELL_ERR_CANCELED, "%s: qp %u is in error", name.c_str(), qp.qpn);
    }
    if (!qp.connected || !qp.unacked.empty() || !qp.reads.empty()) {
        /* the handshake or the retransmit timer watches it; a QP never
         * used has nothing that depends on its peer (UCP checks every
         * endpoint it made, used or not) */
        return DOORBELL_OK;
    }
    if (depth_ == 0) {
        now_ = now_ns();
    }
    send_keepalive(qp);
    if (depth_ == 0) {
        flush_tx();
    }
    return DOORBELL_OK;
}

/* ------------------------------------------------------------ responder */

void UdpIface::send_accept(const Responder &r)
{
    WireHeader h = make_header(Opcode::kAccept);
    h.token      = r.token;
    h.dst_qp     = r.qpn;
    h.src_qp     = r.id;
    h.psn        = r.isn;
    h.aux        = paths_;
    h.am_id      = uint8_t(ports_ - paths_);
    h.ts_send    = now_;
    h.ts_echo    = r.accept_ts;
    stage(h, nullptr, 0, nullptr, 0, r.peer);
}

/// A CONNECT that carried this iface's token (authenticate): a member of
/// the job asks for a connection. A repeated one gets the same answer; one
/// from a QP number that had another connection replaces it.
void UdpIface::handle_connect(const WireHeader &h, const uint8_t *payload, const sockaddr_in &from)
{
    ConnectPayload c;
    std::memcpy(&c, payload, sizeof(c));
    if (c.conn_token == 0 || c.iface_token == 0) {
        drop(&doorbell_counters_t::rx_drop_malformed);
        return;
    }
    ResponderKey key{from.sin_addr.s_addr, from.sin_port, h.src_qp};
    if (auto it = conn_index_.find(key); it != conn_index_.end()) {
        Responder &old = responders_.at(it->second);
        if (tokens_equal(old.token, c.conn_token)) {
            ++counters.rx_duplicates; /* our ACCEPT was lost */
            old.accept_ts = h.ts_send;
            send_accept(old);
            return;
        }
        erase_responder(it->second);
    }
    forget_restarted(from, c.iface_token);
    Responder *r = admit(h, c, from);
    if (r == nullptr) {
        ++counters.conn_refused;
        WireHeader n = make_header(Opcode::kNak);
        n.am_id      = uint8_t(NakCode::kRefused);
        n.token      = c.conn_token;
        n.dst_qp     = h.src_qp;
        n.psn        = h.psn;
        n.ts_send    = now_;
        stage(n, nullptr, 0, nullptr, 0, from);
        ++counters.naks;
        return;
    }
    ++counters.connects;
    send_accept(*r);
}

/// A new responder for a CONNECT, or null when the table is full and no
/// entry can be reclaimed (none is ever taken from a live connection).
Responder *UdpIface::admit(const WireHeader &h, const ConnectPayload &c, const sockaddr_in &from)
{
    if (responders_.size() >= kMaxResponders && !reclaim_silent()) {
        return nullptr;
    }
    uint32_t id;
    do {
        id = next_rid_++;
    } while (id == 0 || responders_.count(id) != 0);
    Responder r{};
    r.token            = c.conn_token;
    r.id               = id;
    r.qpn              = h.src_qp;
    r.peer_iface_token = c.iface_token;
    r.peer             = from;
    r.isn              = h.psn;
    r.expected         = h.psn;
    r.accept_ts        = h.ts_send;
    r.last_seen        = now_;
    r.peer_paths       = h.aux; /* [1, kMaxPaths] with its spare ones: parse_header */
    r.peer_ports       = h.aux + h.am_id;
    Responder &in      = responders_.emplace(id, std::move(r)).first->second;
    conn_index_[ResponderKey{from.sin_addr.s_addr, from.sin_port, h.src_qp}] = id;
    PeerIface &pi = peer_ifaces_[address_key(from)];
    pi.token      = c.iface_token;
    ++pi.connections;
    return &in;
}

/// A CONNECT from an address whose earlier connections came from an iface
/// with another token: that iface is gone (a port belongs to one socket),
/// and so are its connections.
void UdpIface::forget_restarted(const sockaddr_in &from, uint64_t iface_token)
{
    auto it = peer_ifaces_.find(address_key(from));
    if (it == peer_ifaces_.end() || tokens_equal(it->second.token, iface_token)) {
        return;
    }
    std::vector<uint32_t> gone;
    for (const auto &[id, r] : responders_) {
        if (same_peer(r.peer, from)) {
            gone.push_back(id);
        }
    }
    for (uint32_t id : gone) {
        erase_responder(id);
    }
}

/// The table is full: forgets the connection heard from least recently if
/// its requester has been silent for longer than a live one may be (it
/// probes an idle connection every keepalive interval). False when every
/// connection is live: the new one is refused instead.
bool UdpIface::reclaim_silent()
{
    if (params.keepalive_interval_ns == 0) {
        return false;
    }
    uint64_t   limit  = params.keepalive_interval_ns + params.keepalive_timeout_ns;
    Responder *oldest = nullptr;
    for (auto &[id, r] : responders_) {
        if (now_ - r.last_seen > limit && (oldest == nullptr || r.last_seen < oldest->last_seen)) {
            oldest = &r;
        }
    }
    if (oldest == nullptr) {
        return false;
    }
    erase_responder(oldest->id);
    return true;
}

void UdpIface::erase_responder(uint32_t id)
{
    auto it = responders_.find(id);
    if (it == responders_.end()) {
        return;
    }
    Responder &r      = it->second;
    auto       unlist = [&](std::vector<Responder *> &list) {
        list.erase(std::remove(list.begin(), list.end(), &r), list.end());
    };
    unlist(ack_list_);
    unlist(deferred_acks_);
    drop_reassembly(r);
    release_held(r);
    conn_index_.erase(ResponderKey{r.peer.sin_addr.s_addr, r.peer.sin_port, r.qpn});
    if (auto pi = peer_ifaces_.find(address_key(r.peer));
        pi != peer_ifaces_.end() && --pi->second.connections == 0) {
        peer_ifaces_.erase(pi);
    }
    responders_.erase(it);
}

/* ---------------------------------------------------------- reassembly */

void UdpIface::drop_reassembly(Responder &r)
{
    if (r.am_buf == nullptr) {
        return;
    }
    delete[] r.am_buf;
    reasm_bytes_ -= r.am_alloc;
    counters.reasm_bytes = reasm_bytes_;
    r.am_buf             = nullptr;
    r.am_alloc           = 0;
    r.am_length          = 0;
}

/// Half-finished messages whose sender has been silent for
/// keepalive_timeout are reclaimed: a live sender resends within its
/// retransmit timeout. Its connection fails (the message cannot be
/// completed), as it would have for a peer that timed out. Scans at most
/// every quarter of that timeout, or at once when memory is at its bound.
void UdpIface::reap_reassembly(bool pressure)
{
    if (reasm_bytes_ == 0 || (!pressure && now_ < reap_at_)) {
        return;
    }
    reap_at_ = now_ + std::max<uint64_t>(params.keepalive_timeout_ns / 4, 1000000);
    for (auto &[id, r] : responders_) {
        if (r.am_buf != nullptr && now_ - r.am_last_ns >= params.keepalive_timeout_ns) {
            drop_reassembly(r);
            r.failed     = true;
            r.fail_cause = NakCause::kAbandoned;
            ++counters.reasm_reclaimed;
        }
    }
}

/* -------------------------------------------------------------- seams */

void UdpIface::start_connect(UdpQp &qp)
{
    if (qp.connected || qp.connect_tries != 0 || qp.in_error()) {
        return;
    }
    if (depth_ == 0) {
        now_ = now_ns();
    }
    send_connect(qp);
    if (depth_ == 0) {
        flush_tx();
    }
}

void connect_now(doorbell_qp_t *qp)
{
    auto *core = static_cast<QpCore *>(qp);
    if (qp != nullptr && core->iface.kind == DOORBELL_DEVICE_UDP) {
        static_cast<UdpIface &>(core->iface).start_connect(static_cast<UdpQp &>(*core));
    }
}

void UdpIface::connection_of(const UdpQp &qp, uint64_t *token, uint32_t *remote_qpn,
                             uint32_t *next_psn) const
{
    *token      = qp.token;
    *remote_qpn = qp.remote_qpn;
    *next_psn   = qp.next_psn;
}

void UdpIface::inject(const uint8_t *bytes, size_t len, const sockaddr_in &from, size_t segment)
{
    if (len > kBufSize - kRxLead) {
        return;
    }
    ++depth_;
    now_         = now_ns();
    uint8_t *buf = take_buffer();
    std::memcpy(buf + kRxLead, bytes, len); /* as a receive lands */
    held_injected_ = false;
    rx_ts_         = now_;
    if (segment != 0 && len > segment) {
        handle_merged(buf + kRxLead, len, segment, from, false, kNoSlot);
    } else {
        handle_datagram(buf + kRxLead, len, from, false, kNoSlot);
    }
    if (!held_injected_) {
        give_buffer(buf);
    }
    for (Responder *r : ack_list_) {
        if (r->ack_due) { /* else it rode on a request */
            send_ack(*r);
        }
    }
    ack_list_.clear();
    flush_tx();
    if (--depth_ == 0) {
        graveyard_.clear();
    }
}

bool connection_of(doorbell_qp_t *qp, uint64_t *token, uint32_t *remote_qpn, uint32_t *next_psn)
{
    auto *core = static_cast<QpCore *>(qp);
    if (qp == nullptr || core->iface.kind != DOORBELL_DEVICE_UDP) {
        return false;
    }
    auto &udp = static_cast<UdpQp &>(*core);
    static_cast<UdpIface &>(core->iface).connection_of(udp, token, remote_qpn, next_psn);
    return udp.connected;
}

void inject_datagram(doorbell_iface_t *iface, const void *bytes, size_t len,
                     const sockaddr_in &from, size_t segment)
{
    if (UdpIface *udp = udp_iface(iface)) {
        udp->inject(static_cast<const uint8_t *>(bytes), len, from, segment);
    }
}

} // namespace doorbell::udp
