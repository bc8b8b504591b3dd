// The allreduce schedules with threads as ranks over the fake transport:
// every algorithm, team sizes 1..17, every valid op/type pair, random counts,
// in place or not; results compared bitwise across ranks and with the
// algorithm's fixed-order reference.
#include "coll_harness.h"
#include "reduce.h"
#include "schedules.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <random>
#include <tuple>

using namespace doorbell::coll;
using namespace doorbell::coll::testing;

namespace {

constexpr size_t kHalf = 1 << 20; ///< scratch bytes per half in most tests

// clang-format off
const doorbell_coll_algorithm_t kAlgorithms[] = {
    DOORBELL_COLL_ALG_RECURSIVE_DOUBLING, DOORBELL_COLL_ALG_RING,
    DOORBELL_COLL_ALG_RABENSEIFNER, DOORBELL_COLL_ALG_HIERARCHICAL, DOORBELL_COLL_ALG_DIRECT,
    DOORBELL_COLL_ALG_TWO_STEP, DOORBELL_COLL_ALG_AUTO};

doorbell_coll_tuning_t tuning() {
  doorbell_coll_tuning_t t;
  doorbell_coll_tuning_default(&t);
  t.small_max = 512;        // exercise every branch with small vectors
  t.net_small_max = 256;
  t.hier_max = 4096;
  t.ring_min = 2048;
  t.net_ring_min = 2048;
  t.pipeline_block = 64;    // several sub-blocks per chunk
  t.direct_max_ranks = 4;
  return t;
}
// clang-format on

// Node and leaf ids that make the hierarchy non-trivial: nodes of 1-3 ranks,
// not contiguous, grouped into leaves of up to 3 nodes.
void topology(int n, std::vector<int> &node_of, std::vector<int> &leaf_of)
{
    node_of.resize(n);
    leaf_of.resize(n);
    int nodes = (n + 2) / 3;
    for (int r = 0; r < n; r++) {
        node_of[r] = (r * 7) % nodes; // interleaved ranks
        leaf_of[r] = node_of[r] / 3;
    }
}

// Complex vectors equal as numbers (-0 == +0).
bool same_number(doorbell_coll_dtype_t dt, const Bytes &a, const Bytes &b, size_t count,
                 size_t *first_diff)
{
    auto cmp = [&](auto zero) {
        using T = decltype(zero);
        for (size_t i = 0; i < 2 * count; i++) {
            T x, y;
            std::memcpy(&x, a.data() + i * sizeof(T), sizeof(T));
            std::memcpy(&y, b.data() + i * sizeof(T), sizeof(T));
            if (!(x == y)) {
                *first_diff = i / 2;
                return false;
            }
        }
        return true;
    };
    if (dt == DOORBELL_COLL_DT_FLOAT_COMPLEX)
        return cmp(0.0f);
    if (dt == DOORBELL_COLL_DT_DOUBLE_COMPLEX)
        return cmp(0.0);
    return cmp(0.0L);
}

// What a rank can read in place: nothing, its node's scratch, everyone's.
enum class Readable {
    kNone,
    kNode,
    kAll
};

// Runs the cases on n ranks with this topology (empty: a node per rank, no
// leaves) and checks status, agreement and reference.
void check_on(int n, const std::vector<int> &node_of, const std::vector<int> &leaf_of,
              const std::vector<Case> &cases, const doorbell_coll_tuning_t &tun, size_t half,
              Readable readable)
{
    uint32_t   flags = doorbell_coll_flags_needed(n);
    FakeFabric fabric(n, half, flags);
    fabric.set_peers_readable(readable == Readable::kAll);
    if (!node_of.empty())
        fabric.set_topology(node_of, leaf_of);
    fabric.set_node_readable(readable == Readable::kNode);
    auto                 out = run_cases(fabric, n, cases, tun);
    doorbell_coll_team_t t0  = fabric.team(0);
    for (size_t i = 0; i < cases.size(); i++) {
        const Case               &c   = cases[i];
        doorbell_coll_algorithm_t alg = doorbell_coll_select(&t0, &tun, c.alg,
                                                             c.count * dtype_size(c.dtype));
        SCOPED_TRACE(::testing::Message()
                     << "n=" << n << " alg=" << doorbell_coll_algorithm_name(alg) << " type="
                     << doorbell_coll_dtype_name(c.dtype) << " op=" << doorbell_coll_op_name(c.op)
                     << " count=" << c.count << " in_place=" << c.in_place << " exact=" << c.exact);
        Bytes ref = reference(alg, c, n, node_of, leaf_of);
        for (int r = 0; r < n; r++) {
            const Outcome &o = out[i][r];
            ASSERT_EQ(o.status, DOORBELL_COLL_OK) << "rank " << r << ": " << o.error;
            ASSERT_TRUE(o.send_intact) << "rank " << r << " changed its send buffer";
            size_t diff = 0;
            ASSERT_TRUE(same_value(c.dtype, o.result, out[i][0].result, c.count, &diff))
                << "rank " << r << " differs from rank 0 at element " << diff;
            ASSERT_TRUE(same_value(c.dtype, o.result, ref, c.count, &diff))
                << "rank " << r << " differs from the fixed-order reference at element " << diff;
        }
        if (c.exact) {
            // Order-independent data: any order gives the rank-order fold (complex
            // products may differ in the sign of a zero, so compare those as numbers).
            size_t diff    = 0;
            Bytes  seq     = sequential(c, n);
            bool   complex = c.dtype == DOORBELL_COLL_DT_FLOAT_COMPLEX ||
                           c.dtype == DOORBELL_COLL_DT_DOUBLE_COMPLEX ||
                           c.dtype == DOORBELL_COLL_DT_LONG_DOUBLE_COMPLEX;
            bool same = complex ? same_number(c.dtype, out[i][0].result, seq, c.count, &diff) :
                                  same_value(c.dtype, out[i][0].result, seq, c.count, &diff);
            ASSERT_TRUE(same) << "exact data differs from the rank-order fold at element " << diff;
        }
    }
}

// Runs the cases on n ranks and checks status, agreement and reference.
void check(int n, const std::vector<Case> &cases, const doorbell_coll_tuning_t &tun,
           size_t half = kHalf, bool with_topology = true, bool with_leaves = true,
           bool peers_readable = false)
{
    std::vector<int> node_of, leaf_of;
    if (with_topology) {
        topology(n, node_of, leaf_of);
        if (!with_leaves)
            leaf_of.clear();
    }
    check_on(n, node_of, leaf_of, cases, tun, half,
             peers_readable ? Readable::kAll : Readable::kNone);
}

// One case per supported (type, op): a small random count, in place or not.
std::vector<Case> every_op_and_type(doorbell_coll_algorithm_t alg, std::mt19937_64 &rng)
{
    std::vector<Case> cases;
    for (int t = 0; t < DOORBELL_COLL_DT_COUNT; t++)
        for (int o = 0; o < DOORBELL_COLL_OP_COUNT; o++) {
            auto dt = static_cast<doorbell_coll_dtype_t>(t);
            auto op = static_cast<doorbell_coll_op_t>(o);
            if (!doorbell_coll_supported(dt, op))
                continue;
            Case c;
            c.alg      = alg;
            c.dtype    = dt;
            c.op       = op;
            c.count    = rng() % 97;
            c.in_place = rng() % 2;
            c.seed     = rng();
            cases.push_back(c);
        }
    return cases;
}

// Messages many times a 4 KiB scratch half (int64 sums): many rounds.
std::vector<Case> small_scratch_cases(doorbell_coll_algorithm_t alg, int n)
{
    std::vector<Case> cases;
    for (size_t count : {size_t{5000}, size_t{777}, size_t{4096}}) {
        Case c;
        c.alg      = alg;
        c.count    = count;
        c.dtype    = DOORBELL_COLL_DT_INT64;
        c.seed     = count + n;
        c.in_place = count % 2;
        cases.push_back(c);
    }
    return cases;
}

class Schedules : public ::testing::TestWithParam<std::tuple<doorbell_coll_algorithm_t, int>> {};

// Every op on every type it is defined for.
TEST_P(Schedules, AllOpsAllTypes)
{
    auto [alg, n] = GetParam();
    std::mt19937_64   rng(static_cast<uint64_t>(alg) * 131 + n);
    std::vector<Case> cases = every_op_and_type(alg, rng);
    ASSERT_GT(cases.size(), 80u);
    check(n, cases, tuning());
}

INSTANTIATE_TEST_SUITE_P(Coll, Schedules,
                         ::testing::Combine(::testing::ValuesIn(kAlgorithms),
                                            ::testing::Values(2, 3, 4, 5, 8)),
                         [](const auto &info) {
                             return std::string(
                                        doorbell_coll_algorithm_name(std::get<0>(info.param))) +
                                    "_n" + std::to_string(std::get<1>(info.param));
                         });

class SizesSweep : public ::testing::TestWithParam<doorbell_coll_algorithm_t> {};

// Team sizes 1..17; random full-mantissa doubles must match the algorithm's
// fixed order bit for bit; integer XOR and exact sums across random counts.
TEST_P(SizesSweep, CommSizes1To17)
{
    doorbell_coll_algorithm_t alg = GetParam();
    for (int n = 1; n <= 17; n++) {
        std::mt19937_64   rng(n * 977 + alg);
        std::vector<Case> cases;
        const size_t      counts[] = {0, 1, static_cast<size_t>(n - 1), static_cast<size_t>(n + 1),
                                      rng() % 1500 + 2};
        for (size_t count : counts) {
            Case c;
            c.alg      = alg;
            c.count    = count;
            c.seed     = rng();
            c.in_place = rng() % 2;
            c.exact    = false;
            c.dtype    = DOORBELL_COLL_DT_DOUBLE;
            cases.push_back(c);
            c.dtype    = DOORBELL_COLL_DT_FLOAT;
            c.in_place = !c.in_place;
            cases.push_back(c);
            c.exact = true;
            c.dtype = DOORBELL_COLL_DT_INT32;
            c.op    = DOORBELL_COLL_OP_BXOR;
            cases.push_back(c);
        }
        check(n, cases, tuning(), kHalf, /*with_topology=*/n % 2 == 0, /*with_leaves=*/n % 4 == 0);
        if (HasFatalFailure())
            return;
    }
}

// A scratch half far smaller than the message: many rounds, alternating
// halves, every round's segment planned the same way on every rank.
TEST_P(SizesSweep, ManyRoundsThroughSmallScratch)
{
    doorbell_coll_algorithm_t alg = GetParam();
    for (int n : {3, 4, 6}) {
        check(n, small_scratch_cases(alg, n), tuning(), /*half=*/4096);
        if (HasFatalFailure())
            return;
    }
}

INSTANTIATE_TEST_SUITE_P(Coll, SizesSweep, ::testing::ValuesIn(kAlgorithms), [](const auto &info) {
    return std::string(doorbell_coll_algorithm_name(info.param));
});

// Ranks that read each other's scratch in place (one node, mapped memory):
// the two-step allgather reads finished chunks from their owner. Every
// op/type, team sizes 1..17, and many rounds (an owner's chunk must stay
// valid until every reader has it). The other algorithms ignore the mapping.
TEST(SchedulesReadablePeers, TwoStepReadsChunksInPlace)
{
    for (auto alg : {DOORBELL_COLL_ALG_TWO_STEP, DOORBELL_COLL_ALG_AUTO, DOORBELL_COLL_ALG_RING}) {
        for (int n : {2, 3, 4, 5, 8}) {
            std::mt19937_64   rng(static_cast<uint64_t>(alg) * 7 + n);
            std::vector<Case> cases = every_op_and_type(alg, rng);
            check(n, cases, tuning(), kHalf, false, false, /*peers_readable=*/true);
            if (HasFatalFailure())
                return;
        }
        for (int n = 1; n <= 17; n++) {
            std::mt19937_64   rng(n * 31 + alg);
            std::vector<Case> cases;
            for (size_t count :
                 {size_t{0}, size_t{1}, static_cast<size_t>(n + 1), rng() % 1500 + 2}) {
                Case c;
                c.alg      = alg;
                c.count    = count;
                c.seed     = rng();
                c.in_place = rng() % 2;
                c.exact    = false;
                cases.push_back(c);
            }
            check(n, cases, tuning(), kHalf, false, false, true);
            if (HasFatalFailure())
                return;
        }
        for (int n : {3, 4, 6}) {
            check(n, small_scratch_cases(alg, n), tuning(), /*half=*/4096, false, false, true);
            if (HasFatalFailure())
                return;
        }
    }
}

// Hosts x ranks per host, and leaves: the layouts the hierarchical
// algorithm meets on a cluster (ranks filled host by host) and some it
// should survive (interleaved nodes of unequal size).
struct Layout {
    const char      *name;
    std::vector<int> node_of, leaf_of;
};

Layout hosts_by_ranks(const char *name, int hosts, int per_host, int hosts_per_leaf)
{
    Layout l{name, {}, {}};
    for (int r = 0; r < hosts * per_host; r++) {
        l.node_of.push_back(r / per_host);
        if (hosts_per_leaf > 0)
            l.leaf_of.push_back(r / per_host / hosts_per_leaf);
    }
    return l;
}

std::vector<Layout> hierarchical_layouts()
{
    std::vector<Layout> v = {
        hosts_by_ranks("2x2", 2, 2, 0),          hosts_by_ranks("2x3", 2, 3, 0),
        hosts_by_ranks("3x1", 3, 1, 0),          hosts_by_ranks("2x2_leaf_each", 2, 2, 1),
        hosts_by_ranks("4x2_2_leaves", 4, 2, 2), hosts_by_ranks("6x2_3_leaves", 6, 2, 2),
        hosts_by_ranks("3x3_3_leaves", 3, 3, 1),
    };
    Layout uneven{"uneven_interleaved", {}, {}};
    topology(7, uneven.node_of, uneven.leaf_of); // nodes of 3, 2 and 2 ranks
    v.push_back(uneven);
    return v;
}

class SchedulesHierarchical : public ::testing::TestWithParam<Layout> {
protected:
    // Node leaders only (slice_min beyond any message) or every rank a
    // slice owner (slice_min 0), sub-blocks of 64 bytes.
    static doorbell_coll_tuning_t mode(bool sliced)
    {
        doorbell_coll_tuning_t t = tuning();
        t.hier_slice_min         = sliced ? 0 : SIZE_MAX;
        t.hier_slice_max         = SIZE_MAX;
        return t;
    }
};

// Every op/type, in place or not, with and without in-place reads inside a
// node, leaders only and sliced: bitwise the same on every rank and equal to
// the fixed-order reference.
TEST_P(SchedulesHierarchical, EveryOpAndType)
{
    const Layout &l = GetParam();
    const int     n = static_cast<int>(l.node_of.size());
    for (bool sliced : {false, true})
        for (Readable readable : {Readable::kNone, Readable::kNode}) {
            SCOPED_TRACE(::testing::Message()
                         << l.name << (sliced ? " sliced" : " leaders")
                         << (readable == Readable::kNode ? " node-readable" : " puts only"));
            std::mt19937_64   rng(n * 101 + sliced * 7 + static_cast<int>(readable));
            std::vector<Case> cases = every_op_and_type(DOORBELL_COLL_ALG_HIERARCHICAL, rng);
            check_on(n, l.node_of, l.leaf_of, cases, mode(sliced), kHalf, readable);
            if (HasFatalFailure())
                return;
        }
}

// Counts around the number of slices (empty slices and sub-blocks), random
// full-mantissa doubles, and many rounds through a 4 KiB scratch half.
TEST_P(SchedulesHierarchical, CountsAndRounds)
{
    const Layout &l = GetParam();
    const int     n = static_cast<int>(l.node_of.size());
    for (bool sliced : {false, true})
        for (Readable readable : {Readable::kNone, Readable::kNode}) {
            SCOPED_TRACE(::testing::Message()
                         << l.name << (sliced ? " sliced" : " leaders")
                         << (readable == Readable::kNode ? " node-readable" : " puts only"));
            std::mt19937_64   rng(n * 13 + sliced);
            std::vector<Case> cases;
            for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{333},
                                 size_t{1000}, rng() % 3000 + 1}) {
                Case c;
                c.alg      = DOORBELL_COLL_ALG_HIERARCHICAL;
                c.count    = count;
                c.seed     = rng();
                c.in_place = rng() % 2;
                c.exact    = false;
                cases.push_back(c);
            }
            check_on(n, l.node_of, l.leaf_of, cases, mode(sliced), kHalf, readable);
            if (HasFatalFailure())
                return;
            auto rounds = small_scratch_cases(DOORBELL_COLL_ALG_HIERARCHICAL, n);
            check_on(n, l.node_of, l.leaf_of, rounds, mode(sliced), 4096, readable);
            if (HasFatalFailure())
                return;
        }
}

INSTANTIATE_TEST_SUITE_P(Coll, SchedulesHierarchical, ::testing::ValuesIn(hierarchical_layouts()),
                         [](const auto &info) { return std::string(info.param.name); });

// Node leaders for small messages and slice owners for large ones, by the
// whole message: every rank of a node puts its slices to their owners, so
// the sliced form moves the same bytes in parallel.
TEST(SchedulesHierarchicalPlan, SlicesFollowTheSizeAndTheSmallestNode)
{
    doorbell_coll_tuning_t t = tuning();
    t.hier_slice_min         = 4096;
    FakeFabric fabric(7, kHalf, doorbell_coll_flags_needed(7));
    fabric.set_topology({0, 0, 0, 1, 1, 2, 2}, {});
    doorbell_coll_team_t team = fabric.team(4);
    Hierarchy            h    = make_hierarchy(team);
    ASSERT_EQ(h.nodes.size(), 3u);
    EXPECT_EQ(h.min_node, 2);
    EXPECT_EQ(h.max_node, 3);
    EXPECT_EQ(h.nodes[1].me, 1);
    EXPECT_EQ(hierarchical_plan(h, 4095, t).slices, 1);
    EXPECT_EQ(hierarchical_plan(h, 4096, t).slices, 2);
    t.hier_slice_max = 65536; // and leaders again from hier_slice_max
    EXPECT_EQ(hierarchical_plan(h, 65535, t).slices, 2);
    EXPECT_EQ(hierarchical_plan(h, 65536, t).slices, 1);
    EXPECT_FALSE(hierarchical_plan(h, 65536, t).spine_tree_high);
    t.hier_slice_max = SIZE_MAX;
    Segment  seg{nullptr, 1000, 8, DOORBELL_COLL_DT_DOUBLE, DOORBELL_COLL_OP_SUM};
    HierPlan p = hierarchical_plan(h, 8000, t);
    EXPECT_EQ(hierarchical_pipeline(p, seg, 0), 1);
    EXPECT_EQ(hierarchical_pipeline(p, seg, 1000), 4); // 4000-byte slices
    EXPECT_EQ(hierarchical_pipeline(p, seg, 64), kMaxPipeline);
    EXPECT_LE(hierarchical_flags(h, p), doorbell_coll_flags_needed(7));
}

// Random doubles: results agree bitwise across ranks and across repeated
// runs, and stay within rounding of an exact-order sum.
TEST(SchedulesDeterminism, RepeatedRunsGiveTheSameBits)
{
    for (auto alg : kAlgorithms) {
        Case c;
        c.alg   = alg;
        c.count = 3001;
        c.exact = false;
        c.seed  = 42;
        std::vector<Case> cases(3, c);
        const int         n = 7;
        FakeFabric        fabric(n, kHalf, doorbell_coll_flags_needed(n));
        auto              out = run_cases(fabric, n, cases, tuning());
        Bytes             seq = sequential(c, n);
        for (size_t i = 0; i < cases.size(); i++)
            for (int r = 0; r < n; r++) {
                ASSERT_EQ(out[i][r].status, 0) << out[i][r].error;
                ASSERT_EQ(out[i][r].result, out[0][0].result) << "run " << i << " rank " << r;
            }
        const double *a = reinterpret_cast<const double *>(out[0][0].result.data());
        const double *b = reinterpret_cast<const double *>(seq.data());
        for (size_t k = 0; k < c.count; k++)
            ASSERT_NEAR(a[k], b[k], 1e-12 * 256) << "element " << k;
    }
}

// A rank that never arrives: the others fail with a timeout naming a peer
// instead of hanging.
TEST(SchedulesErrors, DeadPeerTimesOut)
{
    for (auto alg : {DOORBELL_COLL_ALG_RECURSIVE_DOUBLING, DOORBELL_COLL_ALG_RING,
                     DOORBELL_COLL_ALG_RABENSEIFNER, DOORBELL_COLL_ALG_HIERARCHICAL,
                     DOORBELL_COLL_ALG_DIRECT, DOORBELL_COLL_ALG_TWO_STEP}) {
        const int  n = 4;
        FakeFabric fabric(n, kHalf, doorbell_coll_flags_needed(n));
        fabric.timeout_ns = 200'000'000;
        Case c;
        c.alg    = alg;
        c.count  = 100;
        auto out = run_cases(fabric, n, {c}, tuning(), /*absent_rank=*/3);
        for (int r = 0; r < 3; r++) {
            EXPECT_NE(out[0][r].status, DOORBELL_COLL_OK) << doorbell_coll_algorithm_name(alg);
            EXPECT_NE(out[0][r].error.find("rank"), std::string::npos) << out[0][r].error;
        }
        // The waiters handed their idle time to the transport (yielding team).
        EXPECT_GT(fabric.idle_calls(), 0u) << doorbell_coll_algorithm_name(alg);
    }
}

TEST(SchedulesErrors, PutFailureIsReported)
{
    const int  n = 4;
    FakeFabric fabric(n, kHalf, doorbell_coll_flags_needed(n));
    fabric.timeout_ns = 200'000'000;
    fabric.fail_puts_from(2);
    Case c;
    c.alg    = DOORBELL_COLL_ALG_RECURSIVE_DOUBLING;
    c.count  = 10;
    auto out = run_cases(fabric, n, {c}, tuning());
    EXPECT_EQ(out[0][2].status, DOORBELL_COLL_ERR_TRANSPORT);
    EXPECT_NE(out[0][2].error.find("put of"), std::string::npos) << out[0][2].error;
    for (int r : {0, 1, 3})
        EXPECT_NE(out[0][r].status, DOORBELL_COLL_OK);
}

TEST(SchedulesErrors, UnsupportedPairAndTooFewFlags)
{
    FakeFabric           fabric(1, kHalf, 4);
    doorbell_coll_team_t t = fabric.team(0);
    double               x = 1;
    char                 err[256];
    EXPECT_EQ(doorbell_coll_allreduce(&t, nullptr, DOORBELL_COLL_ALG_AUTO, nullptr, &x, 1,
                                      DOORBELL_COLL_DT_DOUBLE, DOORBELL_COLL_OP_BXOR, err,
                                      sizeof(err)),
              DOORBELL_COLL_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(err).find("MPI_BXOR"), std::string::npos) << err;

    FakeFabric        two(2, kHalf, 1); // fewer flags than recursive doubling needs
    std::vector<Case> cases(1);
    cases[0].alg   = DOORBELL_COLL_ALG_RECURSIVE_DOUBLING;
    cases[0].count = 4;
    auto out       = run_cases(two, 2, cases, tuning());
    EXPECT_EQ(out[0][0].status, DOORBELL_COLL_ERR_NO_SPACE) << out[0][0].error;
}

// auto, peers read in place (one node): small -> direct (up to
// direct_max_ranks) or recursive doubling; larger -> two-step (up to
// direct_max_ranks), Rabenseifner (2^k ranks) or ring. Peers over the
// network: recursive doubling up to net_small_max, then Rabenseifner or
// ring. Hierarchical only when ranks share nodes and span several.
TEST(SchedulesSelect, AutoFollowsSizeSizeAndTopology)
{
    doorbell_coll_tuning_t t = tuning();
    FakeFabric             f4(4, kHalf, 64);
    doorbell_coll_team_t   team = f4.team(0);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 8),
              DOORBELL_COLL_ALG_RECURSIVE_DOUBLING);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, t.net_small_max),
              DOORBELL_COLL_ALG_RECURSIVE_DOUBLING);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, t.net_small_max + 1),
              DOORBELL_COLL_ALG_RABENSEIFNER);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 1024),
              DOORBELL_COLL_ALG_RABENSEIFNER);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 1 << 20),
              DOORBELL_COLL_ALG_RING);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_RING, 8), DOORBELL_COLL_ALG_RING);
    {
        // The default over the network: recursive doubling to 1 KiB (2 KiB
        // crosses a two-leaf spine twice), then Rabenseifner at every size
        // (2^k ranks).
        doorbell_coll_tuning_t d;
        doorbell_coll_tuning_default(&d);
        EXPECT_EQ(doorbell_coll_select(&team, &d, DOORBELL_COLL_ALG_AUTO, 1024),
                  DOORBELL_COLL_ALG_RECURSIVE_DOUBLING);
        EXPECT_EQ(doorbell_coll_select(&team, &d, DOORBELL_COLL_ALG_AUTO, 2048),
                  DOORBELL_COLL_ALG_RABENSEIFNER);
        EXPECT_EQ(doorbell_coll_select(&team, &d, DOORBELL_COLL_ALG_AUTO, size_t(1) << 30),
                  DOORBELL_COLL_ALG_RABENSEIFNER);
        FakeFabric           f6(6, kHalf, 64);
        doorbell_coll_team_t t6 = f6.team(0);
        EXPECT_EQ(doorbell_coll_select(&t6, &d, DOORBELL_COLL_ALG_AUTO, 1 << 20),
                  DOORBELL_COLL_ALG_RING); // not 2^k
    }
    f4.set_peers_readable(true); // one node, mapped: two steps
    team = f4.team(0);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 8), DOORBELL_COLL_ALG_DIRECT);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, t.small_max),
              DOORBELL_COLL_ALG_DIRECT);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, t.small_max + 1),
              DOORBELL_COLL_ALG_TWO_STEP);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 1024),
              DOORBELL_COLL_ALG_TWO_STEP);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 1 << 20),
              DOORBELL_COLL_ALG_TWO_STEP);
    f4.set_peers_readable(false);
    f4.set_topology({0, 0, 1, 1}, {});
    team = f4.team(0);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 8),
              DOORBELL_COLL_ALG_HIERARCHICAL);
    f4.set_topology({0, 0, 0, 0}, {}); // one node: nothing to aggregate
    team = f4.team(0);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 8),
              DOORBELL_COLL_ALG_RECURSIVE_DOUBLING); // peers not mapped
    f4.set_peers_readable(true);
    team = f4.team(0);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 8), DOORBELL_COLL_ALG_DIRECT);
    f4.set_peers_readable(false);
    FakeFabric f5(5, kHalf, 64);
    team = f5.team(0);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 8),
              DOORBELL_COLL_ALG_RECURSIVE_DOUBLING); // more ranks than direct_max_ranks
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 1024),
              DOORBELL_COLL_ALG_RING);
    FakeFabric f8(8, kHalf, 64);
    team = f8.team(0);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 8),
              DOORBELL_COLL_ALG_RECURSIVE_DOUBLING);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 1024),
              DOORBELL_COLL_ALG_RABENSEIFNER);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 1 << 20),
              DOORBELL_COLL_ALG_RING);
}

// auto hands the call back to the caller's own allreduce (PREVIOUS) up to
// previous_max when every peer is read in place (one node), up to
// net_previous_max when some peer is reached over the network (hierarchical
// teams included); 0 turns either off, a forced algorithm is never handed
// back, and the library itself refuses to run PREVIOUS.
// The team's node layout, worked out once (doorbell_coll_team_layout) or on
// every call (layout 0), gives the same bits and the same choice, for node
// ids in any order.
TEST(SchedulesSelect, TheNodeLayoutIsWorkedOutOnceWithTheSameAnswer)
{
    struct Layout {
        std::vector<int> node_of;
        unsigned         bits;
    };
    const unsigned multi              = DOORBELL_COLL_LAYOUT_MULTI_NODE,
                   shared             = DOORBELL_COLL_LAYOUT_SHARED_NODE;
    const std::vector<Layout> layouts = {
        {{0, 0, 0, 0}, shared},            // one node
        {{0, 1, 2, 3}, multi},             // a rank per node
        {{0, 0, 1, 1}, multi | shared},    // 2 x 2
        {{5, 2, 5, 2}, multi | shared},    // interleaved, any ids
        {{3, 1, 2, 1}, multi | shared},    // one node of two among singles
        {{7, 3, 9, 1, 4, 0, 8, 2}, multi}, // distinct, unsorted
    };
    doorbell_coll_tuning_t t = tuning();
    for (const Layout &l : layouts) {
        FakeFabric f(static_cast<int>(l.node_of.size()), kHalf, 64);
        f.set_topology(l.node_of, {});
        doorbell_coll_team_t per_call = f.team(0);
        per_call.layout               = 0;
        doorbell_coll_team_t once     = per_call;
        doorbell_coll_team_layout(&once);
        EXPECT_EQ(once.layout, DOORBELL_COLL_LAYOUT_KNOWN | l.bits)
            << ::testing::PrintToString(l.node_of);
        for (size_t bytes : {size_t(8), size_t(4096), size_t(1) << 20})
            EXPECT_EQ(doorbell_coll_select(&once, &t, DOORBELL_COLL_ALG_AUTO, bytes),
                      doorbell_coll_select(&per_call, &t, DOORBELL_COLL_ALG_AUTO, bytes))
                << ::testing::PrintToString(l.node_of) << " " << bytes;
    }
    // Hierarchical needs both bits: only the layouts with both pick it.
    FakeFabric f(4, kHalf, 64);
    f.set_topology({0, 0, 1, 1}, {});
    doorbell_coll_team_t team = f.team(0);
    doorbell_coll_team_layout(&team);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 8),
              DOORBELL_COLL_ALG_HIERARCHICAL);
    f.set_topology({0, 1, 2, 3}, {});
    team = f.team(0);
    doorbell_coll_team_layout(&team);
    EXPECT_NE(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 8),
              DOORBELL_COLL_ALG_HIERARCHICAL);
    // No node ids: one node per rank, as before (neither bit).
    team.node_of = nullptr;
    doorbell_coll_team_layout(&team);
    EXPECT_EQ(team.layout, DOORBELL_COLL_LAYOUT_KNOWN);
}

// A node per rank and a leaf map with several nodes under some leaf (4
// hosts x 1 rank under two leaves): hierarchical from net_leaf_hier_min to
// net_leaf_hier_max, the flat schedules outside; leaves of one node each, a
// single leaf, or no map change nothing.
TEST(SchedulesSelect, ANodePerRankUnderSharedLeavesIsHierarchicalBetweenItsSizes)
{
    doorbell_coll_tuning_t d;
    doorbell_coll_tuning_default(&d);
    ASSERT_LE(d.net_leaf_hier_min, d.net_leaf_hier_max);
    FakeFabric f(4, kHalf, 64);
    f.set_topology({0, 1, 2, 3}, {0, 0, 1, 1});
    doorbell_coll_team_t team = f.team(0);
    doorbell_coll_team_layout(&team);
    EXPECT_EQ(team.layout, DOORBELL_COLL_LAYOUT_KNOWN | DOORBELL_COLL_LAYOUT_MULTI_NODE |
                               DOORBELL_COLL_LAYOUT_SHARED_LEAF);
    EXPECT_EQ(doorbell_coll_select(&team, &d, DOORBELL_COLL_ALG_AUTO, d.net_small_max),
              DOORBELL_COLL_ALG_RECURSIVE_DOUBLING);
    EXPECT_EQ(doorbell_coll_select(&team, &d, DOORBELL_COLL_ALG_AUTO, d.net_leaf_hier_min - 1),
              DOORBELL_COLL_ALG_RABENSEIFNER);
    EXPECT_EQ(doorbell_coll_select(&team, &d, DOORBELL_COLL_ALG_AUTO, d.net_leaf_hier_min),
              DOORBELL_COLL_ALG_HIERARCHICAL);
    EXPECT_EQ(doorbell_coll_select(&team, &d, DOORBELL_COLL_ALG_AUTO, d.net_leaf_hier_max),
              DOORBELL_COLL_ALG_HIERARCHICAL);
    EXPECT_EQ(doorbell_coll_select(&team, &d, DOORBELL_COLL_ALG_AUTO, d.net_leaf_hier_max + 1),
              DOORBELL_COLL_ALG_RABENSEIFNER);
    // Worked out on every call: the same answer.
    team.layout = 0;
    EXPECT_EQ(doorbell_coll_select(&team, &d, DOORBELL_COLL_ALG_AUTO, d.net_leaf_hier_min),
              DOORBELL_COLL_ALG_HIERARCHICAL);
    // No node ids is a node per rank too.
    team.node_of = nullptr;
    doorbell_coll_team_layout(&team);
    EXPECT_EQ(team.layout, DOORBELL_COLL_LAYOUT_KNOWN | DOORBELL_COLL_LAYOUT_SHARED_LEAF);
    EXPECT_EQ(doorbell_coll_select(&team, &d, DOORBELL_COLL_ALG_AUTO, d.net_leaf_hier_min),
              DOORBELL_COLL_ALG_HIERARCHICAL);
    // A forced algorithm stays forced; a min above the max turns it off.
    EXPECT_EQ(doorbell_coll_select(&team, &d, DOORBELL_COLL_ALG_RING, d.net_leaf_hier_min),
              DOORBELL_COLL_ALG_RING);
    doorbell_coll_tuning_t off = d;
    off.net_leaf_hier_min      = off.net_leaf_hier_max + 1;
    EXPECT_NE(doorbell_coll_select(&team, &off, DOORBELL_COLL_ALG_AUTO, d.net_leaf_hier_max),
              DOORBELL_COLL_ALG_HIERARCHICAL);
    struct Case {
        std::vector<int> node_of, leaf_of;
    };
    for (const Case &c : std::vector<Case>{{{0, 1, 2, 3}, {0, 1, 2, 3}}, // a leaf per node
                                           {{0, 1, 2, 3}, {4, 4, 4, 4}}, // one leaf
                                           {{0, 1, 2, 3}, {}}}) {        // no map
        f.set_topology(c.node_of, c.leaf_of);
        doorbell_coll_team_t t = f.team(0);
        doorbell_coll_team_layout(&t);
        EXPECT_EQ(t.layout & DOORBELL_COLL_LAYOUT_SHARED_LEAF, 0u)
            << ::testing::PrintToString(c.leaf_of);
        EXPECT_EQ(doorbell_coll_select(&t, &d, DOORBELL_COLL_ALG_AUTO, d.net_leaf_hier_min),
                  DOORBELL_COLL_ALG_RABENSEIFNER)
            << ::testing::PrintToString(c.leaf_of);
    }
    // Nodes of several ranks: hierarchical at every size, as before.
    f.set_topology({0, 0, 1, 1}, {0, 0, 1, 1});
    team = f.team(0);
    doorbell_coll_team_layout(&team);
    EXPECT_EQ(doorbell_coll_select(&team, &d, DOORBELL_COLL_ALG_AUTO, 8),
              DOORBELL_COLL_ALG_HIERARCHICAL);
}

TEST(SchedulesSelect, AutoHandsSmallMessagesToThePreviousModule)
{
    doorbell_coll_tuning_t t = tuning();
    t.previous_max           = 256; // below small_max (512): direct above it
    t.net_previous_max       = 64;
    FakeFabric f4(4, kHalf, 64);
    f4.set_peers_readable(true); // one node, mapped
    doorbell_coll_team_t team = f4.team(0);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 8),
              DOORBELL_COLL_ALG_PREVIOUS);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 256),
              DOORBELL_COLL_ALG_PREVIOUS);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 257),
              DOORBELL_COLL_ALG_DIRECT);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_DIRECT, 8),
              DOORBELL_COLL_ALG_DIRECT); // forced: never handed back
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_PREVIOUS, 1 << 20),
              DOORBELL_COLL_ALG_PREVIOUS);
    f4.set_peers_readable(false); // over the network: net_previous_max
    team = f4.team(0);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 64),
              DOORBELL_COLL_ALG_PREVIOUS);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 65),
              DOORBELL_COLL_ALG_RECURSIVE_DOUBLING);
    f4.set_topology({0, 0, 1, 1}, {}); // two nodes of two, node peers mapped
    team = f4.team(0);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 64),
              DOORBELL_COLL_ALG_PREVIOUS);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 65),
              DOORBELL_COLL_ALG_HIERARCHICAL);
    t.net_previous_max = 0; // off
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 0),
              DOORBELL_COLL_ALG_HIERARCHICAL);
    t.previous_max = 0;
    f4.set_topology({0, 0, 0, 0}, {});
    f4.set_peers_readable(true);
    team = f4.team(0);
    EXPECT_EQ(doorbell_coll_select(&team, &t, DOORBELL_COLL_ALG_AUTO, 8), DOORBELL_COLL_ALG_DIRECT);

    // The library never runs the caller's allreduce: it says so.
    std::vector<Case> cases(1);
    cases[0].alg   = DOORBELL_COLL_ALG_PREVIOUS;
    cases[0].count = 4;
    auto out       = run_cases(f4, 4, cases, t);
    for (int r = 0; r < 4; r++) {
        EXPECT_EQ(out[0][r].status, DOORBELL_COLL_ERR_INVALID) << out[0][r].error;
        EXPECT_NE(out[0][r].error.find("previous"), std::string::npos) << out[0][r].error;
    }
}

// Byte sizes beyond 2^31 on two ranks (4.3 GB of memory): opt-in.
TEST(SchedulesLarge, ByteSizeBeyond2GiB)
{
    if (std::getenv("DOORBELL_COLL_LARGE_TEST") == nullptr)
        GTEST_SKIP() << "needs ~5 GB of memory; set DOORBELL_COLL_LARGE_TEST=1 to run";
    const size_t             count = (size_t{1} << 31) + 4096 + 3;
    FakeFabric               fabric(2, 8 << 20, doorbell_coll_flags_needed(2));
    std::vector<Bytes>       bufs(2, Bytes(count));
    std::vector<std::thread> th;
    int                      st[2];
    for (int r = 0; r < 2; r++)
        th.emplace_back([&, r] {
            for (size_t i = 0; i < count; i++)
                bufs[r][i] = static_cast<unsigned char>(i * (r + 3));
            doorbell_coll_team_t t = fabric.team(r);
            st[r] = doorbell_coll_allreduce(&t, nullptr, DOORBELL_COLL_ALG_RING, nullptr,
                                            bufs[r].data(), count, DOORBELL_COLL_DT_BYTE,
                                            DOORBELL_COLL_OP_BXOR, nullptr, 0);
        });
    for (auto &t : th)
        t.join();
    ASSERT_EQ(st[0], 0);
    ASSERT_EQ(st[1], 0);
    for (size_t i : {size_t{0}, size_t{1} << 31, count - 1})
        for (int r = 0; r < 2; r++)
            ASSERT_EQ(bufs[r][i], static_cast<unsigned char>((i * 3) ^ (i * 4))) << i;
}

} // namespace

// The target's side of a put_signal carried in one message: remote input,
// so anything outside the scratch halves or the flags is refused untouched.
TEST(DeliverPutSignal, WritesInBoundsAndRefusesTheRest)
{
    std::vector<unsigned char> scratch(2 * 256, 0);
    std::vector<uint64_t>      flags(2 * 4, 0);
    doorbell_coll_team_t       team{};
    team.scratch                 = scratch.data();
    team.scratch_half            = 256;
    team.flags                   = flags.data();
    team.flag_half               = 4;
    const unsigned char data[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

    EXPECT_EQ(0, doorbell_coll_deliver_put_signal(&team, data, 16, 496, 7, 42));
    EXPECT_EQ(0, std::memcmp(scratch.data() + 496, data, 16));
    EXPECT_EQ(42u, flags[7]);
    EXPECT_EQ(0, doorbell_coll_deliver_put_signal(&team, nullptr, 0, 512, 0, 5)); // flag only
    EXPECT_EQ(5u, flags[0]);

    const auto before_scratch = scratch;
    const auto before_flags   = flags;
    EXPECT_EQ(-1, doorbell_coll_deliver_put_signal(&team, data, 16, 497, 1, 9)); // past the end
    EXPECT_EQ(-1, doorbell_coll_deliver_put_signal(&team, data, 1, 513, 1, 9));  // offset beyond
    EXPECT_EQ(-1, doorbell_coll_deliver_put_signal(&team, data, 16, UINT64_MAX - 4, 1, 9)); // wraps
    EXPECT_EQ(-1, doorbell_coll_deliver_put_signal(&team, data, 16, 0, 8, 9));    // no such flag
    EXPECT_EQ(-1, doorbell_coll_deliver_put_signal(&team, nullptr, 16, 0, 1, 9)); // no bytes
    EXPECT_EQ(before_scratch, scratch);
    EXPECT_EQ(before_flags, flags);
}
