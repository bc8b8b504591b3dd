// The fabric's hosts are hosts: on 2 hosts x 2 ranks every host has its own
// hostname, PID, IPC, UTS and mount namespace, /dev/shm and /tmp; MPI sees
// two nodes; shared memory carries the traffic inside a host (vader, UCX sm)
// and cannot reach the other host, whose traffic crosses the spine.
//
// What shows the path: two processes of one host that talk over TCP or UDP
// do so through that host's loopback (even to the host's fabric address), so
// the loopback's byte counter stays near zero when shared memory carries
// their bytes and grows by all of them when it does not (the control runs
// with btl self,tcp show it); bytes between hosts cross the spine's shaped
// ports.
#include <gtest/gtest.h>

#include <sched.h>

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fabric_test.h"

namespace doorbell::fabric_test {
namespace {

const std::string kInstall   = DOORBELL_INSTALL_PREFIX;
const std::string kTransport = kInstall + "/lib/ucx/libuct_doorbell.so";
const std::string kCheck     = DOORBELL_MPI_CHECK;

// Every pair, every size to 256 KiB (eager and rendezvous on every stack):
// about 1.8 MiB each way per pair; four of the six pairs cross the spine.
const std::string kP2p = kCheck + " p2p 262144";
// A hang detector, not a speed check (each run takes 1-5 s here).
constexpr int kHangSeconds = 120;
// Loopback bytes per host for a job that keeps its ranks' bytes in shared
// memory: the PMIx and start-up traffic of the ranks with their orted
// (about 20 KiB measured); one rank pair over TCP moves about 1.8 MiB.
constexpr long long kLoopbackQuiet = 256 << 10;
constexpr long long kLoopbackBusy  = 1 << 20;
constexpr long long kSpineCrossed  = 4 << 20;

const std::string kPmlUcx = "--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any "
                            "--mca osc ^ucx ";

class FabricHosts : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (std::string why = cannot_build_fabric(); !why.empty())
            GTEST_SKIP() << why;
        if (run("command -v mpirun && command -v unshare && command -v nsenter").rc != 0)
            GTEST_SKIP() << "mpirun or util-linux (unshare, nsenter) is not installed";
        // Two hosts, one under each leaf, two ranks each.
        auto up = f_.up("--leaves 2 --hosts-per-leaf 1 --ranks-per-host 2");
        ASSERT_EQ(up.rc, 0) << up.out;
        hosts_ = f_.hosts();
        ASSERT_EQ(hosts_.size(), 2u);
    }

    // Runs an MPI job; fails the test on a hang.
    CmdResult mpirun(const std::string &args)
    {
        auto r = f_.mpirun(args, kHangSeconds);
        EXPECT_NE(r.rc, 124) << "mpirun did not finish within " << kHangSeconds << " s\n" << r.out;
        return r;
    }

    // A job's bytes on both hosts' loopbacks and across the spine.
    struct Traffic {
        long long loopback[2];
        long long spine;
    };
    Traffic traffic()
    {
        return {{loopback_bytes(f_, "h1"), loopback_bytes(f_, "h2")}, spine_bytes(f_)};
    }
    static Traffic delta(const Traffic &a, const Traffic &b)
    {
        return {{b.loopback[0] - a.loopback[0], b.loopback[1] - a.loopback[1]}, b.spine - a.spine};
    }

    // 2 ranks on h1 alone.
    std::string one_host() const { return "-np 2 --host " + hosts_[0] + ":2 "; }

    Fabric                   f_{'h'};
    std::vector<std::string> hosts_;
};

TEST_F(FabricHosts, EveryHostHasItsOwnNameShmTmpAndNamespaces)
{
    const std::string h1 = f_.ns("h1"), h2 = f_.ns("h2");
    EXPECT_EQ(f_.exec("h1", "hostname").out, h1 + "\n");
    EXPECT_EQ(f_.exec(hosts_[1], "hostname").out, h2 + "\n") << "exec by address";
    EXPECT_EQ(f_.exec(h2, "hostname").out, h2 + "\n") << "exec by hostname";
    EXPECT_EQ(f_.exec("h1", "getent hosts " + h2 + " | cut -d\" \" -f1").out, hosts_[1] + "\n")
        << "hosts resolve each other's names";

    // One namespace per host and kind, none the machine's.
    for (const char *kind : {"pid", "ipc", "uts", "mnt", "net"}) {
        std::string cmd = std::string("readlink /proc/self/ns/") + kind;
        auto        a = f_.exec("h1", cmd), b = f_.exec("h2", cmd), a2 = f_.exec("h1", cmd);
        auto        root = run(cmd);
        ASSERT_EQ(a.rc, 0) << a.out;
        EXPECT_NE(a.out, b.out) << kind;
        EXPECT_NE(a.out, root.out) << kind;
        EXPECT_EQ(a.out, a2.out) << kind << ": two commands in one host";
    }
    // A PID namespace of its own: the host's init is PID 1 there.
    EXPECT_NE(f_.exec("h1", "cat /proc/1/cmdline").out.find("doorbell-fabric-init"),
              std::string::npos);

    // /dev/shm and /tmp: what one command of h1 makes, the next one sees, and
    // neither h2 nor the machine does.
    const std::string probe = "doorbell-hosts-test-" + f_.name();
    for (const std::string dir : {"/dev/shm", "/tmp"}) {
        const std::string path = dir + "/" + probe;
        ASSERT_EQ(f_.exec("h1", "touch " + path).rc, 0);
        EXPECT_EQ(f_.exec("h1", "test -e " + path).rc, 0) << path << " in h1";
        EXPECT_NE(f_.exec("h2", "test -e " + path).rc, 0) << path << " of h1 seen in h2";
        EXPECT_FALSE(std::filesystem::exists(path)) << path << " of h1 seen on the machine";
    }

    // MPI: two nodes, split by host; the check compares every pair of ranks.
    auto r = mpirun("-np 4 " + kCheck + " hosts");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("hosts OK"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("hosts: 2 nodes"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("node " + h1 + ": ranks 0 1\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("node " + h2 + ": ranks 2 3\n"), std::string::npos) << r.out;
}

// "0-2,5" -> {0, 1, 2, 5}: a Cpus_allowed_list.
std::set<int> cpu_list(const std::string &text)
{
    std::set<int>      cpus;
    std::istringstream in(text);
    for (std::string part; std::getline(in, part, ',');) {
        const auto dash  = part.find('-');
        const int  first = std::stoi(part.substr(0, dash));
        const int  last  = dash == std::string::npos ? first : std::stoi(part.substr(dash + 1));
        for (int c = first; c <= last; ++c)
            cpus.insert(c);
    }
    return cpus;
}

// The Cpus_allowed_list of every "Cpus_allowed_list:" line in out, in order.
std::vector<std::set<int>> allowed_lists(const std::string &out)
{
    std::vector<std::set<int>> lists;
    static const std::regex    line(R"(Cpus_allowed_list:\s*([0-9,-]+))");
    for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
         ++it)
        lists.push_back(cpu_list((*it)[1]));
    return lists;
}

std::set<int> machine_cpus()
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return {};
    std::set<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set))
            cpus.insert(c);
    return cpus;
}

// A host runs on its own CPUs where the machine has a CPU for each host, as a
// machine's processes run on its own cores: commands run with exec, and the
// orted and ranks of a job, whose ranks inherit the host's CPUs.
TEST_F(FabricHosts, EveryHostRunsOnItsOwnCpus)
{
    const std::set<int> machine = machine_cpus();
    ASSERT_FALSE(machine.empty());
    const std::string show = "grep Cpus_allowed_list /proc/self/status";
    auto              a    = allowed_lists(f_.exec("h1", show).out);
    auto              b    = allowed_lists(f_.exec("h2", show).out);
    ASSERT_EQ(a.size(), 1u);
    ASSERT_EQ(b.size(), 1u);
    const std::set<int> h1 = a[0], h2 = b[0];
    EXPECT_FALSE(h1.empty());
    EXPECT_FALSE(h2.empty());
    for (int c : h1)
        EXPECT_TRUE(machine.count(c)) << "h1 on CPU " << c << ", not one of this machine's";
    for (int c : h2)
        EXPECT_TRUE(machine.count(c)) << "h2 on CPU " << c << ", not one of this machine's";
    if (machine.size() >= 2) {
        // Two hosts: halves of the machine, nothing in common.
        for (int c : h1)
            EXPECT_FALSE(h2.count(c)) << "CPU " << c << " is both hosts'";
        EXPECT_EQ(h1.size() + h2.size(), machine.size());
    } else {
        EXPECT_EQ(h1, machine);
        EXPECT_EQ(h2, machine);
    }
    EXPECT_NE(run(tool(f_.name()) + " status").out.find(" cpus "), std::string::npos)
        << "status shows every host's CPUs";

    // Ranks 0 and 1 are h1's, 2 and 3 h2's (--map-by slot).
    auto r = mpirun("-np 4 --map-by slot --tag-output " + show);
    ASSERT_EQ(r.rc, 0) << r.out;
    for (int rank = 0; rank < 4; ++rank) {
        const std::string tag = "[1," + std::to_string(rank) + "]<stdout>:";
        const auto        at  = r.out.find(tag);
        ASSERT_NE(at, std::string::npos) << r.out;
        auto lists = allowed_lists(r.out.substr(at, r.out.find('\n', at) - at));
        ASSERT_EQ(lists.size(), 1u) << r.out;
        EXPECT_EQ(lists[0], rank < 2 ? h1 : h2) << "rank " << rank << "\n" << r.out;
    }

    // --host-cpus shared: every host on every CPU, as before; a bad mode is
    // refused with its name.
    auto bad = f_.up("--leaves 2 --hosts-per-leaf 1 --ranks-per-host 2 --host-cpus some");
    EXPECT_NE(bad.rc, 0);
    EXPECT_NE(bad.out.find("--host-cpus must be spread or shared (got 'some')"), std::string::npos)
        << bad.out;
    auto up = f_.up("--leaves 2 --hosts-per-leaf 1 --ranks-per-host 2 --host-cpus shared");
    ASSERT_EQ(up.rc, 0) << up.out;
    EXPECT_EQ(up.out.find("unbound variable"), std::string::npos) << up.out;
    for (const char *host : {"h1", "h2"}) {
        auto lists = allowed_lists(f_.exec(host, show).out);
        ASSERT_EQ(lists.size(), 1u);
        EXPECT_EQ(lists[0], machine) << host;
    }
}

TEST_F(FabricHosts, Ob1TalksThroughVaderInsideAHostAndTcpAcross)
{
    // Plain mpirun (ob1 with Open MPI's default btls): vader inside a host,
    // tcp across; the loopbacks stay quiet.
    Traffic before = traffic();
    auto    r      = mpirun("-np 4 --mca pml ob1 " + kP2p);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("p2p OK"), std::string::npos) << r.out;
    Traffic d = delta(before, traffic());
    EXPECT_LT(d.loopback[0], kLoopbackQuiet) << "h1's ranks talked over TCP, not vader";
    EXPECT_LT(d.loopback[1], kLoopbackQuiet) << "h2's ranks talked over TCP, not vader";
    EXPECT_GT(d.spine, kSpineCrossed) << "too little crossed the spine";

    // The control: without vader the same pairs fill the loopbacks.
    before = traffic();
    r      = mpirun("-np 4 --mca pml ob1 --mca btl self,tcp " + kP2p);
    ASSERT_EQ(r.rc, 0) << r.out;
    d = delta(before, traffic());
    EXPECT_GT(d.loopback[0], kLoopbackBusy);
    EXPECT_GT(d.loopback[1], kLoopbackBusy);

    // vader alone: a job inside one host runs, a job over two cannot connect.
    r = mpirun(one_host() + "--mca pml ob1 --mca btl self,vader " + kP2p);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("p2p OK 72 checks on 2 ranks"), std::string::npos) << r.out;
    r = mpirun("-np 4 --mca pml ob1 --mca btl self,vader " + kP2p);
    EXPECT_NE(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("unable to reach each other"), std::string::npos) << r.out;
}

TEST_F(FabricHosts, UcxTakesSharedMemoryInsideAHostAndTcpAcross)
{
    Traffic before = traffic();
    auto    r = mpirun("-np 4 " + kPmlUcx + "-x UCX_TLS=sm,tcp,self -x UCX_LOG_LEVEL=info " + kP2p);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("p2p OK"), std::string::npos) << r.out;
    Traffic d = delta(before, traffic());
    EXPECT_LT(d.loopback[0], kLoopbackQuiet) << "h1's ranks talked over TCP, not sm";
    EXPECT_LT(d.loopback[1], kLoopbackQuiet) << "h2's ranks talked over TCP, not sm";
    EXPECT_GT(d.spine, kSpineCrossed) << "too little crossed the spine";
    // UCX's own choice (ucp_worker's "ep_cfg" lines): a peer on the host gets
    // shared-memory lanes only, a peer on the other host tcp only.
    EXPECT_TRUE(
        std::regex_search(r.out,
                          std::regex(R"(ep_cfg\[\d+\]: tag\((sysv|posix)/memory cma/memory\)\n)")))
        << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(ep_cfg\[\d+\]: tag\(tcp/fab0\)\n)")))
        << r.out;

    // sm alone: inside one host it runs; UCX finds the other host unreachable.
    r = mpirun(one_host() + kPmlUcx + "-x UCX_TLS=sm,self " + kP2p);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("p2p OK 72 checks on 2 ranks"), std::string::npos) << r.out;
    r = mpirun("-np 4 " + kPmlUcx + "-x UCX_TLS=sm,self " + kP2p);
    EXPECT_NE(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("Destination is unreachable"), std::string::npos) << r.out;
}

TEST_F(FabricHosts, DoorbellCarriesNothingInsideAHost)
{
    if (!std::filesystem::exists(kTransport))
        GTEST_SKIP() << "doorbell transport not built: " << kTransport << " is absent";
    const std::string stack = kPmlUcx + "-x LD_PRELOAD=" + kTransport +
                              " -x UCX_TLS=doorbell,sm,self -x UCX_DOORBELL_STATS=y ";

    // Two ranks of one host: sm carries everything, the doorbell interfaces
    // (opened, their counters dumped) send and receive no packet.
    auto r = mpirun(one_host() + stack + kP2p);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("p2p OK 72 checks on 2 ranks"), std::string::npos) << r.out;
    EXPECT_EQ(doorbell_counter(r.out, "tx_packets"), 0) << r.out;
    EXPECT_EQ(doorbell_counter(r.out, "rx_packets"), 0) << r.out;

    // Two hosts: doorbell carries what crosses, the loopbacks stay quiet
    // (a doorbell packet between ranks of one host would pass there).
    Traffic before = traffic();
    r              = mpirun("-np 4 " + stack + kP2p);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("p2p OK 432 checks on 4 ranks"), std::string::npos) << r.out;
    Traffic d = delta(before, traffic());
    EXPECT_GT(doorbell_counter(r.out, "tx_packets"), 0) << r.out;
    EXPECT_LT(d.loopback[0], kLoopbackQuiet) << "h1's ranks exchanged doorbell packets";
    EXPECT_LT(d.loopback[1], kLoopbackQuiet) << "h2's ranks exchanged doorbell packets";
    EXPECT_GT(d.spine, kSpineCrossed) << "too little crossed the spine";
}

// The spines answer an expired TTL (doorbell-fabric): a doorbell connection
// across the spine learns which spine each of its ports reaches from those
// answers and sends on both (docs/core.md, Multipath, Spines); every check
// of the job still passes with its packets taking the spines in turn.
TEST_F(FabricHosts, DoorbellConnectionsAcrossTheSpineLearnBothSpines)
{
    if (!std::filesystem::exists(kTransport))
        GTEST_SKIP() << "doorbell transport not built: " << kTransport << " is absent";
    const std::string stack = kPmlUcx + "-x LD_PRELOAD=" + kTransport +
                              " -x UCX_TLS=doorbell,sm,self -x UCX_DOORBELL_STATS=y ";
    auto r = mpirun("-np 4 " + stack + kP2p);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("p2p OK 432 checks on 4 ranks"), std::string::npos) << r.out;
    // One line per QP: a QP that sent (srtt known) learned 0, 1 or 2 spines.
    std::regex qp_line(" qp 0x[0-9a-f]+ .* srtt_us ([0-9.]+) .* spines ([0-9]+) ");
    int        used = 0, both = 0;
    for (std::sregex_iterator it(r.out.begin(), r.out.end(), qp_line), end; it != end; ++it) {
        if (std::stod((*it)[1].str()) == 0)
            continue;
        ++used;
        EXPECT_LE(std::stoi((*it)[2].str()), 2) << "this fabric has two spines\n" << r.out;
        both += std::stoi((*it)[2].str()) == 2;
    }
    EXPECT_GT(used, 0) << r.out;
    EXPECT_GT(both, 0) << "no connection learned both spines\n" << r.out;
    // Each iface's counters: every answer was drawn by a probe of its own.
    auto sum = [&](const char *counter) {
        std::regex line(std::string(" ") + counter + " ([0-9]+)\n");
        uint64_t   total = 0;
        for (std::sregex_iterator it(r.out.begin(), r.out.end(), line), end; it != end; ++it)
            total += std::stoull((*it)[1].str());
        return total;
    };
    const uint64_t probes = sum("spine_probes"), answers = sum("spine_answers");
    EXPECT_GT(answers, 0u) << r.out;
    EXPECT_LE(answers, probes) << r.out;
}

// A connection whose steered ports all reach one spine goes on to the
// spare ports its iface binds after them (udp_path_classes.h). With
// PATHS=2 a connection probes one steered port (port 1, port 0 receives),
// so without the spare ports (2 and 3) none could learn both spines; with
// them its three probed ports all reach one spine for 1 connection in 4.
TEST_F(FabricHosts, AConnectionFindsTheOtherSpineOnItsSparePorts)
{
    if (!std::filesystem::exists(kTransport))
        GTEST_SKIP() << "doorbell transport not built: " << kTransport << " is absent";
    const std::string stack = kPmlUcx + "-x LD_PRELOAD=" + kTransport +
                              " -x UCX_TLS=doorbell,sm,self -x UCX_DOORBELL_STATS=y "
                              "-x UCX_DOORBELL_PATHS=2 ";
    auto r = mpirun("-np 4 " + stack + kP2p);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("p2p OK 432 checks on 4 ranks"), std::string::npos) << r.out;
    std::regex qp_line(" qp 0x[0-9a-f]+ .* spines ([0-9]+) spine_ports ([-0-9,]+) ");
    int        both = 0;
    for (std::sregex_iterator it(r.out.begin(), r.out.end(), qp_line), end; it != end; ++it) {
        if (std::stoi((*it)[1].str()) != 2)
            continue;
        ++both;
        const std::string ports = (*it)[2].str();
        EXPECT_TRUE(ports == "1,2" || ports == "1,3" || ports == "2,1" || ports == "3,1" ||
                    ports == "2,3" || ports == "3,2")
            << "two of the probed ports 1-3, a spare one among them: " << ports << "\n"
            << r.out;
    }
    EXPECT_GT(both, 0) << "no connection learned both spines\n" << r.out;
}

// The tune file's stack (ob1 over btl self, vader and doorbell): on one host
// the doorbell btl stays closed and vader carries everything; on two hosts
// every rank's doorbell btl sends and receives over the fabric while the
// ranks of each host keep their bytes off the loopback.
TEST_F(FabricHosts, DoorbellBtlCarriesOnlyWhatCrosses)
{
    const std::string tune = kInstall + "/share/doorbell/doorbell.tune";
    if (!std::filesystem::exists(tune) ||
        !std::filesystem::exists(kInstall + "/lib/openmpi/mca_btl_doorbell.so"))
        GTEST_SKIP() << "the btl or the tune file is not installed in " << kInstall;
    const std::string stack = "--tune " + tune + " --mca btl_doorbell_stats 1 " +
                              "--mca btl_doorbell_verbose 1 ";

    Traffic before = traffic();
    auto    r      = mpirun(one_host() + stack + kP2p);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("p2p OK 72 checks on 2 ranks"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("the doorbell btl stays closed"), std::string::npos) << r.out;
    Traffic d = delta(before, traffic());
    EXPECT_LT(d.loopback[0], kLoopbackQuiet) << "h1's ranks did not keep to shared memory";

    before = traffic();
    r      = mpirun("-np 4 " + stack + kP2p);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("p2p OK 432 checks on 4 ranks"), std::string::npos) << r.out;
    d = delta(before, traffic());
    std::regex line("btl:doorbell \\S+ fab0 stats: .* tx_packets ([0-9]+) rx_packets ([0-9]+) ");
    int        modules = 0;
    for (std::sregex_iterator it(r.out.begin(), r.out.end(), line), end; it != end; ++it) {
        EXPECT_GT(std::stol((*it)[1].str()), 0) << r.out;
        EXPECT_GT(std::stol((*it)[2].str()), 0) << r.out;
        ++modules;
    }
    EXPECT_EQ(modules, 4) << r.out;
    EXPECT_LT(d.loopback[0], kLoopbackQuiet) << "h1's ranks exchanged packets";
    EXPECT_LT(d.loopback[1], kLoopbackQuiet) << "h2's ranks exchanged packets";
    EXPECT_GT(d.spine, kSpineCrossed) << "too little crossed the spine";
}

// One-sided MPI through the tune file on 2 hosts x 2 ranks. By default the
// doorbell osc component claims the window (its group spans hosts) for osc
// pt2pt, whose operations are ob1 messages: every rank's window traffic goes
// over the doorbell btl as sends (the 1 MiB put and get as rendezvous reads),
// no btl atomic runs, the bytes cross the spine. With
// osc_doorbell_across_hosts rdma, osc rdma runs the window on the doorbell
// btl's puts, gets and atomics (the only btl that reaches every rank of it,
// itself and its host's ranks included). Both end with the windows of ob1
// over tcp with osc pt2pt, what a user can run across hosts without doorbell
// (plain mpirun has no one-sided component across hosts on Debian:
// MPI_Win_allocate fails).
TEST_F(FabricHosts, OneSidedRunsOnTheDoorbellBtl)
{
    const std::string tune = kInstall + "/share/doorbell/doorbell.tune";
    const std::string rma  = DOORBELL_RMA_CHECK;
    if (rma.empty() || !std::filesystem::exists(tune) ||
        !std::filesystem::exists(kInstall + "/lib/openmpi/mca_btl_doorbell.so") ||
        !std::filesystem::exists(kInstall + "/lib/openmpi/mca_osc_doorbell.so"))
        GTEST_SKIP() << "the btl, the osc component, the one-sided check or the tune file is "
                        "not installed";
    const std::regex  line("btl:doorbell \\S+ fab0 stats: sends ([0-9]+) sendis ([0-9]+) .* "
                            "recvs ([0-9]+) recv_bytes [0-9]+ puts ([0-9]+) put_bytes [0-9]+ gets "
                            "([0-9]+) get_bytes [0-9]+ atomics ([0-9]+) ");
    const std::string claimed = "spans hosts: osc pt2pt";

    Traffic before = traffic();
    auto    r      = mpirun("-np 4 --tune " + tune +
                            " --mca btl_doorbell_stats 1 --mca osc_base_verbose 10 " + rma + " self");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("rma-check: 4 ranks, 0 errors"), std::string::npos) << r.out;
    Traffic d       = delta(before, traffic());
    int     modules = 0, claims = 0;
    for (std::sregex_iterator it(r.out.begin(), r.out.end(), line), end; it != end; ++it) {
        EXPECT_GT(std::stol((*it)[1].str()) + std::stol((*it)[2].str()), 0) << "sends\n" << r.out;
        EXPECT_GT(std::stol((*it)[3].str()), 0) << "recvs\n" << r.out;
        EXPECT_GT(std::stol((*it)[5].str()), 0) << "rendezvous reads\n" << r.out;
        EXPECT_EQ(std::stol((*it)[6].str()), 0) << "btl atomics under osc pt2pt\n" << r.out;
        ++modules;
    }
    for (size_t at = r.out.find(claimed); at != std::string::npos; at = r.out.find(claimed, at + 1))
        ++claims;
    EXPECT_EQ(modules, 4) << r.out;
    EXPECT_GE(claims, 4) << "every rank's window goes to osc pt2pt\n" << r.out;
    EXPECT_GT(d.spine, kSpineCrossed) << "too little crossed the spine";

    auto rdma = mpirun("-np 4 --tune " + tune + " --mca osc_doorbell_across_hosts rdma " +
                       "--mca btl_doorbell_stats 1 --mca osc_base_verbose 10 " + rma + " self");
    ASSERT_EQ(rdma.rc, 0) << rdma.out;
    EXPECT_NE(rdma.out.find("rma-check: 4 ranks, 0 errors"), std::string::npos) << rdma.out;
    EXPECT_EQ(rdma.out.find(claimed), std::string::npos) << rdma.out;
    modules = 0;
    for (std::sregex_iterator it(rdma.out.begin(), rdma.out.end(), line), end; it != end; ++it) {
        EXPECT_GT(std::stol((*it)[4].str()), 0) << "puts\n" << rdma.out;
        EXPECT_GT(std::stol((*it)[5].str()), 0) << "gets\n" << rdma.out;
        EXPECT_GT(std::stol((*it)[6].str()), 0) << "atomics\n" << rdma.out;
        ++modules;
    }
    EXPECT_EQ(modules, 4) << rdma.out;

    auto ref = mpirun("-np 4 --mca pml ob1 --mca btl self,vader,tcp --mca osc pt2pt " + rma +
                      " self");
    ASSERT_EQ(ref.rc, 0) << ref.out;
    std::smatch a, b, c;
    ASSERT_TRUE(std::regex_search(r.out, a, std::regex("digest ([0-9a-f]{16})"))) << r.out;
    ASSERT_TRUE(std::regex_search(rdma.out, c, std::regex("digest ([0-9a-f]{16})"))) << rdma.out;
    ASSERT_TRUE(std::regex_search(ref.out, b, std::regex("digest ([0-9a-f]{16})"))) << ref.out;
    EXPECT_EQ(a[1].str(), b[1].str()) << r.out << ref.out;
    EXPECT_EQ(c[1].str(), b[1].str()) << rdma.out << ref.out;
}

} // namespace
} // namespace doorbell::fabric_test
