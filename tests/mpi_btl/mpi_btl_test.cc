// The btl component under mpirun on this host: ob1 over btl self,doorbell
// with btl_doorbell_local 1 (peers over lo), against plain mpirun (ob1 over
// vader) running the same programs. Every byte is compared, the counters
// prove the traffic went over doorbell, a failed peer ends in an error, and a
// bad parameter is refused with its range.
#include <gtest/gtest.h>

#include "doorbell_spawn.h"

#include <regex>
#include <sstream>

using namespace doorbell_test;

namespace {

const std::string kComponentPath = std::string(DOORBELL_BTL_DIR) +
                                   ":/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3";

// mpirun with a bound: a hang becomes status 124 (timeout), not a stuck test.
std::vector<std::string> mpirun(int ranks, int seconds = 200)
{
    return {"timeout",
            "-k",
            "10",
            std::to_string(seconds),
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            std::to_string(ranks),
            "--mca",
            "mpi_yield_when_idle",
            "1"};
}

// ob1 over doorbell only (self inside a process): every peer through the btl.
std::vector<std::string> over_doorbell(int ranks, int seconds = 200)
{
    auto a = mpirun(ranks, seconds);
    a.insert(a.end(), {"--mca", "mca_base_component_path", kComponentPath, "--mca", "pml", "ob1",
                       "--mca", "btl", "self,doorbell", "--mca", "btl_doorbell_local", "1", "--mca",
                       "btl_doorbell_if_include", "lo", "--mca", "btl_doorbell_stats", "1"});
    return a;
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string> &more)
{
    a.insert(a.end(), more.begin(), more.end());
    return a;
}

std::string digest_of(const std::string &out)
{
    std::smatch m;
    return std::regex_search(out, m, std::regex("digest ([0-9a-f]{16})")) ? m[1].str() : "";
}

// The counters one process printed for its lo module at finalize.
struct Stats {
    long rank = -1, sends = -1, sendis = -1, recvs = -1, gets = -1, get_bytes = -1, rx_packets = -1,
         puts = -1, put_bytes = -1, atomics = -1;
    /* the process's registrations: without the cache, and the cache's */
    long registrations = -1, rcache_hits = -1, rcache_misses = -1, rcache_bypassed = -1;
};

std::vector<Stats> lo_stats(const std::string &out)
{
    std::vector<Stats> all;
    std::regex         line("btl:doorbell \\[\\[\\d+,\\d+\\],(\\d+)\\] lo stats: (.*)");
    for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it) {
        std::istringstream fields((*it)[2].str());
        std::string        name;
        long               value;
        Stats              s;
        s.rank = std::stol((*it)[1].str());
        while (fields >> name >> value) {
            if (name == "sends")
                s.sends = value;
            else if (name == "sendis")
                s.sendis = value;
            else if (name == "recvs")
                s.recvs = value;
            else if (name == "gets")
                s.gets = value;
            else if (name == "get_bytes")
                s.get_bytes = value;
            else if (name == "rx_packets")
                s.rx_packets = value;
            else if (name == "puts")
                s.puts = value;
            else if (name == "put_bytes")
                s.put_bytes = value;
            else if (name == "atomics")
                s.atomics = value;
            else if (name == "registrations")
                s.registrations = value;
            else if (name == "rcache_hits")
                s.rcache_hits = value;
            else if (name == "rcache_misses")
                s.rcache_misses = value;
            else if (name == "rcache_bypassed")
                s.rcache_bypassed = value;
        }
        all.push_back(s);
    }
    return all;
}

class Datatypes : public ::testing::TestWithParam<int> {};

// Derived datatypes (nested resized/hindexed, indexed, vector, struct,
// signature-compatible mismatches, counts that do not divide) from a few
// bytes across the eager/rendezvous boundary to above 1 MiB: every received
// byte equals the local datatype engine's, and the digest of all received
// buffers equals plain mpirun's.
TEST_P(Datatypes, EveryByteAsPlainMpirun)
{
    const int ranks = GetParam();
    Child     plain = run(with(mpirun(ranks), {DOORBELL_DTYPE_CHECK}));
    Child     btl   = run(with(over_doorbell(ranks), {DOORBELL_DTYPE_CHECK}));

    ASSERT_EQ(plain.status, 0) << plain.output;
    ASSERT_EQ(btl.status, 0) << btl.output;
    EXPECT_TRUE(contains(btl.output, "0 wrong bytes, 0 bad counts")) << btl.output;
    ASSERT_FALSE(digest_of(plain.output).empty()) << plain.output;
    EXPECT_EQ(digest_of(btl.output), digest_of(plain.output)) << btl.output;

    // every rank received over doorbell, eager and rendezvous (RDMA reads)
    auto stats = lo_stats(btl.output);
    ASSERT_EQ(stats.size(), static_cast<size_t>(ranks)) << btl.output;
    for (const Stats &s : stats) {
        EXPECT_GT(s.recvs, 0) << btl.output;
        EXPECT_GT(s.sends + s.sendis, 0) << btl.output;
        EXPECT_GT(s.gets, 0) << btl.output;
        EXPECT_GT(s.get_bytes, 1 << 20) << btl.output;
    }
}

INSTANTIATE_TEST_SUITE_P(Btl, Datatypes, ::testing::Values(2, 4),
                         [](const auto &info) { return std::to_string(info.param) + "ranks"; });

// The tune file's stack on one host: vader carries the peers, the doorbell
// btl stays closed (the job polls no socket it does not use), and the bytes
// are plain mpirun's.
TEST(Tune, OneHostUsesSharedMemoryAndSameBytes)
{
    Child plain = run(with(mpirun(2), {DOORBELL_DTYPE_CHECK}));
    Child tuned = run(with(mpirun(2), {"--tune", DOORBELL_TUNE_FILE, "--mca",
                                       "btl_doorbell_verbose", "1", DOORBELL_DTYPE_CHECK}));
    ASSERT_EQ(plain.status, 0) << plain.output;
    ASSERT_EQ(tuned.status, 0) << tuned.output;
    EXPECT_EQ(digest_of(tuned.output), digest_of(plain.output)) << tuned.output;
    EXPECT_TRUE(contains(tuned.output, "btl:doorbell")) << "the btl did not open\n" << tuned.output;
    EXPECT_FALSE(contains(tuned.output, "progress registered")) << tuned.output;
}

// One-sided MPI through ob1 over doorbell (osc pt2pt): puts, gets,
// accumulates, fetch-and-op and compare-and-swap (on other ranks' windows
// and on one's own) in fence, PSCW and lock epochs on allocated and created
// windows, every result checked, the bytes counted on doorbell.
TEST(OneSided, Pt2ptOverDoorbellIsExact)
{
    Child c = run(with(over_doorbell(3), {"--mca", "osc", "pt2pt", DOORBELL_RMA_CHECK, "self"}));
    ASSERT_EQ(c.status, 0) << c.output;
    EXPECT_TRUE(contains(c.output, "rma-check: 3 ranks, 0 errors")) << c.output;
    auto stats = lo_stats(c.output);
    ASSERT_EQ(stats.size(), 3u) << c.output;
    for (const Stats &s : stats) {
        EXPECT_GT(s.recvs, 0) << c.output;
        EXPECT_GE(s.get_bytes, 1 << 20) << c.output; // the 1 MiB put and get
    }
}

// The same through osc rdma over the doorbell btl: its puts, gets and
// atomics, every rank also compare-and-swapping a word of its own window
// through its endpoint to itself. On one host osc rdma keeps an allocated
// window's data and its own state words in shared memory (the CPU's
// atomics); a created window's data and atomics cross the btl. The final
// windows are plain mpirun's, without compare-and-swap, which crashes the
// target under plain mpirun (osc rdma over vader, Open MPI 4.1.4).
TEST(OneSided, RdmaOverDoorbellIsExact)
{
    Child plain = run(with(mpirun(3), {DOORBELL_RMA_CHECK, "no-cas", "no-umax"}));
    Child same  = run(
         with(over_doorbell(3), {"--mca", "osc", "rdma", DOORBELL_RMA_CHECK, "no-cas", "no-umax"}));
    Child all = run(with(over_doorbell(3), {"--mca", "osc", "rdma", DOORBELL_RMA_CHECK, "self"}));
    ASSERT_EQ(plain.status, 0) << plain.output;
    ASSERT_EQ(same.status, 0) << same.output;
    ASSERT_EQ(all.status, 0) << all.output;
    ASSERT_FALSE(digest_of(plain.output).empty()) << plain.output;
    EXPECT_EQ(digest_of(same.output), digest_of(plain.output)) << same.output;
    EXPECT_TRUE(contains(all.output, "rma-check: 3 ranks, 0 errors")) << all.output;
    auto stats = lo_stats(all.output);
    ASSERT_EQ(stats.size(), 3u) << all.output;
    long atomics = 0;
    for (const Stats &s : stats) {
        EXPECT_GE(s.put_bytes, 1 << 20) << all.output; // the created window's
        EXPECT_GE(s.get_bytes, 1 << 20) << all.output;
        atomics += s.atomics;
    }
    EXPECT_GT(atomics, 0) << all.output;
}

// A peer that stops answering (a hung host: its process exists, its socket
// queues, nothing comes back): the retransmit timeout ends the other rank's
// communication with an error naming the device, the peer and the cause.
TEST(Faults, StoppedPeerIsAnErrorNotAHang)
{
    Child c = run(
        with(over_doorbell(2, 90),
             {"--mca", "btl_doorbell_rto_min", "2000", "--mca", "btl_doorbell_rto_max", "20000",
              "--mca", "btl_doorbell_retry_count", "4", DOORBELL_FAULT_CHECK, "stop"}));
    EXPECT_NE(c.status, 0) << c.output;
    EXPECT_NE(c.status, 124) << "hung until the bound\n" << c.output;
    EXPECT_FALSE(contains(c.output, "ended normally")) << c.output;
    EXPECT_TRUE(contains(c.output, "device lo lost peer")) << c.output;
    EXPECT_TRUE(contains(c.output, "127.0.0.1:")) << c.output;
    EXPECT_TRUE(contains(c.output, "peer timed out")) << c.output;
}

// A killed peer: the job ends with an error instead of waiting for it.
TEST(Faults, KilledPeerEndsTheJob)
{
    Child c = run(
        with(over_doorbell(2, 90),
             {"--mca", "btl_doorbell_rto_min", "2000", "--mca", "btl_doorbell_rto_max", "20000",
              "--mca", "btl_doorbell_retry_count", "4", DOORBELL_FAULT_CHECK, "kill"}));
    EXPECT_NE(c.status, 0) << c.output;
    EXPECT_NE(c.status, 124) << "hung until the bound\n" << c.output;
    EXPECT_FALSE(contains(c.output, "ended normally")) << c.output;
}

struct BadParam {
    const char *name, *value, *message;
};

void PrintTo(const BadParam &p, std::ostream *os)
{
    *os << p.name << "=" << p.value;
}

// The counters of rank r (its lo module's line), or a line of -1s.
Stats rank_stats(const std::string &out, long r)
{
    for (const Stats &s : lo_stats(out)) {
        if (s.rank == r) {
            return s;
        }
    }
    return Stats{};
}

// ob1's rendezvous registers the send buffer (remote read) and the receive
// buffer each message: from the cache, a buffer sent again is registered
// once.
TEST(RegCache, BufferSentAgainIsRegisteredOnce)
{
    Child c = run(with(over_doorbell(2), {DOORBELL_RCACHE_CHECK, "reuse", "20"}));
    ASSERT_EQ(c.status, 0) << c.output;
    EXPECT_TRUE(contains(c.output, "rcache_check: reuse 0 wrong bytes")) << c.output;
    for (long r : {0, 1}) {
        Stats s = rank_stats(c.output, r);
        EXPECT_EQ(s.registrations, 0) << "rank " << r << "\n" << c.output;
        EXPECT_GE(s.rcache_hits, 19) << "rank " << r << "\n" << c.output;
        EXPECT_LE(s.rcache_misses, 2) << "rank " << r << "\n" << c.output;
        EXPECT_EQ(s.rcache_bypassed, 0) << c.output;
    }
    // without the cache, every message registers on both sides
    Child off = run(with(over_doorbell(2), {"--mca", "btl_doorbell_rcache_max", "0",
                                            DOORBELL_RCACHE_CHECK, "reuse", "20"}));
    ASSERT_EQ(off.status, 0) << off.output;
    for (long r : {0, 1}) {
        Stats s = rank_stats(off.output, r);
        EXPECT_GE(s.registrations, 20) << "rank " << r << "\n" << off.output;
        EXPECT_EQ(s.rcache_hits, 0) << off.output;
    }
}

// At most btl_doorbell_rcache_max regions: four buffers in turn through a
// cache of two evict one another (every send registers), nothing is made
// outside the cache, and the bytes are right.
TEST(RegCache, BoundEvictsTheLeastRecentlyUsed)
{
    Child c = run(with(over_doorbell(2), {"--mca", "btl_doorbell_rcache_max", "2",
                                          DOORBELL_RCACHE_CHECK, "cycle", "20", "4"}));
    ASSERT_EQ(c.status, 0) << c.output;
    EXPECT_TRUE(contains(c.output, "rcache_check: cycle 0 wrong bytes")) << c.output;
    Stats sender = rank_stats(c.output, 0);
    EXPECT_GE(sender.rcache_misses, 20) << c.output;
    EXPECT_EQ(sender.rcache_bypassed, 0) << c.output;
    EXPECT_EQ(sender.registrations, 0) << c.output;
    // with room for all four, each is registered once
    Child roomy = run(with(over_doorbell(2), {DOORBELL_RCACHE_CHECK, "cycle", "20", "4"}));
    ASSERT_EQ(roomy.status, 0) << roomy.output;
    EXPECT_LE(rank_stats(roomy.output, 0).rcache_misses, 5) << roomy.output;
}

// Memory unmapped is invalidated through Open MPI's memory hooks: a buffer
// mapped again at the same address registers again instead of finding the
// old registration (whose key a peer could still use on memory that was
// gone), and every byte arrives.
TEST(RegCache, UnmappedMemoryIsRegisteredAgain)
{
    Child c = run(with(over_doorbell(2), {DOORBELL_RCACHE_CHECK, "remap", "10"}));
    ASSERT_EQ(c.status, 0) << c.output;
    EXPECT_TRUE(contains(c.output, "rcache_check: remap 0 wrong bytes")) << c.output;
    Stats sender = rank_stats(c.output, 0);
    EXPECT_GE(sender.rcache_misses, 10) << c.output;
    EXPECT_EQ(sender.rcache_bypassed, 0) << c.output;
}

// The tune file's osc_rdma_network_max_amo 1: an accumulate of 32 ints
// runs as one get-modify-put (a get and a put each), not 32 btl atomics
// (a round trip each through the target); the sums are right either way.
TEST(Tune, AccumulateOfSeveralElementsIsOneGetModifyPut)
{
    const int n     = 20;
    auto      tuned = with(mpirun(2),
                           {"--tune", DOORBELL_TUNE_FILE, "--mca", "btl", "self,doorbell", "--mca",
                            "btl_doorbell_local", "1", "--mca", "btl_doorbell_if_include", "lo", "--mca",
                            "btl_doorbell_stats", "1", "--mca", "osc", "rdma"});
    Child     c     = run(with(tuned, {DOORBELL_ACC_CHECK, std::to_string(n)}));
    ASSERT_EQ(c.status, 0) << c.output;
    EXPECT_TRUE(contains(c.output, "acc_check: 0 wrong elements")) << c.output;
    Stats origin = rank_stats(c.output, 0);
    EXPECT_LT(origin.atomics, n) << c.output;
    EXPECT_GE(origin.gets, n) << c.output;
    EXPECT_GE(origin.puts, n) << c.output;
    // osc rdma's own default: one atomic per element
    Child dflt = run(with(tuned, {"--mca", "osc_rdma_network_max_amo", "32", DOORBELL_ACC_CHECK,
                                  std::to_string(n)}));
    ASSERT_EQ(dflt.status, 0) << dflt.output;
    EXPECT_TRUE(contains(dflt.output, "acc_check: 0 wrong elements")) << dflt.output;
    EXPECT_GE(rank_stats(dflt.output, 0).atomics, 32 * n) << dflt.output;
}

// The tune file's osc component claims only windows that span hosts: on one
// host it leaves every window to osc rdma over vader, as plain mpirun does,
// and the windows end as plain mpirun's (without compare-and-swap and
// unsigned maximum, which plain mpirun's osc rdma over vader gets wrong).
TEST(OscSelect, WindowInsideOneHostIsLeftToPlainMpirunsComponent)
{
    Child plain = run(with(mpirun(3), {DOORBELL_RMA_CHECK, "no-cas", "no-umax"}));
    Child tuned = run(with(mpirun(3), {"--tune", DOORBELL_TUNE_FILE, "--mca", "osc_base_verbose",
                                       "10", DOORBELL_RMA_CHECK, "no-cas", "no-umax"}));
    ASSERT_EQ(plain.status, 0) << plain.output;
    ASSERT_EQ(tuned.status, 0) << tuned.output;
    EXPECT_TRUE(contains(tuned.output, "is inside one host: left to the other components"))
        << "the osc component did not run\n"
        << tuned.output;
    EXPECT_FALSE(contains(tuned.output, "spans hosts")) << tuned.output;
    ASSERT_FALSE(digest_of(plain.output).empty()) << plain.output;
    EXPECT_EQ(digest_of(tuned.output), digest_of(plain.output)) << tuned.output;
}

// A value osc_doorbell_across_hosts does not know is refused by name and
// value; the component then claims nothing and the job still runs.
TEST(OscSelect, UnknownAcrossHostsValueIsRefusedByName)
{
    Child c = run(
        with(mpirun(2),
             {"--tune", DOORBELL_TUNE_FILE, "--mca", "osc_doorbell_across_hosts", "rdmaa", "--mca",
              "osc_base_verbose", "10", DOORBELL_RMA_CHECK, "no-cas", "no-umax"}));
    ASSERT_EQ(c.status, 0) << c.output;
    EXPECT_TRUE(contains(c.output, "osc_doorbell_across_hosts = \"rdmaa\" is neither \"pt2pt\" "
                                   "nor \"rdma\""))
        << c.output;
    EXPECT_FALSE(contains(c.output, "left to the other components")) << c.output;
    EXPECT_TRUE(contains(c.output, "rma-check: 2 ranks, 0 errors")) << c.output;
}

class Params : public ::testing::TestWithParam<BadParam> {};

// An out-of-range value is refused at start-up with the parameter, the value
// and the range; the btl then offers nothing and the job cannot start.
TEST_P(Params, OutOfRangeRefusedWithItsRange)
{
    const BadParam &p = GetParam();
    Child c = run(with(over_doorbell(2, 60), {"--mca", std::string("btl_doorbell_") + p.name,
                                              p.value, DOORBELL_DTYPE_CHECK}));
    EXPECT_NE(c.status, 0) << c.output;
    EXPECT_TRUE(contains(c.output, p.message)) << c.output;
    EXPECT_FALSE(contains(c.output, "dtype-check:")) << c.output;
}

INSTANTIATE_TEST_SUITE_P(
    Btl, Params,
    ::testing::Values(
        BadParam{"am_credits", "0", "btl_doorbell_am_credits = 0 is out of range [1, 256]"},
        BadParam{"tx_queue_len", "100", "btl_doorbell_tx_queue_len = 100 is not a power of two"},
        BadParam{"seg_size", "100000",
                 "btl_doorbell_seg_size = 100000 is out of range [1024, 65472]"},
        BadParam{"eager_limit", "65536",
                 "btl_doorbell_eager_limit = 65536 is out of range [256, 40960]"},
        BadParam{"cc", "fast", "btl_doorbell_cc = \"fast\" is not one of"},
        BadParam{"async_interval", "10",
                 "btl_doorbell_async_interval = 10 is out of range [1000, 1000000]"},
        BadParam{"rto_max", "500", "btl_doorbell_rto_max = 500 is out of range [50000, 60000000]"},
        BadParam{"rcache_max", "100000",
                 "btl_doorbell_rcache_max = 100000 is out of range [0, 65536]"},
        /* text that is not a number: Open MPI would read it as 0 (off,
         * the device's MTU) */
        BadParam{"verbose", "abc", "btl_doorbell_verbose = \"abc\" is not a decimal integer"},
        BadParam{"mtu", "-1", "btl_doorbell_mtu = \"-1\" is not a decimal integer"},
        BadParam{"rx_queue_len", "1k",
                 "btl_doorbell_rx_queue_len = \"1k\" is not a decimal integer"}),
    [](const auto &info) { return std::string(info.param.name); });

} // namespace
