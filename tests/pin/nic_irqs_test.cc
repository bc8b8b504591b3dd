// Finding a NIC's interrupts: names of both kernel generations, the two
// msi_irqs layouts, and the IB device -> PCI address mapping through sysfs.
#include <gtest/gtest.h>

#include "pin_test_util.h"
#include "pinning/nic_irqs.h"
#include "pinning/topology.h"

using namespace doorbell::pin;
using namespace pin_test;

namespace {

Nic nic(const std::string &ib, const std::string &bdf, std::vector<std::string> netdevs = {})
{
    Nic n;
    n.name       = ib;
    n.ib_devices = {ib};
    n.netdevs    = std::move(netdevs);
    n.bdf        = bdf;
    return n;
}

// A root holding only the recorded /proc/interrupts `sample`.
std::string root_with_sample(const ScratchDir &dir, const char *sample)
{
    fs::path src = fs::path(shared_fixtures()) / "procfs" / sample;
    if (!fs::exists(src))
        return "";
    write_file(dir.path() / "proc/interrupts", read_file(src));
    return dir.path().string();
}

} // namespace

TEST(PinNicIrqs, NormalizesPciAddresses)
{
    EXPECT_EQ(normalize_bdf("0000:01:00.0"), "0000:01:00.0");
    EXPECT_EQ(normalize_bdf("01:00.1"), "0000:01:00.1");
    EXPECT_EQ(normalize_bdf("8B76:00:02.0"), "8b76:00:02.0");
    EXPECT_EQ(normalize_bdf("0:1:0.0"), "0000:01:00.0");
    EXPECT_EQ(normalize_bdf("mlx5_0"), "");
    EXPECT_EQ(normalize_bdf("0000:01:00"), "");
}

TEST(PinNicIrqs, ClassifiesNamesOfEveryGeneration)
{
    const std::string bdf = "0000:01:00.0";
    auto              c   = classify_irq_name("mlx5_comp3@pci:0000:01:00.0", bdf, {});
    ASSERT_TRUE(c);
    EXPECT_EQ(c->kind, IrqKind::completion);
    EXPECT_EQ(c->vector, 3);
    for (const char *async : {"mlx5_async0@pci:0000:01:00.0", "mlx5_async_eq@pci:0000:01:00.0",
                              "mlx5_cmd_eq@pci:0000:01:00.0", "mlx5_pages_eq@pci:0000:01:00.0",
                              "mlx4-async@pci:0000:01:00.0"}) {
        auto a = classify_irq_name(async, bdf, {});
        ASSERT_TRUE(a) << async;
        EXPECT_EQ(a->kind, IrqKind::async) << async;
    }
    auto m4 = classify_irq_name("mlx4-7@0000:01:00.0", bdf, {});
    ASSERT_TRUE(m4);
    EXPECT_EQ(m4->vector, 7);
    // The other port of the same card, and another device, are not ours.
    EXPECT_FALSE(classify_irq_name("mlx5_comp0@pci:0000:01:00.1", bdf, {}));
    EXPECT_FALSE(classify_irq_name("timer", bdf, {}));
    // Drivers that name IRQs after the netdev.
    auto e = classify_irq_name("eth2-TxRx-5", bdf, {"eth2"});
    ASSERT_TRUE(e);
    EXPECT_EQ(e->vector, 5);
    EXPECT_FALSE(classify_irq_name("eth20-TxRx-5", bdf, {"eth2"}));
}

TEST(PinNicIrqs, NewKernelSampleThroughSysfsLink)
{
    ScratchDir  dir;
    std::string root = root_with_sample(dir, "interrupts.ryzen9900x-cx5-12cpu.grep-mlx.txt");
    if (root.empty())
        GTEST_SKIP() << "shared fixtures absent at " << shared_fixtures();
    // mlx5_0 -> 0000:01:00.0 only through sysfs: the topology has a stale address.
    fs::path dev = dir.path() / "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0";
    fs::create_directories(dev / "infiniband/mlx5_0");
    fs::create_directories(dir.path() / "sys/class/infiniband");
    fs::create_symlink("../../../0000:01:00.0", dev / "infiniband/mlx5_0/device");
    fs::create_symlink("../../devices/pci0000:00/0000:00:01.1/0000:01:00.0/infiniband/mlx5_0",
                       dir.path() / "sys/class/infiniband/mlx5_0");
    fs::create_directories(dir.path() / "sys/bus/pci/devices");
    fs::create_symlink("../../../devices/pci0000:00/0000:00:01.1/0000:01:00.0",
                       dir.path() / "sys/bus/pci/devices/0000:01:00.0");
    for (int irq : {98, 99, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119})
        write_file(dev / "msi_irqs" / std::to_string(irq), "msix\n");

    Result<NicIrqs> r = find_nic_irqs(root, nic("mlx5_0", "0000:99:00.0", {"enp1s0f0np0"}));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->bdf, "0000:01:00.0");
    EXPECT_EQ(r->msi_layout, "file");
    EXPECT_EQ(r->completion_count(), 12);
    ASSERT_EQ(r->irqs.size(), 13u);
    // The mlnx-tools example: completion IRQs 99, 109..119, async 98 excluded.
    EXPECT_EQ(r->irqs[0].irq, 99);
    EXPECT_EQ(r->irqs[0].vector, 0);
    EXPECT_EQ(r->irqs[11].irq, 119);
    EXPECT_EQ(r->irqs[11].vector, 11);
    EXPECT_EQ(r->irqs[12].irq, 98);
    EXPECT_EQ(r->irqs[12].kind, IrqKind::async);
    EXPECT_FALSE(r->notes.empty()); // says sysfs overrode the topology's address
}

TEST(PinNicIrqs, OldKernelSampleByAddressAlone)
{
    ScratchDir  dir;
    std::string root = root_with_sample(dir, "interrupts.azure-centos7-3.10-2xmlx5vf-8cpu.txt");
    if (root.empty())
        GTEST_SKIP() << "shared fixtures absent at " << shared_fixtures();
    Result<NicIrqs> r = find_nic_irqs(root, nic("mlx5_1", "8b76:00:02.0"));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->msi_layout, "absent");
    EXPECT_EQ(r->completion_count(), 8);
    ASSERT_EQ(r->irqs.size(), 11u); // + pages, cmd and async EQs
    for (int i = 0; i < 8; i++) {
        EXPECT_EQ(r->irqs[i].irq, 28 + i);
        EXPECT_EQ(r->irqs[i].vector, i);
    }
    for (int i = 8; i < 11; i++)
        EXPECT_EQ(r->irqs[i].kind, IrqKind::async);
    // The other VF's vectors (36..47) are not this one's.
    for (const NicIrq &i : r->irqs)
        EXPECT_LT(i.irq, 36);
}

TEST(PinNicIrqs, MsiIrqsAsFilesAndAsDirectoriesSortedNumerically)
{
    std::string                 layout;
    Result<std::vector<MsiIrq>> f = read_msi_irqs(own_fixtures() + "/root-2nic", "0000:17:00.0",
                                                  &layout);
    ASSERT_TRUE(f.ok()) << f.error();
    EXPECT_EQ(layout, "file");
    ASSERT_EQ(f->size(), 9u);
    EXPECT_EQ(f->front().irq, 130);
    EXPECT_EQ(f->front().mode, "msix");

    Result<std::vector<MsiIrq>> d = read_msi_irqs(own_fixtures() + "/root-machine-nic",
                                                  "0000:0a:00.0", &layout);
    ASSERT_TRUE(d.ok()) << d.error();
    EXPECT_EQ(layout, "directory");
    ASSERT_EQ(d->size(), 5u);
    EXPECT_EQ(d->front().irq, 60);
    EXPECT_EQ(d->back().mode, "msix");

    ScratchDir dir;
    for (int irq : {1000, 999, 99})
        write_file(dir.path() / "sys/bus/pci/devices/0000:01:00.0/msi_irqs" / std::to_string(irq),
                   "msi");
    Result<std::vector<MsiIrq>> n = read_msi_irqs(dir.path().string(), "0000:01:00.0", &layout);
    ASSERT_TRUE(n.ok());
    ASSERT_EQ(n->size(), 3u);
    EXPECT_EQ((*n)[0].irq, 99); // `ls` would put 1000 first
    EXPECT_EQ((*n)[2].irq, 1000);
}

TEST(PinNicIrqs, UnnamedVectorsFromMsiIrqsLowestIsAsync)
{
    ScratchDir dir;
    write_file(dir.path() / "proc/interrupts",
               "           CPU0\n 50:  1  PCI-MSI 524288-edge      qdev\n"
               " 51:  1  PCI-MSI 524289-edge      qdev\n 52:  1  PCI-MSI 524290-edge      qdev\n");
    for (int irq : {50, 51, 52})
        write_file(dir.path() / "sys/bus/pci/devices/0000:05:00.0/msi_irqs" / std::to_string(irq),
                   "msix");
    Result<NicIrqs> r = find_nic_irqs(dir.path().string(), nic("qib0", "0000:05:00.0"));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->completion_count(), 2);
    EXPECT_EQ(r->irqs.back().irq, 50);
    EXPECT_EQ(r->irqs.back().kind, IrqKind::async);
    EXPECT_EQ(r->notes.size(), 3u); // each guess is said
}

TEST(PinNicIrqs, OwnRootsFindBothNicsIncludingViaNetdev)
{
    Result<Machine> m = load_machine(own_fixtures() + "/2pkg-2nic.xml");
    ASSERT_TRUE(m.ok()) << m.error();
    const Nic *n1 = m->find_nic("ens2f0");
    ASSERT_NE(n1, nullptr);
    EXPECT_EQ(n1->name, "mlx5_1");
    // root-2nic has no /sys/class/infiniband/mlx5_1: found through the netdev.
    Result<NicIrqs> r = find_nic_irqs(own_fixtures() + "/root-2nic", *n1);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->bdf, "0000:b3:00.0");
    EXPECT_EQ(r->completion_count(), 4);
    EXPECT_EQ(r->irqs.size(), 5u);

    Result<NicIrqs> missing = find_nic_irqs("/nonexistent-root", *n1);
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().find("mlx5_1"), std::string::npos) << missing.error();
    EXPECT_NE(missing.error().find("proc/interrupts"), std::string::npos) << missing.error();
}
