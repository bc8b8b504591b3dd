// The fabric comes up routed, is idempotent, and goes down (also after a
// failed or interrupted set-up) leaving no namespace, veth, tc or BPF state,
// no process (the hosts' init processes) and no mount.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>

#include "fabric_test.h"

namespace doorbell::fabric_test {
namespace {

class FabricLifecycle : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (std::string why = cannot_build_fabric(); !why.empty())
            GTEST_SKIP() << why;
    }
};

// Namespaces of fabric `name` that exist now.
std::vector<std::string> namespaces_of(const std::string &name)
{
    std::vector<std::string> v;
    std::istringstream       in(run("ip netns list | awk '{print $1}'").out);
    for (std::string ns; std::getline(in, ns);)
        if (ns.rfind(name + "-", 0) == 0)
            v.push_back(ns);
    return v;
}

// Ids of the BPF programs attached to the shaped ports of a 2x2 fabric.
std::vector<std::string> marker_ids(const Fabric &f)
{
    std::vector<std::string> ids;
    for (const char *port :
         {"l1 s1", "l1 s2", "l2 s1", "l2 s2", "s1 l1", "s1 l2", "s2 l1", "s2 l2"}) {
        std::istringstream p(port);
        std::string        node, dev;
        p >> node >> dev;
        auto        r  = run("ip netns exec " + f.ns(node) + " tc filter show dev " + dev +
                             " egress | sed -n 's/.* id \\([0-9]*\\).*/\\1/p'");
        std::string id = r.out.substr(0, r.out.find('\n'));
        if (!id.empty())
            ids.push_back(id);
    }
    return ids;
}

// What the root namespace holds; a fabric must never change it. The mount of
// /run/netns is left out: iproute2 bind-mounts that folder onto itself the
// first time any namespace is added after boot and keeps it there by design
// (on a fresh machine this test may be the first to add one).
std::string root_netns_state()
{
    return run("ip -o link show | awk '{print $2}'; tc qdisc show; "
               "awk '$2 != \"/run/netns\"' /proc/self/mounts")
        .out;
}

// Processes whose command line names a host of fabric `name` (its init's
// does: "doorbell-fabric-init NAME-h1 ..."), with their command lines.
std::string host_processes(const std::string &name)
{
    const std::string pattern = "*'" + name + "-h'[0-9]*";
    return run("for p in /proc/[0-9]*; do c=$(tr '\\0' ' ' 2>/dev/null < $p/cmdline); case $c in " +
               pattern + ") echo \"${p#/proc/}: $c\" ;; esac; done")
        .out;
}

TEST_F(FabricLifecycle, UpIsRoutedAndIdempotentDownLeavesNothing)
{
    const std::string        root_before = root_netns_state();
    std::vector<std::string> ids;
    {
        Fabric f('a');
        auto   up = f.up();
        ASSERT_EQ(up.rc, 0) << up.out;
        EXPECT_EQ(namespaces_of(f.name()).size(), 9u) << "4 hosts, 2 leaves, 2 spines, login";
        auto hosts = f.hosts();
        ASSERT_EQ(hosts.size(), 4u);
        for (const auto &h : hosts)
            EXPECT_EQ(h.rfind("198.18.", 0), 0u) << h << " outside 198.18.0.0/15";

        // h1 (leaf 1) reaches h4 (leaf 2) through a spine.
        auto ping = run(tool(f.name()) + " exec h1 -- ping -c 1 -W 2 " + hosts[3]);
        EXPECT_EQ(ping.rc, 0) << ping.out;
        auto trace = run(tool(f.name()) + " exec h1 -- ip route get " + hosts[3]);
        EXPECT_NE(trace.out.find("fab0"), std::string::npos) << trace.out;
        // The login node (mpirun's) reaches the last host too.
        auto login = run("ip netns exec " + f.ns("login") + " ping -c 1 -W 2 " + hosts[3]);
        EXPECT_EQ(login.rc, 0) << login.out;
        // Every host runs its init, and a hostfile of one slot per host.
        EXPECT_NE(host_processes(f.name()), "");
        auto hostfile = run("cat /run/doorbell-fabric/" + f.name() + "/hostfile");
        EXPECT_EQ(hostfile.out, hosts[0] + " slots=1\n" + hosts[1] + " slots=1\n" + hosts[2] +
                                    " slots=1\n" + hosts[3] + " slots=1\n");
        // Which hosts share a leaf, for coll_doorbell_topology_file.
        auto leaves = run("grep -v '^#' /run/doorbell-fabric/" + f.name() + "/leaves");
        EXPECT_EQ(leaves.out, f.ns("h1") + " " + f.ns("l1") + "\n" + f.ns("h2") + " " + f.ns("l1") +
                                  "\n" + f.ns("h3") + " " + f.ns("l2") + "\n" + f.ns("h4") + " " +
                                  f.ns("l2") + "\n");

        // Every shaped port has its marker and a tbf root.
        ids = marker_ids(f);
        EXPECT_EQ(ids.size(), 8u);
        auto q = run("ip netns exec " + f.ns("l1") + " tc qdisc show dev s1");
        EXPECT_NE(q.out.find("tbf"), std::string::npos) << q.out;
        EXPECT_NE(q.out.find("clsact"), std::string::npos) << q.out;
        // Every host's NIC cuts UDP GSO packets into datagrams on the way out
        // (the switches see datagrams), and keeps TCP's segmentation.
        for (const char *h : {"h1", "h4"}) {
            auto k = run("ip netns exec " + f.ns(h) + " ethtool -k fab0");
            EXPECT_NE(k.out.find("tx-udp-segmentation: off"), std::string::npos) << h << k.out;
            EXPECT_NE(k.out.find("tx-tcp-segmentation: on"), std::string::npos) << h << k.out;
        }

        // A second `up` with the same options changes nothing.
        auto again = f.up();
        ASSERT_EQ(again.rc, 0) << again.out;
        EXPECT_NE(again.out.find("already up"), std::string::npos) << again.out;
        EXPECT_EQ(marker_ids(f), ids);

        auto down = run(tool(f.name()) + " down");
        ASSERT_EQ(down.rc, 0) << down.out;
        EXPECT_TRUE(namespaces_of(f.name()).empty());
        EXPECT_EQ(host_processes(f.name()), "") << "processes of the hosts remain";
        EXPECT_FALSE(std::filesystem::exists("/run/doorbell-fabric/" + f.name()));
        auto status = run(tool(f.name()) + " status");
        EXPECT_NE(status.rc, 0);
        EXPECT_NE(status.out.find("not up"), std::string::npos) << status.out;
    }
    // The kernel freed the markers with their namespaces.
    if (run("command -v bpftool").rc == 0) {
        for (const auto &id : ids)
            EXPECT_NE(run("bpftool prog show id " + id).rc, 0) << "program " << id << " remains";
    }
    EXPECT_EQ(root_netns_state(), root_before);
}

TEST_F(FabricLifecycle, UpWithOtherOptionsRebuilds)
{
    Fabric f('b');
    ASSERT_EQ(f.up().rc, 0);
    auto r = f.up("--spines 1 --hosts-per-leaf 3");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("rebuilding"), std::string::npos) << r.out;
    EXPECT_EQ(namespaces_of(f.name()).size(), 10u) << "6 hosts, 2 leaves, 1 spine, login";
    EXPECT_EQ(f.hosts().size(), 6u);
    // Ranks per host (--slots is the older name) are the hostfile's slots.
    r = f.up("--spines 1 --hosts-per-leaf 3 --slots 3");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("rebuilding"), std::string::npos) << r.out;
    auto hostfile = run("cat /run/doorbell-fabric/" + f.name() + "/hostfile");
    EXPECT_NE(hostfile.out.find(f.hosts()[5] + " slots=3\n"), std::string::npos) << hostfile.out;
    EXPECT_EQ(hostfile.out.find("slots=1"), std::string::npos) << hostfile.out;
    // The shaped ports' token bucket: 8 KiB by default, one frame with
    // "line" (tc prints it back from a time, rounded: 8175b, 1500b).
    auto bucket = [&] { return run("ip netns exec " + f.name() + "-l1 tc qdisc show dev s1").out; };
    const std::regex kib8("burst 81[0-9][0-9]b"), frame("burst 1[45][0-9][0-9]b");
    EXPECT_TRUE(std::regex_search(bucket(), kib8)) << bucket();
    r = f.up("--spines 1 --hosts-per-leaf 3 --slots 3 --burst line");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("rebuilding"), std::string::npos) << r.out;
    EXPECT_TRUE(std::regex_search(bucket(), frame)) << bucket();
}

TEST_F(FabricLifecycle, FailedSetUpLeavesNothingBehind)
{
    // A clang that fails makes the set-up fail after the namespaces and veths exist.
    char dir[] = "/tmp/dbfab-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    ASSERT_EQ(run(std::string("printf '#!/bin/sh\\nexit 1\\n' > ") + dir + "/clang && chmod +x " +
                  dir + "/clang")
                  .rc,
              0);
    Fabric f('c');
    auto   r = run("PATH=" + std::string(dir) + ":$PATH " + tool(f.name()) + " up");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.out.find("building the BPF ECN marker failed"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("tearing down"), std::string::npos) << r.out;
    EXPECT_TRUE(namespaces_of(f.name()).empty());
    EXPECT_EQ(host_processes(f.name()), "") << "the hosts started before the failure remain";
    EXPECT_FALSE(std::filesystem::exists("/run/doorbell-fabric/" + f.name()));
    std::filesystem::remove_all(dir);
}

TEST_F(FabricLifecycle, InterruptedSetUpLeavesNothingBehind)
{
    // Ctrl-C half-way: a clang that interrupts the whole job (its process group).
    char dir[] = "/tmp/dbfab-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    ASSERT_EQ(
        run(std::string(
                "printf '#!/bin/sh\\nkill -INT -- -$(ps -o pgid= -p $$ | tr -d \" \")\\nexit 1\\n' > ") +
            dir + "/clang && chmod +x " + dir + "/clang")
            .rc,
        0);
    Fabric f('d');
    auto   r = run("PATH=" + std::string(dir) + ":$PATH setsid -w " + tool(f.name()) + " up");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.out.find("tearing down"), std::string::npos) << r.out;
    EXPECT_TRUE(namespaces_of(f.name()).empty());
    EXPECT_EQ(host_processes(f.name()), "") << "the hosts started before the interruption remain";
    std::filesystem::remove_all(dir);
}

TEST(FabricRefusal, RefusesClearlyWhenNotRoot)
{
    std::string prefix;
    if (geteuid() == 0) {
        if (run("command -v setpriv").rc != 0)
            GTEST_SKIP() << "setpriv (util-linux) is not installed";
        prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
    }
    auto r = run(prefix + tool(unique_name('e')) + " up");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.out.find("must run as root"), std::string::npos) << r.out;
}

TEST(FabricRefusal, RejectsBadOptions)
{
    auto r = run(tool(unique_name('f')) + " up --ecn-k 200k --buffer 100k");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.out.find("must be below the buffer"), std::string::npos) << r.out;
    r = run(tool(unique_name('f')) + " up --spine-rate fast");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.out.find("bad rate"), std::string::npos) << r.out;
    r = run(tool(unique_name('f')) + " up --burst 1000");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.out.find("must hold one frame"), std::string::npos) << r.out;
}

} // namespace
} // namespace doorbell::fabric_test
