// --mpi under mpirun: two ranks read different recorded trees (MPMD), so the
// job spans node-a and node-c whose ConnectX-5s differ by one patch level.
#include "doctor_test_util.h"

#include <array>
#include <cstdio>
#include <sys/wait.h>

namespace doorbell::doctor::testing {
namespace {

struct Job {
    int         rc;
    std::string out;
};

Job mpirun(const std::string &a, const std::string &b, const std::string &extra)
{
    std::string cmd = std::string(DOORBELL_MPIRUN) +
                      " --allow-run-as-root --oversubscribe --mca btl self,tcp" + " -np 1 " +
                      DOORBELL_DOCTOR_EXE + " --mpi --check firmware --root " + a + extra +
                      " : -np 1 " + DOORBELL_DOCTOR_EXE + " --mpi --check firmware --root " + b +
                      extra + " 2>&1";
    Job   j{-1, ""};
    FILE *p = popen(cmd.c_str(), "r");
    if (!p)
        return j;
    std::array<char, 4096> buf;
    size_t                 n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
        j.out.append(buf.data(), n);
    int s = pclose(p);
    j.rc  = WIFEXITED(s) ? WEXITSTATUS(s) : -1;
    return j;
}

TEST(DoctorMpi, PatchLevelDifferenceAcrossNodesFails)
{
    if (!std::filesystem::is_directory(fixture("peer-patch")))
        GTEST_SKIP() << "recorded trees missing at " << fixture("");
    Job j = mpirun(fixture("healthy"), fixture("peer-patch"), "");
    EXPECT_EQ(j.rc, 2) << j.out;
    // Each node alone is consistent; the job is not.
    EXPECT_NE(j.out.find("[PASS] firmware    HCA type MT4119: 2 HCA(s) on 1 host(s) on node-a"),
              std::string::npos)
        << j.out;
    EXPECT_NE(
        j.out.find(
            "[FAIL] firmware    HCA type MT4119: 2 firmware versions across the job (patch-level"),
        std::string::npos)
        << j.out;
    EXPECT_NE(j.out.find("node-c mlx5_0 fw_ver 16.35.2010  <- differs"), std::string::npos)
        << j.out;
    EXPECT_NE(j.out.find("=== rank 1 ==="), std::string::npos);
    EXPECT_NE(j.out.find("job: worst finding over 2 rank(s): FAIL"), std::string::npos);
}

TEST(DoctorMpi, SameFirmwareAcrossNodesPassesAndJsonParses)
{
    if (!std::filesystem::is_directory(fixture("healthy")))
        GTEST_SKIP() << "recorded trees missing at " << fixture("");
    Job j = mpirun(fixture("healthy"), fixture("healthy"), " --json");
    EXPECT_EQ(j.rc, 0) << j.out;
    EXPECT_TRUE(json_valid(j.out)) << j.out;
    EXPECT_NE(j.out.find("4 HCA(s) on 1 host(s) across the job all run 16.35.2000"),
              std::string::npos)
        << j.out;
}

} // namespace
} // namespace doorbell::doctor::testing
