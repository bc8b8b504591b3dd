// p2p_check under mpirun with the doorbell tune file: pml ucx on the doorbell
// transport only, 2 and 4 ranks on this host, every byte of every size.
#include <gtest/gtest.h>

#include "doorbell_spawn.h"

using namespace doorbell_test;

namespace {

Child run_p2p(int ranks)
{
    return run({"timeout", "-k", "10", "240", "mpirun", "--allow-run-as-root", "--oversubscribe",
                "-np", std::to_string(ranks), "--tune", DOORBELL_TUNE_FILE, "-x",
                "UCX_NET_DEVICES=lo", "-x", "UCX_DOORBELL_STATS=y", DOORBELL_P2P_CHECK});
}

class MpiP2p : public ::testing::TestWithParam<int> {};

TEST_P(MpiP2p, EverySizeEveryByteBothDirections)
{
    Child c = run_p2p(GetParam());
    ASSERT_EQ(c.status, 0) << c.output;
    EXPECT_TRUE(contains(c.output, std::to_string(GetParam()) + " ranks")) << c.output;
    EXPECT_TRUE(contains(c.output, ", 0 wrong bytes")) << c.output;
    // UCX_DOORBELL_STATS=y: every rank's doorbell iface printed its counters at
    // close, so the traffic went over the doorbell transport.
    size_t dumps = 0;
    for (size_t at = c.output.find("lo wqes "); at != std::string::npos;
         at        = c.output.find("lo wqes ", at + 1))
        ++dumps;
    EXPECT_EQ(dumps, static_cast<size_t>(GetParam())) << c.output;
}

// Rank 0 starts a 64 KiB send (eager, several fragments) and then computes
// outside MPI; rank 1's receive completes because the transport's background
// progress keeps moving (and acknowledging) packets, as a NIC would.
TEST(MpiProgress, EagerCompletesWhileSenderComputes)
{
    const std::string flag = "/tmp/doorbell-progress-" + std::to_string(getpid());
    Child c = run({"timeout", "-k", "10", "120", "mpirun", "--allow-run-as-root", "--oversubscribe",
                   "-np", "2", "--tune", DOORBELL_TUNE_FILE, "-x", "UCX_NET_DEVICES=lo",
                   DOORBELL_PROGRESS_CHECK, flag, "65536"});
    EXPECT_EQ(c.status, 0) << c.output;
    EXPECT_TRUE(contains(c.output, "receiver completed while the sender computed")) << c.output;
}

INSTANTIATE_TEST_SUITE_P(Doorbell, MpiP2p, ::testing::Values(2, 4),
                         [](const auto &info) { return std::to_string(info.param) + "ranks"; });

} // namespace

// The tune file also selects the coll component: MPI_Allreduce runs in it, on
// a UCP context over the doorbell transport, and the results are checked.
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
    EXPECT_TRUE(contains(c.output, "UCP context up on transports \"doorbell\"")) << c.output;
    EXPECT_TRUE(contains(c.output, "mca_coll_doorbell_allreduce()")) << c.output;
    EXPECT_FALSE(contains(c.output, "running fallback")) << c.output;
}

INSTANTIATE_TEST_SUITE_P(Doorbell, TuneAllreduce, ::testing::Values(3, 4),
                         [](const auto &info) { return std::to_string(info.param) + "ranks"; });
