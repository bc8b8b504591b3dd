// ucx_info sees the preloaded module: the transport and its devices, its
// configuration variables with their documentation, and a UCX_NET_DEVICES
// naming a device that does not exist.
#include <gtest/gtest.h>

#include "doorbell_core.h"
#include "doorbell_spawn.h"

#include <cstdlib>

using namespace doorbell_test;

namespace {

const std::string kPreload = std::string("LD_PRELOAD=") + DOORBELL_UCT_MODULE;

TEST(UcxInfo, ListsTransportOnLoopback)
{
    Child c = run({"ucx_info", "-d"}, {kPreload});
    ASSERT_EQ(c.status, 0) << c.output;
    EXPECT_TRUE(contains(c.output, "Component: doorbell")) << c.output;
    EXPECT_TRUE(contains(c.output, "Transport: doorbell")) << c.output;
    // The transport's devices are the host's IPv4 netdevs; lo always has one.
    auto tl = c.output.find("Transport: doorbell");
    ASSERT_NE(tl, std::string::npos);
    auto dev = c.output.find("Device: lo", tl);
    EXPECT_NE(dev, std::string::npos) << c.output;
    EXPECT_TRUE(contains(c.output, "put_zcopy")) << c.output;
    EXPECT_TRUE(contains(c.output, "get_zcopy")) << c.output;
    EXPECT_TRUE(contains(c.output, "am_short")) << c.output;
    EXPECT_TRUE(contains(c.output, "to iface")) << c.output;
}

TEST(UcxInfo, WithoutPreloadTransportIsAbsent)
{
    Child c = run({"ucx_info", "-d"}, {"LD_PRELOAD="});
    ASSERT_EQ(c.status, 0) << c.output;
    EXPECT_FALSE(contains(c.output, "Transport: doorbell")) << c.output;
}

TEST(UcxInfo, ShowsDocumentedVariables)
{
    Child c = run({"ucx_info", "-c", "-f"}, {kPreload});
    ASSERT_EQ(c.status, 0) << c.output;
    for (const char *var :
         {"UCX_DOORBELL_TX_BATCH=64", "UCX_DOORBELL_TX_MODERATION=64",
          "UCX_DOORBELL_MTU=", "UCX_DOORBELL_SEG_SIZE=", "UCX_DOORBELL_TX_QUEUE_LEN=",
          "UCX_DOORBELL_RX_QUEUE_LEN=", "UCX_DOORBELL_AM_CREDITS=", "UCX_DOORBELL_RTO_MIN=",
          "UCX_DOORBELL_RTO_MAX=", "UCX_DOORBELL_RETRY_COUNT=", "UCX_DOORBELL_CC=auto",
          "UCX_DOORBELL_IBRC_GAIN=auto", "UCX_DOORBELL_STATS=n"})
        EXPECT_TRUE(contains(c.output, var)) << var;
    EXPECT_TRUE(contains(c.output, "Largest number of work requests one doorbell covers"))
        << c.output;
}

/// The value ucx_info prints for UCX_DOORBELL_<name>, or "" if absent.
std::string config_value(const std::string &output, const std::string &name)
{
    std::string key = "UCX_DOORBELL_" + name + "=";
    size_t      at  = output.find(key);
    if (at == std::string::npos) {
        return "";
    }
    at += key.size();
    return output.substr(at, output.find('\n', at) - at);
}

TEST(UcxInfo, DefaultsAreTheCoresDefaults)
{
    // One source (doorbell_defaults.h): what UCX prints for the transport's
    // defaults parses back to doorbell_iface_params_init()'s values.
    Child c = run({"ucx_info", "-c", "-f"}, {kPreload});
    ASSERT_EQ(c.status, 0) << c.output;
    doorbell_iface_params_t p;
    doorbell_iface_params_init(&p);
    auto number = [&](const char *name) {
        return std::strtoull(config_value(c.output, name).c_str(), nullptr, 10);
    };
    EXPECT_EQ(p.tx_batch, number("TX_BATCH"));
    EXPECT_EQ(p.tx_moderation, number("TX_MODERATION"));
    EXPECT_EQ(p.tx_queue_len, number("TX_QUEUE_LEN"));
    EXPECT_EQ(p.rx_queue_len, number("RX_QUEUE_LEN"));
    EXPECT_EQ(p.am_credits, number("AM_CREDITS"));
    EXPECT_EQ(p.retry_count, number("RETRY_COUNT"));
    /* memory units as UCX prints them: "8K" */
    std::string seg = config_value(c.output, "SEG_SIZE");
    char       *unit;
    uint64_t    bytes = std::strtoull(seg.c_str(), &unit, 10);
    bytes <<= *unit == 'K' ? 10 : *unit == 'M' ? 20 : 0;
    EXPECT_EQ(p.seg_size, bytes) << seg;
    /* times as UCX prints them: "50000.00us" */
    for (auto [name, ns] :
         {std::pair{"RTO_MIN", p.rto_min_ns}, std::pair{"RTO_MAX", p.rto_max_ns}}) {
        std::string t = config_value(c.output, name);
        EXPECT_EQ(double(ns), std::strtod(t.c_str(), nullptr) * 1e3) << name << "=" << t;
    }
    EXPECT_EQ(std::string(p.cc), config_value(c.output, "CC"));
}

TEST(UcxInfo, ConfigValueIsParsed)
{
    Child c = run({"ucx_info", "-c", "-f"}, {kPreload, "UCX_DOORBELL_TX_BATCH=16"});
    ASSERT_EQ(c.status, 0) << c.output;
    EXPECT_TRUE(contains(c.output, "UCX_DOORBELL_TX_BATCH=16")) << c.output;
}

TEST(UcxInfo, MissingNetDeviceSelectsNothingAndDoesNotCrash)
{
    // UCP filters network devices by UCX_NET_DEVICES; a name that does not
    // exist leaves no doorbell resource and UCX says which device is missing.
    Child c = run({"ucx_info", "-e", "-u", "t"},
                  {kPreload, "UCX_TLS=doorbell", "UCX_NET_DEVICES=nosuchdev0"});
    EXPECT_EQ(c.signal, 0) << "killed by a signal:\n" << c.output;
    EXPECT_NE(c.status, 0) << c.output;
    // The module loaded (UCX offers its devices) but none was selected.
    EXPECT_TRUE(contains(c.output, "network device 'nosuchdev0' is not available")) << c.output;
    EXPECT_TRUE(contains(c.output, "'lo'(doorbell)")) << c.output;
    EXPECT_TRUE(contains(c.output, "no usable transports")) << c.output;
}

} // namespace
