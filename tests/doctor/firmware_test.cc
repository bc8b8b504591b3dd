// Firmware consistency: one version per HCA type; any difference is a FAIL.
#include "doctor_test_util.h"

namespace doorbell::doctor::testing {
namespace {

TEST(DoctorFirmware, OneVersionPerTypePasses)
{
    Report r;
    compare_firmware({"node1 mlx5_0 MT4129 28.39.1002", "node2 mlx5_0 MT4129 28.39.1002",
                      "node2 mlx5_1 MT4125 22.36.1010"},
                     "across the job", r);
    ASSERT_EQ(r.size(), 2u); // one finding per HCA type; different types are not compared
    for (const Finding &f : r)
        EXPECT_EQ(f.status, Status::kPass);
    EXPECT_NE(find(r, "HCA type MT4129").summary.find("2 HCA(s) on 2 host(s)"), std::string::npos);
}

TEST(DoctorFirmware, SinglePatchLevelDifferenceFails)
{
    Report r;
    compare_firmware({"node1 mlx5_0 MT4129 28.39.1002", "node2 mlx5_0 MT4129 28.39.1002",
                      "node3 mlx5_0 MT4129 28.39.1010"},
                     "across the job", r);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, Status::kFail);
    EXPECT_NE(r[0].summary.find("patch-level difference; most run 28.39.1002"), std::string::npos);
    EXPECT_EQ(r[0].evidence.at(0), "node3 mlx5_0 fw_ver 28.39.1010  <- differs");
    EXPECT_NE(r[0].fix.find("MT4129"), std::string::npos);
}

TEST(DoctorFirmware, MinorDifferenceNamed)
{
    Report r;
    compare_firmware({"a mlx5_0 MT4129 28.38.1002", "b mlx5_0 MT4129 28.39.1002",
                      "c mlx5_0 MT4129 28.39.1002"},
                     "across the job", r);
    EXPECT_NE(r.at(0).summary.find("minor-level"), std::string::npos);
}

TEST(DoctorFirmware, LargeJobEvidenceIsBounded)
{
    std::vector<std::string> lines;
    for (int i = 0; i < 500; i++)
        lines.push_back("node" + std::to_string(i) + " mlx5_0 MT4129 " +
                        (i % 2 ? "28.39.1002" : "28.39.2000"));
    Report r;
    compare_firmware(lines, "across the job", r);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, Status::kFail);
    EXPECT_LE(r[0].evidence.size(), 17u);
    EXPECT_EQ(r[0].evidence.back(), "... and 484 more HCA(s)");
}

TEST(DoctorFirmware, MalformedLinesIgnored)
{
    Report r;
    compare_firmware({"", "only-two fields", "h mlx5_0 MT4129 1.2.3"}, "here", r);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, Status::kPass);
}

TEST(DoctorFirmware, MpiWithoutMpirunSaysSo)
{
    if (!std::filesystem::is_directory(fixture("healthy")))
        GTEST_SKIP() << "recorded trees missing at " << fixture("");
    if (std::getenv("OMPI_COMM_WORLD_SIZE"))
        GTEST_SKIP() << "running under mpirun";
    Result r = doctor({"--root", fixture("healthy"), "--check", "firmware", "--mpi"});
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("job-wide firmware comparison not done"), std::string::npos) << r.out;
    EXPECT_TRUE(r.out.find("not launched by mpirun") != std::string::npos ||
                r.out.find("built without MPI") != std::string::npos)
        << r.out;
}

} // namespace
} // namespace doorbell::doctor::testing
