// apply-irqs against a fake procfs root writes exactly the planned lists;
// verify detects a drifted IRQ; write errors say their cause.
#include <gtest/gtest.h>

#include <cerrno>
#include <map>

#include "pin_test_util.h"
#include "pinning/apply.h"
#include "pinning/cpu_list.h"
#include "pinning/topology.h"
#include "pinning/verify.h"

using namespace doorbell::pin;
using namespace pin_test;

namespace {

Plan plan_for_2nic(const std::string &root, int irq_cores)
{
    Result<Machine> m = load_machine(own_fixtures() + "/2pkg-2nic.xml");
    EXPECT_TRUE(m.ok()) << m.error();
    std::vector<NicInput> in;
    for (const Nic &n : m->nics) {
        Result<NicIrqs> irqs = find_nic_irqs(root, n);
        EXPECT_TRUE(irqs.ok()) << irqs.error();
        in.push_back(NicInput{n, *irqs});
    }
    PlanOptions opt;
    opt.ranks     = 4;
    opt.irq_cores = irq_cores;
    return make_plan(*m, in, opt);
}

} // namespace

TEST(PinApply, WritesExactlyThePlannedListsAndVerifyAgrees)
{
    ScratchDir  dir;
    std::string root = dir.copy_root("root-2nic");
    Plan        p    = plan_for_2nic(root, 2);
    ASSERT_EQ(p.irq_numbers().size(), 14u);

    ApplyResult r = apply_irqs(p, root, /*dry_run=*/false);
    ASSERT_TRUE(r.ok()) << r.errors.front();
    EXPECT_EQ(r.done.size(), 14u);
    std::map<int, std::string> planned;
    for (const NicPlan &n : p.nics)
        for (const IrqAssignment &a : n.irqs)
            planned[a.irq] = format_cpu_list(a.cpus) + "\n";
    for (const fs::directory_entry &e : fs::directory_iterator(fs::path(root) / "proc/irq")) {
        int         irq  = std::stoi(e.path().filename().string());
        std::string text = read_file(e.path() / "smp_affinity_list");
        ASSERT_TRUE(planned.count(irq)) << "IRQ " << irq << " is not in the plan";
        EXPECT_EQ(text, planned[irq]) << "IRQ " << irq;
    }
    // mlx5_0's 8 completion vectors alternate over its two interrupt cores,
    // which are package 0's last two (SMT siblings n, n+8 together).
    EXPECT_EQ(read_file(fs::path(root) / "proc/irq/131/smp_affinity_list"), "2,10\n");
    EXPECT_EQ(read_file(fs::path(root) / "proc/irq/132/smp_affinity_list"), "3,11\n");

    for (const IrqCheck &c : check_irqs(p, root))
        EXPECT_TRUE(c.ok()) << "IRQ " << c.irq << " " << c.error;
}

TEST(PinApply, DryRunWritesNothing)
{
    ScratchDir  dir;
    std::string root = dir.copy_root("root-2nic");
    Plan        p    = plan_for_2nic(root, 1);
    ApplyResult r    = apply_irqs(p, root, /*dry_run=*/true);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.done.size(), 14u);
    EXPECT_NE(r.done[0].find("would write"), std::string::npos);
    EXPECT_EQ(read_file(fs::path(root) / "proc/irq/131/smp_affinity_list"), "0-15\n");
}

TEST(PinVerify, DetectsADriftedIrq)
{
    ScratchDir  dir;
    std::string root = dir.copy_root("root-2nic");
    Plan        p    = plan_for_2nic(root, 1);
    ASSERT_TRUE(apply_irqs(p, root, false).ok());
    // What irqbalance would do: move one vector elsewhere.
    write_file(fs::path(root) / "proc/irq/135/smp_affinity_list", "0-1\n");
    std::vector<IrqCheck> checks = check_irqs(p, root);
    ASSERT_EQ(checks.size(), 14u);
    int drifted = 0;
    for (const IrqCheck &c : checks) {
        if (c.ok())
            continue;
        drifted++;
        EXPECT_EQ(c.irq, 135);
        EXPECT_EQ(c.current, (std::vector<int>{0, 1}));
        EXPECT_EQ(c.planned, (std::vector<int>{3, 11}));
    }
    EXPECT_EQ(drifted, 1);
    // An IRQ whose file vanished is reported, not skipped.
    fs::remove(fs::path(root) / "proc/irq/140/smp_affinity_list");
    checks    = check_irqs(p, root);
    auto gone = std::find_if(checks.begin(), checks.end(),
                             [](const IrqCheck &c) { return c.irq == 140; });
    ASSERT_NE(gone, checks.end());
    EXPECT_FALSE(gone->ok());
    EXPECT_NE(gone->error.find("cannot read"), std::string::npos);
}

TEST(PinApply, EveryWriteErrorSaysItsCauseAndTheOthersStillApply)
{
    ScratchDir               dir;
    std::string              root = dir.copy_root("root-2nic");
    Plan                     p    = plan_for_2nic(root, 1);
    std::map<int, int>       fail = {{131, EIO}, {132, EINVAL}, {133, ENOSPC}, {134, EACCES}};
    std::vector<std::string> written;
    WriteFn                  fake = [&](const std::string &path, const std::string &) {
        for (auto [irq, err] : fail)
            if (path.find("/proc/irq/" + std::to_string(irq) + "/") != std::string::npos)
                return err;
        written.push_back(path);
        return 0;
    };
    ApplyResult r = apply_irqs(p, root, false, fake);
    ASSERT_EQ(r.errors.size(), 4u);
    EXPECT_EQ(written.size(), 10u);
    auto has = [&](const char *a, const char *b) {
        for (const std::string &e : r.errors)
            if (e.find(a) != std::string::npos && e.find(b) != std::string::npos)
                return true;
        return false;
    };
    EXPECT_TRUE(has("IRQ 131 (mlx5_comp0@pci:0000:17:00.0)", "EIO: the kernel manages"));
    EXPECT_TRUE(has("IRQ 132", "EINVAL: none of CPUs 3,11 is online"));
    EXPECT_TRUE(has("IRQ 133", "ENOSPC"));
    EXPECT_TRUE(has("IRQ 134", "needs root"));

    // A real write into a missing IRQ folder.
    fs::remove_all(fs::path(root) / "proc/irq/144");
    r = apply_irqs(p, root, false);
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_NE(r.errors[0].find("IRQ 144"), std::string::npos);
    EXPECT_NE(r.errors[0].find("no such IRQ"), std::string::npos) << r.errors[0];
}
