// The command line: exit status = worst finding, usage errors exit 3, JSON
// parses, and on a machine without NIC or GPU it says so.
#include "doctor_test_util.h"

#include <sys/wait.h>

namespace doorbell::doctor::testing {
namespace {

bool have_fixtures()
{
    return std::filesystem::is_directory(fixture("healthy"));
}

TEST(DoctorCli, ExitStatusIsWorstFinding)
{
    if (!have_fixtures())
        GTEST_SKIP() << "recorded trees missing at " << fixture("");
    EXPECT_EQ(doctor({"--root", fixture("healthy"), "--check",
                      "rdma,firmware,gpudirect,pcie,irq,irqbalance"})
                  .rc,
              0);
    EXPECT_EQ(doctor({"--root", fixture("healthy")}).rc,
              1); // the GPU has no hwmon sensor, no --topology
    EXPECT_EQ(doctor({"--root", fixture("degraded")}).rc, 2);
    EXPECT_EQ(doctor({"--root", fixture("degraded"), "--check", "irqbalance"}).rc, 1);
}

TEST(DoctorCli, UsageErrorsExit3WithReason)
{
    struct Case {
        std::vector<std::string> args;
        const char              *says;
    } cases[] = {
        {{"--bogus"}, "unknown argument `--bogus`"},
        {{"--check", "nope"}, "--check nope: unknown check"},
        {{"--check"}, "--check needs a value"},
        {{"--interval", "fast"}, "--interval fast: expected milliseconds"},
        {{"--interval", "-5"}, "expected milliseconds"},
        {{"--interval", "600000"}, "expected milliseconds"},
        {{"--root", "/nonexistent/doorbell"}, "--root /nonexistent/doorbell: not a directory"},
        {{"--later", "/tmp"}, "--later needs --root"},
        {{"--root", "/tmp", "--later", "/tmp"}, "--later needs --interval"},
        {{"--root", "/tmp", "--interval", "100"}, "cannot be sampled over time"},
        {{"--record", "/tmp"}, "--record /tmp: already exists"},
        {{"--topology", "/tmp"}, "--topology describes a recorded node: it needs --root"},
        {{"--root", "/tmp", "--topology", "/nonexistent.xml"},
         "--topology /nonexistent.xml: no such file"},
        {{"--root", "/tmp", "--record", "/nonexistent/x"}, "cannot be combined with --root"},
    };
    for (const Case &c : cases) {
        Result r = doctor(c.args);
        EXPECT_EQ(r.rc, kExitUsage) << c.says;
        EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("usage: doorbell-doctor"), std::string::npos);
        EXPECT_TRUE(r.out.empty());
    }
}

TEST(DoctorCli, HelpListsEveryCheck)
{
    Result r = doctor({"--help"});
    EXPECT_EQ(r.rc, 0);
    for (size_t i = 0; i < kNumChecks; i++)
        EXPECT_NE(r.out.find(std::string("  ") + kChecks[i].name + " "), std::string::npos)
            << kChecks[i].name;
}

TEST(DoctorCli, CheckSelectsOnlyThatCheck)
{
    if (!have_fixtures())
        GTEST_SKIP() << "recorded trees missing at " << fixture("");
    Result r = doctor({"--root", fixture("degraded"), "--check", "pcie"});
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.out.find("[FAIL] pcie        8b76:00:02.0 (mlx5_0): x8 @ 8 GT/s of x16 @ 8 GT/s"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("] rdma"), std::string::npos);
    EXPECT_NE(r.out.find("summary: 0 pass, 1 warn, 2 fail -> FAIL"), std::string::npos);
}

TEST(DoctorCli, JsonParsesForEveryTree)
{
    if (!have_fixtures())
        GTEST_SKIP() << "recorded trees missing at " << fixture("");
    for (const char *tree : {"healthy", "degraded", "sparse"}) {
        Result r = doctor({"--root", fixture(tree), "--json"});
        EXPECT_TRUE(json_valid(r.out)) << tree << "\n" << r.out;
        EXPECT_NE(r.out.find("\"exit_status\":" + std::to_string(r.rc)), std::string::npos) << tree;
    }
    Result w = doctor({"--root", fixture("degraded"), "--later", fixture("degraded-later"),
                       "--interval", "1000", "--json", "--check", "congestion,retransmit"});
    EXPECT_TRUE(json_valid(w.out)) << w.out;
    EXPECT_NE(w.out.find("\"window_ms\":1000"), std::string::npos);
    EXPECT_NE(w.out.find(
                  "{\"check\":\"retransmit\",\"subject\":\"mlx5_0 port 1\",\"status\":\"FAIL\","),
              std::string::npos)
        << w.out;
}

TEST(DoctorCli, JsonEscapesControlAndQuoteCharacters)
{
    EXPECT_EQ(json_escape("a\"b\\c\nd\x01"), "a\\\"b\\\\c\\nd\\u0001");
    EXPECT_EQ(json_escape("\xff 25\xc2\xb0"
                          "C \xe2\x82"),
              "\\ufffd 25\xc2\xb0"
              "C \\ufffd\\ufffd"); // junk, valid, truncated
    Context ctx;
    ctx.host = "h\"ost";
    Report r;
    add_finding(r, "x", "s\tubject", Status::kWarn, "line\nbreak", "fix \x7f")
        .evidence.push_back("\x1f");
    std::string j = render_json(ctx, r);
    EXPECT_TRUE(json_valid(j)) << j;
    EXPECT_FALSE(json_valid(j + "x"));
    EXPECT_FALSE(json_valid("{\"a\":1,}"));
    EXPECT_FALSE(json_valid("{\"a\":\"\n\"}"));
}

// This machine class has neither RDMA NIC nor GPU: the doctor must say so and
// still check what exists (irqbalance, TCP retransmits).
TEST(DoctorCli, LiveMachineSaysWhatIsMissing)
{
    Fs        live;
    Inventory inv = take_inventory(live);
    Result    r   = doctor({"--interval", "0"});
    ASSERT_NE(r.rc, kExitUsage) << r.err;
    EXPECT_NE(r.out.find("] retransmit  tcp: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("] irqbalance  host: "), std::string::npos) << r.out;
    if (!inv.rdma.empty() || !inv.gpus.empty())
        GTEST_SKIP()
            << "this machine has an RDMA NIC or a GPU; the absent-hardware wording is not exercised";
    EXPECT_NE(r.out.find("[WARN] rdma        host: no RDMA NIC on this host"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("[WARN] gpudirect   host: no NVIDIA GPU on this host"), std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("[FAIL]"), std::string::npos) << r.out;
    EXPECT_EQ(r.rc, 1);
}

// --record copies what a live run reads; replaying the copy gives the same report.
TEST(DoctorCli, RecordedLiveRunReplaysIdentically)
{
    TempTree    t;
    std::string rec  = t.root() + "/node";
    Result      live = doctor({"--interval", "0", "--record", rec});
    ASSERT_NE(live.rc, kExitUsage) << live.err;
    EXPECT_NE(live.err.find("replay: doorbell-doctor --root " + rec), std::string::npos)
        << live.err;
    EXPECT_TRUE(std::filesystem::exists(rec + "/proc/sys/kernel/hostname"));
    Result replay = doctor({"--root", rec});
    EXPECT_EQ(replay.rc, live.rc);
    auto body = [](const std::string &s) {
        return s.substr(s.find('\n') + 1);
    }; // the header names the source
    EXPECT_EQ(body(replay.out), body(live.out));
    EXPECT_EQ(replay.out.substr(0, replay.out.find(" (")), live.out.substr(0, live.out.find(" (")));
}

// The installed binary: same exit statuses through a real process.
TEST(DoctorCli, ExecutableExitStatus)
{
    if (!have_fixtures())
        GTEST_SKIP() << "recorded trees missing at " << fixture("");
    auto status = [](const std::string &args) {
        std::string cmd = std::string(DOORBELL_DOCTOR_EXE) + " " + args + " >/dev/null 2>&1";
        int         s   = std::system(cmd.c_str());
        return WIFEXITED(s) ? WEXITSTATUS(s) : -1;
    };
    EXPECT_EQ(status("--root " + fixture("healthy") + " --check pcie"), 0);
    EXPECT_EQ(status("--root " + fixture("sparse") + " --check pcie"), 1);
    EXPECT_EQ(status("--root " + fixture("degraded")), 2);
    EXPECT_EQ(status("--no-such-option"), 3);
}

} // namespace
} // namespace doorbell::doctor::testing
