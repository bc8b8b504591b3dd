#include <gtest/gtest.h>

#include "pinning/cpu_list.h"

using namespace doorbell::pin;

TEST(PinCpuList, ParsesRangesAndSingles)
{
    Result<std::vector<int>> r = parse_cpu_list("0-3,8,10-11\n");
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(*r, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
    EXPECT_TRUE(parse_cpu_list("").ok());
    EXPECT_TRUE(parse_cpu_list("\n")->empty());
}

TEST(PinCpuList, FormatsCompactlyAndRoundTrips)
{
    EXPECT_EQ(format_cpu_list({11, 0, 1, 2, 3, 8, 10, 3}), "0-3,8,10-11");
    EXPECT_EQ(format_cpu_list({7}), "7");
    EXPECT_EQ(format_cpu_list({}), "");
    EXPECT_EQ(format_cpu_list(*parse_cpu_list("4-7,12-15")), "4-7,12-15");
}

TEST(PinCpuList, RejectsGarbageWithAMessage)
{
    for (const char *bad : {"a", "3-1", "1-", "-1", "0-99999999", "1,,x", "0x3"}) {
        Result<std::vector<int>> r = parse_cpu_list(bad);
        EXPECT_FALSE(r.ok()) << bad;
        if (!r.ok()) {
            EXPECT_NE(r.error().find("CPU"), std::string::npos) << r.error();
        }
    }
}
