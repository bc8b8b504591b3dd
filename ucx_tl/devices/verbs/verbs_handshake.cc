/* Verbs device, the RC handshake over the UD QP: REQ, REP and BYE, the
 * passive QPs it creates, retries and their timeout. */
#include "verbs_device.h"

#include "core/clock.h"
#include "core/error.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace doorbell::verbs {

doorbell_status_t VerbsIface::connect_rc(ibv_qp *qp, const PeerAddr &peer, uint32_t remote_qpn,
                                         uint32_t remote_psn, uint32_t local_psn, uint32_t peer_mtu)
{
    ibv_qp_attr a{};
    a.qp_state           = IBV_QPS_RTR;
    a.path_mtu           = ibv_mtu(std::min<uint32_t>(port_.attr.active_mtu, peer_mtu));
    a.dest_qp_num        = remote_qpn;
    a.rq_psn             = remote_psn & 0xffffff;
    a.max_dest_rd_atomic = uint8_t(std::max(1, std::min(dev_attr_.orig_attr.max_qp_rd_atom, 16)));
    a.min_rnr_timer      = 12;
    a.ah_attr.port_num   = port_.port;
    a.ah_attr.dlid       = peer.lid;
    if (port_.roce || !gid_zero(peer.gid)) {
        a.ah_attr.is_global = 1;
        std::memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
        a.ah_attr.grh.sgid_index = uint8_t(port_.gid_index);
        a.ah_attr.grh.hop_limit  = 64;
    }
    int rc = prov_.modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc == 0) {
        a               = {};
        a.qp_state      = IBV_QPS_RTS;
        a.timeout       = 14;
        a.retry_cnt     = uint8_t(std::min<uint32_t>(params.retry_count, 7));
        a.rnr_retry     = 7; /* infinite: the receiver reposts buffers */
        a.sq_psn        = local_psn & 0xffffff;
        a.max_rd_atomic = uint8_t(
            std::max(1, std::min(dev_attr_.orig_attr.max_qp_init_rd_atom, 16)));
        rc = prov_.modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    }
    if (rc != 0) {
        return set_error(DOORBELL_ERR_IO, "%s: RC QP 0x%x to RTR/RTS for peer %s failed: %s",
                         name.c_str(), qp->qp_num, peer_string(peer).c_str(), strerror(rc));
    }
    return DOORBELL_OK;
}

Hello VerbsIface::make_hello(uint8_t type) const
{
    Hello h{};
    h.magic   = kHelloMagic;
    h.version = 1;
    h.type    = type;
    h.lid     = port_.attr.lid;
    h.ud_qpn  = ud_qp_->qp_num;
    h.mtu     = port_.attr.active_mtu;
    std::memcpy(h.gid, port_.gid.raw, 16);
    return h;
}

ibv_ah *VerbsIface::address_handle(const PeerAddr &to)
{
    std::array<uint8_t, 16> gid;
    std::memcpy(gid.data(), to.gid, 16);
    auto key = std::make_pair(gid, to.lid);
    auto it  = ahs_.find(key);
    if (it != ahs_.end()) {
        return it->second;
    }
    ibv_ah_attr a{};
    a.port_num = port_.port;
    a.dlid     = to.lid;
    if (port_.roce || !gid_zero(to.gid)) {
        a.is_global = 1;
        std::memcpy(a.grh.dgid.raw, to.gid, 16);
        a.grh.sgid_index = uint8_t(port_.gid_index);
        a.grh.hop_limit  = 64;
    }
    ibv_ah *ah = prov_.create_ah(ibpd_, &a);
    if (ah != nullptr) {
        ahs_.emplace(key, ah);
    }
    return ah;
}

doorbell_status_t VerbsIface::ud_send(const PeerAddr &to, const Hello &hello)
{
    ibv_ah *ah = address_handle(to);
    if (ah == nullptr) {
        return set_error(DOORBELL_ERR_UNREACHABLE, "%s: ibv_create_ah for peer %s failed: %s",
                         name.c_str(), peer_string(to).c_str(), strerror(errno));
    }
    uint8_t *buf = pool_.get();
    if (buf == nullptr) {
        return DOORBELL_ERR_NO_RESOURCE; /* retried by the handshake timer */
    }
    std::memcpy(buf, &hello, sizeof(hello));
    ibv_sge     sge{uintptr_t(buf), uint32_t(sizeof(hello)), pool_.lkey()};
    ibv_send_wr wr{};
    wr.wr_id             = uintptr_t(buf);
    wr.sg_list           = &sge;
    wr.num_sge           = 1;
    wr.opcode            = IBV_WR_SEND;
    wr.send_flags        = IBV_SEND_SIGNALED;
    wr.wr.ud.ah          = ah;
    wr.wr.ud.remote_qpn  = to.ud_qpn;
    wr.wr.ud.remote_qkey = kQkey;
    ibv_send_wr *bad;
    int          rc = ibv_post_send(ud_qp_, &wr, &bad);
    if (rc != 0) {
        pool_.put(buf);
        return set_error(DOORBELL_ERR_IO, "%s: UD send to %s failed: %s", name.c_str(),
                         peer_string(to).c_str(), strerror(rc));
    }
    return DOORBELL_OK;
}

void VerbsIface::send_req(VerbsQp &qp)
{
    Hello h  = make_hello(kHelloReq);
    h.rc_qpn = qp.qp->qp_num;
    h.psn    = qp.psn;
    ud_send(qp.peer, h);
    qp.hello_deadline_ns = now_ns() + (params.rto_min_ns << qp.hello_retries);
}

void VerbsIface::post_passive_recvs(Passive &p)
{
    while (p.posted < params.am_credits) {
        uint8_t *buf = pool_.get();
        if (buf == nullptr) {
            return; /* the sender's RNR retries wait for a release */
        }
        if (!post_recv_buffer(p.qp, buf, DOORBELL_AM_HEADROOM, params.seg_size)) {
            return;
        }
        ++p.posted;
        p.bufs.insert(buf);
    }
}

void VerbsIface::destroy_passive(Passive &p)
{
    passive_by_qpn_.erase(p.qp->qp_num);
    prov_.destroy_qp(p.qp);
    /* the HCA no longer owns the receives it had */
    for (uint8_t *buf : p.bufs) {
        pool_.put(buf);
    }
    std::array<uint8_t, 16> gid;
    std::memcpy(gid.data(), p.peer.gid, 16);
    passive_.erase(std::make_tuple(gid, p.peer.lid, p.peer.ud_qpn, p.peer_rc_qpn));
}

void VerbsIface::handle_hello(const Hello &h, uint32_t src_qp)
{
    PeerAddr peer{};
    std::memcpy(peer.gid, h.gid, 16);
    peer.lid    = h.lid;
    peer.ud_qpn = h.ud_qpn;
    if (h.magic != kHelloMagic || h.version != 1 || h.ud_qpn != src_qp || h.rc_qpn == 0 ||
        h.rc_qpn > 0xffffff || h.mtu < IBV_MTU_256 || h.mtu > IBV_MTU_4096) {
        ++counters.rx_dropped;
        debug("%s: dropped a malformed handshake from ud qp 0x%x", name.c_str(), src_qp);
        return;
    }
    if (h.type == kHelloReq) {
        std::array<uint8_t, 16> gid;
        std::memcpy(gid.data(), h.gid, 16);
        auto key = std::make_tuple(gid, h.lid, h.ud_qpn, h.rc_qpn);
        auto it  = passive_.find(key);
        if (it == passive_.end()) {
            if (passive_.size() >= 65536) {
                ++counters.rx_dropped;
                return;
            }
            ibv_qp *ib;
            if (create_rc_qp(&ib) != DOORBELL_OK) {
                return; /* the requester retries */
            }
            Passive p{ib, peer, h.rc_qpn, random_u32() & 0xffffff, 0};
            if (connect_rc(ib, peer, h.rc_qpn, h.psn, p.psn, h.mtu) != DOORBELL_OK) {
                prov_.destroy_qp(ib);
                return;
            }
            it                          = passive_.emplace(key, p).first;
            passive_by_qpn_[ib->qp_num] = &it->second;
            post_passive_recvs(it->second);
        }
        /* a repeated REQ (our REP was lost) gets the same answer */
        Hello rep   = make_hello(kHelloRep);
        rep.rc_qpn  = it->second.qp->qp_num;
        rep.psn     = it->second.psn;
        rep.req_qpn = h.rc_qpn;
        ud_send(peer, rep);
        return;
    }
    if (h.type == kHelloBye) {
        std::array<uint8_t, 16> gid;
        std::memcpy(gid.data(), h.gid, 16);
        auto it = passive_.find(std::make_tuple(gid, h.lid, h.ud_qpn, h.rc_qpn));
        if (it != passive_.end()) {
            destroy_passive(it->second);
        }
        return;
    }
    if (h.type != kHelloRep) {
        ++counters.rx_dropped;
        return;
    }
    auto it = by_rc_qpn_.find(h.req_qpn);
    if (it == by_rc_qpn_.end()) {
        return; /* destroyed meanwhile, or a stale answer */
    }
    VerbsQp &qp = *it->second;
    if (qp.state != VerbsQp::State::kConnecting || std::memcmp(qp.peer.gid, h.gid, 16) != 0 ||
        qp.peer.lid != h.lid || qp.peer.ud_qpn != h.ud_qpn) {
        return; /* duplicate, or not from the peer we asked */
    }
    doorbell_status_t status = connect_rc(qp.qp, qp.peer, h.rc_qpn, h.psn, qp.psn, h.mtu);
    if (status != DOORBELL_OK) {
        qp.fail(status, doorbell_last_error());
        return;
    }
    qp.state             = VerbsQp::State::kConnected;
    qp.hello_deadline_ns = 0;
    post(qp); /* what waited for the connection */
}

void VerbsIface::check_hellos()
{
    uint64_t now = 0;
    for (QpCore *q : qps) {
        auto *qp = static_cast<VerbsQp *>(q);
        if (qp->state != VerbsQp::State::kConnecting || qp->in_error()) {
            continue;
        }
        if (now == 0) {
            now = now_ns();
        }
        if (now < qp->hello_deadline_ns) {
            continue;
        }
        if (qp->hello_retries >= params.retry_count) {
            qp->fail(DOORBELL_ERR_TIMED_OUT, name + ": peer " + peer_string(qp->peer) +
                                                 " did not answer the RC handshake (" +
                                                 std::to_string(params.retry_count) + " retries)");
            continue;
        }
        ++qp->hello_retries;
        send_req(*qp);
    }
}

unsigned VerbsIface::poll_ud_cq()
{
    struct Msg {
        Hello    hello;
        uint32_t src_qp;
    };
    Msg              msgs[kPollBatch];
    unsigned         nmsg = 0, n = 0;
    ibv_poll_cq_attr attr{};
    if (ibv_start_poll(ud_cq_, &attr) != 0) {
        return 0;
    }
    do {
        auto         *buf = reinterpret_cast<uint8_t *>(uintptr_t(ud_cq_->wr_id));
        ibv_wc_status st  = ud_cq_->status;
        ibv_wc_opcode op  = st == IBV_WC_SUCCESS ? ibv_wc_read_opcode(ud_cq_) : IBV_WC_RECV;
        ++n;
        if (op == IBV_WC_SEND) {
            pool_.put(buf);
            continue;
        }
        if (st != IBV_WC_SUCCESS && !pool_.owns(buf)) {
            continue;
        }
        if (st == IBV_WC_SUCCESS && ibv_wc_read_byte_len(ud_cq_) >= kGrhBytes + sizeof(Hello)) {
            std::memcpy(&msgs[nmsg].hello, buf + kGrhBytes, sizeof(Hello));
            msgs[nmsg++].src_qp = ibv_wc_read_src_qp(ud_cq_);
        } else if (st == IBV_WC_SUCCESS) {
            ++counters.rx_dropped;
        }
        if (st == IBV_WC_WR_FLUSH_ERR) {
            pool_.put(buf);
            continue;
        }
        post_recv_buffer(ud_qp_, buf, 0, uint32_t(kGrhBytes + sizeof(Hello)));
    } while (n < kPollBatch && ibv_next_poll(ud_cq_) == 0);
    ibv_end_poll(ud_cq_);
    for (unsigned k = 0; k < nmsg; ++k) {
        handle_hello(msgs[k].hello, msgs[k].src_qp);
    }
    return 0; /* handshakes are not completions */
}

} // namespace doorbell::verbs
