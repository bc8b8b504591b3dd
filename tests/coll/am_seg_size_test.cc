// The SEG_SIZE the component asks of the doorbell transport for its own UCP
// context, and when it asks (mpi_coll/algorithms/am_seg_size.h). That the
// size carries a step of am_max bytes as one message is checked against the
// UDP device's own limits in tests/udp (test_udp_data_segments.cc).
#include "am_seg_size.h"

#include <gtest/gtest.h>

namespace {

TEST(CollAmSegSize, TheDefaultIsKeptWhereItCarriesTheStep)
{
    EXPECT_EQ(doorbell_coll_am_seg_size(0), 0u); // no active messages
    EXPECT_EQ(doorbell_coll_am_seg_size(2048), 0u);
    EXPECT_EQ(doorbell_coll_am_seg_size(4096), 0u);
    EXPECT_EQ(doorbell_coll_am_seg_size(DOORBELL_COLL_SEG_SIZE_DEFAULT - DOORBELL_COLL_AM_SLACK),
              0u);
}

TEST(CollAmSegSize, ALargerStepAsksForItsBytesAndTheSlack)
{
    EXPECT_EQ(doorbell_coll_am_seg_size(8192), 8192u + DOORBELL_COLL_AM_SLACK);
    EXPECT_EQ(doorbell_coll_am_seg_size(16384), 16384u + DOORBELL_COLL_AM_SLACK);
    EXPECT_EQ(doorbell_coll_am_seg_size(DOORBELL_COLL_SEG_SIZE_DEFAULT - DOORBELL_COLL_AM_SLACK +
                                        1),
              DOORBELL_COLL_SEG_SIZE_DEFAULT + 1u);
}

TEST(CollAmSegSize, NeverPastTheTransportsLargest)
{
    EXPECT_EQ(doorbell_coll_am_seg_size(65536), size_t(DOORBELL_COLL_SEG_SIZE_MAX));
    EXPECT_EQ(doorbell_coll_am_seg_size(DOORBELL_COLL_SEG_SIZE_MAX - DOORBELL_COLL_AM_SLACK),
              size_t(DOORBELL_COLL_SEG_SIZE_MAX));
    EXPECT_EQ(doorbell_coll_am_seg_size(size_t(1) << 30), size_t(DOORBELL_COLL_SEG_SIZE_MAX));
}

TEST(CollAmSegSize, OnlyAListNamingTheTransportIsAsked)
{
    EXPECT_TRUE(doorbell_coll_tls_names_doorbell("doorbell"));
    EXPECT_TRUE(doorbell_coll_tls_names_doorbell("doorbell,sm,self"));
    EXPECT_TRUE(doorbell_coll_tls_names_doorbell("sm,self,doorbell"));
    EXPECT_TRUE(doorbell_coll_tls_names_doorbell("posix,doorbell,self"));
    EXPECT_FALSE(doorbell_coll_tls_names_doorbell(nullptr));
    EXPECT_FALSE(doorbell_coll_tls_names_doorbell(""));
    EXPECT_FALSE(doorbell_coll_tls_names_doorbell("posix,sysv,self,tcp"));
    EXPECT_FALSE(doorbell_coll_tls_names_doorbell("^doorbell"));     // excluded
    EXPECT_FALSE(doorbell_coll_tls_names_doorbell("^tcp,doorbell")); // a list of exclusions
    EXPECT_FALSE(doorbell_coll_tls_names_doorbell("doorbellx,sm"));  // another name
    EXPECT_FALSE(doorbell_coll_tls_names_doorbell("xdoorbell,sm"));
    EXPECT_FALSE(doorbell_coll_tls_names_doorbell("all"));
}

} // namespace
