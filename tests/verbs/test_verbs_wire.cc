/* Hostile handshake input and the wake-up descriptor. */
#include "verbs_pair.h"

#include <poll.h>

#include <cstring>
#include <string>
#include <vector>

using namespace doorbell;
using namespace doorbell::test;

namespace {

/// A raw UD sender on HCA mlx5_0, outside any iface (an attacker's view).
class RawUd {
public:
    explicit RawUd(const verbs::Provider &p) : prov(p)
    {
        int          n;
        ibv_device **list = prov.get_device_list(&n);
        ctx               = prov.open_device(list[0]);
        pd                = prov.alloc_pd(ctx);
        ibv_cq_init_attr_ex ca{};
        ca.cqe = 16;
        cq     = prov.create_cq_ex(ctx, &ca);
        ibv_qp_init_attr qa{};
        qa.send_cq = qa.recv_cq = ibv_cq_ex_to_cq(cq);
        qa.qp_type              = IBV_QPT_UD;
        qa.cap.max_send_wr      = 4;
        qa.cap.max_recv_wr      = 4;
        qa.cap.max_send_sge     = 1;
        qa.cap.max_recv_sge     = 1;
        qa.cap.max_inline_data  = 128;
        qp                      = prov.create_qp(pd, &qa);
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RTS;
        prov.modify_qp(qp, &a, IBV_QP_STATE);
    }
    ~RawUd()
    {
        if (ah)
            prov.destroy_ah(ah);
        prov.destroy_qp(qp);
        prov.destroy_cq(ibv_cq_ex_to_cq(cq));
        prov.dealloc_pd(pd);
        prov.close_device(ctx);
    }
    void send(const uint8_t *gid, uint32_t qpn, const void *data, size_t len)
    {
        if (ah == nullptr) {
            ibv_ah_attr aa{};
            aa.is_global = 1;
            std::memcpy(aa.grh.dgid.raw, gid, 16);
            ah = prov.create_ah(pd, &aa);
        }
        ibv_sge     sge{uintptr_t(data), uint32_t(len), 0};
        ibv_send_wr wr{};
        wr.sg_list           = &sge;
        wr.num_sge           = 1;
        wr.opcode            = IBV_WR_SEND;
        wr.send_flags        = IBV_SEND_INLINE;
        wr.wr.ud.ah          = ah;
        wr.wr.ud.remote_qpn  = qpn;
        wr.wr.ud.remote_qkey = verbs::kQkey;
        ibv_send_wr *bad;
        ASSERT_EQ(0, ibv_post_send(qp, &wr, &bad));
    }

    const verbs::Provider &prov;
    ibv_context           *ctx;
    ibv_pd                *pd;
    ibv_cq_ex             *cq;
    ibv_qp                *qp;
    ibv_ah                *ah = nullptr;
};

} // namespace

TEST(VerbsWire, MalformedAndSpoofedHandshakesAreDropped)
{
    VerbsPair                pair;
    std::vector<std::string> lines; /* the debug channel's */
    doorbell_set_debug_handler(
        [](void *arg, const char *m) {
            static_cast<std::vector<std::string> *>(arg)->push_back(m);
        },
        &lines);
    uint8_t  gid[18];
    uint32_t ud_qpn;
    doorbell_iface_get_device_address(pair.b, gid);
    doorbell_iface_get_address(pair.b, &ud_qpn);
    RawUd raw(pair.fabric.provider);

    uint8_t junk[sizeof(verbs::Hello)];
    std::memset(junk, 0xa5, sizeof(junk));
    raw.send(gid, ud_qpn, junk, sizeof(junk)); /* bad magic */
    raw.send(gid, ud_qpn, junk, 7);            /* short */

    verbs::Hello h{};
    h.magic   = verbs::kHelloMagic;
    h.version = 1;
    h.type    = verbs::kHelloReq;
    h.ud_qpn  = raw.qp->qp_num + 1; /* claims another sender's UD QP */
    h.rc_qpn  = 0x42;
    h.mtu     = IBV_MTU_4096;
    raw.send(gid, ud_qpn, &h, sizeof(h));
    h.ud_qpn = raw.qp->qp_num;
    h.mtu    = 99; /* not an MTU */
    raw.send(gid, ud_qpn, &h, sizeof(h));
    h.mtu    = IBV_MTU_4096;
    h.rc_qpn = 0x1000000; /* not a 24-bit QP number */
    raw.send(gid, ud_qpn, &h, sizeof(h));

    for (int i = 0; i < 4; ++i) {
        doorbell_iface_progress(pair.b);
    }
    doorbell_counters_t c;
    doorbell_iface_get_counters(pair.b, &c);
    EXPECT_EQ(5u, c.rx_dropped);
    EXPECT_EQ(0u, device(pair.b).passive_count());
    doorbell_set_debug_handler(nullptr, nullptr);
    /* each drop is said at debug level, naming the device */
    size_t said = 0;
    for (const std::string &l : lines) {
        said += l.find("mlx5_1:1: dropped a malformed handshake") != std::string::npos;
    }
    EXPECT_GE(said, 3u) << lines.size() << " debug lines";

    /* the iface still connects */
    pair.connect();
    EXPECT_EQ(1u, device(pair.b).passive_count());
}

TEST(VerbsWire, ArmedEventFdWakesOnAnActiveMessage)
{
    VerbsPair pair;
    pair.connect();
    doorbell_iface_progress(pair.b);
    ASSERT_EQ(DOORBELL_OK, doorbell_iface_arm(pair.b));
    pollfd pfd{doorbell_iface_event_fd(pair.b), POLLIN, 0};
    EXPECT_EQ(0, poll(&pfd, 1, 0));
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_am_short(pair.qa, 1, 7, nullptr, 0));
    EXPECT_EQ(1, poll(&pfd, 1, 0)); /* readable without waiting */
    ASSERT_TRUE(pair.wait([&] { return pair.ams_b.size() == 1; }));
    /* progress consumed the event */
    EXPECT_EQ(0, poll(&pfd, 1, 0));
}

TEST(VerbsWire, ArmReportsBusyWhileTheBatcherHoldsWqes)
{
    VerbsPair pair;
    pair.connect();
    std::vector<uint8_t> t(64);
    uint32_t             rkey = pair.expose(t.data(), 64, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t             v    = 1;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, uintptr_t(t.data()), rkey));
    EXPECT_EQ(DOORBELL_OK, doorbell_iface_arm(pair.a)); /* posted: the CQ wakes */
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, uintptr_t(t.data()), rkey));
    /* busy queue: the second put waits for a doorbell only progress rings */
    EXPECT_EQ(DOORBELL_ERR_NO_RESOURCE, doorbell_iface_arm(pair.a));
    doorbell_iface_progress(pair.a);
    EXPECT_EQ(DOORBELL_OK, doorbell_iface_arm(pair.a));
}

TEST(VerbsWire, FakeAnswersTheInlineVerbsCallsLikeAProvider)
{
    /* the fake is a verbs_context: the real inline entry points of
     * <infiniband/verbs.h> reach it, not only the device's seam */
    verbs::fake::Fabric    fabric;
    verbs::fake::HcaConfig cfg;
    cfg.hw_pacing = true;
    fabric.add_hca(cfg);
    fabric.install();
    int          n;
    ibv_device **list = fabric.provider.get_device_list(&n);
    ASSERT_EQ(1, n);
    ibv_context       *ctx = fabric.provider.open_device(list[0]);
    ibv_device_attr_ex attr{};
    ASSERT_EQ(0, ibv_query_device_ex(ctx, nullptr, &attr));
    EXPECT_EQ(156250u, attr.hca_core_clock);
    ibv_port_attr port{};
    ASSERT_EQ(0, ibv_query_port(ctx, 1, &port));
    EXPECT_EQ(IBV_PORT_ACTIVE, port.state);
    ibv_values_ex v{};
    v.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
    ASSERT_EQ(0, ibv_query_rt_values_ex(ctx, &v));
    EXPECT_GT(v.raw_clock.tv_nsec, 0);
    ibv_cq_init_attr_ex ca{};
    ca.cqe        = 4;
    ca.wc_flags   = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
    ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &ca);
    ASSERT_NE(nullptr, cq);
    ibv_poll_cq_attr pa{};
    EXPECT_EQ(ENOENT, ibv_start_poll(cq, &pa));
    ibv_wc wc;
    EXPECT_EQ(0, ibv_poll_cq(ibv_cq_ex_to_cq(cq), 1, &wc));
    fabric.provider.destroy_cq(ibv_cq_ex_to_cq(cq));
    fabric.provider.close_device(ctx);
}
