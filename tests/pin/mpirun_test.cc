// Under mpirun -np 2 with --bind-to none, `doorbell-pin exec` binds each
// local rank to a different core and the `doorbell-pin verify` it runs
// confirms its own binding.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>

#include <cstdio>
#include <regex>
#include <set>
#include <string>

TEST(PinMpirun, TwoRanksOnDifferentCoresVerified)
{
    if (system("command -v mpirun >/dev/null 2>&1") != 0)
        GTEST_SKIP() << "mpirun not found";
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) < 2)
        GTEST_SKIP() << "fewer than 2 CPUs available to this process";
    std::string cmd =
        "mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 " DOORBELL_PIN_BIN
        " exec -- " DOORBELL_PIN_BIN " verify 2>&1";
    FILE *p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char        buf[4096];
    size_t      n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
        out.append(buf, n);
    int st = pclose(p);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << out;

    // "local rank R: CPUs planned P (core L#C), current P: ok", once per rank.
    std::regex line(
        R"(local rank (\d): CPUs planned ([0-9,-]+) \(core L#(\d+)\), current ([0-9,-]+): ok)");
    std::set<std::string> ranks, cores, pus;
    for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
         ++it) {
        ranks.insert((*it)[1]);
        cores.insert((*it)[3]);
        pus.insert((*it)[2]);
        EXPECT_EQ((*it)[2], (*it)[4]);
    }
    EXPECT_EQ(ranks, (std::set<std::string>{"0", "1"})) << out;
    EXPECT_EQ(cores.size(), 2u) << "both ranks on one core:\n" << out;
    EXPECT_EQ(pus.size(), 2u) << out;
    size_t as_planned = 0;
    for (size_t pos = 0; (pos = out.find("verify: as planned", pos)) != std::string::npos; pos++)
        as_planned++;
    EXPECT_EQ(as_planned, 2u) << out;
    EXPECT_NE(out.find("memory planned bind to NUMA 0, current bind 0: ok"), std::string::npos)
        << out;
}
