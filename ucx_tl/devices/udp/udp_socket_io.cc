/* UDP device, socket I/O: progress, receive (batches, read data in place,
 * CE marks and kernel timestamps), staging and the sendmmsg flush. */
#include "udp_device.h"

#include "core/clock.h"
#include "parser.h"

#include <sys/epoll.h>
#include <sys/timerfd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <utility>

namespace doorbell::udp {

namespace {

/// CLOCK_REALTIME - CLOCK_MONOTONIC now, ns: the kernel stamps arrivals on
/// the realtime scale, the wire and the timers use the monotonic one.
int64_t realtime_minus_monotonic_ns()
{
    timespec rt, mono;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    return (int64_t(rt.tv_sec) - int64_t(mono.tv_sec)) * 1000000000ll +
           (int64_t(rt.tv_nsec) - int64_t(mono.tv_nsec));
}

} // namespace

unsigned UdpIface::progress()
{
    if (fd_in_epoll_ && !background && ++polls_since_arm_ >= kEpollIdlePolls) {
        /* the application busy-polls, it does not wait: take the socket
         * out of the wake-up set until the next arm, so arrivals skip the
         * epoll callback */
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd_, nullptr);
        fd_in_epoll_ = false;
    }
    ++depth_;
    now_         = now_ns();
    bool reading = false;
    for (size_t i = 0; i < qps.size(); ++i) {
        auto *qp = static_cast<UdpQp *>(qps[i]);
        if (qp->ring.unrung() != 0) {
            qp->ring.ring(); /* what the batcher held back */
            ++counters.doorbells;
            transmit(*qp);
        }
        reading |= !qp->reads.empty();
    }
    flush_tx();
    rx_place_      = reading && mtu_ >= kPlaceMin && !faults_;
    size_t   bytes = 0;
    unsigned count = receive(bytes);
    if (count > 1 || bytes >= kLinearTx) {
        /* copying the data took time; an empty poll, or one small datagram
         * (a ping, an ACK), did not: the clock read above still holds */
        now_ = now_ns();
    }
    flush_deferred_acks(false);
    if (now_ < class_watch_until_ns_) {
        read_path_errors();
    }
    if (!gapped_.empty()) {
        check_gaps();
    }
    reap_reassembly(false);
    for (size_t i = 0; i < qps.size(); ++i) {
        auto *qp = static_cast<UdpQp *>(qps[i]);
        check_timer(*qp);
        transmit(*qp);
    }
    flush_tx();
    count += poll_completions();
    if (background && count != 0) {
        /* what this took from the socket (ACKs that free slots a pending
         * request waits for, completions to deliver) took the event fd's
         * readiness with it: fire the wake-up timer now, so a worker asleep
         * on the fd comes for it */
        itimerspec its{};
        its.it_value.tv_nsec = 1;
        timerfd_settime(timer_fd_, 0, &its, nullptr);
    }
    if (--depth_ == 0) {
        graveyard_.clear();
    }
    return count;
}

/// Takes what the socket holds (up to kRxRounds batches); returns the
/// datagrams and adds their bytes to bytes.
unsigned UdpIface::receive(size_t &bytes)
{
    rx_prev_look_        = rx_look_end_;
    unsigned total       = 0;
    bool     drained     = false;
    int64_t  rt_to_mono  = 0; /* CLOCK_REALTIME - CLOCK_MONOTONIC, ns */
    bool     have_offset = false;
    for (unsigned round = 0; round < kRxRounds; ++round) {
        /* After a quiet poll ask for one datagram: a lone message (a ping)
         * then costs no second, failing receive attempt in the kernel. A
         * call that filled its request asks for a full batch next time. */
        unsigned want   = rx_want_;
        int      placed = rx_place_ ? place_read_response() : 0;
        if (placed < 0) {
            break; /* the peek found the socket empty */
        }
        if (rx_place_) {
            /* one datagram at a time while read data may arrive: a batch
             * behind a control packet would land in receive buffers */
            want = 1;
        }
        int n = receive_batch(want);
        /* a full batch, or a second datagram in a row asked for alone:
         * a stream, so ask for a batch; one datagram after a quiet poll
         * is a ping, and its answer is a round trip away */
        rx_singles_ = n == 1 && want == 1 ? rx_singles_ + 1 : 0;
        rx_want_    = (n >= 2 || rx_singles_ >= 2) ? kRxBatch : 1;
        if (n <= 0) {
            if (placed > 0) {
                rx_placed_ = nullptr;
                rearm_rx(1);
            }
            drained = true;
            break;
        }
        for (int i = 0; i < n; ++i) {
            msghdr &m       = rx_msgs_[i].msg_hdr;
            bool    ce      = false;
            size_t  segment = 0; /* a merged buffer's datagram size (GRO) */
            rx_ts_          = now_;
            for (cmsghdr *c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
                if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS &&
                    c->cmsg_len >= CMSG_LEN(1)) {
                    ce = (*CMSG_DATA(c) & 0x3) == 0x3;
                } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS &&
                           c->cmsg_len >= CMSG_LEN(sizeof(timespec))) {
                    if (!have_offset) {
                        rt_to_mono  = realtime_minus_monotonic_ns();
                        have_offset = true;
                    }
                    rx_ts_ = kernel_rx_time(c, rt_to_mono);
                    ++counters.rx_timestamped;
                } else if (size_t s = gro_segment(c); s != 0) {
                    segment = s;
                }
            }
            size_t len = rx_msgs_[i].msg_len;
            bool   cut = m.msg_flags & MSG_TRUNC;
            /* a datagram cut short is lost (and resent); so is a buffer
             * whose merged datagrams' size was cut off (GRO): it would be
             * read as one datagram */
            if ((cut && segment == 0) || (rx_gro_ && (m.msg_flags & MSG_CTRUNC))) {
                ++counters.rx_packets;
                drop(&doorbell_counters_t::rx_drop_malformed);
                continue;
            }
            if (segment != 0 && (len > segment || cut)) {
                bytes += len;
                receive_merged(unsigned(i), len, segment, ce);
                continue;
            }
            if (!rx_ce_ && (unsigned(n) >= kCeQueuedDatagrams || len >= kCeBulkBytes)) {
                enable_bulk_receive();
            }
            bytes += len;
            handle_datagram(rx_slots_[i] + kRxLead, len, rx_addr_[i], ce, size_t(i));
        }
        rearm_rx(unsigned(n));
        for (Responder *r : ack_list_) {
            if (r->ack_due) { /* else it rode on a request */
                send_ack(*r);
            }
        }
        ack_list_.clear();
        total += unsigned(n);
        if (!rx_place_ && n < int(kRxBatch)) {
            drained = n < int(want);
            break; /* drained (or asked for one: the next poll drains) */
        }
    }
    /* a datagram still in the socket now waited behind those taken */
    rx_look_end_ = total != 0 ? now_ns() : now_;
    if (drained) {
        rx_drained_ns_ = rx_look_end_;
    }
    return total;
}

/// The datagrams of a merged buffer (GRO) in receive entry i, each as if it
/// had come alone. Only whole ones: a buffer cut short by the receive
/// buffer loses its last, partial datagram (resent).
void UdpIface::receive_merged(unsigned i, size_t len, size_t segment, bool ce)
{
    const bool   truncated = rx_msgs_[i].msg_hdr.msg_flags & MSG_TRUNC;
    const size_t whole     = gro_whole_bytes(len, segment, truncated);
    if (truncated) {
        ++gro_truncated_;
        ++counters.rx_packets;
        drop(&doorbell_counters_t::rx_drop_malformed);
    }
    handle_merged(rx_slots_[i] + kRxLead, whole, segment, rx_addr_[i], ce, i);
}

/// The datagrams of segment bytes (the last may be shorter) in len bytes at
/// buf, in order. The first may be lent to the AM handler in place, and the
/// slot then gets a new buffer: the rest follow in the lent one, which lives
/// until its AM is released.
void UdpIface::handle_merged(uint8_t *buf, size_t len, size_t segment, const sockaddr_in &from,
                             bool ce, size_t slot)
{
    ++counters.rx_merged;
    for (size_t at = 0; at < len; at += segment) {
        ++counters.rx_merged_datagrams;
        handle_datagram(buf + at, std::min(segment, len - at), from, ce, slot, at != 0);
    }
}

/// A read's data lands where it belongs, not in a receive buffer copied
/// from: peeks at the header of the datagram at the head of the socket and,
/// when it is a READ_RESP chunk a piece still waits for (checked exactly as
/// handle_read_resp checks it), points receive entry 0 at the header slot
/// and the chunk's place in the destination. Returns 1 when set up, 0 when
/// the datagram takes the normal path, -1 when the socket is empty.
int UdpIface::place_read_response()
{
    uint8_t                              head[sizeof(WireHeader)];
    sockaddr_in                          from{};
    iovec                                iov{head, sizeof(head)};
    msghdr                               m = one_iov_msg(from, iov);
    std::array<uint8_t, kRxControlBytes> control;
    if (rx_gro_) {
        /* a merged buffer (GRO) is not one chunk: it takes the normal path */
        m.msg_control    = control.data();
        m.msg_controllen = control.size();
    }
    ssize_t len = recvmsg(fd_, &m, MSG_PEEK | MSG_DONTWAIT | MSG_TRUNC);
    if (len < 0) {
        return errno == EINTR ? 0 : -1;
    }
    if (size_t(len) > kBufSize) {
        return 0;
    }
    for (cmsghdr *c = rx_gro_ ? CMSG_FIRSTHDR(&m) : nullptr; c != nullptr; c = CMSG_NXTHDR(&m, c)) {
        if (gro_segment(c) != 0) {
            return 0;
        }
    }
    /* the connection and its token first, as for every datagram; anything
     * that does not pass takes the normal path, which counts the drop */
    size_t head_len = std::min(sizeof(head), size_t(len));
    Prefix p;
    if (!read_prefix(head, head_len, p) || p.opcode != uint8_t(Opcode::kReadResp)) {
        return 0;
    }
    auto it = qp_by_num_.find(p.dst_qp);
    if (it == qp_by_num_.end() || !tokens_equal(p.token, it->second->token) ||
        !from_peer(it->second->peer, it->second->peer_ports, from) || it->second->in_error()) {
        return 0;
    }
    ParseResult       pr = parse_header(head, head_len, size_t(len));
    const WireHeader &h  = pr.header;
    if (pr.status != ParseStatus::kOk || Opcode(h.opcode) != Opcode::kReadResp) {
        return 0;
    }
    for (const ReadPiece &piece : it->second->reads) {
        if (piece.psn != h.psn) {
            continue;
        }
        if (h.msg_offset >= piece.length || h.msg_offset % piece.chunk != 0 ||
            h.length != std::min(piece.chunk, piece.length - h.msg_offset) ||
            piece.got[h.msg_offset / piece.chunk]) {
            return 0;
        }
        rx_place_iov_[0]  = {rx_slots_[0] + kRxLead, pr.header_bytes};
        rx_place_iov_[1]  = {piece.dest + h.msg_offset, h.length};
        msghdr &e         = rx_msgs_[0].msg_hdr;
        e.msg_iov         = rx_place_iov_.data();
        e.msg_iovlen      = rx_place_iov_.size();
        rx_placed_        = piece.dest + h.msg_offset;
        rx_placed_header_ = h;
        return 1;
    }
    return 0;
}

/// recvmmsg into the first want entries; for one entry recvmsg, which
/// costs the kernel less per call (about 0.15 us per hop on lo here), and
/// recvfrom when no control message is wanted and entry 0 is not placed: the
/// kernel then copies in no message header and no iovec (0.05-0.1 us).
int UdpIface::receive_batch(unsigned want)
{
    if (want > 1) {
        return recvmmsg(fd_, rx_msgs_.data(), want, MSG_DONTWAIT, nullptr);
    }
    msghdr &m = rx_msgs_[0].msg_hdr;
    ssize_t len;
    if (!rx_ce_ && !rx_timestamps_ && !rx_gro_ && rx_placed_ == nullptr) {
        socklen_t alen = sizeof(sockaddr_in);
        /* MSG_TRUNC: the length of the datagram, even one that did not fit */
        len = recvfrom(fd_, rx_slots_[0] + kRxLead, rx_room_, MSG_DONTWAIT | MSG_TRUNC,
                       reinterpret_cast<sockaddr *>(&rx_addr_[0]), &alen);
        if (len < 0) {
            return -1;
        }
        m.msg_controllen    = 0;
        m.msg_flags         = size_t(len) > rx_room_ ? MSG_TRUNC : 0;
        rx_msgs_[0].msg_len = unsigned(std::min<size_t>(size_t(len), rx_room_));
        return 1;
    }
    len = recvmsg(fd_, &m, MSG_DONTWAIT);
    if (len < 0) {
        return -1;
    }
    rx_msgs_[0].msg_len = unsigned(len);
    return 1;
}

/// Resets the first count receive headers: recvmmsg wrote the address,
/// control and flag fields of those it filled (the others are intact), and
/// the AM handler may have lent a slot's buffer away. A datagram lands
/// kRxLead bytes into its buffer (the headroom of a pack's first message).
void UdpIface::rearm_rx(unsigned count)
{
    for (unsigned i = 0; i < count; ++i) {
        rx_iov_[i]       = {rx_slots_[i] + kRxLead, rx_room_};
        msghdr &m        = rx_msgs_[i].msg_hdr;
        m.msg_name       = &rx_addr_[i];
        m.msg_namelen    = sizeof(sockaddr_in);
        m.msg_iov        = &rx_iov_[i];
        m.msg_iovlen     = 1;
        m.msg_control    = rx_cmsg_[i].data();
        m.msg_controllen = rx_cmsg_[i].size();
        m.msg_flags      = 0;
    }
    rx_placed_ = nullptr; /* consumed, or its datagram was not delivered */
}

void UdpIface::handle_datagram(uint8_t *buf, size_t len, const sockaddr_in &from, bool ce,
                               size_t slot, bool later)
{
    /* entry 0 may have been received in place: its payload is in a read's
     * destination already (and its header must be the one peeked at) */
    const uint8_t *placed = slot == 0 ? std::exchange(rx_placed_, nullptr) : nullptr;
    if (!later) {
        rx_lent_ = false;
    }
    ++counters.rx_packets;
    counters.rx_bytes += len;
    if (faults_ && faults_->rx_drop()) {
        return;
    }
    Prefix p;
    if (!read_prefix(buf, len, p)) {
        drop(&doorbell_counters_t::rx_drop_malformed);
        return;
    }
    if (!known_prefix(p)) {
        drop(&doorbell_counters_t::rx_drop_foreign);
        return;
    }
    UdpQp     *qp = nullptr;
    Responder *r  = nullptr;
    if (!authenticate(p, from, &qp, &r)) {
        return; /* no such connection, wrong token or wrong source */
    }
    ParseResult pr = parse(buf, len);
    if (pr.status != ParseStatus::kOk) {
        drop(pr.status == ParseStatus::kForeign ? &doorbell_counters_t::rx_drop_foreign :
                                                  &doorbell_counters_t::rx_drop_malformed);
        return;
    }
    if (placed != nullptr && std::memcmp(&pr.header, &rx_placed_header_, sizeof(WireHeader)) != 0) {
        drop(&doorbell_counters_t::rx_drop_malformed); /* (a changed header: not with one reader) */
        return;
    }
    if (placed != nullptr) {
        pr.payload = placed;
    }
    if (faults_ && faults_->ce()) {
        ce = true;
    }
    if (ce) {
        ++counters.ce_marks;
    }
    if (qp != nullptr) {
        rx_path_ = uint8_t(ntohs(from.sin_port) - ntohs(qp->peer.sin_port)); /* < peer_ports */
        handle_response(*qp, pr.header, pr.payload, ce);
    } else if (r != nullptr) {
        if (pr.has_ride) {
            take_ride(pr.ride, from);
        }
        uint32_t id = r->id;
        if (pr.pack_count != 0) {
            handle_pack(id, pr, buf, ce, slot);
        } else {
            handle_request(*r, pr.header, buf, pr.payload, ce, slot);
        }
        if (auto it = responders_.find(id); it != responders_.end() && !it->second.held.empty()) {
            replay_held(id); /* multipath: what waited for the gap this filled */
        }
    } else {
        handle_connect(pr.header, pr.payload, from);
    }
}

/// Queues a packet for the next sendmmsg from the socket of `path`; a
/// header_bytes other than the full header's sends hdr as a SegHeader.
void UdpIface::stage(const WireHeader &hdr, const void *a, size_t alen, const void *b, size_t blen,
                     const sockaddr_in &to, uint8_t path, uint32_t header_bytes)
{
    if (tx_count_ == kTxBatch) {
        flush_tx();
    }
    TxSlot &s = tx_[tx_count_++];
    s.path    = path;
    if (header_bytes == sizeof(WireHeader)) {
        s.hdr = hdr;
    } else {
        header_bytes = encode_seg_header(hdr, reinterpret_cast<uint8_t *>(&s.hdr));
    }
    s.to     = to;
    s.iov[0] = {&s.hdr, header_bytes};
    s.iov[1] = {const_cast<void *>(a), alen};
    s.iov[2] = {const_cast<void *>(b), blen};
    s.iovcnt = blen != 0 ? 3 : alen != 0 ? 2 : 1;
    s.bytes  = header_bytes + alen + blen;
}

/// A slot for a datagram the caller builds whole in the slot's own buffer
/// (*buf, kPackMaxBytes), then describes in iov[0] and bytes.
UdpIface::TxSlot &UdpIface::stage_linear(const sockaddr_in &to, uint8_t path, uint8_t **buf)
{
    if (tx_count_ == kTxBatch) {
        flush_tx();
    }
    unsigned i = tx_count_++;
    if (!tx_pack_[i]) {
        tx_pack_[i].reset(new uint8_t[kPackMaxBytes]);
    }
    TxSlot &s = tx_[i];
    s.path    = path;
    s.to      = to;
    s.iovcnt  = 1;
    s.bytes   = 0;
    *buf      = tx_pack_[i].get();
    return s;
}

/// Sends one small staged packet with sendto from a linear copy (or from
/// its own buffer, when it is one piece already).
void UdpIface::send_linear(const TxSlot &s)
{
    uint8_t *p   = tx_linear_.data();
    size_t   len = 0;
    if (s.iovcnt == 1) {
        p   = static_cast<uint8_t *>(s.iov[0].iov_base);
        len = s.iov[0].iov_len;
    }
    for (unsigned i = 0; s.iovcnt > 1 && i < s.iovcnt; ++i) {
        std::memcpy(p + len, s.iov[i].iov_base, s.iov[i].iov_len);
        len += s.iov[i].iov_len;
    }
    ssize_t  rc;
    unsigned icmp = 0;
    do {
        rc = sendto(path_fd_[s.path], p, len, 0, reinterpret_cast<const sockaddr *>(&s.to),
                    sizeof(s.to));
    } while (rc < 0 && send_again(s.path, icmp));
    if (rc >= 0) { /* else lost; retransmission recovers it */
        counters.tx_bytes += uint64_t(rc);
        ++counters.tx_packets;
    }
}

/// Builds tx_msgs_ from the staged slots of `path` from slot `from` on: a
/// message per packet (with the fault injector's drops, duplicates and
/// swaps), or while GSO is on one per run of the path's packets to one peer
/// that gso_run groups. A packet steered to another port (a probe) does not
/// break a run: each port's packets leave from its own socket, in the order
/// they were staged. Returns the messages.
unsigned UdpIface::stage_batch(unsigned from, uint8_t path)
{
    const bool gso = gso_ && !faults_; /* the fault injector's tests send per packet */
    /* the path's slots, in order */
    std::array<unsigned, kTxBatch> slot;
    unsigned                       count = 0;
    for (unsigned i = from; i < tx_count_; ++i) {
        if (tx_[i].path == path) {
            slot[count++] = i;
        }
    }
    unsigned n        = 0;
    unsigned iov_used = 0;
    auto     add      = [&](unsigned i) {
        mmsghdr &m            = tx_msgs_[n];
        m                     = {};
        m.msg_hdr.msg_name    = &tx_[i].to;
        m.msg_hdr.msg_namelen = sizeof(sockaddr_in);
        m.msg_hdr.msg_iov     = tx_[i].iov;
        m.msg_hdr.msg_iovlen  = tx_[i].iovcnt;
        tx_first_[n]          = i;
        tx_segs_[n++]         = 1;
    };
    std::array<GsoItem, kTxBatch> items;
    if (gso) {
        for (unsigned k = 0; k < count; ++k) {
            items[k] = {tx_[slot[k]].bytes, tx_[slot[k]].to};
        }
    }
    for (unsigned k = 0; k < count; ++k) {
        unsigned i = slot[k];
        if (faults_) {
            if (faults_->tx_drop()) {
                continue;
            }
            if (k + 1 < count && faults_->reorder()) {
                add(slot[k + 1]);
                add(i);
                ++k;
                continue;
            }
            if (faults_->duplicate()) {
                add(i);
            }
            add(i);
            continue;
        }
        unsigned run = gso ? gso_run(items.data(), count, k) : 1;
        if (run == 1) {
            add(i);
            continue;
        }
        /* one super-datagram: the run's iovecs back to back, cut by the
         * kernel every tx_[i].bytes */
        mmsghdr &m   = tx_msgs_[n];
        iovec   *iov = &tx_gso_iov_[iov_used];
        size_t   cnt = 0;
        for (unsigned r = k; r < k + run; ++r) {
            const TxSlot &t = tx_[slot[r]];
            for (unsigned j = 0; j < t.iovcnt; ++j) {
                iov[cnt++] = t.iov[j];
            }
        }
        iov_used += unsigned(cnt);
        m                        = {};
        m.msg_hdr.msg_name       = &tx_[i].to;
        m.msg_hdr.msg_namelen    = sizeof(sockaddr_in);
        m.msg_hdr.msg_iov        = iov;
        m.msg_hdr.msg_iovlen     = cnt;
        m.msg_hdr.msg_control    = tx_gso_cmsg_[n].data();
        m.msg_hdr.msg_controllen = gso_control(tx_gso_cmsg_[n].data(), uint16_t(tx_[i].bytes));
        tx_first_[n]             = i;
        tx_segs_[n++]            = run;
        k += run - 1;
    }
    return n;
}

void UdpIface::flush_tx()
{
    if (tx_count_ == 0) {
        return;
    }
    /* ACKs leave stamped with the clock of their send (send_control) */
    if (tx_stamp_at_send_ != 0) {
        uint64_t sent = now_ns();
        for (uint64_t m = tx_stamp_at_send_; m != 0; m &= m - 1) {
            tx_[std::countr_zero(m)].hdr.ts_send = sent;
        }
        tx_stamp_at_send_ = 0;
    }
    if (tx_count_ == 1 && !faults_ && (tx_[0].bytes <= tx_linear_.size() || tx_[0].iovcnt == 1)) {
        send_linear(tx_[0]); /* a ping, an ACK: the common latency case */
        tx_count_ = 0;
        return;
    }
    /* the ports this flush uses, each in one pass (most flushes take one
     * or two of the 16; an iface of one path, its one) */
    uint32_t used = 0;
    for (unsigned i = 0; i < tx_count_; ++i) {
        used |= 1u << tx_[i].path;
    }
    for (; used != 0; used &= used - 1) {
        auto p = uint8_t(std::countr_zero(used));
        if (unsigned n = stage_batch(0, p); n != 0) {
            send_staged(p, n);
        }
    }
    tx_count_ = 0;
}

/// Sends the n messages stage_batch built from the socket of `path`.
void UdpIface::send_staged(uint8_t path, unsigned n)
{
    int      fd      = path_fd_[path];
    unsigned sent    = 0;
    unsigned icmp    = 0;
    auto     account = [&](unsigned count) {
        for (unsigned i = 0; i < count; ++i) {
            counters.tx_bytes += tx_msgs_[i].msg_len;
            counters.tx_packets += tx_segs_[i];
            if (tx_segs_[i] > 1) {
                ++gso_sends_;
                gso_segments_ += tx_segs_[i];
            }
        }
    };
    while (sent < n) {
        int rc = tx_syscall_(fd, tx_msgs_.data() + sent, n - sent, 0);
        if (rc > 0) {
            sent += unsigned(rc);
            continue;
        }
        if (rc < 0 && send_again(path, icmp)) {
            continue;
        }
        if (rc < 0 && tx_segs_[sent] > 1 &&
            (errno == EIO || errno == EINVAL || errno == EOPNOTSUPP || errno == ENOPROTOOPT ||
             errno == EMSGSIZE)) {
            /* the kernel refused a super-datagram (no UDP_SEGMENT, or a
             * route's device without checksum offload): one datagram per
             * packet from here on, starting with what it refused */
            gso_ = false;
            ++gso_fallbacks_;
            account(sent);
            n    = stage_batch(tx_first_[sent], path);
            sent = 0;
            continue;
        }
        break; /* the rest is lost; retransmission recovers it */
    }
    account(sent);
}

void UdpIface::enable_rx_timestamps()
{
    if (rx_timestamps_) {
        return;
    }
    int on         = 1;
    rx_timestamps_ = setsockopt(fd_, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) == 0;
}

/// CE marks are read, and merged buffers (GRO) taken, from here on. A mark
/// says a queue on the path passed its threshold, and queues are built by
/// bulk traffic: a segment of at least kCeBulkBytes, or a receive that
/// finds kCeQueuedDatagrams waiting. Until such traffic arrives, a
/// latency-bound exchange of small messages does not pay for the control
/// messages, 0.2-0.25 us per datagram on lo here for TOS alone
/// (docs/transport.md). A receiver that reads no marks echoes none, so a
/// sender of small messages alone is paced by delay.
void UdpIface::enable_bulk_receive()
{
    int on = 1;
    /* tried once: IPv4 sockets on Linux always accept it (checked at open) */
    setsockopt(fd_, IPPROTO_IP, IP_RECVTOS, &on, sizeof(on));
    rx_ce_ = true;
    if (gro_allowed_ && !rx_gro_) {
        rx_gro_ = gro_enable(fd_);
    }
}

void UdpIface::set_rx_room(size_t bytes)
{
    rx_room_ = std::clamp<size_t>(bytes, 1, kBufSize - kRxLead);
    rearm_rx(kRxBatch);
}

void UdpIface::set_gro(bool on)
{
    if (!on) {
        gro_allowed_ = rx_gro_; /* once on, merged buffers may be queued */
        return;
    }
    gro_allowed_ = true;
    rx_gro_      = rx_gro_ || gro_enable(fd_);
}

/// The kernel's arrival time of a datagram (SCM_TIMESTAMPNS) on the
/// monotonic scale, at most now_: the time it waited in the socket for this
/// process to run is no part of the path.
uint64_t UdpIface::kernel_rx_time(const cmsghdr *c, int64_t rt_to_mono) const
{
    timespec ts;
    std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
    int64_t mono = int64_t(ts.tv_sec) * 1000000000ll + ts.tv_nsec - rt_to_mono;
    if (mono <= 0 || uint64_t(mono) > now_) {
        return now_;
    }
    return uint64_t(mono);
}

} // namespace doorbell::udp
