/*
 * The verbs device: one iface per "<hca>:<port>", RC queue pairs over
 * libibverbs (through the provider seam, verbs_provider.h).
 *
 * Connection (CONNECT_TO_IFACE): the iface address is the QP number of a UD
 * QP; the device address is the port's GID and LID. doorbell_qp_create
 * creates an RC QP and sends a REQ (RC QPN, PSN) to the peer's UD QP; the
 * peer creates a passive RC QP for it (it receives the active messages)
 * and answers a REP. WQEs posted before the REP wait in the send ring.
 *
 * Posting: the doorbell turns the WQEs behind it into one chained
 * ibv_post_send. Consecutive unsignaled PUT/GET WQEs at consecutive remote
 * addresses under one key (the entries of a zcopy iov) become one WR with an
 * SGE list. Payloads up to max_inline_data go inline; other local buffers
 * get their lkey from the registration cache. wr_id is the ring index of the
 * WR's last WQE, so a signaled completion retires everything up to it.
 *
 * Remote keys: the iface attaches to the protection domain as its hardware
 * key source, so doorbell_mr_register registers with the HCA and returns the
 * HCA's rkey.
 *
 * Files: verbs_device.cc (set-up: discovery, open, keys, QPs, addresses),
 * verbs_handshake.cc (the UD handshake), verbs_device_datapath.cc (WR chains,
 * completions, active messages), verbs_direct.cc (PUT_SIGNAL's checks, the
 * mlx5 export), verbs_pacing.cc (clock, rate limit, congestion counters).
 */
#pragma once

#include "bounce_pool.h"
#include "core/iface_core.h"
#include "hw_counters.h"
#include "pacing/pacing_gate.h"
#include "reg_cache.h"
#include "verbs_provider.h"

#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace doorbell::verbs {

static constexpr uint32_t kQkey            = 0x0DB0E11u;
static constexpr size_t   kGrhBytes        = 40; ///< UD receive prefix
static constexpr unsigned kUdRecvs         = 32;
static constexpr unsigned kPollBatch       = 32;
static constexpr size_t   kMaxShortBytes   = 2048;
static constexpr size_t   kMaxZcopy        = size_t(1) << 30;
static constexpr size_t   kRegCacheRegions = 1024;
static constexpr unsigned kPostListBuckets = 8; ///< 1,2-3,4-7,...,128+

/// The handshake message on the UD QP (little-endian fields).
struct Hello {
    uint32_t magic;
    uint8_t  version;
    uint8_t  type; ///< kHelloReq / kHelloRep
    uint16_t lid;
    uint32_t ud_qpn;  ///< sender's UD QP (where to answer)
    uint32_t rc_qpn;  ///< sender's RC QP
    uint32_t psn;     ///< sender's first send PSN
    uint32_t req_qpn; ///< REP: the requester's RC QP it answers
    uint32_t mtu;     ///< sender's port MTU (enum ibv_mtu)
    uint8_t  gid[16];
} __attribute__((packed));
static constexpr uint32_t kHelloMagic = 0x44424856; /* "DBHV" */
static constexpr uint8_t  kHelloReq = 1, kHelloRep = 2;
/// The requester destroyed its QP: the passive QP can go (best effort).
static constexpr uint8_t kHelloBye = 3;

/// Where a peer is: device + iface address.
struct PeerAddr {
    uint8_t  gid[16];
    uint16_t lid;
    uint32_t ud_qpn;
};

/// Bytes of an enum ibv_mtu.
inline uint32_t mtu_bytes(ibv_mtu mtu)
{
    return 128u << unsigned(mtu);
}

/// Whether a 16-byte GID is all zero (no GID: IB within the subnet).
inline bool gid_zero(const uint8_t *g)
{
    static const uint8_t zero[16] = {};
    return std::memcmp(g, zero, 16) == 0;
}

/// Device-visible state of one verbs port (what discovery found).
struct PortInfo {
    std::string   hca;
    uint8_t       port = 1;
    ibv_port_attr attr{};
    ibv_gid       gid{};
    int           gid_index = 0;
    bool          roce      = false;
};

/// Counts of the CPU posting path (beside doorbell_counters_t).
struct PostStats {
    uint64_t post_calls                  = 0; ///< ibv_post_send calls (RC)
    uint64_t wrs                         = 0; ///< WRs in them
    uint64_t sges                        = 0;
    uint64_t inline_wrs                  = 0;
    uint64_t signaled_wrs                = 0;
    uint64_t merged_wqes                 = 0;  ///< WQEs folded into an earlier WR's SGE list
    uint64_t post_list[kPostListBuckets] = {}; ///< WRs per call, log2 buckets
    uint64_t hw_rate_updates             = 0;  ///< ibv_modify_qp_rate_limit calls
    uint64_t paced_holds                 = 0;  ///< posts cut short by software pacing
};

class VerbsIface;

struct VerbsQp : public QpCore {
    enum class State {
        kConnecting,
        kConnected
    };

    VerbsQp(VerbsIface &iface, uint32_t qpn, const PeerAddr &peer, ibv_qp *qp, uint32_t psn);

    ibv_qp  *qp;
    PeerAddr peer;
    State    state = State::kConnecting;
    uint32_t psn;
    uint64_t cursor            = 0; ///< next WQE to hand to the HCA
    uint32_t unsignaled_sends  = 0; ///< SEND WRs since the last signaled WR
    uint64_t hello_deadline_ns = 0;
    uint32_t hello_retries     = 0;
    /* per ring slot */
    std::vector<uint64_t>       wr_first; ///< first WQE of the WR ending here
    std::vector<CachedRegion *> region;   ///< registration the WQE holds
    std::vector<uint64_t>       post_ns;  ///< CPU time the WR was posted
    /* pacing */
    std::unique_ptr<pacing::PacingGate> gate;
    double                              applied_rate = 0; ///< bytes/s last set in hardware
    uint64_t                            srtt_ns      = 0;
    /* PUT_SIGNAL: 8 registered bytes per ring slot, the local end of a
     * signal's fetch-add (its old value lands here) or of a SET signal
     * when the HCA grants no inline data */
    std::unique_ptr<uint64_t[]> scratch;
    ibv_mr                     *scratch_mr = nullptr;
    /* a direct QP: its send queue belongs to another agent (the GPU, via
     * export_mlx5); the CPU posts nothing to it, and it has its own send
     * CQ that the agent polls */
    bool       direct    = false;
    ibv_cq_ex *direct_cq = nullptr;
};

/// A passive RC QP: the far end of a peer's VerbsQp; receives its AMs.
struct Passive {
    ibv_qp                       *qp;
    PeerAddr                      peer;
    uint32_t                      peer_rc_qpn;
    uint32_t                      psn;
    unsigned                      posted = 0; ///< receive buffers posted
    std::unordered_set<uint8_t *> bufs;       ///< the posted receive buffers
};

class VerbsIface : public IfaceCore {
public:
    using Qp                                      = VerbsQp;
    static constexpr doorbell_device_kind_t kKind = DOORBELL_DEVICE_VERBS;

    static doorbell_status_t open(ProtectionDomain &pd, const doorbell_iface_params_t &params,
                                  VerbsIface **iface_p);
    ~VerbsIface();

    /* set-up (verbs_device.cc) */
    doorbell_status_t create_qp(const void *device_addr, const void *iface_addr, VerbsQp **qp_p);
    /// A QP whose send queue another agent drives (see export_mlx5): it has
    /// its own send CQ; the core posts nothing to it.
    doorbell_status_t create_direct_qp(const void *device_addr, const void *iface_addr,
                                       VerbsQp **qp_p);
    void              destroy_qp(VerbsQp &qp);
    size_t            device_address_length() const { return 18; }
    size_t            address_length() const { return 4; }
    void              get_device_address(void *addr) const;
    void              get_address(void *addr) const;
    bool              is_reachable(const void *device_addr, const void *iface_addr) const;
    void              query_limits(doorbell_iface_limits_t &limits) const;
    int               event_fd() const;
    doorbell_status_t arm();

    /* PUT_SIGNAL and direct QPs (verbs_direct.cc) */
    /// The mlx5 objects of a connected direct QP: SQ buffer, doorbell record,
    /// UAR, its send CQ and an 8-byte fetch-add landing slot.
    /// UNSUPPORTED (no mlx5dv in the build, not an mlx5 device), NO_RESOURCE
    /// (not connected yet: progress and ask again), or an error.
    doorbell_status_t export_mlx5(VerbsQp &qp, doorbell_qp_mlx5_t &out);
    /// Checks a raw WQE beyond the core's checks (PUT_SIGNAL's needs).
    doorbell_status_t check_raw_wqe(const VerbsQp &qp, const doorbell_wqe_t &w,
                                    unsigned index) const;

    /* data path (verbs_device_datapath.cc) */
    void     ring(VerbsQp &qp);
    unsigned progress();
    void     release_am(void *data);

    /* inspection (tests, stats) */
    const PostStats          &post_stats() const { return post_stats_; }
    const RegCache           &reg_cache() const { return *rcache_; }
    const BouncePool         &bounce_pool() const { return pool_; }
    const PortInfo           &port() const { return port_; }
    bool                      hw_pacing() const { return hw_pacing_; }
    uint32_t                  max_inline() const { return max_inline_; }
    bool                      has_timestamps() const { return hca_clock_khz_ != 0; }
    size_t                    passive_count() const { return passive_.size(); }
    const CongestionCounters &congestion() const { return congestion_; }
    /// Re-reads the port's hw_counters (ECN/CNP) and feeds new CE marks to
    /// the QPs' pacing gates; progress calls it every few milliseconds
    /// (verbs_pacing.cc).
    void sample_congestion();
    /// Converts a completion timestamp (HCA clock ticks) to CLOCK_MONOTONIC ns.
    uint64_t hca_to_host_ns(uint64_t ticks) const;

private:
    /* set-up (verbs_device.cc) */
    VerbsIface(ProtectionDomain &pd, const doorbell_iface_params_t &params, std::string name);
    doorbell_status_t init(const PortInfo &port);
    doorbell_status_t create_cq(ibv_cq_ex **cq, int depth);
    doorbell_status_t create_rc_qp(ibv_qp **qp_p, ibv_cq_ex *send_cq = nullptr);
    doorbell_status_t create_qp_common(const void *device_addr, const void *iface_addr, bool direct,
                                       VerbsQp **qp_p);
    bool              post_recv_buffer(ibv_qp *qp, uint8_t *buf, uint32_t offset, uint32_t length);
    std::string       peer_string(const PeerAddr &p) const;

    /* the handshake (verbs_handshake.cc) */
    doorbell_status_t connect_rc(ibv_qp *qp, const PeerAddr &peer, uint32_t remote_qpn,
                                 uint32_t remote_psn, uint32_t local_psn, uint32_t peer_mtu);
    doorbell_status_t ud_send(const PeerAddr &to, const Hello &hello);
    ibv_ah           *address_handle(const PeerAddr &to);
    Hello             make_hello(uint8_t type) const;
    void              send_req(VerbsQp &qp);
    void              handle_hello(const Hello &h, uint32_t src_qp);
    void              post_passive_recvs(Passive &p);
    void              destroy_passive(Passive &p);
    unsigned          poll_ud_cq();
    void              check_hellos();

    /* data path (verbs_device_datapath.cc) */
    void              post(VerbsQp &qp);
    doorbell_status_t attach_data(ibv_send_wr &wr, VerbsQp &qp, uint64_t i, const doorbell_wqe_t &w,
                                  uint32_t len, size_t &n_sge);
    unsigned          poll_send_cq();
    unsigned          poll_recv_cq();
    void              complete_wrs(VerbsQp &qp, uint64_t end, uint64_t ts);
    void              fail_wr(VerbsQp &qp, uint64_t wr_last, ibv_wc_status status);
    void              release_slots(VerbsQp &qp, uint64_t from, uint64_t to);

    /* pacing and clock (verbs_pacing.cc) */
    void calibrate_clock();
    void apply_rate(VerbsQp &qp);

    class Keys : public HardwareKeys {
    public:
        explicit Keys(VerbsIface &iface) : iface_(iface) {}
        doorbell_status_t register_region(doorbell_mr &mr) override;
        void              deregister_region(doorbell_mr &mr) override;

    private:
        VerbsIface &iface_;
    };

    const Provider           &prov_;
    PortInfo                  port_;
    ibv_context              *ctx_     = nullptr;
    ibv_pd                   *ibpd_    = nullptr;
    ibv_comp_channel         *channel_ = nullptr;
    ibv_cq_ex                *send_cq_ = nullptr;
    ibv_cq_ex                *recv_cq_ = nullptr;
    ibv_cq_ex                *ud_cq_   = nullptr;
    ibv_qp                   *ud_qp_   = nullptr;
    ibv_device_attr_ex        dev_attr_{};
    uint32_t                  max_inline_         = 0;
    uint32_t                  max_sge_            = 1;
    bool                      atomics_            = false; ///< atomic_cap != IBV_ATOMIC_NONE
    bool                      hw_pacing_          = false;
    uint64_t                  hca_clock_khz_      = 0; ///< 0: no completion timestamps
    int64_t                   clock_offset_ns_    = 0; ///< host ns - HCA ns
    uint64_t                  next_calibrate_ns_  = 0;
    uint64_t                  next_congestion_ns_ = 0;
    CongestionCounters        congestion_;
    Keys                      keys_{*this};
    bool                      keys_attached_ = false;
    std::unique_ptr<RegCache> rcache_;
    BouncePool                pool_;
    pacing::PacingFactory     pacing_;
    std::string               cc_; ///< the pacing policy in force (params.cc resolved)
    double                    line_rate_ = 0;
    uint32_t                  next_qpn_  = 0;
    PostStats                 post_stats_;
    std::unordered_map<uint32_t, VerbsQp *>                                              by_rc_qpn_;
    std::vector<std::unique_ptr<VerbsQp>>                                                owned_;
    std::map<std::tuple<std::array<uint8_t, 16>, uint16_t, uint32_t, uint32_t>, Passive> passive_;
    std::unordered_map<uint32_t, Passive *>                          passive_by_qpn_;
    std::map<std::pair<std::array<uint8_t, 16>, uint16_t>, ibv_ah *> ahs_;
    std::unordered_map<uint8_t *, uint32_t> held_am_; ///< buffer -> passive qpn
    /* deregistrations arrive on any thread (the domain is thread-safe);
     * the cache is the iface's: they are applied by the iface's thread */
    std::mutex                                   inval_mu_;
    std::vector<std::pair<const void *, size_t>> inval_;
    bool                                         inval_pending_ = false;
    void                                         apply_invalidations();
    std::vector<ibv_send_wr>                     wrs_;
    std::vector<ibv_sge>                         sges_;
    unsigned                                     depth_ = 0;
};

/// Active ports of every device as doorbell devices "<hca>:<port>".
int query_devices(doorbell_device_info_t *devices, int max);
/// Whether name is "<hca>:<port>" of a device the provider lists.
bool is_verbs_name(const char *name);

} // namespace doorbell::verbs
