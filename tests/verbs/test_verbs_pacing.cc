/* Pacing hooks: completion-timestamp RTT, hardware rate limit, software
 * pacing at post time, and RoCE ECN/CNP counters. */
#include "verbs_pair.h"

#include <filesystem>
#include <fstream>

using namespace doorbell;
using namespace doorbell::test;

namespace {

/// A gate with a fixed rate that records what the device told it; open
/// lets `budget` WRs through, then closes until reopened.
struct RecordingGate : public pacing::PacingGate {
    static inline double   rate_bps = 1.25e9;
    static inline int      budget   = 1 << 30;
    static inline uint64_t rtt_sum = 0, rtt_count = 0, ce_bytes = 0, acked = 0;

    uint64_t next_send_ns(uint64_t now, uint32_t) override
    {
        return budget > 0 ? now : now + 1000000000ull;
    }
    void on_send(uint64_t, uint32_t) override { --budget; }
    void on_ack(uint64_t, uint64_t a, uint64_t ce, uint64_t rtt, uint64_t) override
    {
        acked += a;
        ce_bytes += ce;
        if (rtt != 0) {
            rtt_sum += rtt;
            ++rtt_count;
        }
    }
    void   on_loss(uint64_t) override {}
    double rate() const override { return rate_bps; }

    static void reset()
    {
        rate_bps = 1.25e9;
        budget   = 1 << 30;
        rtt_sum = rtt_count = ce_bytes = acked = 0;
    }
};

doorbell_iface_params_t paced(const char *dev)
{
    static bool registered = [] {
        pacing::register_pacing_policy("verbs-test", [](const pacing::PacingContext &) {
            return std::make_unique<RecordingGate>();
        });
        return true;
    }();
    (void)registered;
    auto p = verbs_params(dev);
    p.cc   = "verbs-test";
    return p;
}

} // namespace

TEST(VerbsPacing, RttFromCompletionTimestampsUsesTheDeviceClock)
{
    RecordingGate::reset();
    VerbsPair pair({}, {}, paced("mlx5_0:1"), paced("mlx5_1:1"));
    pair.connect();
    pair.fabric.completion_delay_ns = 3000000; /* the "wire" takes 3 ms */
    std::vector<uint8_t> target(4096), src(4096, 1);
    uint32_t   rkey = pair.expose(target.data(), target.size(), DOORBELL_ACCESS_REMOTE_WRITE);
    iovec      iov{src.data(), src.size()};
    Completion c;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair.qa, &iov, 1, uintptr_t(target.data()), rkey, &c));
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    doorbell_counters_t ctr;
    doorbell_iface_get_counters(pair.a, &ctr);
    EXPECT_EQ(1u, ctr.rtt_samples);
    ASSERT_EQ(1u, RecordingGate::rtt_count);
    /* ticks at 156.25 MHz converted back to ns: at least the delay, and far
     * below a second (a unit error would be off by 1e3 or more) */
    EXPECT_GE(RecordingGate::rtt_sum, 3000000u - 1000u);
    EXPECT_LT(RecordingGate::rtt_sum, 1000000000u);
    EXPECT_GE(VerbsPair::vqp(pair.qa).srtt_ns, 2999000u);
    EXPECT_EQ(4096u, RecordingGate::acked);
}

TEST(VerbsPacing, NoTimestampsNoRttSamples)
{
    RecordingGate::reset();
    verbs::fake::HcaConfig ca, cb;
    ca.timestamps = false;
    VerbsPair pair(ca, cb, paced("mlx5_0:1"), paced("mlx5_1:1"));
    pair.connect();
    EXPECT_FALSE(device(pair.a).has_timestamps());
    Completion           f;
    uint64_t             v = 1;
    std::vector<uint8_t> t(64);
    uint32_t             rkey = pair.expose(t.data(), 64, DOORBELL_ACCESS_REMOTE_WRITE);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, uintptr_t(t.data()), rkey));
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_flush(pair.qa, &f));
    ASSERT_TRUE(pair.wait([&] { return f.count == 1; }));
    EXPECT_EQ(0u, RecordingGate::rtt_count);
}

TEST(VerbsPacing, HardwareRateLimitWhenPacingCapsAllowRc)
{
    RecordingGate::reset();
    RecordingGate::rate_bps = 1.25e9; /* 10 Gb/s */
    verbs::fake::HcaConfig ca, cb;
    ca.hw_pacing = true;
    VerbsPair pair(ca, cb, paced("mlx5_0:1"), paced("mlx5_1:1"));
    pair.connect();
    std::vector<uint8_t> t(64);
    uint32_t             rkey = pair.expose(t.data(), 64, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t             v    = 1;
    Completion           f;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, uintptr_t(t.data()), rkey));
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_flush(pair.qa, &f));
    ASSERT_TRUE(pair.wait([&] { return f.count == 1; }));
    EXPECT_EQ(1u, pair.fabric.rate_limit_calls);
    EXPECT_EQ(10000000u, pair.fabric.last_rate_kbps);
    /* a change under 5 % is not worth a modify */
    RecordingGate::rate_bps = 1.26e9;
    Completion g;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, uintptr_t(t.data()), rkey));
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_flush(pair.qa, &g));
    ASSERT_TRUE(pair.wait([&] { return g.count == 1; }));
    EXPECT_EQ(1u, pair.fabric.rate_limit_calls);
    /* hardware pacing: the gate never holds a post */
    EXPECT_EQ(0u, device(pair.a).post_stats().paced_holds);
}

TEST(VerbsPacing, SoftwarePacingHoldsPostsWithoutHardwareSupport)
{
    RecordingGate::reset();
    VerbsPair pair({}, {}, paced("mlx5_0:1"), paced("mlx5_1:1"));
    pair.connect();
    std::vector<uint8_t> t(4096);
    uint32_t             rkey = pair.expose(t.data(), 4096, DOORBELL_ACCESS_REMOTE_WRITE);
    RecordingGate::budget     = 2;
    for (int i = 0; i < 4; ++i) {
        uint8_t v = uint8_t(i + 1);
        ASSERT_EQ(DOORBELL_OK,
                  doorbell_qp_put_short(pair.qa, &v, 1, uintptr_t(t.data()) + i, rkey));
    }
    doorbell_iface_progress(pair.a);
    size_t wrs = 0;
    for (auto &c : pair.fabric.posts("mlx5_0")) {
        wrs += c.size();
    }
    EXPECT_EQ(2u, wrs); /* the gate let two through */
    EXPECT_GT(device(pair.a).post_stats().paced_holds, 0u);
    EXPECT_EQ(0u, pair.fabric.rate_limit_calls);
    EXPECT_EQ(0, t[2]);
    RecordingGate::budget = 100; /* the gate opens: progress posts the rest */
    Completion f;
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_flush(pair.qa, &f));
    ASSERT_TRUE(pair.wait([&] { return f.count == 1; }));
    EXPECT_EQ(3, t[2]);
    EXPECT_EQ(4, t[3]);
}

TEST(VerbsPacing, RoceCnpCountersReachTheGates)
{
    RecordingGate::reset();
    namespace fs  = std::filesystem;
    fs::path root = fs::temp_directory_path() /
                    ("doorbell-verbs-sysfs-" + std::to_string(getpid()));
    fs::path dir = root / "mlx5_0" / "ports" / "1" / "hw_counters";
    fs::create_directories(dir);
    auto write = [&](const char *name, int v) { std::ofstream(dir / name) << v << "\n"; };
    write("np_ecn_marked_roce_packets", 10);
    write("np_cnp_sent", 3);
    write("rp_cnp_handled", 5);

    verbs::fake::HcaConfig ca, cb;
    ca.roce = cb.roce = true;
    VerbsPair pair(ca, cb, paced("mlx5_0:1"), paced("mlx5_1:1"));
    pair.fabric.sysfs_root = root.string();
    pair.fabric.install();
    /* the iface read its provider at open: reopen a on the new root */
    doorbell_iface_close(pair.a);
    doorbell_pd_destroy(pair.pda);
    ASSERT_EQ(DOORBELL_OK, doorbell_pd_create(&pair.pda));
    auto p = paced("mlx5_0:1");
    ASSERT_EQ(DOORBELL_OK, doorbell_iface_open(pair.pda, &p, &pair.a));
    doorbell_iface_set_completion_handler(pair.a, on_completion);
    pair.connect();

    auto &dev = device(pair.a);
    dev.sample_congestion(); /* baseline */
    ASSERT_TRUE(dev.congestion().present);
    EXPECT_EQ(10u, dev.congestion().ecn_marked);
    EXPECT_EQ(0u, RecordingGate::ce_bytes);
    write("np_ecn_marked_roce_packets", 14);
    write("rp_cnp_handled", 7);
    dev.sample_congestion();
    EXPECT_EQ(2u * 1024u, RecordingGate::ce_bytes); /* 2 CNPs x MTU */
    doorbell_counters_t c;
    doorbell_iface_get_counters(pair.a, &c);
    EXPECT_EQ(4u, c.ce_marks);
    fs::remove_all(root);
}
