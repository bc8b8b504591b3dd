/* Verbs device, set-up: discovery, open and close, memory keys, QPs, addresses, wake-up. */
#include "verbs_device.h"

#include "core/clock.h"
#include "core/error.h"
#include "core/protection_domain.h"

#include <arpa/inet.h>
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace doorbell::verbs {

namespace {

/// Gb/s per lane of ibv_port_attr::active_speed.
double lane_gbps(uint32_t speed)
{
    switch (speed) {
    case 1:
        return 2.5;
    case 2:
        return 5.0;
    case 4:
    case 8:
        return 10.0;
    case 16:
        return 14.0;
    case 32:
        return 25.0;
    case 64:
        return 50.0;
    case 128:
        return 100.0;
    case 256:
        return 200.0;
    default:
        return 10.0;
    }
}

unsigned lanes(uint8_t width)
{
    switch (width) {
    case 1:
        return 1;
    case 2:
        return 4;
    case 4:
        return 8;
    case 8:
        return 12;
    case 16:
        return 2;
    default:
        return 1;
    }
}

bool is_ipv4_mapped(const ibv_gid &g)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(g.raw, prefix, sizeof(prefix)) == 0;
}

/// Active ports of every device; calls fn(PortInfo) for each.
template <class Fn>
void for_each_port(const Provider &prov, Fn &&fn)
{
    int          n    = 0;
    ibv_device **list = prov.get_device_list(&n);
    if (list == nullptr) {
        debug("ibv_get_device_list: %s", strerror(errno));
        return;
    }
    for (int i = 0; i < n; ++i) {
        ibv_context *ctx = prov.open_device(list[i]);
        if (ctx == nullptr) {
            debug("%s: ibv_open_device failed: %s", list[i]->name, strerror(errno));
            continue;
        }
        ibv_device_attr_ex attr{};
        if (prov.query_device_ex(ctx, nullptr, &attr) != 0) {
            prov.close_device(ctx);
            continue;
        }
        for (unsigned p = 1; p <= attr.orig_attr.phys_port_cnt; ++p) {
            PortInfo info;
            info.hca  = list[i]->name;
            info.port = uint8_t(p);
            if (prov.query_port(ctx, info.port, &info.attr) != 0 ||
                info.attr.state != IBV_PORT_ACTIVE) {
                continue;
            }
            info.roce = info.attr.link_layer == IBV_LINK_LAYER_ETHERNET;
            /* RoCE: prefer an IPv4-mapped GID (RoCE v2 over the IPv4
             * address), else index 0; IB: index 0 (link-local) */
            info.gid_index = 0;
            if (prov.query_gid(ctx, info.port, 0, &info.gid) != 0) {
                continue;
            }
            if (info.roce) {
                int max = std::min(info.attr.gid_tbl_len, 16);
                for (int g = 1; g < max; ++g) {
                    ibv_gid gid;
                    if (prov.query_gid(ctx, info.port, g, &gid) == 0 && is_ipv4_mapped(gid)) {
                        info.gid       = gid;
                        info.gid_index = g;
                        break;
                    }
                }
            }
            fn(info, list[i]);
        }
        prov.close_device(ctx);
    }
    prov.free_device_list(list);
}

bool parse_name(const char *name, std::string *hca, unsigned *port)
{
    const char *colon = strrchr(name, ':');
    if (colon == nullptr || colon == name || colon[1] == '\0') {
        return false;
    }
    char         *end;
    unsigned long p = strtoul(colon + 1, &end, 10);
    if (*end != '\0' || p == 0 || p > 255) {
        return false;
    }
    hca->assign(name, size_t(colon - name));
    *port = unsigned(p);
    return true;
}

} // namespace

int query_devices(doorbell_device_info_t *devices, int max)
{
    int count = 0;
    for_each_port(provider(), [&](const PortInfo &p, ibv_device *dev) {
        if (count < max) {
            doorbell_device_info_t &info = devices[count];
            info                         = {};
            snprintf(info.name, sizeof(info.name), "%s:%u", p.hca.c_str(), p.port);
            info.kind       = DOORBELL_DEVICE_VERBS;
            info.mtu        = mtu_bytes(p.attr.active_mtu);
            info.bandwidth  = lane_gbps(p.attr.active_speed) * lanes(p.attr.active_width) * 1e9 / 8;
            info.latency_ns = p.roce ? 1500 : 1000;
            info.numa_node  = -1;
            std::ifstream numa(std::string(dev->ibdev_path) + "/device/numa_node");
            numa >> info.numa_node;
            snprintf(info.link_layer, sizeof(info.link_layer), "%s", p.roce ? "RoCE" : "IB");
            info.lid = p.attr.lid;
            std::memcpy(info.gid, p.gid.raw, 16);
        }
        ++count;
    });
    return count;
}

bool is_verbs_name(const char *name)
{
    std::string hca;
    unsigned    port;
    if (!parse_name(name, &hca, &port)) {
        return false;
    }
    const Provider &prov = provider();
    int             n    = 0;
    ibv_device    **list = prov.get_device_list(&n);
    if (list == nullptr) {
        return false;
    }
    bool found = false;
    for (int i = 0; i < n && !found; ++i) {
        found = hca == list[i]->name;
    }
    prov.free_device_list(list);
    return found;
}

/* ------------------------------------------------------------------ QP */

VerbsQp::VerbsQp(VerbsIface &iface_, uint32_t qpn_, const PeerAddr &peer_, ibv_qp *qp_,
                 uint32_t psn_) :
    QpCore(iface_, qpn_),
    qp(qp_),
    peer(peer_),
    psn(psn_),
    wr_first(iface_.params.tx_queue_len),
    region(iface_.params.tx_queue_len, nullptr),
    post_ns(iface_.params.tx_queue_len, 0)
{
}

/* --------------------------------------------------------------- iface */

VerbsIface::VerbsIface(ProtectionDomain &pd_, const doorbell_iface_params_t &p, std::string name_) :
    IfaceCore(DOORBELL_DEVICE_VERBS, pd_, p, std::move(name_)), prov_(provider())
{
}

doorbell_status_t VerbsIface::open(ProtectionDomain &pd, const doorbell_iface_params_t &params,
                                   VerbsIface **iface_p)
{
    std::string hca;
    unsigned    port = 0;
    if (params.device == nullptr || !parse_name(params.device, &hca, &port)) {
        return set_error(DOORBELL_ERR_INVALID_PARAM, "iface_open: '%s' is not <hca>:<port>",
                         params.device ? params.device : "(null)");
    }
    PortInfo found;
    bool     ok = false;
    for_each_port(provider(), [&](const PortInfo &p, ibv_device *) {
        if (p.hca == hca && p.port == port) {
            found = p;
            ok    = true;
        }
    });
    if (!ok) {
        return set_error(DOORBELL_ERR_NO_DEVICE, "iface_open: %s is not an active verbs port",
                         params.device);
    }
    std::unique_ptr<VerbsIface> iface(new VerbsIface(pd, params, std::string(params.device)));
    doorbell_status_t           status = iface->init(found);
    if (status != DOORBELL_OK) {
        return status;
    }
    *iface_p = iface.release();
    return DOORBELL_OK;
}

doorbell_status_t VerbsIface::create_cq(ibv_cq_ex **cq, int depth)
{
    ibv_cq_init_attr_ex attr{};
    attr.cqe      = uint32_t(depth);
    attr.channel  = channel_;
    attr.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                    IBV_WC_EX_WITH_SRC_QP;
    if (hca_clock_khz_ != 0) {
        attr.wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
    }
    *cq = prov_.create_cq_ex(ctx_, &attr);
    if (*cq == nullptr && hca_clock_khz_ != 0) {
        debug("%s: no completion timestamps on this CQ (%s)", name.c_str(), strerror(errno));
        hca_clock_khz_ = 0;
        attr.wc_flags &= ~uint64_t(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP);
        *cq = prov_.create_cq_ex(ctx_, &attr);
    }
    if (*cq == nullptr) {
        return set_error(DOORBELL_ERR_IO, "%s: ibv_create_cq_ex(%d) failed: %s", name.c_str(),
                         depth, strerror(errno));
    }
    return DOORBELL_OK;
}

doorbell_status_t VerbsIface::init(const PortInfo &port)
{
    port_             = port;
    int          n    = 0;
    ibv_device **list = prov_.get_device_list(&n);
    for (int i = 0; list != nullptr && i < n && ctx_ == nullptr; ++i) {
        if (port.hca == list[i]->name) {
            ctx_ = prov_.open_device(list[i]);
        }
    }
    if (list != nullptr) {
        prov_.free_device_list(list);
    }
    if (ctx_ == nullptr) {
        return set_error(DOORBELL_ERR_NO_DEVICE, "%s: ibv_open_device failed: %s", name.c_str(),
                         strerror(errno));
    }
    if (prov_.query_device_ex(ctx_, nullptr, &dev_attr_) != 0) {
        return set_error(DOORBELL_ERR_IO, "%s: ibv_query_device_ex failed", name.c_str());
    }
    max_sge_ = uint32_t(std::max(1, std::min(dev_attr_.orig_attr.max_sge, 16)));
    atomics_ = dev_attr_.orig_attr.atomic_cap != IBV_ATOMIC_NONE;
    const ibv_packet_pacing_caps &pp = dev_attr_.packet_pacing_caps;
    hw_pacing_ = pp.qp_rate_limit_max != 0 && (pp.supported_qpts & (1u << IBV_QPT_RC)) != 0;
    if (dev_attr_.completion_timestamp_mask != 0 && dev_attr_.hca_core_clock) {
        hca_clock_khz_ = dev_attr_.hca_core_clock;
    }
    line_rate_ = lane_gbps(port.attr.active_speed) * lanes(port.attr.active_width) * 1e9 / 8;

    ibpd_ = prov_.alloc_pd(ctx_);
    if (ibpd_ == nullptr) {
        return set_error(DOORBELL_ERR_IO, "%s: ibv_alloc_pd failed: %s", name.c_str(),
                         strerror(errno));
    }
    channel_ = prov_.create_comp_channel(ctx_);
    if (channel_ == nullptr) {
        return set_error(DOORBELL_ERR_IO, "%s: ibv_create_comp_channel failed: %s", name.c_str(),
                         strerror(errno));
    }
    fcntl(channel_->fd, F_SETFL, fcntl(channel_->fd, F_GETFL) | O_NONBLOCK);
    calibrate_clock();
    /* a QP in error flushes every outstanding WR into the send CQ, signaled
     * or not: room for many QPs' rings, within what the HCA allows */
    int max_cqe  = dev_attr_.orig_attr.max_cqe > 0 ? dev_attr_.orig_attr.max_cqe : 65536;
    int tx_depth = std::min(max_cqe, std::max(4096, int(params.tx_queue_len) * 16));
    /* receives are bounded by the bounce pool */
    int               rx_depth = std::min(max_cqe, int(params.rx_queue_len + kUdRecvs + 64));
    doorbell_status_t status;
    if ((status = create_cq(&send_cq_, tx_depth)) != DOORBELL_OK ||
        (status = create_cq(&recv_cq_, rx_depth)) != DOORBELL_OK ||
        (status = create_cq(&ud_cq_, 2 * kUdRecvs + 64)) != DOORBELL_OK) {
        return status;
    }

    /* bounce buffers: AM receives and the handshake */
    status = pool_.init(
        name, params.rx_queue_len + kUdRecvs + 64, DOORBELL_AM_HEADROOM + params.seg_size,
        [&](void *base, size_t len, uint32_t *lkey, void **handle) {
            ibv_mr *mr = prov_.reg_mr(ibpd_, base, len, IBV_ACCESS_LOCAL_WRITE);
            if (mr == nullptr) {
                return set_error(DOORBELL_ERR_IO, "%s: ibv_reg_mr of %zu bounce bytes failed: %s",
                                 name.c_str(), len, strerror(errno));
            }
            *lkey   = mr->lkey;
            *handle = mr;
            return DOORBELL_OK;
        },
        [this](void *handle) { prov_.dereg_mr(static_cast<ibv_mr *>(handle)); });
    if (status != DOORBELL_OK) {
        return status;
    }
    rcache_ = std::make_unique<RegCache>(
        [this](CachedRegion &r) {
            ibv_mr *mr = prov_.reg_mr(ibpd_, reinterpret_cast<void *>(r.start), r.end - r.start,
                                      IBV_ACCESS_LOCAL_WRITE);
            if (mr == nullptr) {
                return set_error(DOORBELL_ERR_IO, "%s: ibv_reg_mr(%#lx, %zu) failed: %s",
                                 name.c_str(), (unsigned long)r.start, size_t(r.end - r.start),
                                 strerror(errno));
            }
            r.handle = mr;
            r.lkey   = mr->lkey;
            return DOORBELL_OK;
        },
        [this](CachedRegion &r) { prov_.dereg_mr(static_cast<ibv_mr *>(r.handle)); },
        kRegCacheRegions);

    /* the UD QP of the handshake */
    ibv_qp_init_attr ud{};
    ud.send_cq          = ibv_cq_ex_to_cq(ud_cq_);
    ud.recv_cq          = ibv_cq_ex_to_cq(ud_cq_);
    ud.qp_type          = IBV_QPT_UD;
    ud.cap.max_send_wr  = 64;
    ud.cap.max_recv_wr  = kUdRecvs;
    ud.cap.max_send_sge = 1;
    ud.cap.max_recv_sge = 1;
    ud_qp_              = prov_.create_qp(ibpd_, &ud);
    if (ud_qp_ == nullptr) {
        return set_error(DOORBELL_ERR_IO, "%s: ibv_create_qp(UD) failed: %s", name.c_str(),
                         strerror(errno));
    }
    ibv_qp_attr a{};
    a.qp_state   = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num   = port_.port;
    a.qkey       = kQkey;
    int rc       = prov_.modify_qp(ud_qp_, &a,
                                   IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    if (rc == 0) {
        a          = {};
        a.qp_state = IBV_QPS_RTR;
        rc         = prov_.modify_qp(ud_qp_, &a, IBV_QP_STATE);
    }
    if (rc == 0) {
        a          = {};
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn   = 0;
        rc         = prov_.modify_qp(ud_qp_, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
    }
    if (rc != 0) {
        return set_error(DOORBELL_ERR_IO, "%s: UD QP to RTS failed: %s", name.c_str(),
                         strerror(rc));
    }
    for (unsigned i = 0; i < kUdRecvs; ++i) {
        if (!post_recv_buffer(ud_qp_, pool_.get(), 0, uint32_t(kGrhBytes + sizeof(Hello)))) {
            return set_error(DOORBELL_ERR_IO, "%s: ibv_post_recv(UD) failed", name.c_str());
        }
    }
    max_inline_ = 0;
    {
        /* the inline limit the HCA grants an RC QP (probe one) */
        ibv_qp *probe;
        status = create_rc_qp(&probe);
        if (status != DOORBELL_OK) {
            return status;
        }
        prov_.destroy_qp(probe);
    }
    if (!pd.set_hardware_keys(&keys_)) {
        return set_error(DOORBELL_ERR_UNSUPPORTED,
                         "%s: the protection domain already serves another "
                         "verbs device (one per domain)",
                         name.c_str());
    }
    keys_attached_ = true;
    cc_            = pacing::resolve_pacing_policy(params.cc, false); /* a NIC's port */
    pacing_        = pacing::find_pacing_policy(cc_);
    next_qpn_      = random_u32();
    debug("%s: %s, gid index %d, lid 0x%x, max_inline %u, max_sge %u, "
          "hw pacing %s, timestamps %s, bounce pool on %s",
          name.c_str(), port_.roce ? "RoCE" : "IB", port_.gid_index, port_.attr.lid, max_inline_,
          max_sge_, hw_pacing_ ? "yes" : "no", hca_clock_khz_ ? "yes" : "no",
          pool_.huge_pages() ? "huge pages" : "normal pages");
    return DOORBELL_OK;
}

VerbsIface::~VerbsIface()
{
    if (stats) {
        /* beside the core counters IfaceCore prints */
        const PostStats                        &p      = post_stats_;
        const std::pair<const char *, uint64_t> rows[] = {
            {"post_calls", p.post_calls},
            {"wrs", p.wrs},
            {"sges", p.sges},
            {"inline_wrs", p.inline_wrs},
            {"signaled_wrs", p.signaled_wrs},
            {"merged_wqes", p.merged_wqes},
            {"hw_rate_updates", p.hw_rate_updates},
            {"paced_holds", p.paced_holds},
        };
        print_counters(rows);
        for (unsigned b = 0; b < kPostListBuckets; ++b) {
            fprintf(stderr, "%s post_list_%u %llu\n", name.c_str(), 1u << b,
                    (unsigned long long)p.post_list[b]);
        }
        if (rcache_) {
            const RegCacheStats &r = rcache_->stats();
            fprintf(stderr, "%s rcache_hits %llu\n%s rcache_misses %llu\n", name.c_str(),
                    (unsigned long long)r.hits, name.c_str(), (unsigned long long)r.misses);
        }
    }
    while (!owned_.empty()) {
        destroy_qp(*owned_.back());
    }
    if (keys_attached_) {
        pd.set_hardware_keys(nullptr);
    }
    for (auto &[key, p] : passive_) {
        prov_.destroy_qp(p.qp);
    }
    if (ud_qp_ != nullptr) {
        prov_.destroy_qp(ud_qp_);
    }
    for (auto &[key, ah] : ahs_) {
        prov_.destroy_ah(ah);
    }
    apply_invalidations();
    rcache_.reset();
    pool_.reset();
    for (ibv_cq_ex *cq : {send_cq_, recv_cq_, ud_cq_}) {
        if (cq != nullptr) {
            prov_.destroy_cq(ibv_cq_ex_to_cq(cq));
        }
    }
    if (channel_ != nullptr) {
        prov_.destroy_comp_channel(channel_);
    }
    if (ibpd_ != nullptr) {
        prov_.dealloc_pd(ibpd_);
    }
    if (ctx_ != nullptr) {
        prov_.close_device(ctx_);
    }
}

doorbell_status_t VerbsIface::Keys::register_region(doorbell_mr &mr)
{
    int access = IBV_ACCESS_LOCAL_WRITE;
    if (mr.access & DOORBELL_ACCESS_REMOTE_READ) {
        access |= IBV_ACCESS_REMOTE_READ;
    }
    if (mr.access & DOORBELL_ACCESS_REMOTE_WRITE) {
        /* a writable region also takes a PUT_SIGNAL's fetch-add (ADD), as
         * on the UDP device, where the signal needs write access */
        access |= IBV_ACCESS_REMOTE_WRITE;
        if (iface_.atomics_) {
            access |= IBV_ACCESS_REMOTE_ATOMIC;
        }
    }
    if ((mr.access & DOORBELL_ACCESS_REMOTE_ATOMIC) && iface_.atomics_) {
        access |= IBV_ACCESS_REMOTE_ATOMIC; /* doorbell_qp_atomic */
    }
    ibv_mr *m = iface_.prov_.reg_mr(iface_.ibpd_, mr.address, std::max<size_t>(mr.length, 1),
                                    access);
    if (m == nullptr) {
        return set_error(DOORBELL_ERR_IO, "%s: ibv_reg_mr(%p, %zu) failed: %s", iface_.name.c_str(),
                         static_cast<void *>(mr.address), mr.length, strerror(errno));
    }
    mr.rkey = m->rkey;
    mr.hw   = m;
    return DOORBELL_OK;
}

void VerbsIface::Keys::deregister_region(doorbell_mr &mr)
{
    /* zero-copy registrations cached over this memory must not outlive it;
     * this runs on the caller's thread, the cache belongs to the iface's */
    {
        std::lock_guard lock(iface_.inval_mu_);
        iface_.inval_.emplace_back(mr.address, mr.length);
        __atomic_store_n(&iface_.inval_pending_, true, __ATOMIC_RELEASE);
    }
    iface_.prov_.dereg_mr(static_cast<ibv_mr *>(mr.hw));
    mr.hw = nullptr;
}

void VerbsIface::apply_invalidations()
{
    if (!__atomic_load_n(&inval_pending_, __ATOMIC_ACQUIRE)) {
        return;
    }
    std::vector<std::pair<const void *, size_t>> todo;
    {
        std::lock_guard lock(inval_mu_);
        todo.swap(inval_);
        __atomic_store_n(&inval_pending_, false, __ATOMIC_RELAXED);
    }
    for (const auto &[addr, len] : todo) {
        rcache_->invalidate(addr, len);
    }
}

doorbell_status_t VerbsIface::create_rc_qp(ibv_qp **qp_p, ibv_cq_ex *send_cq)
{
    ibv_qp_init_attr a{};
    a.send_cq          = ibv_cq_ex_to_cq(send_cq ? send_cq : send_cq_);
    a.recv_cq          = ibv_cq_ex_to_cq(recv_cq_);
    a.qp_type          = IBV_QPT_RC;
    a.cap.max_send_wr  = params.tx_queue_len;
    a.cap.max_recv_wr  = params.am_credits;
    a.cap.max_send_sge = max_sge_;
    a.cap.max_recv_sge = 1;
    a.sq_sig_all       = 0;
    ibv_qp *qp         = nullptr;
    /* HCAs refuse more inline than they have: ask for less until granted */
    for (uint32_t inl : {256u, 128u, 64u, 0u}) {
        if (max_inline_ != 0 && inl > max_inline_) {
            continue;
        }
        a.cap.max_inline_data = inl;
        if ((qp = prov_.create_qp(ibpd_, &a)) != nullptr) {
            break;
        }
    }
    if (qp == nullptr) {
        return set_error(DOORBELL_ERR_IO, "%s: ibv_create_qp(RC) failed: %s", name.c_str(),
                         strerror(errno));
    }
    /* create_qp wrote back what the HCA grants */
    if (max_inline_ == 0 || a.cap.max_inline_data < max_inline_) {
        max_inline_ = a.cap.max_inline_data;
    }
    ibv_qp_attr attr{};
    attr.qp_state        = IBV_QPS_INIT;
    attr.pkey_index      = 0;
    attr.port_num        = port_.port;
    attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                           IBV_ACCESS_LOCAL_WRITE | (atomics_ ? IBV_ACCESS_REMOTE_ATOMIC : 0);
    int rc = prov_.modify_qp(qp, &attr,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc != 0) {
        prov_.destroy_qp(qp);
        return set_error(DOORBELL_ERR_IO, "%s: RC QP to INIT failed: %s", name.c_str(),
                         strerror(rc));
    }
    *qp_p = qp;
    return DOORBELL_OK;
}

std::string VerbsIface::peer_string(const PeerAddr &p) const
{
    char gid[INET6_ADDRSTRLEN], buf[128];
    inet_ntop(AF_INET6, p.gid, gid, sizeof(gid));
    snprintf(buf, sizeof(buf), "gid %s lid 0x%x ud qp 0x%x", gid, p.lid, p.ud_qpn);
    return buf;
}

void VerbsIface::get_device_address(void *addr) const
{
    auto *b = static_cast<uint8_t *>(addr);
    std::memcpy(b, port_.gid.raw, 16);
    uint16_t lid = port_.attr.lid;
    std::memcpy(b + 16, &lid, 2);
}

void VerbsIface::get_address(void *addr) const
{
    uint32_t qpn = ud_qp_->qp_num;
    std::memcpy(addr, &qpn, 4);
}

bool VerbsIface::is_reachable(const void *device_addr, const void *iface_addr) const
{
    auto    *b = static_cast<const uint8_t *>(device_addr);
    uint16_t lid;
    std::memcpy(&lid, b + 16, 2);
    if (iface_addr == nullptr) {
        return false;
    }
    /* RoCE needs a GID; IB within the subnet a LID */
    return port_.roce ? !gid_zero(b) : (lid != 0 || !gid_zero(b));
}

void VerbsIface::query_limits(doorbell_iface_limits_t &l) const
{
    l.max_short     = std::min<size_t>(kMaxShortBytes, params.seg_size);
    l.max_bcopy     = params.seg_size;
    l.max_am_bcopy  = params.seg_size;
    l.max_zcopy     = kMaxZcopy;
    l.max_iov       = max_sge_;
    l.max_am_header = 128;
    l.max_am_zcopy  = params.seg_size;
    /* the verbs standard atomics: fetch-and-add and compare-and-swap on 8
     * bytes, on a word the HCA keeps big-endian (docs/verbs.md) */
    l.atomic_ops   = atomics_ ? (1u << DOORBELL_ATOMIC_ADD) | (1u << DOORBELL_ATOMIC_CSWAP) : 0;
    l.atomic_sizes = atomics_ ? 8 : 0;
    l.atomic_big_endian = 1;
}

int VerbsIface::event_fd() const
{
    return channel_->fd;
}

doorbell_status_t VerbsIface::arm()
{
    for (QpCore *q : qps) {
        auto *qp = static_cast<VerbsQp *>(q);
        if (!qp->cq.empty() || qp->ring.unrung() != 0 ||
            (qp->state == VerbsQp::State::kConnected && qp->cursor < qp->ring.rung() &&
             !qp->in_error())) {
            return DOORBELL_ERR_NO_RESOURCE;
        }
    }
    for (ibv_cq_ex *cq : {send_cq_, recv_cq_, ud_cq_}) {
        if (ibv_req_notify_cq(ibv_cq_ex_to_cq(cq), 0) != 0) {
            return set_error(DOORBELL_ERR_IO, "%s: ibv_req_notify_cq failed", name.c_str());
        }
    }
    return DOORBELL_OK;
}

doorbell_status_t VerbsIface::create_qp(const void *device_addr, const void *iface_addr,
                                        VerbsQp **qp_p)
{
    return create_qp_common(device_addr, iface_addr, false, qp_p);
}

doorbell_status_t VerbsIface::create_direct_qp(const void *device_addr, const void *iface_addr,
                                               VerbsQp **qp_p)
{
    return create_qp_common(device_addr, iface_addr, true, qp_p);
}

doorbell_status_t VerbsIface::create_qp_common(const void *device_addr, const void *iface_addr,
                                               bool direct, VerbsQp **qp_p)
{
    if (device_addr == nullptr || iface_addr == nullptr) {
        return set_error(DOORBELL_ERR_INVALID_PARAM, "%s: qp_create: no peer address",
                         name.c_str());
    }
    PeerAddr peer{};
    std::memcpy(peer.gid, device_addr, 16);
    std::memcpy(&peer.lid, static_cast<const uint8_t *>(device_addr) + 16, 2);
    std::memcpy(&peer.ud_qpn, iface_addr, 4);
    if (!is_reachable(device_addr, iface_addr) || peer.ud_qpn == 0 || peer.ud_qpn > 0xffffff) {
        return set_error(DOORBELL_ERR_UNREACHABLE,
                         "%s: qp_create: peer %s is not reachable from %s", name.c_str(),
                         peer_string(peer).c_str(), port_.roce ? "RoCE" : "IB");
    }
    ibv_cq_ex        *own_cq = nullptr;
    doorbell_status_t status;
    if (direct) {
        /* the agent polls this CQ itself: one CQE per WQE at most, and
         * the flush of a full send queue after an error */
        status = create_cq(&own_cq, int(2 * params.tx_queue_len));
        if (status != DOORBELL_OK) {
            return status;
        }
    }
    ibv_qp *ib;
    status = create_rc_qp(&ib, own_cq);
    if (status != DOORBELL_OK) {
        if (own_cq != nullptr) {
            prov_.destroy_cq(ibv_cq_ex_to_cq(own_cq));
        }
        return status;
    }
    auto qp    = std::make_unique<VerbsQp>(*this, next_qpn_++, peer, ib, random_u32() & 0xffffff);
    qp->direct = direct;
    qp->direct_cq = own_cq;
    qp->scratch.reset(new uint64_t[params.tx_queue_len]());
    qp->scratch_mr = prov_.reg_mr(ibpd_, qp->scratch.get(), params.tx_queue_len * sizeof(uint64_t),
                                  IBV_ACCESS_LOCAL_WRITE);
    if (qp->scratch_mr == nullptr) {
        status = set_error(DOORBELL_ERR_IO,
                           "%s: ibv_reg_mr of the signal slots of a QP to %s "
                           "failed: %s",
                           name.c_str(), peer_string(peer).c_str(), strerror(errno));
        prov_.destroy_qp(ib);
        if (own_cq != nullptr) {
            prov_.destroy_cq(ibv_cq_ex_to_cq(own_cq));
        }
        return status;
    }
    if (pacing_) {
        pacing::PacingContext pc{name, cc_, params.ibrc_gain, line_rate_,
                                 mtu_bytes(port_.attr.active_mtu)};
        qp->gate = pacing_(pc);
    }
    VerbsQp *raw           = qp.get();
    by_rc_qpn_[ib->qp_num] = raw;
    qps.push_back(raw);
    owned_.push_back(std::move(qp));
    send_req(*raw);
    *qp_p = raw;
    return DOORBELL_OK;
}

void VerbsIface::destroy_qp(VerbsQp &qp)
{
    release_slots(qp, qp.done, qp.cursor);
    qp.cancel_all();
    /* the QP's bounce buffers go away with it */
    for (const auto &b : qp.bounce_buffers()) {
        rcache_->invalidate(b.get(), params.seg_size);
    }
    /* the peer's passive QP can go; if this is lost it stays until the
     * peer's iface closes */
    Hello bye  = make_hello(kHelloBye);
    bye.rc_qpn = qp.qp->qp_num;
    ud_send(qp.peer, bye);
    by_rc_qpn_.erase(qp.qp->qp_num);
    prov_.destroy_qp(qp.qp);
    if (qp.scratch_mr != nullptr) {
        prov_.dereg_mr(qp.scratch_mr);
    }
    if (qp.direct_cq != nullptr) {
        prov_.destroy_cq(ibv_cq_ex_to_cq(qp.direct_cq));
    }
    qps.erase(std::find(qps.begin(), qps.end(), &qp));
    auto it = std::find_if(owned_.begin(), owned_.end(), [&](auto &p) { return p.get() == &qp; });
    owned_.erase(it);
}

/// Posts one pool buffer (data at offset, length bytes) to a receive queue;
/// a buffer the provider refuses goes back to the pool.
bool VerbsIface::post_recv_buffer(ibv_qp *qp, uint8_t *buf, uint32_t offset, uint32_t length)
{
    if (buf == nullptr) {
        return false;
    }
    ibv_sge     sge{uintptr_t(buf + offset), length, pool_.lkey()};
    ibv_recv_wr wr{};
    wr.wr_id   = uintptr_t(buf);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr *bad;
    if (ibv_post_recv(qp, &wr, &bad) != 0) {
        pool_.put(buf);
        return false;
    }
    return true;
}

} // namespace doorbell::verbs
