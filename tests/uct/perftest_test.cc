// ucx_perftest between two processes over doorbell on lo: every UCT
// operation the transport offers and UCP tag matching (eager and rendezvous)
// run to completion. Numbers are not checked here (scripts/bench-p2p.sh).
#include <gtest/gtest.h>

#include "doorbell_spawn.h"

using namespace doorbell_test;

namespace {

struct PerfCase {
    const char              *name;
    std::vector<std::string> args; ///< test arguments, given to the client
};

std::ostream &operator<<(std::ostream &os, const PerfCase &c)
{
    return os << c.name;
}

const std::vector<std::string> kUct = {"-x", "doorbell", "-d", "lo"};

std::vector<std::string> uct(std::vector<std::string> args)
{
    args.insert(args.end(), kUct.begin(), kUct.end());
    return args;
}

// clang-format off
const PerfCase kCases[] = {
    {"am_short_lat", uct({"-t", "am_lat", "-D", "short", "-s", "8", "-n", "2000"})},
    {"am_bcopy_bw", uct({"-t", "am_bw", "-D", "bcopy", "-s", "4096", "-n", "2000"})},
    {"am_zcopy_bw", uct({"-t", "am_bw", "-D", "zcopy", "-s", "4096", "-n", "2000"})},
    {"put_short_lat", uct({"-t", "put_lat", "-D", "short", "-s", "8", "-n", "2000"})},
    {"put_bcopy_bw", uct({"-t", "put_bw", "-D", "bcopy", "-s", "4096", "-n", "2000"})},
    {"put_zcopy_bw", uct({"-t", "put_bw", "-D", "zcopy", "-s", "65536", "-n", "500"})},
    {"get_bcopy", uct({"-t", "get", "-D", "bcopy", "-s", "1024", "-n", "1000"})},
    {"get_zcopy", uct({"-t", "get", "-D", "zcopy", "-s", "65536", "-n", "500"})},
    {"ucp_tag_lat", {"-t", "tag_lat", "-s", "8", "-n", "2000"}},
    {"ucp_tag_bw_eager", {"-t", "tag_bw", "-s", "4096", "-n", "2000"}},
    // several eager zcopy fragments per message (UCP's 24-byte first header)
    {"ucp_tag_bw_eager_multi", {"-t", "tag_bw", "-s", "20000", "-n", "500"}},
    {"ucp_tag_bw_rndv", {"-t", "tag_bw", "-s", "1048576", "-n", "100"}},
};
// clang-format on

class Perftest : public ::testing::TestWithParam<PerfCase> {};

TEST_P(Perftest, RunsToCompletion)
{
    const PerfCase                &pc  = GetParam();
    const std::vector<std::string> env = {std::string("LD_PRELOAD=") + DOORBELL_UCT_MODULE,
                                          "UCX_TLS=doorbell", "UCX_NET_DEVICES=lo",
                                          "UCX_WARN_UNUSED_ENV_VARS=n"};
    // timeout(1) bounds a hang; the test then fails with its output.
    const std::vector<std::string> guard = {"timeout", "-k", "5", "60"};

    // ucx_perftest takes a port number, not a listening socket: the port
    // reserved here can be taken by another process's connection before the
    // server binds it. Only that case is tried again, with another port.
    Child server, client;
    for (int bind_attempt = 0; bind_attempt < 5; ++bind_attempt) {
        const std::string port = std::to_string(reserve_port());

        std::vector<std::string> server_argv = guard;
        server_argv.insert(server_argv.end(), {"ucx_perftest", "-p", port});
        server = spawn(server_argv, env);

        std::vector<std::string> client_argv = guard;
        client_argv.insert(client_argv.end(),
                           {"ucx_perftest", "127.0.0.1", "-p", port, "-w", "100", "-f"});
        client_argv.insert(client_argv.end(), pc.args.begin(), pc.args.end());

        // The server may not listen yet: retry the client while its connect
        // is refused and the server is still alive.
        for (int attempt = 0; attempt < 1000; ++attempt) {
            client = run(client_argv, env);
            if (client.status == 0 || !contains(client.output, "Connection refused") ||
                exited(server))
                break;
        }
        wait_all({&server});
        if (!contains(server.output, "bind() failed: Address already in use"))
            break;
    }

    EXPECT_EQ(client.status, 0) << "client:\n" << client.output << "\nserver:\n" << server.output;
    EXPECT_EQ(server.status, 0) << "server:\n" << server.output;
    EXPECT_TRUE(contains(client.output, "# iterations")) << client.output;
}

INSTANTIATE_TEST_SUITE_P(Doorbell, Perftest, ::testing::ValuesIn(kCases),
                         [](const auto &info) { return std::string(info.param.name); });

} // namespace
