// The coll component on hosts that are hosts: each peer gets the lanes a
// user expects (shared memory inside a host, doorbell between hosts, by
// UCX's own reachability and by the transport's counters), the hierarchical
// allreduce is right for every predefined op/type on 2 x 2, 2 x 3 and 3 x 1
// layouts, and a rank killed inside a host ends the others' allreduce with
// an error instead of a hang.
//
// Point-to-point runs on Open MPI's own stack (ob1: vader inside a host, tcp
// between), so that every doorbell packet counted is the collective's.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "../common/mpi_output.h"
#include "fabric_test.h"

namespace doorbell::fabric_test {
using doorbell::test::kTypeCases;
using doorbell::test::whole_lines_of;
namespace {

const std::string kInstall   = DOORBELL_INSTALL_PREFIX;
const std::string kTransport = kInstall + "/lib/ucx/libuct_doorbell.so";
const std::string kCollDir   = kInstall + "/lib/openmpi";
const std::string kCheck     = DOORBELL_COLL_CHECK;

// The component as the tune file selects it (coll_doorbell_tls at its
// default), with point-to-point off doorbell.
const std::string kColl = "--mca pml ob1 --mca btl self,vader,tcp --mca mca_base_component_path " +
                          kCollDir +
                          ":/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3"
                          " --mca coll_doorbell_priority 100 -x LD_PRELOAD=" +
                          kTransport + " ";
const std::string kTypesOk = "TYPES OK " + std::to_string(kTypeCases) + " cases on ";
// A hang detector, not a speed check.
constexpr int kHangSeconds = 240;
// Loopback bytes per host of a job whose ranks keep their bytes in shared
// memory (start-up traffic with the host's orted), as in fabric_hosts_test.
constexpr long long kLoopbackQuiet = 256 << 10;

class FabricColl : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (std::string why = cannot_build_fabric(); !why.empty())
            GTEST_SKIP() << why;
        if (run("command -v mpirun && command -v unshare && command -v nsenter").rc != 0)
            GTEST_SKIP() << "mpirun or util-linux (unshare, nsenter) is not installed";
        if (kCheck.empty())
            GTEST_SKIP() << "coll_mpi_check is not built (tests/coll)";
        if (!std::filesystem::exists(kTransport))
            GTEST_SKIP() << "doorbell transport not installed: " << kTransport << " is absent";
        if (!std::filesystem::exists(kCollDir + "/mca_coll_doorbell.so"))
            GTEST_SKIP() << "coll component not installed in " << kCollDir;
    }

    // Brings up `hosts` hosts of `per_host` ranks, one host per leaf.
    void up(int hosts, int per_host)
    {
        auto r = f_.up("--leaves " + std::to_string(hosts) +
                       " --hosts-per-leaf 1 --ranks-per-host " + std::to_string(per_host));
        ASSERT_EQ(r.rc, 0) << r.out;
        hosts_ = f_.hosts();
        ASSERT_EQ(hosts_.size(), static_cast<size_t>(hosts));
    }

    CmdResult mpirun(const std::string &args)
    {
        auto r = f_.mpirun(args, kHangSeconds);
        EXPECT_NE(r.rc, 124) << "mpirun did not finish within " << kHangSeconds << " s\n" << r.out;
        return r;
    }

    // The lanes the component printed for every (rank, peer) pair at
    // verbose 2: same node or not, lanes, mapped or not.
    struct Lane {
        bool        same_node;
        std::string lanes;
        bool        mapped;
    };
    static std::vector<Lane> lanes(const std::string &out)
    {
        std::vector<Lane> v;
        std::regex        line(
                   R"(rank \d+ -> rank \d+ \((same|other) node, host \S+\): lanes \[([^\]]*)\], (mapped|UCP puts))");
        for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it)
            v.push_back({(*it)[1] == "same", (*it)[2], (*it)[3] == "mapped"});
        return v;
    }

    // A peer on the same host: its region is mapped (the component writes it
    // with stores), active messages and rendezvous take shared memory, and a
    // doorbell lane, if UCP keeps one for puts to registered memory, has no
    // role.
    static void expect_host_lanes(const Lane &l)
    {
        EXPECT_TRUE(l.mapped) << l.lanes;
        EXPECT_TRUE(std::regex_search(l.lanes, std::regex(R"((sysv|posix)/memory\([^)]*\bam\b)")))
            << l.lanes;
        EXPECT_FALSE(std::regex_search(l.lanes, std::regex(R"(doorbell/\S+\()"))) << l.lanes;
    }

    static size_t count(const std::string &s, const std::string &what)
    {
        size_t n = 0;
        for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
            n++;
        return n;
    }

    Fabric                   f_{'c'};
    std::vector<std::string> hosts_;
};

// 2 hosts x 2 ranks. Inside one host: shared-memory lanes, mapped, and the
// doorbell interfaces (opened, counters dumped) send no packet. Across both:
// a peer on the other host gets doorbell lanes only (UCX finds no shared
// memory there: another IPC namespace), the allreduce is hierarchical,
// doorbell packets flow, and none passes a host's loopback.
TEST_F(FabricColl, EachPeerGetsTheLaneAUserExpects)
{
    up(2, 2);
    const std::string job = kColl + "-x UCX_DOORBELL_STATS=y --mca coll_doorbell_verbose 3 " +
                            kCheck + " 1 types";

    auto r = mpirun("-np 2 --host " + hosts_[0] + ":2 " + job);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find(kTypesOk + "2 ranks"), std::string::npos) << r.out;
    auto one = lanes(r.out);
    ASSERT_EQ(one.size(), 2u) << r.out;
    for (const Lane &l : one) {
        EXPECT_TRUE(l.same_node);
        expect_host_lanes(l);
    }
    EXPECT_EQ(doorbell_counter(r.out, "tx_packets"), 0) << r.out;
    EXPECT_EQ(doorbell_counter(r.out, "rx_packets"), 0) << r.out;

    long long lo0 = loopback_bytes(f_, "h1"), lo1 = loopback_bytes(f_, "h2");
    long long spine = spine_bytes(f_);
    r               = mpirun("-np 4 " + job);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find(kTypesOk + "4 ranks"), std::string::npos) << r.out;
    EXPECT_GE(count(r.out, ", hierarchical"), whole_lines_of(4u * kTypeCases))
        << "auto did not pick hierarchical";
    auto all = lanes(r.out);
    ASSERT_EQ(all.size(), 12u) << r.out;
    for (const Lane &l : all) {
        if (l.same_node) {
            expect_host_lanes(l);
        } else {
            // Another IPC namespace: no shared memory, doorbell carries all.
            EXPECT_FALSE(l.mapped) << l.lanes;
            EXPECT_EQ(l.lanes.find("/memory"), std::string::npos) << l.lanes;
            EXPECT_TRUE(std::regex_search(l.lanes, std::regex(R"(doorbell/fab0\([^)]*\bam\b)")))
                << l.lanes;
        }
    }
    EXPECT_GT(doorbell_counter(r.out, "tx_packets"), 0) << r.out;
    // The component's context carries a step of coll_doorbell_am_max (8 KiB)
    // as one message (am_seg_size.h), and UCP took the setting.
    EXPECT_GE(count(r.out, "UCX_DOORBELL_SEG_SIZE=10240: puts of up to 8192 bytes"), 4u) << r.out;
    EXPECT_EQ(r.out.find("invalid configuration"), std::string::npos) << r.out;
    EXPECT_LT(loopback_bytes(f_, "h1") - lo0, kLoopbackQuiet) << "h1's ranks exchanged packets";
    EXPECT_LT(loopback_bytes(f_, "h2") - lo1, kLoopbackQuiet) << "h2's ranks exchanged packets";
    EXPECT_GT(spine_bytes(f_) - spine, 1 << 20) << "too little crossed the spine";
}

// Every predefined op/type pair, leaders (1 and 13 elements) and slices in
// pipelined sub-blocks (3000 elements), checked against Open MPI's kernels
// and for the same bits on every rank.
TEST_F(FabricColl, HierarchicalEveryOpAndTypeTwoHostsByThree)
{
    up(2, 3);
    auto r = mpirun("-np 6 " + kColl +
                    "--mca coll_doorbell_verbose 3 --mca coll_doorbell_hier_slice_min 1024"
                    " --mca coll_doorbell_pipeline_block 4096 " +
                    kCheck + " 1 types");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find(kTypesOk + "6 ranks"), std::string::npos) << r.out;
    EXPECT_EQ(count(r.out, "TYPES FAIL"), 0u);
    EXPECT_GE(count(r.out, ", hierarchical"), whole_lines_of(6u * kTypeCases))
        << "auto did not pick hierarchical";
    EXPECT_GE(count(r.out, "2 peers mapped, 3 by UCP puts"), 6u) << r.out;
}

// One rank per host on three leaves (the fabric's leaves file): nothing to
// share inside a host, the spine runs recursive doubling or Rabenseifner.
TEST_F(FabricColl, HierarchicalEveryOpAndTypeThreeHostsByOne)
{
    up(3, 1);
    auto r = mpirun("-np 3 " + kColl +
                    "--mca coll_doorbell_verbose 3 --mca coll_doorbell_allreduce_algorithm "
                    "hierarchical --mca coll_doorbell_hier_slice_min 1024 " +
                    kCheck + " 1 types");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find(kTypesOk + "3 ranks"), std::string::npos) << r.out;
    EXPECT_GE(count(r.out, ", hierarchical"), whole_lines_of(3u * kTypeCases));
    EXPECT_GE(count(r.out, "leaves yes, 0 peers mapped, 2 by UCP puts"), 3u) << r.out;
}

// One rank per host, two hosts under each of two leaves (the fabric's
// leaves file): auto's leaf rule, opened to every size, picks hierarchical
// for every call, and every op/type pair comes out right and the same on
// every rank.
TEST_F(FabricColl, AutoIsHierarchicalUnderSharedLeavesFourHostsByOne)
{
    auto up = f_.up("--leaves 2 --hosts-per-leaf 2 --ranks-per-host 1");
    ASSERT_EQ(up.rc, 0) << up.out;
    ASSERT_EQ(f_.hosts().size(), 4u);
    auto r = mpirun("-np 4 " + kColl +
                    "--mca coll_doorbell_verbose 3 --mca coll_doorbell_net_leaf_hier_min 0"
                    " --mca coll_doorbell_net_leaf_hier_max 1g " +
                    kCheck + " 1 types");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find(kTypesOk + "4 ranks"), std::string::npos) << r.out;
    EXPECT_EQ(count(r.out, "TYPES FAIL"), 0u);
    EXPECT_GE(count(r.out, ", hierarchical"), whole_lines_of(4u * kTypeCases))
        << "auto did not pick hierarchical";
    EXPECT_GE(count(r.out, "leaves yes, 0 peers mapped, 3 by UCP puts"), 4u) << r.out;
}

// Rank 1 (host h1, beside rank 0) is killed after set-up: the others' next
// allreduces, 8 B and 1 MiB, return MPI_ERR_OTHER within the 2 s timeout.
// mpirun runs with --enable-recovery, or it would end the job the moment
// rank 1 dies; across these hosts it then keeps waiting after every process
// has ended (its daemons stay up), so the test ends it after a bound that
// leaves the survivors ample time.
TEST_F(FabricColl, RankKilledInsideAHostEndsTheOthersAllreduce)
{
    up(2, 2);
    auto r = f_.mpirun("-np 4 --enable-recovery " + kColl + "--mca coll_doorbell_timeout 2000 " +
                           kCheck + " 1 kill 1",
                       60);
    std::regex line(
        R"(KILL rank ([023]) small class (\d+) ([0-9.]+) s large class (\d+) ([0-9.]+) s \(MPI_ERR_OTHER is (\d+)\))");
    size_t ended = 0;
    for (std::sregex_iterator it(r.out.begin(), r.out.end(), line), end; it != end; ++it) {
        EXPECT_EQ((*it)[2], (*it)[6]) << it->str();
        EXPECT_EQ((*it)[4], (*it)[6]) << it->str();
        // A hang detector far above the 2 s timeout (which the error adds
        // to the bounded completion of puts still in flight), not a speed check.
        EXPECT_LT(std::stod((*it)[3]), 30.0) << it->str();
        EXPECT_LT(std::stod((*it)[5]), 30.0) << it->str();
        ended++;
    }
    EXPECT_EQ(ended, 3u) << r.out;
}

} // namespace
} // namespace doorbell::fabric_test
