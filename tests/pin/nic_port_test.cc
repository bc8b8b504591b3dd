// Which port of a NIC doorbell-pin exec hands to UCX (UCX_NET_DEVICES).
#include <gtest/gtest.h>

#include "pin_test_util.h"
#include "pinning/nic_port.h"

using namespace doorbell::pin;
using namespace pin_test;

namespace {

void add_port(const ScratchDir &d, int n, const std::string &state)
{
    write_file(d.path() / "sys/class/infiniband/mlx5_0/ports" / std::to_string(n) / "state",
               state + "\n");
}

} // namespace

TEST(NicPort, TheLowestActivePort)
{
    ScratchDir d;
    add_port(d, 1, "1: DOWN");
    add_port(d, 3, "4: ACTIVE");
    add_port(d, 2, "4: ACTIVE");
    NicPort p = ucx_port_for(d.path().string(), "mlx5_0");
    EXPECT_EQ(p.port, 2);
    EXPECT_NE(p.why.find("ACTIVE"), std::string::npos) << p.why;
}

TEST(NicPort, NoneActiveMeansTheLowestListed)
{
    ScratchDir d;
    add_port(d, 2, "1: DOWN");
    add_port(d, 5, "2: INIT");
    write_file(d.path() / "sys/class/infiniband/mlx5_0/ports/x/state", "4: ACTIVE\n"); // not a port
    EXPECT_EQ(ucx_port_for(d.path().string(), "mlx5_0").port, 2);
}

TEST(NicPort, NoSysfsMeansPortOne)
{
    ScratchDir d;
    NicPort    p = ucx_port_for(d.path().string(), "eth0");
    EXPECT_EQ(p.port, 1);
    EXPECT_NE(p.why.find("no ports"), std::string::npos) << p.why;
}
