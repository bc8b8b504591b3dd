#include "fabric_test.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <regex>
#include <sstream>

namespace doorbell::fabric_test {

CmdResult run(const std::string &cmdline)
{
    CmdResult r{-1, ""};
    FILE     *p = popen((cmdline + " 2>&1").c_str(), "r");
    if (!p)
        return r;
    std::array<char, 4096> buf;
    size_t                 n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
        r.out.append(buf.data(), n);
    int status = pclose(p);
    r.rc       = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

std::string cannot_build_fabric()
{
    if (geteuid() != 0)
        return "needs root (network namespaces, veth, tc)";
    if (run("command -v ip && command -v tc").rc != 0)
        return "iproute2 (ip, tc) is not installed";
    if (run("command -v clang").rc != 0)
        return "clang is not installed (the BPF ECN marker is built with it)";
    if (run("command -v ethtool").rc != 0)
        return "ethtool is not installed (a host's NIC is set to cut UDP GSO packets with it)";
    // A namespace with a veth pair inside, made and removed in a child.
    pid_t pid = fork();
    if (pid == 0) {
        if (unshare(CLONE_NEWNET) != 0)
            _exit(1);
        _exit(system("ip link add dbprobe0 type veth peer name dbprobe1 >/dev/null 2>&1") == 0 ? 0 :
                                                                                                 2);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0)
        return "fork failed";
    if (!WIFEXITED(status) || WEXITSTATUS(status) == 1)
        return "network namespaces are unavailable (unshare(CLONE_NEWNET) failed)";
    if (WEXITSTATUS(status) != 0)
        return "veth pairs cannot be created (no veth support)";
    return "";
}

std::string unique_name(char tag)
{
    return "dbt" + std::to_string(getpid() % 1000000) + tag;
}

std::string tool(const std::string &name)
{
    return std::string(DOORBELL_FABRIC_TOOL) + " --name " + name;
}

Fabric::~Fabric()
{
    run(tool(name_) + " down");
}

CmdResult Fabric::up(const std::string &options)
{
    return run(tool(name_) + " up " + options);
}

CmdResult Fabric::mpirun(const std::string &mpirun_args, int timeout_s)
{
    return run("timeout -k 5 " + std::to_string(timeout_s) + " " + tool(name_) + " run -- " +
               mpirun_args);
}

CmdResult Fabric::exec(const std::string &host, const std::string &command)
{
    return run(tool(name_) + " exec " + host + " -- sh -c '" + command + "'");
}

std::vector<std::string> Fabric::hosts()
{
    std::vector<std::string> v;
    std::istringstream       in(run(tool(name_) + " hosts").out);
    for (std::string line; std::getline(in, line);)
        if (!line.empty())
            v.push_back(line);
    return v;
}

int socket_in_netns(const std::string &ns, int domain, int type)
{
    int self   = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int target = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    int fd = -1, saved = 0;
    if (self >= 0 && target >= 0 && setns(target, CLONE_NEWNET) == 0) {
        fd    = socket(domain, type, 0);
        saved = errno;
        if (setns(self, CLONE_NEWNET) != 0) { // never keep the test in the fabric
            if (fd >= 0)
                close(fd);
            fd    = -1;
            saved = errno;
        }
    } else {
        saved = errno;
    }
    if (self >= 0)
        close(self);
    if (target >= 0)
        close(target);
    errno = saved;
    return fd;
}

long long spine_bytes(const Fabric &f)
{
    long long total = 0;
    for (const char *leaf : {"l1", "l2"})
        for (const char *dev : {"s1", "s2"}) {
            auto r = run("ip netns exec " + f.ns(leaf) + " tc -s qdisc show dev " + dev + " root");
            std::smatch m;
            if (std::regex_search(r.out, m, std::regex("Sent ([0-9]+) bytes")))
                total += std::stoll(m[1]);
        }
    return total;
}

long long loopback_bytes(const Fabric &f, const std::string &host)
{
    auto r = run("ip netns exec " + f.ns(host) + " cat /sys/class/net/lo/statistics/tx_bytes");
    return r.rc == 0 ? std::stoll(r.out) : -1;
}

long long doorbell_counter(const std::string &out, const std::string &counter)
{
    long long  total = -1;
    std::regex line("^\\S+ " + counter + " ([0-9]+)$", std::regex::multiline);
    for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
         ++it)
        total = (total < 0 ? 0 : total) + std::stoll((*it)[1]);
    return total;
}

} // namespace doorbell::fabric_test
