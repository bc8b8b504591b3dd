/* Discovery: every active port of every device, and nothing without one. */
#include "verbs_pair.h"

#include <cstring>

using namespace doorbell;
using namespace doorbell::test;

namespace {

std::vector<doorbell_device_info_t> verbs_devices()
{
    int                                 n = doorbell_query_devices(nullptr, 0);
    std::vector<doorbell_device_info_t> all(size_t(n) + 4);
    n = doorbell_query_devices(all.data(), int(all.size()));
    all.resize(size_t(std::min<int>(n, int(all.size()))));
    std::vector<doorbell_device_info_t> out;
    for (auto &d : all) {
        if (d.kind == DOORBELL_DEVICE_VERBS) {
            out.push_back(d);
        }
    }
    return out;
}

} // namespace

TEST(VerbsDiscovery, ListsActivePortsWithLinkLayerAddressesAndSpeed)
{
    verbs::fake::Fabric    fabric;
    verbs::fake::HcaConfig ib;
    ib.name = "mlx5_0";
    ib.lid  = 0x12;
    verbs::fake::HcaConfig roce;
    roce.name = "mlx5_1";
    roce.roce = true;
    verbs::fake::HcaConfig down;
    down.name        = "mlx5_2";
    down.port_active = false;
    fabric.add_hca(ib);
    fabric.add_hca(roce);
    fabric.add_hca(down);
    fabric.install();

    auto devs = verbs_devices();
    ASSERT_EQ(2u, devs.size());
    EXPECT_STREQ("mlx5_0:1", devs[0].name);
    EXPECT_STREQ("IB", devs[0].link_layer);
    EXPECT_EQ(0x12, devs[0].lid);
    EXPECT_EQ(0xfe, devs[0].gid[0]);
    EXPECT_EQ(4096u, devs[0].mtu);
    EXPECT_DOUBLE_EQ(200e9 / 8, devs[0].bandwidth); /* 4x HDR lanes */

    EXPECT_STREQ("mlx5_1:1", devs[1].name);
    EXPECT_STREQ("RoCE", devs[1].link_layer);
    EXPECT_EQ(1024u, devs[1].mtu);
    /* RoCE picks the IPv4-mapped GID (index 1 on the fake) */
    EXPECT_EQ(0xff, devs[1].gid[10]);
    EXPECT_EQ(10, devs[1].gid[12]);

    /* the names open; an inactive or unknown port does not */
    EXPECT_TRUE(verbs::is_verbs_name("mlx5_0:1"));
    EXPECT_FALSE(verbs::is_verbs_name("mlx5_9:1"));
    EXPECT_FALSE(verbs::is_verbs_name("mlx5_0"));
    doorbell_pd_t *pd;
    ASSERT_EQ(DOORBELL_OK, doorbell_pd_create(&pd));
    auto              p     = verbs_params("mlx5_2:1");
    doorbell_iface_t *iface = nullptr;
    EXPECT_EQ(DOORBELL_ERR_NO_DEVICE, doorbell_iface_open(pd, &p, &iface));
    EXPECT_NE(nullptr, strstr(doorbell_last_error(), "mlx5_2:1"));
    p = verbs_params("mlx5_0:2");
    EXPECT_EQ(DOORBELL_ERR_NO_DEVICE, doorbell_iface_open(pd, &p, &iface));
    doorbell_pd_destroy(pd);
}

TEST(VerbsDiscovery, NoDeviceListsNothingAndPrintsNothing)
{
    verbs::fake::Fabric fabric; /* no HCA */
    fabric.install();
    testing::internal::CaptureStderr();
    auto        devs = verbs_devices();
    std::string err  = testing::internal::GetCapturedStderr();
    EXPECT_TRUE(devs.empty());
    EXPECT_EQ("", err);
}

TEST(VerbsDiscovery, RealLibibverbsWithoutNicListsNothingQuietly)
{
    verbs::set_provider(nullptr);
    testing::internal::CaptureStderr();
    auto        devs = verbs_devices();
    std::string err  = testing::internal::GetCapturedStderr();
    if (!devs.empty()) {
        GTEST_SKIP() << "this machine has an RDMA device (" << devs[0].name
                     << "): the no-device case cannot be observed here";
    }
    EXPECT_EQ("", err);
}

TEST(VerbsDiscovery, OpenReportsPortCapabilities)
{
    verbs::fake::HcaConfig ca, cb;
    ca.hw_pacing = true;
    VerbsPair               pair(ca, cb);
    auto                   &a = device(pair.a);
    doorbell_iface_limits_t l;
    doorbell_iface_query_limits(pair.a, &l);
    EXPECT_EQ(4u, l.max_iov); /* the HCA's max_sge */
    EXPECT_TRUE(a.hw_pacing());
    EXPECT_FALSE(device(pair.b).hw_pacing());
    EXPECT_TRUE(a.has_timestamps());
    EXPECT_EQ(18u, doorbell_iface_device_address_length(pair.a));
    EXPECT_EQ(4u, doorbell_iface_address_length(pair.a));
}

TEST(VerbsDiscovery, OneVerbsIfacePerProtectionDomain)
{
    VerbsPair         pair;
    auto              p      = verbs_params("mlx5_1:1");
    doorbell_iface_t *second = nullptr;
    /* pda already gives its keys to mlx5_0:1 */
    EXPECT_EQ(DOORBELL_ERR_UNSUPPORTED, doorbell_iface_open(pair.pda, &p, &second));
    EXPECT_NE(nullptr, strstr(doorbell_last_error(), "mlx5_1:1"));
    /* the domain's keys are the HCA's: registering calls ibv_reg_mr and
     * deregistering ibv_dereg_mr */
    std::vector<uint8_t> buf(64);
    doorbell_mr_t       *mr;
    uint32_t             rkey;
    uint64_t             regs = pair.fabric.reg_mr_calls, deregs = pair.fabric.dereg_mr_calls;
    ASSERT_EQ(DOORBELL_OK, doorbell_mr_register(pair.pda, buf.data(), 64,
                                                DOORBELL_ACCESS_REMOTE_READ, &mr, &rkey));
    EXPECT_EQ(regs + 1, pair.fabric.reg_mr_calls);
    ASSERT_EQ(DOORBELL_OK, doorbell_mr_deregister(pair.pda, mr));
    EXPECT_EQ(deregs + 1, pair.fabric.dereg_mr_calls);
}
