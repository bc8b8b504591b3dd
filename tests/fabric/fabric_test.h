// Helpers of the fabric tests: run the tool, own a fabric for one test, open
// sockets inside a host namespace.
#pragma once

#include <string>
#include <vector>

namespace doorbell::fabric_test {

struct CmdResult {
    int         rc;  ///< exit status, or -1 when it did not exit normally
    std::string out; ///< stdout and stderr together
};

/// Runs a shell command line and collects its output.
CmdResult run(const std::string &cmdline);

/// Empty when this process can build fabrics; otherwise why not (no root,
/// no network namespaces, no veth, no clang for the marker).
std::string cannot_build_fabric();

/// A unique fabric name for this test process (tests may run in parallel).
std::string unique_name(char tag);

/// `doorbell-fabric --name N ...` as a shell command prefix.
std::string tool(const std::string &name);

/// Owns one fabric: brought up by up(), torn down by the destructor.
class Fabric {
public:
    explicit Fabric(char tag) : name_(unique_name(tag)) {}
    ~Fabric();
    Fabric(const Fabric &)            = delete;
    Fabric &operator=(const Fabric &) = delete;

    /// `up` with the given options; the result for the caller to assert on.
    CmdResult up(const std::string &options = "");
    /// `run -- mpirun_args`, bounded by timeout_s.
    CmdResult mpirun(const std::string &mpirun_args, int timeout_s = 120);
    /// `exec host -- sh -c command` (host: h1, an address or a hostname).
    CmdResult                exec(const std::string &host, const std::string &command);
    std::vector<std::string> hosts();
    const std::string       &name() const { return name_; }
    std::string              ns(const std::string &node) const { return name_ + "-" + node; }

private:
    std::string name_;
};

/// A socket created inside network namespace `ns` (it stays there); -1 and
/// errno on failure.
int socket_in_netns(const std::string &ns, int domain, int type);

/// Bytes the leaves l1, l2 sent up to the spines s1, s2 (tbf counters).
long long spine_bytes(const Fabric &f);

/// Bytes sent on the loopback of a host namespace (h1...): what two processes
/// of one host exchange over TCP or UDP, even to the host's fabric address.
long long loopback_bytes(const Fabric &f, const std::string &host);

/// Sum of one counter over every doorbell interface's dump in a job's output
/// (UCX_DOORBELL_STATS=y: "<iface> <counter> <value>" per line); -1 if none.
long long doorbell_counter(const std::string &out, const std::string &counter);

} // namespace doorbell::fabric_test
