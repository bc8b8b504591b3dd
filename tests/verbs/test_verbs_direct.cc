/* Direct QPs: the export of a QP's mlx5 send queue, doorbell record, UAR
 * and send CQ (mlx5dv_init_obj, faked), and what the core refuses on it. */
#include "verbs_pair.h"

#include <endian.h>

#include <cstring>

using namespace doorbell;
using namespace doorbell::test;

namespace {

doorbell_qp_t *create_direct(VerbsPair &pair, doorbell_status_t *st_p)
{
    std::vector<uint8_t> dev(doorbell_iface_device_address_length(pair.b));
    std::vector<uint8_t> ifa(doorbell_iface_address_length(pair.b));
    doorbell_iface_get_device_address(pair.b, dev.data());
    doorbell_iface_get_address(pair.b, ifa.data());
    doorbell_qp_t *q = nullptr;
    *st_p            = doorbell_qp_create_direct(pair.a, dev.data(), ifa.data(), &q);
    return q;
}

verbs::fake::HcaConfig not_mlx5()
{
    verbs::fake::HcaConfig c;
    c.mlx5 = false;
    return c;
}

} // namespace

#ifdef DOORBELL_VERBS_MLX5DV

TEST(VerbsDirect, ExportGivesTheSendQueueDoorbellRecordUarAndCq)
{
    VerbsPair         pair;
    doorbell_status_t st;
    doorbell_qp_t    *q = create_direct(pair, &st);
    ASSERT_EQ(DOORBELL_OK, st) << doorbell_last_error();
    pair.extra.push_back(q);
    doorbell_qp_mlx5_t m;
    /* connecting: ask again after progress */
    EXPECT_EQ(DOORBELL_ERR_NO_RESOURCE, doorbell_qp_export_mlx5(q, &m));
    ASSERT_TRUE(pair.wait([&] { return doorbell_qp_export_mlx5(q, &m) == DOORBELL_OK; }))
        << doorbell_last_error();
    EXPECT_NE(nullptr, m.sq_buf);
    EXPECT_GE(m.sq_wqebbs, VerbsPair::vqp(q).ring.size()); /* tx_queue_len */
    EXPECT_EQ(0u, m.sq_wqebbs & (m.sq_wqebbs - 1));
    EXPECT_EQ(VerbsPair::vqp(q).qp->qp_num, m.qpn);
    EXPECT_NE(nullptr, m.dbrec);
    EXPECT_NE(nullptr, m.uar);
    EXPECT_EQ(256u, m.uar_size);
    EXPECT_NE(nullptr, m.cq_buf);
    EXPECT_EQ(64u, m.cqe_size);
    EXPECT_GE(m.cqe_cnt, m.sq_wqebbs);
    EXPECT_NE(nullptr, m.cq_dbrec);
    EXPECT_NE(0u, m.fetch_addr);
    EXPECT_NE(0u, m.fetch_lkey);
    /* the CQ is the QP's own, not the iface's shared send CQ */
    EXPECT_NE(VerbsPair::vqp(q).qp->send_cq,
              VerbsPair::vqp(pair.create(pair.a, pair.b)).qp->send_cq);
}

TEST(VerbsDirect, TheCorePostsNothingToADirectQp)
{
    VerbsPair         pair;
    doorbell_status_t st;
    doorbell_qp_t    *q = create_direct(pair, &st);
    ASSERT_EQ(DOORBELL_OK, st);
    pair.extra.push_back(q);
    doorbell_qp_mlx5_t m;
    ASSERT_TRUE(pair.wait([&] { return doorbell_qp_export_mlx5(q, &m) == DOORBELL_OK; }));
    std::vector<uint64_t> target(8, 0);
    uint32_t              rkey = pair.expose(target.data(), 64, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t              v    = 5;
    EXPECT_EQ(DOORBELL_ERR_UNSUPPORTED,
              doorbell_qp_put_short(q, &v, 8, uintptr_t(target.data()), rkey));
    EXPECT_NE(std::string::npos, std::string(doorbell_last_error()).find("direct"));
    doorbell_wqe_t w{};
    w.opcode = DOORBELL_OP_NOP;
    EXPECT_EQ(DOORBELL_ERR_UNSUPPORTED, doorbell_qp_post(q, &w, 1));
    iovec iov{&v, 8};
    EXPECT_EQ(DOORBELL_ERR_UNSUPPORTED,
              doorbell_qp_put_zcopy(q, &iov, 1, uintptr_t(target.data()), rkey, nullptr));
    /* a flush of the iface covers it and completes: the core holds nothing */
    Completion        c;
    doorbell_status_t fs = doorbell_iface_flush(pair.a, &c);
    if (fs == DOORBELL_INPROGRESS) {
        ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
        EXPECT_EQ(DOORBELL_OK, c.status);
    } else {
        EXPECT_EQ(DOORBELL_OK, fs);
    }
    EXPECT_TRUE(pair.fabric.posts("mlx5_0").empty());
    EXPECT_EQ(0u, target[0]);
}

TEST(VerbsDirect, AWqeWrittenIntoTheExportedQueueRunsAndCompletesInItsCq)
{
    VerbsPair         pair;
    doorbell_status_t st;
    doorbell_qp_t    *q = create_direct(pair, &st);
    ASSERT_EQ(DOORBELL_OK, st);
    pair.extra.push_back(q);
    doorbell_qp_mlx5_t m;
    ASSERT_TRUE(pair.wait([&] { return doorbell_qp_export_mlx5(q, &m) == DOORBELL_OK; }));
    std::vector<uint64_t> target(8, 0);
    uint32_t              rkey = pair.expose(target.data(), 64, DOORBELL_ACCESS_REMOTE_WRITE);
    /* a signaled 8-byte inline RDMA WRITE at WQE index 0, as the GPU writes
     * it (big-endian segments), then the doorbell record and the UAR */
    auto *w    = static_cast<uint8_t *>(m.sq_buf);
    auto  be32 = [](uint8_t *p, uint32_t v) {
        v = htobe32(v);
        std::memcpy(p, &v, 4);
    };
    auto be64 = [](uint8_t *p, uint64_t v) {
        v = htobe64(v);
        std::memcpy(p, &v, 8);
    };
    std::memset(w, 0, 64);
    be32(w, 0x08);                 /* index 0, RDMA WRITE */
    be32(w + 4, (m.qpn << 8) | 3); /* ds = 3 */
    w[11] = 0x08;                  /* CQ update */
    be64(w + 16, uintptr_t(target.data()));
    be32(w + 24, rkey);
    be32(w + 32, 0x80000000u | 8);
    uint64_t v = 0xfeed;
    std::memcpy(w + 36, &v, 8);
    __atomic_store_n(&m.dbrec[1], htobe32(1), __ATOMIC_RELEASE);
    uint64_t ctrl;
    std::memcpy(&ctrl, w, 8);
    __atomic_store_n(static_cast<uint64_t *>(m.uar), ctrl, __ATOMIC_RELEASE);
    EXPECT_EQ(1u, pair.fabric.mlx5_process());
    EXPECT_EQ(0xfeedu, target[0]);
    auto view = pair.fabric.mlx5_qp(m.qpn);
    EXPECT_EQ(1u, view.wqes_executed);
    EXPECT_EQ(ctrl, view.last_uar);
    const uint8_t *cqe = static_cast<const uint8_t *>(m.cq_buf);
    EXPECT_EQ(0x00, cqe[63]) << "MLX5_CQE_REQ, owner 0 on the first pass";
    EXPECT_EQ(0u, cqe[60] | cqe[61]); /* wqe_counter: WQE 0 */
}

#endif

TEST(VerbsDirect, ExportOfANonMlx5DeviceSaysWhy)
{
    VerbsPair         pair(not_mlx5(), {});
    doorbell_status_t st;
    doorbell_qp_t    *q = create_direct(pair, &st);
    ASSERT_EQ(DOORBELL_OK, st) << doorbell_last_error();
    pair.extra.push_back(q);
    doorbell_qp_mlx5_t m;
    ASSERT_EQ(DOORBELL_ERR_UNSUPPORTED, doorbell_qp_export_mlx5(q, &m));
    std::string msg = doorbell_last_error();
    EXPECT_NE(std::string::npos, msg.find("mlx5_0:1")) << msg;
#ifdef DOORBELL_VERBS_MLX5DV
    EXPECT_NE(std::string::npos, msg.find("not an mlx5 device")) << msg;
#else
    EXPECT_NE(std::string::npos, msg.find("without mlx5")) << msg;
#endif
}

TEST(VerbsDirect, AnOrdinaryQpIsNotExported)
{
    VerbsPair pair;
    pair.connect();
    doorbell_qp_mlx5_t m;
    EXPECT_NE(DOORBELL_OK, doorbell_qp_export_mlx5(pair.qa, &m));
}
