// The component end to end: mpirun runs the check program with
// coll_doorbell selected (priority 100) on shared memory + tcp, verbose
// output proving that the component, not a stock one, reduced the data.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <regex>
#include <string>

#include "../common/mpi_output.h"

using doorbell::test::kTypeCases;
using doorbell::test::whole_lines_of;

namespace {

struct MpiRun {
    int         status = -1;
    std::string out;
};

MpiRun run(const std::string &cmd)
{
    MpiRun r;
    FILE  *p = popen((cmd + " 2>&1").c_str(), "r");
    if (p == nullptr)
        return r;
    std::array<char, 4096> buf;
    size_t                 n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
        r.out.append(buf.data(), n);
    int st   = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

std::string mpirun(int np, const std::string &extra, const std::string &args = "5")
{
    std::string cmd = std::string(DOORBELL_MPIRUN) + " --allow-run-as-root --oversubscribe" +
                      " --bind-to none -np " + std::to_string(np) + " --mca mpi_yield_when_idle 1" +
                      " --mca mca_base_component_path " DOORBELL_COLL_DIR
                      ":/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3" +
                      " --mca coll_doorbell_priority 100" +
                      (extra.find("coll_doorbell_tls") == std::string::npos ?
                           " --mca coll_doorbell_tls posix,sysv,self,tcp" :
                           "") +
                      (extra.find("coll_doorbell_timeout") == std::string::npos ?
                           " --mca coll_doorbell_timeout 60000 " :
                           " ") +
                      extra + " " DOORBELL_COLL_CHECK " " + args;
    return cmd;
}

size_t count(const std::string &s, const std::string &what)
{
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
        n++;
    return n;
}

void skip_without_mpirun()
{
    if (access(DOORBELL_MPIRUN, X_OK) != 0)
        GTEST_SKIP() << "mpirun not found";
}

class CollMpi : public ::testing::TestWithParam<int> {};

// Exact integer references, fixed-order float references, MPI_IN_PLACE,
// communicators dup/split and freed in a loop; every rank ran doorbell.
TEST_P(CollMpi, ChecksPassOnDoorbell)
{
    skip_without_mpirun();
    int    np = GetParam();
    MpiRun r  = run(mpirun(np, "--mca coll_doorbell_verbose 3"));
    ASSERT_EQ(r.status, 0) << r.out.substr(r.out.size() > 6000 ? r.out.size() - 6000 : 0);
    EXPECT_NE(r.out.find("CHECK OK"), std::string::npos) << r.out.substr(0, 4000);
    EXPECT_EQ(count(r.out, "CHECK FAIL"), 0u);
    // Level 3 prints each allreduce the component ran, level 2 each team.
    EXPECT_GE(count(r.out, "mca_coll_doorbell_allreduce() comm MPI_COMM_WORLD: allreduce of"),
              static_cast<size_t>(np) * 20);
    EXPECT_GE(count(r.out, "team of " + std::to_string(np) + " ready"), static_cast<size_t>(np));
    // Communicators freed in the loop release their teams.
    EXPECT_GE(count(r.out, "freeing team of comm"), static_cast<size_t>(np) * 5);
}

INSTANTIATE_TEST_SUITE_P(Np, CollMpi, ::testing::Values(2, 3, 4, 5));

// Without shared memory every byte goes through UCP puts (fence, flag put,
// local completion) over tcp: the path a network transport takes.
TEST(CollMpiUcpPuts, ChecksPassOverTcpPuts)
{
    skip_without_mpirun();
    MpiRun r = run(
        mpirun(4, "--mca coll_doorbell_verbose 2 --mca coll_doorbell_tls tcp,self", "3"));
    ASSERT_EQ(r.status, 0) << r.out.substr(r.out.size() > 6000 ? r.out.size() - 6000 : 0);
    EXPECT_NE(r.out.find("CHECK OK"), std::string::npos);
    EXPECT_GE(count(r.out, "0 peers mapped, 3 by UCP puts"), 4u);
}

// The two-step algorithm over UCP puts (auto picks it only on mapped
// peers): step 2 writes every finished chunk to every peer.
TEST(CollMpiUcpPuts, TwoStepOverTcpPuts)
{
    skip_without_mpirun();
    MpiRun r = run(mpirun(4,
                          "--mca coll_doorbell_verbose 3 --mca coll_doorbell_tls tcp,self "
                          "--mca coll_doorbell_allreduce_algorithm two_step",
                          "3"));
    ASSERT_EQ(r.status, 0) << r.out.substr(r.out.size() > 6000 ? r.out.size() - 6000 : 0);
    EXPECT_NE(r.out.find("CHECK OK"), std::string::npos);
    EXPECT_GE(count(r.out, ", two_step"), 40u) << "the forced algorithm did not run";
}

// With shared memory, peers on the node are written through mappings.
TEST(CollMpiUcpPuts, SharedMemoryPeersAreMapped)
{
    skip_without_mpirun();
    MpiRun r = run(mpirun(3, "--mca coll_doorbell_verbose 2", "1"));
    ASSERT_EQ(r.status, 0) << r.out.substr(0, 4000);
    EXPECT_GE(count(r.out, "2 peers mapped, 0 by UCP puts"), 3u);
}

class CollMpiAlgorithm : public ::testing::TestWithParam<const char *> {};

// Every algorithm forced, on 4 ranks emulating two nodes and two leaves.
TEST_P(CollMpiAlgorithm, ForcedAlgorithmPasses)
{
    skip_without_mpirun();
    std::string alg = GetParam();
    MpiRun      r   = run(mpirun(4,
                                 "--mca coll_doorbell_verbose 3 --mca coll_doorbell_allreduce_algorithm " +
                                     alg + " --mca coll_doorbell_emulate_ranks_per_node 2",
                                 "2"));
    ASSERT_EQ(r.status, 0) << r.out.substr(r.out.size() > 6000 ? r.out.size() - 6000 : 0);
    EXPECT_NE(r.out.find("CHECK OK"), std::string::npos);
    EXPECT_GE(count(r.out, ", " + alg), 40u) << "the forced algorithm did not run";
}

INSTANTIATE_TEST_SUITE_P(Alg, CollMpiAlgorithm,
                         ::testing::Values("recursive_doubling", "ring", "rabenseifner",
                                           "hierarchical", "direct", "two_step", "previous"));

// Two-hop aggregation with a leaf map: 5 ranks as 3 emulated nodes on 2
// leaves; auto picks hierarchical for small messages.
TEST(CollMpiTopology, LeafMapDrivesHierarchical)
{
    skip_without_mpirun();
    MpiRun r = run(mpirun(5,
                          "--mca coll_doorbell_leaves node0:leafA,node1:leafA,node2:leafB"
                          " --mca coll_doorbell_verbose 3"
                          " --mca coll_doorbell_emulate_ranks_per_node 2",
                          "2"));
    ASSERT_EQ(r.status, 0) << r.out.substr(r.out.size() > 6000 ? r.out.size() - 6000 : 0);
    EXPECT_NE(r.out.find("CHECK OK"), std::string::npos);
    EXPECT_NE(r.out.find("leaves yes"), std::string::npos);
    EXPECT_GE(count(r.out, ", hierarchical"), 20u);
}

// Hierarchical on emulated nodes (hosts x ranks per host): the ranks of a
// node write each other through mappings and read finished slices in place;
// the other nodes are reached through UCP (here shared-memory active
// messages and puts; across hosts, doorbell). Every predefined op/type pair
// checked against Open MPI's own kernels, bitwise the same on every rank:
// 1 and 13 elements through the node leaders, 3000 elements sliced into
// pipelined sub-blocks. The last layout's waits for a rank of the same node
// run the UCP worker (which carries the other nodes' data) only while puts of
// their own are in flight: the schedules must finish without those passes.
struct HierLayout {
    const char *name;
    int         hosts, per_host;
    const char *extra = "";
};
void PrintTo(const HierLayout &l, std::ostream *os)
{
    *os << l.name;
}

class CollMpiHierarchical : public ::testing::TestWithParam<HierLayout> {};

TEST_P(CollMpiHierarchical, EveryOpAndTypeOnEmulatedHosts)
{
    skip_without_mpirun();
    const HierLayout &l  = GetParam();
    const int         np = l.hosts * l.per_host;
    MpiRun            r  = run(mpirun(np,
                                      "--mca coll_doorbell_verbose 3 --mca "
                                                  "coll_doorbell_allreduce_algorithm hierarchical "
                                                  "--mca coll_doorbell_emulate_ranks_per_node " +
                                          std::to_string(l.per_host) +
                                          " --mca coll_doorbell_hier_slice_min 1024"
                                                      " --mca coll_doorbell_pipeline_block 4096 " +
                                          l.extra,
                                      "1 types"));
    ASSERT_EQ(r.status, 0) << r.out.substr(r.out.size() > 6000 ? r.out.size() - 6000 : 0);
    EXPECT_NE(r.out.find("TYPES OK " + std::to_string(kTypeCases) + " cases on " +
                         std::to_string(np) + " ranks"),
              std::string::npos)
        << r.out.substr(r.out.size() > 6000 ? r.out.size() - 6000 : 0);
    EXPECT_EQ(count(r.out, "TYPES FAIL"), 0u);
    EXPECT_EQ(count(r.out, "running fallback"), 0u);
    // every call ran hierarchical (a line per call and rank), none went to
    // the module below
    EXPECT_GE(count(r.out, ", hierarchical"), whole_lines_of(static_cast<size_t>(np) * kTypeCases));
    EXPECT_EQ(count(r.out, ", previous"), 0u);
    const std::string peers = std::to_string(l.per_host - 1) + " peers mapped, " +
                              std::to_string(np - l.per_host) + " by UCP puts";
    EXPECT_GE(count(r.out, peers), static_cast<size_t>(np)) << peers;
    if (l.per_host > 1) {
        EXPECT_GE(count(r.out, "all ranks read their node's peers in place"),
                  static_cast<size_t>(np));
    }
}

INSTANTIATE_TEST_SUITE_P(Layouts, CollMpiHierarchical,
                         ::testing::Values(HierLayout{"2x2", 2, 2}, HierLayout{"2x3", 2, 3},
                                           HierLayout{"3x1", 3, 1},
                                           HierLayout{"2x2_mapped_waits_without_worker", 2, 2,
                                                      "--mca coll_doorbell_mapped_wait_ucp_every "
                                                      "1048576"}),
                         [](const auto &info) { return std::string(info.param.name); });

// auto hands messages up to coll_doorbell_previous_max (one node) or
// net_previous_max (several nodes) to the module below (tuned): every
// predefined op/type pair, exact inputs, gives the same bits as the
// component's own schedules (one job each, digests of every result
// compared), on one node (direct, two-step) and on two emulated nodes
// (hierarchical).
struct PreviousLayout {
    const char *name;
    const char *param;    // the threshold that applies
    const char *own;      // what auto runs with the threshold at 0
    int         per_node; // 0: one node
};
void PrintTo(const PreviousLayout &l, std::ostream *os)
{
    *os << l.name;
}

class CollMpiPrevious : public ::testing::TestWithParam<PreviousLayout> {};

TEST_P(CollMpiPrevious, DelegationGivesTheSameBitsAsOwnSchedules)
{
    skip_without_mpirun();
    const PreviousLayout &l      = GetParam();
    const int             np     = 4;
    const std::string     layout = l.per_node ? " --mca coll_doorbell_emulate_ranks_per_node " +
                                                std::to_string(l.per_node) :
                                                "";
    std::string           digest[2];
    for (int delegated = 0; delegated < 2; delegated++) {
        MpiRun r = run(mpirun(np,
                              std::string("--mca coll_doorbell_verbose 3 --mca ") + l.param +
                                  (delegated ? " 1g" : " 0") + layout,
                              "1 types"));
        ASSERT_EQ(r.status, 0) << r.out.substr(r.out.size() > 6000 ? r.out.size() - 6000 : 0);
        std::smatch m;
        ASSERT_TRUE(std::regex_search(r.out, m,
                                      std::regex("TYPES OK " + std::to_string(kTypeCases) +
                                                 " cases on 4 ranks, digest ([0-9a-f]{16})")))
            << r.out.substr(r.out.size() > 6000 ? r.out.size() - 6000 : 0);
        digest[delegated] = m[1];
        EXPECT_EQ(count(r.out, "TYPES FAIL"), 0u);
        if (delegated) {
            EXPECT_GE(count(r.out, ", previous\n"),
                      whole_lines_of(static_cast<size_t>(np) * kTypeCases));
            EXPECT_EQ(count(r.out, std::string(", ") + l.own), 0u);
        } else {
            EXPECT_EQ(count(r.out, ", previous\n"), 0u);
            EXPECT_GE(count(r.out, std::string(", ") + l.own), static_cast<size_t>(np));
        }
    }
    EXPECT_EQ(digest[0], digest[1]) << "the module below and the component's schedules differ";
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, CollMpiPrevious,
    ::testing::Values(PreviousLayout{"OneNode", "coll_doorbell_previous_max", "direct", 0},
                      PreviousLayout{"TwoNodes", "coll_doorbell_net_previous_max", "hierarchical",
                                     2}),
    [](const auto &info) { return std::string(info.param.name); });

// A rank killed on a node of two (emulated hosts, hierarchical): the others'
// next allreduces, 8 B and 1 MiB, return MPI_ERR_OTHER within the timeout,
// never hang; the error names a silent rank.
TEST(CollMpiErrors, KilledRankEndsTheOthersAllreduceWithAnError)
{
    skip_without_mpirun();
    MpiRun r = run("timeout -k 5 120 " + mpirun(4,
                                                "--enable-recovery --mca coll_doorbell_timeout 2000"
                                                " --mca coll_doorbell_emulate_ranks_per_node 2",
                                                "1 kill 1"));
    ASSERT_NE(r.status, 124) << "a hang:\n" << r.out.substr(0, 6000);
    std::regex line(
        R"(KILL rank ([023]) small class (\d+) ([0-9.]+) s large class (\d+) ([0-9.]+) s \(MPI_ERR_OTHER is (\d+)\))");
    size_t ended = 0;
    for (std::sregex_iterator it(r.out.begin(), r.out.end(), line), end; it != end; ++it) {
        EXPECT_EQ((*it)[2], (*it)[6]) << it->str();
        EXPECT_EQ((*it)[4], (*it)[6]) << it->str();
        ended++;
    }
    EXPECT_EQ(ended, 3u) << r.out.substr(0, 6000);
    EXPECT_NE(r.out.find("no signal from rank"), std::string::npos) << r.out.substr(0, 6000);
}

// User ops are delegated to the previous module, saying why at level 5.
TEST(CollMpiFallback, UserOpIsDelegatedWithReason)
{
    skip_without_mpirun();
    MpiRun r = run(mpirun(2, "--mca coll_doorbell_verbose 5", "1"));
    ASSERT_EQ(r.status, 0) << r.out.substr(0, 4000);
    EXPECT_NE(r.out.find("user-defined (or non-commutative) op"), std::string::npos);
    EXPECT_NE(r.out.find("running fallback allreduce"), std::string::npos);
}

// A transport that does not exist: every rank falls back together, and the
// results stay right.
TEST(CollMpiFallback, MissingTransportFallsBackCollectively)
{
    skip_without_mpirun();
    MpiRun r = run(
        mpirun(3, "--mca coll_doorbell_verbose 1 --mca coll_doorbell_tls nosuchtl", "1"));
    ASSERT_EQ(r.status, 0) << r.out.substr(0, 4000);
    EXPECT_NE(r.out.find("CHECK OK"), std::string::npos);
    EXPECT_NE(r.out.find("falling back"), std::string::npos) << r.out.substr(0, 4000);
}

// A rank that stalls past coll_doorbell_timeout: the others get MPI_ERR_OTHER
// through the communicator's error handler (MPI_ERRORS_RETURN), and the
// error line names the silent rank, instead of hanging.
TEST(CollMpiErrors, StalledPeerReturnsAnError)
{
    skip_without_mpirun();
    MpiRun r = run(mpirun(3, "--mca coll_doorbell_timeout 300", "1 stall"));
    ASSERT_EQ(r.status, 0) << r.out.substr(0, 4000);
    // Ranks 0 and 1 waited for the stalled rank 2: their class is MPI_ERR_OTHER.
    std::regex line(R"(STALL rank ([01]) class (\d+) \(MPI_ERR_OTHER is (\d+)\))");
    size_t     errors = 0;
    for (std::sregex_iterator it(r.out.begin(), r.out.end(), line), end; it != end; ++it)
        if ((*it)[2] == (*it)[3])
            errors++;
    EXPECT_EQ(errors, 2u) << r.out.substr(0, 4000);
    EXPECT_NE(r.out.find("no signal from rank"), std::string::npos) << r.out.substr(0, 4000);
}

// ompi_info shows every parameter.
TEST(CollMpiParams, OmpiInfoListsParameters)
{
    MpiRun r = run(
        "OMPI_MCA_mca_base_component_path=" DOORBELL_COLL_DIR
        ":/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3 ompi_info --param coll doorbell "
        "--level 9");
    if (r.status != 0)
        GTEST_SKIP() << "ompi_info not usable: " << r.out.substr(0, 500);
    for (const char *p : {"coll_doorbell_priority",
                          "coll_doorbell_verbose",
                          "coll_doorbell_enable",
                          "coll_doorbell_np",
                          "coll_doorbell_allreduce_algorithm",
                          "coll_doorbell_small_max",
                          "coll_doorbell_net_small_max",
                          "coll_doorbell_hier_max",
                          "coll_doorbell_hier_slice_min",
                          "coll_doorbell_hier_slice_max",
                          "coll_doorbell_ring_min",
                          "coll_doorbell_net_ring_min",
                          "coll_doorbell_tls",
                          "coll_doorbell_timeout",
                          "coll_doorbell_leaves",
                          "coll_doorbell_topology_file",
                          "coll_doorbell_scratch_size",
                          "coll_doorbell_am_max",
                          "coll_doorbell_previous_max",
                          "coll_doorbell_net_previous_max",
                          "coll_doorbell_net_leaf_hier_min",
                          "coll_doorbell_net_leaf_hier_max",
                          "coll_doorbell_mapped_wait_ucp_every"})
        EXPECT_NE(r.out.find(p), std::string::npos) << p;
}

} // namespace
