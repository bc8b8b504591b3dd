// The pacing seam of the UDP device with the built-in controllers: two ifaces
// on lo, a QP each way. A recording wrapper around the real IBRC gate checks
// that the device feeds it sends, ACKs with RTT samples, and asks it before
// sending; a bad gain fails at iface open with a message.
#include <gtest/gtest.h>

#include <atomic>

#include "../udp/loopback_pair.h"
#include "pacing/pacing_gate.h"

using namespace doorbell::test;
using namespace doorbell::pacing;

namespace {

struct Record {
    uint64_t sends = 0, acks = 0, rtts = 0, asks = 0, losses = 0;
    uint64_t sent_bytes = 0;
    double   min_rate = 1e300, max_rate = 0;
};

class RecordingGate final : public PacingGate {
public:
    RecordingGate(std::unique_ptr<PacingGate> inner, Record *rec) :
        inner_(std::move(inner)), rec_(rec)
    {
    }
    uint64_t next_send_ns(uint64_t now_ns, uint32_t bytes) override
    {
        ++rec_->asks;
        return inner_->next_send_ns(now_ns, bytes);
    }
    void on_send(uint64_t now_ns, uint32_t bytes) override
    {
        ++rec_->sends;
        rec_->sent_bytes += bytes;
        inner_->on_send(now_ns, bytes);
        note();
    }
    void on_ack(uint64_t now_ns, uint64_t acked, uint64_t ce, uint64_t rtt) override
    {
        ++rec_->acks;
        rec_->rtts += rtt != 0;
        inner_->on_ack(now_ns, acked, ce, rtt);
        note();
    }
    void on_loss(uint64_t now_ns) override
    {
        ++rec_->losses;
        inner_->on_loss(now_ns);
    }
    double rate() const override { return inner_->rate(); }

private:
    void note()
    {
        rec_->min_rate = std::min(rec_->min_rate, inner_->rate());
        rec_->max_rate = std::max(rec_->max_rate, inner_->rate());
    }
    std::unique_ptr<PacingGate> inner_;
    Record                     *rec_;
};

Record g_record;

doorbell_iface_params_t paced(const char *cc, double gain = 0)
{
    doorbell_iface_params_t p = lo_params();
    p.cc                      = cc;
    p.ibrc_gain               = gain;
    return p;
}

} // namespace

TEST(UdpPacerGate, BuiltinPoliciesExist)
{
    for (const char *p : {"ibrc", "dcqcn", "timely"}) {
        EXPECT_TRUE(find_pacing_policy(p)) << p;
    }
    EXPECT_FALSE(find_pacing_policy("none"));
    EXPECT_FALSE(find_pacing_policy("cubic"));
}

TEST(UdpPacerGate, BadGainFailsAtOpen)
{
    doorbell_pd_t *pd = nullptr;
    ASSERT_EQ(DOORBELL_OK, doorbell_pd_create(&pd));
    doorbell_iface_t *i = nullptr;
    auto              p = paced("ibrc", -3);
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_iface_open(pd, &p, &i));
    EXPECT_NE(std::string(doorbell_last_error()).find("gain"), std::string::npos);
    doorbell_pd_destroy(pd);
}

TEST(UdpPacerGate, IbrcGateSeesTheTraffic)
{
    PacingFactory ibrc = find_pacing_policy("ibrc");
    ASSERT_TRUE(ibrc);
    g_record = Record{};
    register_pacing_policy("ibrc-recorded", [ibrc](const PacingContext &ctx) {
        PacingContext c = ctx;
        c.policy        = "ibrc";
        return std::unique_ptr<PacingGate>(new RecordingGate(ibrc(c), &g_record));
    });
    {
        LoopbackPair pair(paced("ibrc-recorded"), paced("ibrc-recorded"));
        const size_t len = 4 << 20;
        Region       target(pair.pd, len, DOORBELL_ACCESS_REMOTE_WRITE);
        auto         data = pattern(len, 11);
        iovec        iov{data.data(), len};
        Completion   c;
        ASSERT_EQ(DOORBELL_INPROGRESS,
                  doorbell_qp_put_zcopy(pair.qa, &iov, 1, target.addr(), target.rkey, &c));
        ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
        EXPECT_EQ(DOORBELL_OK, c.status);
        EXPECT_EQ(0, std::memcmp(target.bytes.data(), data.data(), len));
        doorbell_counters_t ca = pair.counters(pair.a);
        EXPECT_EQ(g_record.sends, ca.tx_packets);
        EXPECT_GE(g_record.sent_bytes, len);
    }
    EXPECT_GE(g_record.asks, g_record.sends);
    EXPECT_GT(g_record.acks, 0u);
    EXPECT_GT(g_record.rtts, 0u);
    // IBRC starts at 1/16 of the iface's line rate and never leaves [floor, line].
    EXPECT_GT(g_record.min_rate, 0);
    EXPECT_LE(g_record.max_rate, 10e9);
}

TEST(UdpPacerGate, BadRatesOrTargetFailAtOpen)
{
    doorbell_pd_t *pd = nullptr;
    ASSERT_EQ(DOORBELL_OK, doorbell_pd_create(&pd));
    doorbell_iface_t *i = nullptr;
    auto              p = paced("ibrc");
    p.cc_min_rate       = 2e6;
    p.cc_max_rate       = 1e6;
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_iface_open(pd, &p, &i));
    EXPECT_NE(std::string(doorbell_last_error()).find("pacing rates"), std::string::npos);
    p                    = paced("ibrc");
    p.cc_target_delay_ns = 2000000000ull;
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_iface_open(pd, &p, &i));
    EXPECT_NE(std::string(doorbell_last_error()).find("target delay"), std::string::npos);
    doorbell_pd_destroy(pd);
}

TEST(UdpPacerGate, RateBoundsAndTargetReachTheController)
{
    PacingFactory ibrc = find_pacing_policy("ibrc");
    ASSERT_TRUE(ibrc);
    g_record = Record{};
    PacingContext seen;
    register_pacing_policy("ibrc-bounded", [ibrc, &seen](const PacingContext &ctx) {
        seen            = ctx;
        PacingContext c = ctx;
        c.policy        = "ibrc";
        return std::unique_ptr<PacingGate>(new RecordingGate(ibrc(c), &g_record));
    });
    auto p               = paced("ibrc-bounded");
    p.cc_target_delay_ns = 300000;
    p.cc_min_rate        = 1e6;
    p.cc_max_rate        = 40e6;
    {
        LoopbackPair pair(p, p);
        const size_t len = 1 << 20;
        Region       target(pair.pd, len, DOORBELL_ACCESS_REMOTE_WRITE);
        auto         data = pattern(len, 12);
        iovec        iov{data.data(), len};
        Completion   c;
        ASSERT_EQ(DOORBELL_INPROGRESS,
                  doorbell_qp_put_zcopy(pair.qa, &iov, 1, target.addr(), target.rkey, &c));
        ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
        EXPECT_EQ(0, std::memcmp(target.bytes.data(), data.data(), len));
    }
    EXPECT_EQ(300000u, seen.target_delay_ns);
    EXPECT_EQ(1e6, seen.min_rate);
    EXPECT_EQ(40e6, seen.max_rate);
    EXPECT_GE(g_record.min_rate, 1e6);
    EXPECT_LE(g_record.max_rate, 40e6);
}
