/*
 * An in-memory verbs provider for tests: fake HCAs whose ibv_context ops
 * table executes RC and UD semantics in memory (so the inline data-path
 * calls of <infiniband/verbs.h> - ibv_post_send, ibv_post_recv, the
 * ibv_cq_ex polling calls, ibv_req_notify_cq - reach it) and a Provider
 * table for the control path.
 *
 * Semantics: a WR executes when posted (or, for a SEND, when the receiver
 * has a receive posted: RNR waits). WRITE/READ check the remote key, bounds
 * and access flags on the target HCA and the local key on this one; a
 * failure completes the WR in error (always, signaled or not), moves the QP
 * to the error state and flushes the rest with IBV_WC_WR_FLUSH_ERR. UD
 * delivers with a 40-byte GRH prefix or drops when no receive is posted.
 * Completions carry timestamps in HCA clock ticks.
 *
 * Every RC ibv_post_send call is recorded (WRs, flags, SGE lengths) so
 * tests can assert the chains a device built.
 */
#pragma once

#include "devices/verbs/verbs_provider.h"

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace doorbell::verbs::fake {

struct HcaConfig {
    std::string name        = "mlx5_0";
    bool        roce        = false;
    bool        port_active = true;
    uint16_t    lid         = 0; ///< 0: assigned
    uint32_t    max_inline  = 220;
    int         max_sge     = 4;
    bool        timestamps  = true;
    uint64_t    clock_khz   = 156250; ///< HCA core clock (mlx5: 156.25 MHz)
    bool        hw_pacing   = false;  ///< packet_pacing_caps on RC
    bool        atomics     = true;   ///< atomic_cap (fetch-add, compare-and-swap, big-endian)
    bool        mlx5        = true;   ///< mlx5dv_is_supported / init_obj
};

struct PostedWr {
    uint64_t              wr_id;
    ibv_wr_opcode         opcode;
    unsigned              send_flags;
    std::vector<uint32_t> sge_lengths;
    uint64_t              remote_addr;
    uint32_t              rkey        = 0;
    uint64_t              compare_add = 0; ///< atomics: the operand (CMP_AND_SWP: the compare)
    uint64_t              swap        = 0; ///< CMP_AND_SWP: the new value
    std::vector<uint8_t>  inline_data;     ///< inline WRs: the bytes
};

struct FakeHca;

/// The fabric: every fake HCA of the process. Install() makes it the
/// provider of the verbs device; the destructor restores libibverbs.
class Fabric {
public:
    Fabric();
    ~Fabric();
    Fabric(const Fabric &)            = delete;
    Fabric &operator=(const Fabric &) = delete;

    FakeHca &add_hca(const HcaConfig &config);
    void     install();

    /// RC ibv_post_send calls of an HCA, in order.
    const std::vector<std::vector<PostedWr>> &posts(const std::string &hca) const;
    void                                      clear_posts();
    /// UD sends to drop before delivery (handshake loss).
    unsigned drop_ud = 0;
    /// Added to completion timestamps: the "wire" time of a WR.
    uint64_t completion_delay_ns = 0;
    /// Counters of control-path calls.
    /* registration may run on any thread (the protection domain is
     * thread-safe): counters are atomic, the key tables locked */
    std::atomic<uint64_t> reg_mr_calls{0}, dereg_mr_calls{0};
    uint64_t              rate_limit_calls = 0;
    uint32_t              last_rate_kbps   = 0;
    /// Root for hw_counters (tests write files under it).
    std::string sysfs_root;

    /* mlx5 emulation: a QP or CQ handed to mlx5dv_init_obj gets host-memory
     * SQ / CQ buffers, doorbell records and a UAR page, as the mlx5 provider
     * gives. Whoever drives an exported send queue writes WQEs and rings;
     * mlx5_process() is the NIC: it reads each exported SQ up to its
     * doorbell record, executes the WQEs (the same RC semantics and key
     * checks as posted WRs) and writes mlx5 CQEs (error CQEs with the
     * syndrome) into the QP's exported send CQ. */
    unsigned mlx5_process();
    struct Mlx5QpView {
        uint64_t wqes_executed = 0; ///< WQEs the fake NIC consumed
        uint64_t last_uar      = 0; ///< the UAR register's 8 bytes
        uint16_t consumer      = 0; ///< next WQE index the NIC reads
        uint32_t bad_wqes      = 0; ///< malformed WQEs (error CQE)
    };
    /// The emulation state of exported QP qpn (zero if none).
    Mlx5QpView mlx5_qp(uint32_t qpn) const;
    /// CQEs an exported CQ could not take (consumer index too far behind).
    uint64_t mlx5_cq_overruns = 0;

    /* internals used by the ops */
    static Fabric *current();
    FakeHca       *find_hca(const ibv_ah_attr &ah);
    void           run(); ///< executes what can execute
    uint32_t       next_qpn();
    uint32_t       next_key();

    std::vector<std::unique_ptr<FakeHca>> hcas;
    std::vector<ibv_device *>             list;
    Provider                              provider;

private:
    uint32_t              qpn_ = 0x100;
    std::atomic<uint32_t> key_{0x1000};
    bool                  running_ = false;
};

} // namespace doorbell::verbs::fake
