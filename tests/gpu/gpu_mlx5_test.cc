/*
 * The mlx5 IBGDA translation, byte for byte: segments built by
 * doorbell_gpu_mlx5.h against the vendor's own builders and structs from
 * infiniband/mlx5dv.h (when the build has it), the doorbell record and the
 * UAR write against fake memory. No NIC is involved.
 */
#include "doorbell_gpu_mlx5.h"

#include <gtest/gtest.h>

#include <endian.h>

#include <cstring>
#include <vector>

#if defined(DOORBELL_HAVE_MLX5DV)
#include <infiniband/mlx5dv.h>
#endif

namespace {

uint32_t be32_at(const uint8_t *p)
{
    uint32_t v;
    std::memcpy(&v, p, 4);
    return be32toh(v);
}

uint64_t be64_at(const uint8_t *p)
{
    uint64_t v;
    std::memcpy(&v, p, 8);
    return be64toh(v);
}

doorbell_wqe_t put(uint64_t local, uint32_t len, uint64_t raddr, uint32_t rkey)
{
    return doorbell_gpu_make_put(reinterpret_cast<void *>(local), len, raddr, rkey);
}

} /* namespace */

TEST(gpu_mlx5, put_is_ctrl_raddr_data_big_endian)
{
    uint8_t        out[128];
    doorbell_wqe_t w = put(0x1122334455667788ull, 4096, 0xa1a2a3a4a5a6a7a8ull, 0xdeadbeef);
    ASSERT_EQ(1u, doorbell_mlx5_translate(w, 0x1234, 0xabcdef, 0x777, 0, 0, true, out));

    EXPECT_EQ((0x1234u << 8) | 0x08u, be32_at(out));    /* pi, RDMA_WRITE */
    EXPECT_EQ((0xabcdefu << 8) | 3u, be32_at(out + 4)); /* qpn, ds = 3 */
    EXPECT_EQ(0x08, out[11]);                           /* CQ update */
    EXPECT_EQ(0xa1a2a3a4a5a6a7a8ull, be64_at(out + 16));
    EXPECT_EQ(0xdeadbeefu, be32_at(out + 24));
    EXPECT_EQ(4096u, be32_at(out + 32));
    EXPECT_EQ(0x777u, be32_at(out + 36));
    EXPECT_EQ(0x1122334455667788ull, be64_at(out + 40));

#if defined(DOORBELL_HAVE_MLX5DV)
    /* the vendor's builders give the same bytes */
    uint8_t ref[64] = {};
    mlx5dv_set_ctrl_seg(reinterpret_cast<mlx5_wqe_ctrl_seg *>(ref), 0x1234, MLX5_OPCODE_RDMA_WRITE,
                        0, 0xabcdef, MLX5_WQE_CTRL_CQ_UPDATE, 3, 0, 0);
    auto *raddr  = reinterpret_cast<mlx5_wqe_raddr_seg *>(ref + 16);
    raddr->raddr = htobe64(0xa1a2a3a4a5a6a7a8ull);
    raddr->rkey  = htobe32(0xdeadbeef);
    mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg *>(ref + 32), 4096, 0x777,
                        0x1122334455667788ull);
    EXPECT_EQ(0, std::memcmp(ref, out, 64));
    static_assert(sizeof(mlx5_wqe_ctrl_seg) == 16 && sizeof(mlx5_wqe_raddr_seg) == 16 &&
                      sizeof(mlx5_wqe_data_seg) == 16 && sizeof(mlx5_wqe_atomic_seg) == 16,
                  "segment sizes");
    static_assert(int(DOORBELL_MLX5_OPCODE_WRITE) == int(MLX5_OPCODE_RDMA_WRITE),
                  "MLX5_OPCODE_RDMA_WRITE");
    static_assert(int(DOORBELL_MLX5_OPCODE_READ) == int(MLX5_OPCODE_RDMA_READ),
                  "MLX5_OPCODE_RDMA_READ");
    static_assert(int(DOORBELL_MLX5_OPCODE_FA) == int(MLX5_OPCODE_ATOMIC_FA),
                  "MLX5_OPCODE_ATOMIC_FA");
    static_assert(int(DOORBELL_MLX5_OPCODE_NOP) == int(MLX5_OPCODE_NOP), "MLX5_OPCODE_NOP");
    static_assert(int(DOORBELL_MLX5_CTRL_CQ_UPDATE) == int(MLX5_WQE_CTRL_CQ_UPDATE),
                  "MLX5_WQE_CTRL_CQ_UPDATE");
    static_assert(int(DOORBELL_MLX5_CTRL_FENCE) == int(MLX5_WQE_CTRL_FENCE), "MLX5_WQE_CTRL_FENCE");
    static_assert(int(DOORBELL_MLX5_INLINE_SEG) == int(MLX5_INLINE_SEG), "MLX5_INLINE_SEG");
    static_assert(int(DOORBELL_MLX5_SND_DBR) == int(MLX5_SND_DBR), "MLX5_SND_DBR");
    static_assert(int(DOORBELL_MLX5_WQEBB) == int(MLX5_SEND_WQE_BB), "MLX5_SEND_WQE_BB");
#else
    GTEST_SKIP() << "built without infiniband/mlx5dv.h: compared with hand-written bytes only";
#endif
}

TEST(gpu_mlx5, inline_put_carries_its_payload)
{
    uint8_t        out[128];
    doorbell_wqe_t w = {};
    w.opcode         = DOORBELL_OP_PUT;
    w.flags          = DOORBELL_WQE_INLINE | DOORBELL_WQE_FENCE;
    w.inline_len     = 13;
    w.remote_addr    = 0x4000;
    w.rkey           = 9;
    for (int k = 0; k < 13; ++k) {
        w.inline_data[k] = uint8_t(0x30 + k);
    }
    ASSERT_EQ(1u, doorbell_mlx5_translate(w, 7, 5, 0, 0, 0, false, out));
    /* ctrl + raddr + (4-byte header + 13 bytes -> two 16-byte units) */
    EXPECT_EQ((5u << 8) | 4u, be32_at(out + 4));
    EXPECT_EQ(0x80, out[11]) << "fence, no CQ update";
    EXPECT_EQ(0x80000000u | 13u, be32_at(out + 32));
    EXPECT_EQ(0, std::memcmp(w.inline_data, out + 36, 13));
    EXPECT_EQ(0, out[49]) << "padding zeroed";
}

TEST(gpu_mlx5, put_signal_is_a_write_then_the_signal)
{
    uint8_t        out[128];
    doorbell_wqe_t add = doorbell_gpu_make_put_signal(reinterpret_cast<void *>(0x1000), 64, 0x2000,
                                                      11, 0x3000, 12, DOORBELL_SIGNAL_ADD, 5);
    ASSERT_EQ(2u, doorbell_mlx5_translate(add, 0xffff, 3, 0x55, 0x9000, 0x66, true, out));
    EXPECT_EQ(0, out[11]) << "the write is not signaled";
    const uint8_t *s = out + 64;
    EXPECT_EQ((0x0000u << 8) | 0x12u, be32_at(s)) << "pi wraps at 16 bits, fetch-add";
    EXPECT_EQ((3u << 8) | 4u, be32_at(s + 4));
    EXPECT_EQ(0x08, s[11]);
    EXPECT_EQ(0x3000u, be64_at(s + 16));
    EXPECT_EQ(12u, be32_at(s + 24));
    EXPECT_EQ(5u, be64_at(s + 32)); /* swap_add */
    EXPECT_EQ(0u, be64_at(s + 40)); /* compare */
    EXPECT_EQ(8u, be32_at(s + 48)); /* fetched value lands here */
    EXPECT_EQ(0x66u, be32_at(s + 52));
    EXPECT_EQ(0x9000u, be64_at(s + 56));
#if defined(DOORBELL_HAVE_MLX5DV)
    uint8_t ref[64] = {};
    mlx5dv_set_ctrl_seg(reinterpret_cast<mlx5_wqe_ctrl_seg *>(ref), 0, MLX5_OPCODE_ATOMIC_FA, 0, 3,
                        MLX5_WQE_CTRL_CQ_UPDATE, 4, 0, 0);
    EXPECT_EQ(0, std::memcmp(ref, s, 16));
#endif

    doorbell_wqe_t set = doorbell_gpu_make_put_signal(reinterpret_cast<void *>(0x1000), 64, 0x2000,
                                                      11, 0x3000, 12, DOORBELL_SIGNAL_SET,
                                                      0x0102030405060708ull);
    ASSERT_EQ(2u, doorbell_mlx5_translate(set, 10, 3, 0x55, 0, 0, false, out));
    EXPECT_EQ((11u << 8) | 0x08u, be32_at(s));
    EXPECT_EQ((3u << 8) | 3u, be32_at(s + 4)) << "ctrl, raddr, 12 inline bytes: ds 3";
    EXPECT_EQ(0x80000008u, be32_at(s + 32));
    uint64_t v;
    std::memcpy(&v, s + 36, 8);
    EXPECT_EQ(0x0102030405060708ull, v) << "SET writes the value's native bytes";
}

TEST(gpu_mlx5, get_nop_and_unsupported)
{
    uint8_t        out[128];
    doorbell_wqe_t get = put(0x10, 32, 0x20, 4);
    get.opcode         = DOORBELL_OP_GET;
    ASSERT_EQ(1u, doorbell_mlx5_translate(get, 1, 2, 3, 0, 0, false, out));
    EXPECT_EQ((1u << 8) | 0x10u, be32_at(out));
    doorbell_wqe_t nop = {};
    ASSERT_EQ(1u, doorbell_mlx5_translate(nop, 2, 2, 3, 0, 0, true, out));
    EXPECT_EQ((2u << 8) | 0x00u, be32_at(out));
    EXPECT_EQ((2u << 8) | 1u, be32_at(out + 4));
    doorbell_wqe_t send = put(0x10, 32, 0x20, 4);
    send.opcode         = DOORBELL_OP_SEND;
    EXPECT_EQ(0u, doorbell_mlx5_translate(send, 1, 2, 3, 0, 0, false, out));
    doorbell_wqe_t bad = put(0x10, 32, 0x20, 4);
    bad.opcode         = 77;
    EXPECT_EQ(0u, doorbell_mlx5_translate(bad, 1, 2, 3, 0, 0, false, out));
}

/* A batch: WQEs land at consecutive WQEBBs (wrapping in the SQ buffer), only
 * the last is signaled, one doorbell record update and one UAR write. */
TEST(gpu_mlx5, batch_post_wraps_and_rings_once)
{
    std::vector<uint8_t> sqbuf(8 * 64, 0xee);
    uint32_t             dbrec[2] = {0, 0};
    uint64_t             uar      = 0;
    doorbell_mlx5_sq_t   sq       = {};
    sq.buf                        = sqbuf.data();
    sq.wqebbs                     = 8;
    sq.qpn                        = 0x42;
    sq.dbrec                      = dbrec;
    sq.uar                        = &uar;
    sq.lkey                       = 0x99;

    doorbell_wqe_t w[3] = {put(0x100, 8, 0x200, 1),
                           doorbell_gpu_make_put_signal(reinterpret_cast<void *>(0x100), 8, 0x208,
                                                        1, 0x300, 2, DOORBELL_SIGNAL_SET, 1),
                           put(0x108, 8, 0x210, 1)};
    uint16_t       pi   = 0xfffe; /* 16-bit producer index about to wrap; slot 6 of 8 */
    ASSERT_EQ(4u, doorbell_mlx5_post(sq, &pi, w, 3, 8));
    EXPECT_EQ(2u, pi);
    /* slots 6, 7, 0, 1 hold pi 0xfffe, 0xffff, 0, 1 */
    EXPECT_EQ((0xfffeu << 8) | 0x08u, be32_at(&sqbuf[6 * 64]));
    EXPECT_EQ((0xffffu << 8) | 0x08u, be32_at(&sqbuf[7 * 64]));
    EXPECT_EQ((0x0000u << 8) | 0x08u, be32_at(&sqbuf[0 * 64]));
    EXPECT_EQ((0x0001u << 8) | 0x08u, be32_at(&sqbuf[1 * 64]));
    EXPECT_EQ(0, sqbuf[6 * 64 + 11] | sqbuf[7 * 64 + 11] | sqbuf[0 * 64 + 11]);
    EXPECT_EQ(0x08, sqbuf[1 * 64 + 11]) << "only the last is signaled";
    EXPECT_EQ(0xee, sqbuf[2 * 64]) << "nothing beyond the batch";

    /* doorbell record: big-endian 16-bit pi in the SQ word */
    EXPECT_EQ(0u, dbrec[0]);
    EXPECT_EQ(2u, be32toh(dbrec[1]));
    /* UAR: the last WQE's first 8 ctrl bytes, as they lie in memory */
    uint64_t expect;
    std::memcpy(&expect, &sqbuf[1 * 64], 8);
    EXPECT_EQ(expect, uar);

    /* too little room: nothing rung */
    uar = 0;
    EXPECT_EQ(0u, doorbell_mlx5_post(sq, &pi, w, 3, 3));
    EXPECT_EQ(2u, pi);
    EXPECT_EQ(0u, uar);
}

TEST(gpu_mlx5, probe_says_why_not)
{
    char              reason[160] = "";
    doorbell_status_t st          = doorbell_gpu_mlx5_probe(reason, sizeof(reason));
    EXPECT_NE('\0', reason[0]);
    if (st != DOORBELL_OK) {
        GTEST_SKIP() << "IBGDA not available here: " << reason;
    }
    SUCCEED() << reason;
}
