// /proc/interrupts parsing on the recorded samples of both kernel
// generations, and on the traps they carry.
#include <gtest/gtest.h>

#include "pin_test_util.h"
#include "pinning/interrupts.h"

using namespace doorbell::pin;
using namespace pin_test;

namespace {

std::string sample(const char *name)
{
    fs::path p = fs::path(shared_fixtures()) / "procfs" / name;
    if (!fs::exists(p))
        return "";
    return read_file(p);
}

const IrqLine *find(const InterruptsTable &t, int irq)
{
    for (const IrqLine &l : t.irqs)
        if (l.irq == irq)
            return &l;
    return nullptr;
}

} // namespace

TEST(PinInterrupts, NewKernelGrepWithoutHeader)
{
    std::string text = sample("interrupts.ryzen9900x-cx5-12cpu.grep-mlx.txt");
    if (text.empty())
        GTEST_SKIP() << "shared fixtures absent at " << shared_fixtures();
    Result<InterruptsTable> t = parse_interrupts(text);
    ASSERT_TRUE(t.ok()) << t.error();
    EXPECT_TRUE(t->cpus.empty());
    ASSERT_EQ(t->irqs.size(), 15u);
    const IrqLine *l = find(*t, 98);
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(l->counts.size(), 12u);
    EXPECT_EQ(l->counts[10], 23274u);
    EXPECT_EQ(l->chip, "IR-PCI-MSIX-0000:01:00.0");
    EXPECT_EQ(l->hwirq, "0");
    EXPECT_EQ(l->flow, "edge");
    EXPECT_EQ(l->actions, std::vector<std::string>{"mlx5_async0@pci:0000:01:00.0"});
    l = find(*t, 119);
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(l->hwirq, "12");
    EXPECT_EQ(l->actions, std::vector<std::string>{"mlx5_comp11@pci:0000:01:00.0"});
}

TEST(PinInterrupts, OldKernelWholeFileWithLostSpacesAndEmptyName)
{
    std::string text = sample("interrupts.azure-centos7-3.10-2xmlx5vf-8cpu.txt");
    if (text.empty())
        GTEST_SKIP() << "shared fixtures absent at " << shared_fixtures();
    Result<InterruptsTable> t = parse_interrupts(text);
    ASSERT_TRUE(t.ok()) << t.error();
    EXPECT_EQ(t->cpus, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
    // 31 numbered IRQs; NMI/LOC/... trailer rows are not IRQs.
    EXPECT_EQ(t->irqs.size(), 31u);
    EXPECT_EQ(find(*t, 0)->actions, std::vector<std::string>{"timer"});
    // IRQ 3: empty name.
    const IrqLine *l = find(*t, 3);
    ASSERT_NE(l, nullptr);
    EXPECT_TRUE(l->actions.empty());
    EXPECT_EQ(l->counts[7], 856u);
    EXPECT_EQ(l->chip, "IO-APIC");
    EXPECT_EQ(l->flow, "edge");
    // "12:" and "14:" lost their leading space in transit.
    l = find(*t, 12);
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(l->counts, (std::vector<uint64_t>{0, 0, 0, 0, 0, 0, 0, 5}));
    EXPECT_EQ(l->actions, std::vector<std::string>{"i8042"});
    ASSERT_NE(find(*t, 14), nullptr);
    EXPECT_EQ(find(*t, 14)->counts[0], 602u);
    // 3.x: chip and flow joined, no hwirq.
    l = find(*t, 28);
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(l->chip, "PCI-MSI");
    EXPECT_EQ(l->hwirq, "");
    EXPECT_EQ(l->flow, "edge");
    EXPECT_EQ(l->actions, std::vector<std::string>{"mlx5_comp0@pci:8b76:00:02.0"});
    EXPECT_EQ(find(*t, 9)->flow, "fasteoi");
}

TEST(PinInterrupts, ChipNameWithSpacesAndCommaListOfActions)
{
    const char *text =
        "            CPU0       CPU1\n"
        "  24:         10          0  Hyper-V PCIe MSI 134742016-edge      mlx5_comp0@pci:8b76:00:02.0\n"
        "  16:          1          2   IO-APIC  16-fasteoi   ehci_hcd:usb1, eth0\n";
    Result<InterruptsTable> t = parse_interrupts(text);
    ASSERT_TRUE(t.ok()) << t.error();
    ASSERT_EQ(t->irqs.size(), 2u);
    EXPECT_EQ(t->irqs[0].chip, "Hyper-V PCIe MSI");
    EXPECT_EQ(t->irqs[0].hwirq, "134742016");
    EXPECT_EQ(t->irqs[0].actions, std::vector<std::string>{"mlx5_comp0@pci:8b76:00:02.0"});
    EXPECT_EQ(t->irqs[1].chip, "IO-APIC");
    EXPECT_EQ(t->irqs[1].flow, "fasteoi");
    EXPECT_EQ(t->irqs[1].actions, (std::vector<std::string>{"ehci_hcd:usb1", "eth0"}));
}

TEST(PinInterrupts, CountMismatchWithHeaderIsAnErrorNamingTheLine)
{
    const char             *text = "            CPU0       CPU1\n"
                                   "  24:         10  PCI-MSI-edge      x\n";
    Result<InterruptsTable> t    = parse_interrupts(text);
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.error().find("line 2"), std::string::npos) << t.error();
    EXPECT_NE(t.error().find("IRQ 24"), std::string::npos) << t.error();
}
