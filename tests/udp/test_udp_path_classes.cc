/* Ports told apart by spine (udp_path_classes.h): the tries a connection
 * makes, what an answer teaches, the spines in turn once two are known,
 * and messages cut so that every spine carries as many bytes. */
#include "devices/udp/udp_path_classes.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

using namespace doorbell::udp;

namespace {

constexpr uint32_t kSpineA = 0x01011301; // addresses, network order: any two
constexpr uint32_t kSpineB = 0x01021301;

} // namespace

TEST(UdpPathClasses, AFirstTryProbesTwoPortsButNeverTheReceivingOne)
{
    PathClasses c;
    EXPECT_EQ(c.due(0, 8), 0b110u); /* ports 1 and 2; port 0 receives */
    EXPECT_EQ(c.due(1000, 8), 0u) << "a try is out: its answers are awaited";
    PathClasses one;
    EXPECT_EQ(one.due(0, 1), 0u) << "one port: nothing to tell apart";
    EXPECT_FALSE(one.ready());
}

TEST(UdpPathClasses, TwoSpinesMakeItReadyAndPacketsTakeThemInTurn)
{
    PathClasses c;
    ASSERT_EQ(c.due(0, 8), 0b110u);
    c.answered(1, kSpineA);
    EXPECT_FALSE(c.ready());
    c.answered(2, kSpineB);
    ASSERT_TRUE(c.ready());
    EXPECT_EQ(c.classes(), 2u);
    std::map<int, int> count;
    for (int i = 0; i < 100; ++i) {
        uint8_t first = c.next(), second = c.next();
        EXPECT_NE(first, second);
        ++count[first];
        ++count[second];
    }
    EXPECT_EQ(count[1], 100);
    EXPECT_EQ(count[2], 100);
    EXPECT_EQ(c.due(kClassAnswerNs * 10, 8), 0u) << "ready: no more probes";
}

TEST(UdpPathClasses, AnAnsweredTryOnOneSpineIsFollowedAtOnceByTheNextPorts)
{
    PathClasses c;
    ASSERT_EQ(c.due(0, 8), 0b110u);
    c.answered(1, kSpineA);
    c.answered(2, kSpineA); /* both ports hash onto one spine */
    EXPECT_FALSE(c.ready());
    EXPECT_EQ(c.due(kClassAnswerNs - 1, 8), 0u);
    EXPECT_EQ(c.due(kClassAnswerNs, 8), 0b11000u) << "ports 3 and 4, without the retry's wait";
    c.answered(4, kSpineB);
    EXPECT_TRUE(c.ready());
    EXPECT_EQ(c.failed(), 0u);
}

TEST(UdpPathClasses, AnUnansweredTryWaitsForTheRoutersBudgetAndFourEndIt)
{
    PathClasses c;
    uint64_t    now = 0;
    ASSERT_NE(c.due(now, 8), 0u);
    for (uint32_t t = 1; t < kClassTries; ++t) {
        now += kClassAnswerNs;
        EXPECT_EQ(c.due(now, 8), 0u) << "try " << t << " went unanswered: wait";
        EXPECT_EQ(c.failed(), t);
        now += kClassRetryNs;
        EXPECT_EQ(c.due(now, 8), 0b110u) << "the same ports again: their answers were lost";
    }
    now += kClassAnswerNs + kClassRetryNs;
    EXPECT_EQ(c.due(now, 8), 0u);
    EXPECT_EQ(c.failed(), kClassTries);
    EXPECT_EQ(c.due(now * 2, 8), 0u) << "no ICMP here: the connection keeps its home";
    EXPECT_FALSE(c.ready());
}

TEST(UdpPathClasses, EveryPortOnOneSpineEndsTheProbing)
{
    PathClasses c;
    uint64_t    now = 0;
    for (int t = 0; t < 2; ++t, now += kClassAnswerNs) {
        uint32_t mask = c.due(now, 4);
        ASSERT_NE(mask, 0u) << "try " << t;
        for (uint8_t p = 1; p < 4; ++p) {
            if (mask & (1u << p)) {
                c.answered(p, kSpineA);
            }
        }
    }
    EXPECT_EQ(c.due(now, 4), 0u);
    EXPECT_FALSE(c.ready());
    EXPECT_EQ(c.failed(), kClassTries);
}

TEST(UdpPathClasses, SteeredPortsAllOnOneSpineGoOnToTheSpareOnes)
{
    /* 8 steered ports and 8 spare: the seven probed steered ports answer
     * for one spine, two a try, then the spare ones; port 9 reaches the other */
    PathClasses          c;
    uint64_t             now = 0;
    std::vector<uint8_t> order;
    for (uint32_t t = 0; t < 8 && !c.ready(); ++t, now += kClassAnswerNs) {
        uint32_t mask = c.due(now, 16);
        ASSERT_NE(mask, 0u) << "try " << t;
        for (uint8_t p = 1; p < 16; ++p) {
            if (mask & (1u << p)) {
                order.push_back(p);
                c.answered(p, p == 9 ? kSpineB : kSpineA);
            }
        }
    }
    EXPECT_EQ(order, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}))
        << "the steered ports first, the spare ones only after them";
    ASSERT_TRUE(c.ready());
    EXPECT_EQ(c.failed(), 0u) << "every try was answered";
    std::map<int, int> count;
    for (int i = 0; i < 10; ++i) {
        ++count[c.next()];
    }
    EXPECT_EQ(count[9], 5) << "the spare port that reaches the other spine takes its turn";
    EXPECT_EQ(count[1], 5) << "the first steered port keeps the first spine";
    /* the same answers without spare ports end on one spine */
    PathClasses steered;
    now = 0;
    for (uint32_t t = 0; t < 8; ++t, now += kClassAnswerNs) {
        uint32_t mask = steered.due(now, 8);
        for (uint8_t p = 1; p < 8; ++p) {
            if (mask & (1u << p)) {
                steered.answered(p, kSpineA);
            }
        }
    }
    EXPECT_EQ(steered.due(now, 8), 0u);
    EXPECT_FALSE(steered.ready());
}

TEST(UdpPathClasses, AnswersOutOfRangeOrRepeatedTeachNothing)
{
    PathClasses c;
    c.answered(0, kSpineA);                  /* port 0 is never probed */
    c.answered(DOORBELL_MAX_PATHS, kSpineA); /* no such port */
    c.answered(3, 0);                        /* no address */
    EXPECT_EQ(c.classes(), 0u);
    c.answered(3, kSpineA);
    c.answered(3, kSpineB); /* a port's first answer stands */
    EXPECT_EQ(c.hop(3), kSpineA);
    EXPECT_EQ(c.classes(), 1u);
    EXPECT_FALSE(c.ready());
}

TEST(UdpPathClasses, MoreSpinesThanItTellsApartAreUsedAsThatMany)
{
    PathClasses c;
    for (uint8_t p = 1; p <= kClassMax + 2; ++p) {
        c.answered(p, kSpineA + (uint32_t(p) << 24));
    }
    EXPECT_EQ(c.classes(), kClassMax);
    std::map<int, int> count;
    for (uint32_t i = 0; i < 8 * kClassMax; ++i) {
        ++count[c.next()];
    }
    EXPECT_EQ(count.size(), kClassMax);
}

TEST(UdpPathClasses, AMessageIsCutIntoAMultipleOfTheSpinesInSegmentsOfOneSize)
{
    /* 4 KiB at 1400 bytes a segment: 3 segments (2 on one spine, 1 on the
     * other) become 4 of 1024 */
    EXPECT_EQ(even_segment(4096, 1400, 2), 1024u);
    /* already even, or a single segment's worth: unchanged or halved */
    EXPECT_EQ(even_segment(2800, 1400, 2), 1400u);
    EXPECT_EQ(even_segment(1000, 1400, 2), 500u);
    /* one spine: the most a segment holds */
    EXPECT_EQ(even_segment(4096, 1400, 1), 1400u);
    for (uint32_t total : {1401u, 4096u, 10000u, 65536u, 1u << 20}) {
        for (uint32_t spines : {2u, 3u, 4u}) {
            uint32_t seg = even_segment(total, 1400, spines);
            ASSERT_GT(seg, 0u);
            EXPECT_LE(seg, 1400u) << total << " bytes, " << spines << " spines";
            uint32_t n = (total + seg - 1) / seg;
            /* as many segments per spine, or one fewer on some (rounding):
             * no spine carries more than one segment over another */
            uint32_t ideal = ((total + 1399) / 1400 + spines - 1) / spines * spines;
            EXPECT_LE(n, ideal);
            EXPECT_GE(n + spines, ideal + 1) << total << " bytes, " << spines << " spines";
        }
    }
}
