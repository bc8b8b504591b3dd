// MPI across the four hosts of a 2-leaf fabric: point-to-point (every size to
// 1 MiB, every pair, every byte checked) and MPI_Allreduce, on the stock Open MPI
// stacks and on doorbell when its transport is installed. The traffic must
// cross the spine (no shared-memory shortcut between namespaces).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <sstream>

#include "fabric_test.h"

namespace doorbell::fabric_test {
namespace {

struct Stack {
    const char *name;
    const char *mpirun_args; ///< selects the stack; "" for doorbell (tune file)
};

// Stock ob1/tcp as the reference stack, and doorbell. Stock pml ucx over UCX
// tcp is left to scripts/run.sh's comparison: across these namespaces its
// allreduce hung intermittently (a 1.8 s run, then a 90 s time-out) with
// ranks sharing two busy cores.
// clang-format off
const Stack kStacks[] = {
    {"ob1_tcp", "--mca pml ob1 --mca btl self,tcp"},
    {"doorbell", ""},
};
// clang-format on

const std::string kInstall   = DOORBELL_INSTALL_PREFIX;
const std::string kTransport = kInstall + "/lib/ucx/libuct_doorbell.so";
const std::string kTune      = kInstall + "/share/doorbell/doorbell.tune";

struct Case {
    Stack       stack;
    const char *what; ///< p2p | allreduce
};
// Names the case in test listings (CTest shows it).
void PrintTo(const Case &c, std::ostream *os)
{
    *os << c.stack.name << "/" << c.what;
}

std::vector<Case> all_cases()
{
    std::vector<Case> v;
    for (const auto &s : kStacks)
        for (const char *what : {"p2p", "allreduce"})
            v.push_back({s, what});
    return v;
}

class FabricMpi : public ::testing::TestWithParam<Case> {
protected:
    void SetUp() override
    {
        if (std::string why = cannot_build_fabric(); !why.empty())
            GTEST_SKIP() << why;
        if (run("command -v mpirun").rc != 0)
            GTEST_SKIP() << "mpirun is not installed";
        const Stack &s = GetParam().stack;
        if (std::string(s.name) == "doorbell") {
            if (!std::filesystem::exists(kTransport))
                GTEST_SKIP() << "doorbell transport not built: " << kTransport << " is absent";
            if (!std::filesystem::exists(kTune))
                GTEST_SKIP() << "doorbell tune file not installed: " << kTune;
        }
    }
};

TEST_P(FabricMpi, FourHostsAcrossTheSpine)
{
    const auto &[stack, what] = GetParam();
    std::string select        = std::string(stack.name) == "doorbell" ? "--tune " + kTune :
                                                                        stack.mpirun_args;
    Fabric      f('p');
    auto        up = f.up();
    ASSERT_EQ(up.rc, 0) << up.out;
    long long before = spine_bytes(f);

    // p2p up to 1 MiB: eager and rendezvous on every stack, and bounded time on
    // a 200 Mb/s spine (sizes up to 4 MiB are the MPI tests' on one host).
    std::string args = std::string(what) == "p2p" ? "p2p 1048576" : what;
    // A hang detector, not a speed check: each stack takes 2-5 s here, more
    // when other tests load the two cores.
    constexpr int kHangSeconds = 180;
    auto r = f.mpirun("-np 4 " + select + " " + DOORBELL_MPI_CHECK + " " + args, kHangSeconds);
    ASSERT_NE(r.rc, 124) << "mpirun did not finish within " << kHangSeconds << " s (a hang)\n"
                         << r.out;
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find(std::string(what) + " OK"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("on 4 ranks"), std::string::npos) << r.out;

    // p2p moves about 7 MiB per cross-leaf pair; allreduce of 1 Mi ints and doubles crosses too.
    long long crossed = spine_bytes(f) - before;
    EXPECT_GT(crossed, 4ll << 20) << "only " << crossed
                                  << " B crossed the spine: a shared-memory shortcut?";
}

INSTANTIATE_TEST_SUITE_P(Stacks, FabricMpi, ::testing::ValuesIn(all_cases()), [](const auto &info) {
    return std::string(info.param.stack.name) + "_" + info.param.what;
});

} // namespace
} // namespace doorbell::fabric_test
