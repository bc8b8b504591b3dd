// p2p_check under mpirun with the doorbell tune file, its btl list narrowed
// to self,doorbell with btl_doorbell_local 1 so that ranks on this host talk
// over the doorbell btl (lo) as ranks on different hosts do: 2 and 4 ranks,
// every byte of every size.
#include <gtest/gtest.h>

#include "doorbell_spawn.h"

#include <regex>

using namespace doorbell_test;

namespace {

// The tune file with every peer on the doorbell btl (command-line --mca
// values override the tune file's).
const std::vector<std::string> kOverDoorbell = {
    "--tune", DOORBELL_TUNE_FILE,        "-x",    "UCX_NET_DEVICES=lo", "--mca",
    "btl",    "self,doorbell",           "--mca", "btl_doorbell_local", "1",
    "--mca",  "btl_doorbell_if_include", "lo"};

Child run_p2p(int ranks)
{
    std::vector<std::string> argv = {"timeout",
                                     "-k",
                                     "10",
                                     "240",
                                     "mpirun",
                                     "--allow-run-as-root",
                                     "--oversubscribe",
                                     "-np",
                                     std::to_string(ranks)};
    argv.insert(argv.end(), kOverDoorbell.begin(), kOverDoorbell.end());
    argv.insert(argv.end(), {"--mca", "btl_doorbell_stats", "1", DOORBELL_P2P_CHECK});
    return run(argv);
}

class MpiP2p : public ::testing::TestWithParam<int> {};

TEST_P(MpiP2p, EverySizeEveryByteBothDirections)
{
    Child c = run_p2p(GetParam());
    ASSERT_EQ(c.status, 0) << c.output;
    EXPECT_TRUE(contains(c.output, std::to_string(GetParam()) + " ranks")) << c.output;
    EXPECT_TRUE(contains(c.output, ", 0 wrong bytes")) << c.output;
    // btl_doorbell_stats 1: every rank's lo module printed its counters at
    // finalize, with messages received, so the traffic went over doorbell.
    std::regex line(" lo stats: .* recvs ([0-9]+) ");
    size_t     dumps = 0;
    for (std::sregex_iterator it(c.output.begin(), c.output.end(), line), end; it != end; ++it) {
        EXPECT_GT(std::stol((*it)[1].str()), 0) << c.output;
        ++dumps;
    }
    EXPECT_EQ(dumps, static_cast<size_t>(GetParam())) << c.output;
}

// Rank 0 starts a 1 MiB send (a rendezvous: rank 1 reads it in pieces) and
// then computes outside MPI; rank 1's receive completes because the btl's
// background progress answers the reads, as a NIC would. The background
// thread sleeps on the device's event fd, so the read requests and rank 1's
// FIN wake it: rank 0's counters show wake-ups by the device.
TEST(MpiProgress, ReceiveCompletesWhileSenderComputes)
{
    const std::string        flag = "/tmp/doorbell-progress-" + std::to_string(getpid());
    std::vector<std::string> argv = {
        "timeout",         "-k",  "10", "120", "mpirun", "--allow-run-as-root",
        "--oversubscribe", "-np", "2"};
    argv.insert(argv.end(), kOverDoorbell.begin(), kOverDoorbell.end());
    argv.insert(argv.end(),
                {"--mca", "btl_doorbell_stats", "1", DOORBELL_PROGRESS_CHECK, flag, "1048576"});
    Child c = run(argv);
    EXPECT_EQ(c.status, 0) << c.output;
    EXPECT_TRUE(contains(c.output, "receiver completed while the sender computed")) << c.output;
    std::smatch m;
    ASSERT_TRUE(
        std::regex_search(c.output, m,
                          std::regex(",0\\] lo stats: .* background ([0-9]+) wakeups ([0-9]+)")))
        << c.output;
    EXPECT_GT(std::stol(m[1].str()), 0) << c.output; /* passes while rank 0 computed */
    EXPECT_GT(std::stol(m[2].str()), 0) << c.output; /* of which woken by the device */
}

INSTANTIATE_TEST_SUITE_P(Doorbell, MpiP2p, ::testing::Values(2, 4),
                         [](const auto &info) { return std::to_string(info.param) + "ranks"; });

} // namespace

// The tune file also selects the coll component: MPI_Allreduce runs in it, on
// a UCP context over doorbell and shared memory, and the results are checked.
// On one host every peer is written through a shared-memory mapping.
class TuneAllreduce : public ::testing::TestWithParam<int> {};

TEST_P(TuneAllreduce, CollComponentRunsOnDoorbell)
{
    const int ranks = GetParam();
    Child     c     = run({"timeout",
                           "-k",
                           "10",
                           "180",
                           "mpirun",
                           "--allow-run-as-root",
                           "--oversubscribe",
                           "-np",
                           std::to_string(ranks),
                           "--tune",
                           DOORBELL_TUNE_FILE,
                           "-x",
                           "UCX_NET_DEVICES=lo",
                           "--mca",
                           "mpi_yield_when_idle",
                           "1",
                           "--mca",
                           "coll_doorbell_verbose",
                           "3",
                           DOORBELL_MPI_CHECK,
                           "allreduce"});
    ASSERT_EQ(c.status, 0) << c.output;
    EXPECT_TRUE(contains(c.output, "allreduce OK")) << c.output;
    EXPECT_TRUE(contains(c.output, "on " + std::to_string(ranks) + " ranks")) << c.output;
    EXPECT_TRUE(contains(c.output, "UCP context up on transports \"doorbell,sm,self\""))
        << c.output;
    EXPECT_TRUE(contains(c.output, std::to_string(ranks - 1) + " peers mapped, 0 by UCP puts"))
        << c.output;
    EXPECT_TRUE(contains(c.output, "mca_coll_doorbell_allreduce()")) << c.output;
    EXPECT_FALSE(contains(c.output, "running fallback")) << c.output;
}

INSTANTIATE_TEST_SUITE_P(Doorbell, TuneAllreduce, ::testing::Values(3, 4),
                         [](const auto &info) { return std::to_string(info.param) + "ranks"; });
