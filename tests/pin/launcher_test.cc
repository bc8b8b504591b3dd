// Local rank from the launchers' variables, and irqbalance detection.
#include <gtest/gtest.h>

#include <map>

#include "pin_test_util.h"
#include "pinning/irqbalance.h"
#include "pinning/local_rank.h"

using namespace doorbell::pin;
using namespace pin_test;

namespace {

Result<std::optional<LocalRank>> from(std::map<std::string, std::string> env)
{
    return local_rank_from_env([env](const char *n) -> const char * {
        auto it = env.find(n);
        return it == env.end() ? nullptr : it->second.c_str();
    });
}

} // namespace

TEST(PinLauncher, OpenMpiFirstThenPmixThenSlurm)
{
    auto r = from({{"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                   {"SLURM_LOCALID", "0"},
                   {"PMIX_RANK", "17"}});
    ASSERT_TRUE(r.ok()) << r.error();
    ASSERT_TRUE(r->has_value());
    EXPECT_EQ((*r)->rank, 3);
    EXPECT_EQ((*r)->size, 4);
    EXPECT_EQ((*r)->source, "OMPI_COMM_WORLD_LOCAL_RANK");

    r = from({{"PMIX_LOCAL_RANK", "1"}, {"PMIX_LOCAL_SIZE", "2"}, {"SLURM_LOCALID", "0"}});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ((*r)->rank, 1);
    EXPECT_EQ((*r)->source, "PMIX_LOCAL_RANK");

    r = from(
        {{"SLURM_LOCALID", "2"}, {"SLURM_STEP_TASKS_PER_NODE", "4(x2),3"}, {"SLURM_NODEID", "2"}});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ((*r)->rank, 2);
    EXPECT_EQ((*r)->size, 3);
}

TEST(PinLauncher, GlobalPmixRankAloneIsNotALocalRank)
{
    auto r = from({{"PMIX_RANK", "5"}});
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->has_value());
}

TEST(PinLauncher, BadValuesAreErrorsNamingTheVariable)
{
    auto r = from({{"OMPI_COMM_WORLD_LOCAL_RANK", "x1"}});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("OMPI_COMM_WORLD_LOCAL_RANK='x1'"), std::string::npos) << r.error();
    r = from({{"SLURM_LOCALID", "-1"}});
    EXPECT_FALSE(r.ok());
    r = from({{"OMPI_COMM_WORLD_LOCAL_RANK", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("not below"), std::string::npos) << r.error();
}

TEST(PinLauncher, SlurmTasksPerNode)
{
    EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 0), 2);
    EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2);
    EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
    EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 4), -1);
    EXPECT_EQ(slurm_tasks_on_node("8", 0), 8);
    EXPECT_EQ(slurm_tasks_on_node("2(x", 0), -1);
}

TEST(PinIrqbalance, DetectedThroughProcCommAndAdvisedNotFought)
{
    IrqbalanceState on = detect_irqbalance(own_fixtures() + "/root-machine-nic");
    EXPECT_EQ(on.pids, std::vector<int>{1234});
    EXPECT_FALSE(detect_irqbalance(own_fixtures() + "/root-2nic").running());
    std::string advice = irqbalance_advice(on, {3, 11}, {60, 61});
    EXPECT_NE(advice.find("pid 1234"), std::string::npos);
    EXPECT_NE(advice.find("IRQBALANCE_BANNED_CPULIST=3,11"), std::string::npos) << advice;
    EXPECT_NE(advice.find("--banirq=60 --banirq=61"), std::string::npos) << advice;
    EXPECT_EQ(irqbalance_advice(IrqbalanceState{}, {3}, {60}), "");
}
