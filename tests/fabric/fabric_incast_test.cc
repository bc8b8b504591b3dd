// The pacing experiment (scripts/fabric/incast.sh): three senders into one
// receiver across the spine, shallow buffer. With UCX_DOORBELL_CC=ibrc the
// doorbell transport must retransmit at most a tenth of what the unpaced
// (none) transport retransmits, deliver at least 1.5 times its goodput, and hold
// at least 90 % of the bottleneck's rate with first transmissions over the
// transfer (the report times it at the bottleneck port, so process start-up
// and connection set-up are outside), with at least 85 % of the rate as
// payload. 24 MiB per sender: at 8 MiB the first round trips' losses weighed
// enough that a clean-clone CI run measured 89 % (6.6 % retransmitted, where
// 24 MiB runs retransmit 0.1-1.9 %). The 24 MiB runs measured 95-98 % and
// 89-92 % here (docs/fabric.md); the payload share is lower because a
// 1500-byte frame carries at most 1440 payload bytes. The goodput ratio was
// 2 until unpaced ifaces sent UDP GSO super-datagrams: that raised the
// unpaced run's goodput from 22-27 % to about 44 % of the bottleneck while it
// still retransmits over 90 %, so IBRC's 88-91 % is about twice it, not more.
// Skipped with the reason until the transport is installed.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "fabric_test.h"

namespace doorbell::fabric_test {
namespace {

const std::string kInstall   = DOORBELL_INSTALL_PREFIX;
const std::string kTransport = kInstall + "/lib/ucx/libuct_doorbell.so";

TEST(FabricIncast, IbrcKeepsTheBottleneckBusyWithATenthOfTheUnpacedRetransmits)
{
    if (std::string why = cannot_build_fabric(); !why.empty())
        GTEST_SKIP() << why;
    if (run("command -v ucx_perftest").rc != 0)
        GTEST_SKIP() << "ucx_perftest (ucx-utils) is not installed";
    if (!std::filesystem::exists(kTransport))
        GTEST_SKIP() << "doorbell transport not built: " << kTransport << " is absent";
    auto cfg = run("LD_PRELOAD=" + kTransport + " ucx_info -c -f");
    if (cfg.out.find("UCX_DOORBELL_CC") == std::string::npos)
        GTEST_SKIP()
            << "the doorbell transport has no UCX_DOORBELL_CC (pacing not wired into the UDP device yet)";

    char dir[] = "/tmp/dbincast-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    struct RemoveDir {
        const char *path;
        ~RemoveDir() { std::filesystem::remove_all(path); }
    } remove_dir{dir};
    const std::string json = std::string(dir) + "/incast.json";
    auto              r    = run("timeout -k 5 150 bash " DOORBELL_SOURCE_DIR
                                 "/scripts/fabric/incast.sh --modes ibrc,none"
                                                 " --mib-per-sender 24 --timeout 60 --name " +
                                 unique_name('i') + " --out " + dir + " --json " + json);
    ASSERT_EQ(r.rc, 0) << r.out;

    auto v = run(
        "python3 -c 'import json,sys; m={x[\"mode\"]: x for x in json.load(open(sys.argv[1]))[\"modes\"]};"
        " print(int(m[\"ibrc\"][\"ok\"]), int(m[\"none\"][\"ok\"]), m[\"ibrc\"][\"bottleneck_share\"], m[\"none\"][\"bottleneck_share\"],"
        " m[\"ibrc\"][\"retransmit_pct\"], m[\"none\"][\"retransmit_pct\"], m[\"ibrc\"][\"link_busy\"])' " +
        json);
    ASSERT_EQ(v.rc, 0) << v.out << r.out;
    std::istringstream in(v.out);
    int                ibrc_ok = 0, none_ok = 0;
    std::string        share_s, none_share_s, ibrc_rt_s, none_rt_s, busy_s;
    in >> ibrc_ok >> none_ok >> share_s >> none_share_s >> ibrc_rt_s >> none_rt_s >> busy_s;
    ASSERT_TRUE(ibrc_ok && none_ok) << r.out;
    ASSERT_NE(ibrc_rt_s, "None") << "no retransmit counters in the UCX_DOORBELL_STATS dump\n"
                                 << r.out;
    ASSERT_NE(none_rt_s, "None") << "no retransmit counters in the UCX_DOORBELL_STATS dump\n"
                                 << r.out;
    double share = std::stod(share_s), none_share = std::stod(none_share_s);
    double ibrc_rt = std::stod(ibrc_rt_s), none_rt = std::stod(none_rt_s);
    EXPECT_GT(share, 0) << r.out;
    EXPECT_GT(none_share, 0) << r.out;
    EXPECT_GT(none_rt, 0) << "the unpaced run saw no retransmits: no congestion to compare\n"
                          << r.out;
    EXPECT_LE(ibrc_rt, none_rt / 10) << r.out;
    EXPECT_GE(share, 1.5 * none_share) << r.out;
    ASSERT_NE(busy_s, "None") << "no bottleneck port counters\n" << r.out;
    EXPECT_GE(std::stod(busy_s) * (1 - ibrc_rt / 100), 0.90) << r.out;
    EXPECT_GE(share, 0.85) << r.out;
}

} // namespace
} // namespace doorbell::fabric_test
