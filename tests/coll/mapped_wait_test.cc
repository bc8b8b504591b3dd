// Which passes of a wait run the UCP worker (mpi_coll/algorithms/mapped_wait.h).
#include "mapped_wait.h"

#include <gtest/gtest.h>

namespace {

doorbell_coll_mapped_wait_t fresh(unsigned every)
{
    doorbell_coll_mapped_wait_t w;
    doorbell_coll_mapped_wait_init(&w, every);
    return w;
}

// Passes of one kind of wait; how many of them ran the worker.
unsigned runs_in(doorbell_coll_mapped_wait_t &w, unsigned passes, int worker_peers, int peer_mapped,
                 int puts_in_flight)
{
    unsigned runs = 0;
    for (unsigned i = 0; i < passes; i++)
        runs += doorbell_coll_mapped_wait_runs_worker(&w, worker_peers, peer_mapped,
                                                      puts_in_flight) != 0;
    return runs;
}

TEST(CollMappedWait, AWaitForAMappedPeerRunsTheWorkerOnEveryEighthPass)
{
    doorbell_coll_mapped_wait_t w = fresh(8);
    EXPECT_EQ(runs_in(w, 7, 1, 1, 0), 0u);
    EXPECT_TRUE(doorbell_coll_mapped_wait_runs_worker(&w, 1, 1, 0)); // the 8th
    EXPECT_EQ(runs_in(w, 80, 1, 1, 0), 10u);
}

TEST(CollMappedWait, AWaitForAPeerOfTheWorkerRunsItOnEveryPass)
{
    doorbell_coll_mapped_wait_t w = fresh(8);
    EXPECT_EQ(runs_in(w, 50, 1, 0, 0), 50u);
    EXPECT_EQ(runs_in(w, 50, 1, 0, 1), 50u);
    // and does not move the mapped waits' count
    EXPECT_EQ(runs_in(w, 7, 1, 1, 0), 0u);
    EXPECT_TRUE(doorbell_coll_mapped_wait_runs_worker(&w, 1, 1, 0));
}

TEST(CollMappedWait, OwnPutsInFlightRunTheWorkerOnEveryPass)
{
    // Their completions (acknowledgements) come only through the worker.
    doorbell_coll_mapped_wait_t w = fresh(8);
    EXPECT_EQ(runs_in(w, 50, 1, 1, 1), 50u);
}

TEST(CollMappedWait, ATeamWithoutWorkerPeersNeverRunsIt)
{
    doorbell_coll_mapped_wait_t w = fresh(8);
    EXPECT_EQ(runs_in(w, 50, 0, 1, 0), 0u);
    EXPECT_EQ(runs_in(w, 50, 0, 0, 1), 0u);
}

TEST(CollMappedWait, EveryOneOrZeroRunsItOnEveryPass)
{
    for (unsigned every : {0u, 1u}) {
        doorbell_coll_mapped_wait_t w = fresh(every);
        EXPECT_EQ(runs_in(w, 50, 1, 1, 0), 50u) << "every " << every;
    }
}

} // namespace
