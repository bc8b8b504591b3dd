// Each check on recorded trees: `healthy` (a ConnectX-5 host with an H100,
// everything right), `degraded` (the Azure VM interrupt table on a box with
// every fault), `sparse` (attribute files missing) and an empty tree.
#include "doctor_test_util.h"

namespace doorbell::doctor::testing {
namespace {

class DoctorChecks : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (!std::filesystem::is_directory(fixture("healthy")))
            GTEST_SKIP() << "recorded trees missing at " << fixture("");
    }
};

TEST_F(DoctorChecks, RdmaPortsActivePass)
{
    Context ctx = load(fixture("healthy"));
    Report  r   = run(check_rdma, ctx);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(find(r, "mlx5_0 port 1").status, Status::kPass);
    EXPECT_EQ(find(r, "mlx5_1 port 1").status, Status::kPass);
    EXPECT_NE(find(r, "mlx5_0 port 1").summary.find("100 Gb/sec"), std::string::npos);
}

TEST_F(DoctorChecks, RdmaPortDownFails)
{
    Context ctx = load(fixture("degraded"));
    Report  r   = run(check_rdma, ctx);
    EXPECT_EQ(find(r, "mlx5_0 port 1").status, Status::kPass);
    const Finding &f = find(r, "mlx5_1 port 1");
    EXPECT_EQ(f.status, Status::kFail);
    EXPECT_TRUE(evidence_has(f, "phys_state: 2: Polling"));
    EXPECT_FALSE(f.fix.empty());
}

TEST_F(DoctorChecks, RdmaSlowerThanSiblingWarnsAndNoSubnetManagerFails)
{
    TempTree t;
    for (auto [dev, bdf, state, rate] :
         {std::tuple{"mlx5_0", "0000:01:00.0", "4: ACTIVE", "400 Gb/sec (4X NDR)"},
          std::tuple{"mlx5_1", "0000:02:00.0", "4: ACTIVE", "100 Gb/sec (1X NDR)"},
          std::tuple{"mlx5_2", "0000:03:00.0", "2: INIT", "400 Gb/sec (4X NDR)"}}) {
        std::string b = std::string("/sys/class/infiniband/") + dev;
        t.link(b + "/device", std::string("../../../bus/pci/devices/") + bdf);
        t.put(b + "/hca_type", "MT4129");
        t.put(b + "/ports/1/state", state);
        t.put(b + "/ports/1/phys_state", "5: LinkUp");
        t.put(b + "/ports/1/rate", rate);
        t.put(b + "/ports/1/link_layer", "InfiniBand");
    }
    Context ctx = load(t.root());
    Report  r   = run(check_rdma, ctx);
    EXPECT_EQ(find(r, "mlx5_0 port 1").status, Status::kPass);
    EXPECT_EQ(find(r, "mlx5_1 port 1").status, Status::kWarn);
    EXPECT_EQ(find(r, "mlx5_2 port 1").status, Status::kFail);
    EXPECT_NE(find(r, "mlx5_2 port 1").fix.find("subnet manager"), std::string::npos);
}

TEST_F(DoctorChecks, FirmwareSameVersionPasses)
{
    Context ctx = load(fixture("healthy"));
    Report  r   = run(check_firmware, ctx);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, Status::kPass);
    EXPECT_NE(r[0].summary.find("16.35.2000"), std::string::npos);
}

TEST_F(DoctorChecks, FirmwarePatchMismatchOnOneHostFails)
{
    Context        ctx = load(fixture("degraded"));
    Report         r   = run(check_firmware, ctx);
    const Finding &f   = find(r, "HCA type MT4120");
    EXPECT_EQ(f.status, Status::kFail);
    EXPECT_NE(f.summary.find("patch-level"), std::string::npos);
    EXPECT_TRUE(evidence_has(f, "mlx5_1 fw_ver 16.28.4010  <- differs"));
}

TEST_F(DoctorChecks, GpuDirectPrerequisitesPass)
{
    Context ctx = load(fixture("healthy"));
    Report  r   = run(check_gpudirect, ctx);
    ASSERT_EQ(r.size(), 4u);
    for (const Finding &f : r)
        EXPECT_EQ(f.status, Status::kPass) << f.subject << ": " << f.summary;
    EXPECT_NE(find(r, "0000:0b:00.0 BAR1").summary.find("131072 MiB"), std::string::npos);
}

TEST_F(DoctorChecks, GpuDirectMissingModulesAndSmallBarFail)
{
    Context ctx = load(fixture("degraded"));
    Report  r   = run(check_gpudirect, ctx);
    EXPECT_EQ(find(r, "peer memory").status, Status::kFail);
    EXPECT_EQ(find(r, "nvidia_uvm").status, Status::kFail);
    EXPECT_EQ(find(r, "peer mapping").status, Status::kWarn);
    const Finding &bar = find(r, "0001:00:00.0 BAR1");
    EXPECT_EQ(bar.status, Status::kFail);
    EXPECT_NE(bar.summary.find("256 MiB"), std::string::npos);
    EXPECT_NE(bar.fix.find("Above 4G decoding"), std::string::npos);
}

TEST_F(DoctorChecks, GpuDirectDmabufCountsAsPeerMemory)
{
    TempTree t;
    t.put("/sys/bus/pci/devices/0000:41:00.0/vendor", "0x10de");
    t.put("/sys/bus/pci/devices/0000:41:00.0/class", "0x030200");
    t.put("/proc/modules",
          "nvidia_uvm 1527808 0 - Live 0x0\nnvidia 56795136 1 nvidia_uvm, Live 0x0");
    t.put("/proc/driver/nvidia/version",
          "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build");
    t.put("/proc/sys/kernel/osrelease", "6.1.0-18-amd64");
    Context ctx = load(t.root());
    Report  r   = run(check_gpudirect, ctx);
    EXPECT_EQ(find(r, "peer memory").status, Status::kPass);
    EXPECT_NE(find(r, "peer memory").summary.find("dmabuf"), std::string::npos);
    t.put("/proc/sys/kernel/osrelease", "5.10.0-28-amd64"); // dmabuf for GPUs needs Linux >= 5.12
    ctx = load(t.root());
    r   = run(check_gpudirect, ctx);
    EXPECT_EQ(find(r, "peer memory").status, Status::kFail);
}

TEST_F(DoctorChecks, PcieFullLinksPass)
{
    Context ctx = load(fixture("healthy"));
    Report  r   = run(check_pcie, ctx);
    ASSERT_EQ(r.size(), 3u);
    for (const Finding &f : r)
        EXPECT_EQ(f.status, Status::kPass) << f.subject;
}

TEST_F(DoctorChecks, PcieNarrowOrSlowLinksFail)
{
    Context        ctx    = load(fixture("degraded"));
    Report         r      = run(check_pcie, ctx);
    const Finding &narrow = find(r, "8b76:00:02.0 (mlx5_0)");
    EXPECT_EQ(narrow.status, Status::kFail);
    EXPECT_NE(narrow.summary.find("x8 @ 8 GT/s of x16"), std::string::npos);
    EXPECT_EQ(find(r, "83a4:00:02.0 (mlx5_1)").status, Status::kFail);
    // An idle GPU lowers its link speed: only a warning.
    EXPECT_EQ(find(r, "0001:00:00.0 (GPU)").status, Status::kWarn);
}

TEST_F(DoctorChecks, IrqbalanceStoppedPassesRunningUnbannedWarns)
{
    Context ok = load(fixture("healthy"));
    EXPECT_EQ(run(check_irqbalance, ok).at(0).status, Status::kPass);
    Context       bad = load(fixture("degraded"));
    const Finding f   = run(check_irqbalance, bad).at(0);
    EXPECT_EQ(f.status, Status::kWarn);
    EXPECT_TRUE(evidence_has(f, "/proc/873/comm: irqbalance"));
    EXPECT_TRUE(evidence_has(f, "/etc/sysconfig/irqbalance: no IRQBALANCE_BANNED_CPULIST"));
}

// Banning CPUs alone does not protect the NIC: irqbalance moves the IRQs it
// balances off banned CPUs. Only --banirq for every NIC IRQ passes.
TEST_F(DoctorChecks, IrqbalanceMustBanTheNicIrqs)
{
    TempTree t;
    t.put("/proc/1/comm", "systemd");
    t.put("/proc/900/comm", "irqbalance");
    t.link("/sys/class/infiniband/mlx5_0/device", "../../../bus/pci/devices/0000:c1:00.0");
    t.put("/sys/bus/pci/devices/0000:c1:00.0/local_cpulist", "32-63");
    t.put(
        "/proc/interrupts",
        "            CPU0       CPU1\n"
        " 140:          5          0  IR-PCI-MSIX-0000:c1:00.0    0-edge      mlx5_async0@pci:0000:c1:00.0\n"
        " 141:        900         20  IR-PCI-MSIX-0000:c1:00.0    1-edge      mlx5_comp0@pci:0000:c1:00.0");
    t.put("/etc/default/irqbalance",
          "#IRQBALANCE_BANNED_CPULIST=\nIRQBALANCE_BANNED_CPULIST=\"32-39\"");
    Context ctx = load(t.root());
    Finding f   = run(check_irqbalance, ctx).at(0);
    EXPECT_EQ(f.status, Status::kWarn);
    EXPECT_NE(f.summary.find("bans CPUs 32-39 but balances 2 of 2 NIC IRQs"), std::string::npos)
        << f.summary;
    EXPECT_NE(f.fix.find("--banirq=140 --banirq=141"), std::string::npos) << f.fix;

    t.put("/etc/default/irqbalance",
          "IRQBALANCE_BANNED_CPUS=000000ff\nIRQBALANCE_ARGS=\"--banirq=141 -i 140\"");
    ctx = load(t.root());
    f   = run(check_irqbalance, ctx).at(0);
    EXPECT_EQ(f.status, Status::kPass) << f.summary;
    EXPECT_TRUE(evidence_has(f, "IRQBALANCE_BANNED_CPUS=000000ff"));
}

TEST_F(DoctorChecks, IrqOnNicNodeSpreadPasses)
{
    Context        ctx = load(fixture("healthy"));
    Report         r   = run(check_irq, ctx);
    const Finding &f   = find(r, "mlx5_0 (0000:01:00.0)");
    EXPECT_EQ(f.status, Status::kPass) << f.summary;
    EXPECT_NE(f.summary.find("12 completion IRQs"), std::string::npos);
    EXPECT_TRUE(evidence_has(f, "IRQ 109 mlx5_comp1@pci:0000:01:00.0: effective affinity 8"));
    EXPECT_EQ(find(r, "mlx5_1 (0000:01:00.1)").status, Status::kPass);
}

// The Azure VM of the shared recording: every completion interrupt on CPU0.
TEST_F(DoctorChecks, IrqOffNodeFailsPiledOnOneCpuWarns)
{
    Context        ctx    = load(fixture("degraded"));
    Report         r      = run(check_irq, ctx);
    const Finding &remote = find(r, "mlx5_0 (8b76:00:02.0)");
    EXPECT_EQ(remote.status, Status::kFail);
    EXPECT_NE(remote.summary.find("8 of 8 completion IRQs point off NUMA node 1"), std::string::npos)
        << remote.summary;
    EXPECT_TRUE(evidence_has(remote, "0 of 839229 completion interrupts fired on CPUs 4-7"));
    EXPECT_NE(remote.fix.find("doorbell-pin apply-irqs --nic mlx5_0"), std::string::npos);
    const Finding &piled = find(r, "mlx5_1 (83a4:00:02.0)");
    EXPECT_EQ(piled.status, Status::kWarn);
    EXPECT_NE(piled.summary.find("fire on CPU 0"), std::string::npos) << piled.summary;
}

// The plan over the recorded 2x EPYC topology of ../shared/fixtures/hwloc.
TEST_F(DoctorChecks, PinPlanAppliedPassesDefaultMasksWarn)
{
    std::string topo = std::string(DOORBELL_SHARED_DIR) + "/fixtures/hwloc/topo.mel3001.xml";
    if (!std::filesystem::exists(topo))
        GTEST_SKIP() << "shared fixtures missing: " << topo;
    Context placed      = load(fixture("mel3001-placed"));
    placed.opt.topology = topo;
    Finding f           = run(check_pinplan, placed).at(0);
    EXPECT_EQ(f.status, Status::kPass) << f.summary;
    EXPECT_NE(f.summary.find("all 9 NIC IRQs"), std::string::npos);
    EXPECT_TRUE(evidence_has(f, "plan: mlx5_2 interrupts on NUMA node 1, CPUs 56-63,120-127"));

    Context unplaced      = load(fixture("mel3001-default"));
    unplaced.opt.topology = topo;
    f                     = run(check_pinplan, unplaced).at(0);
    EXPECT_EQ(f.status, Status::kWarn);
    EXPECT_NE(f.summary.find("9 of 9 NIC IRQs differ"), std::string::npos) << f.summary;
    EXPECT_TRUE(evidence_has(f, "IRQ 210 mlx5_comp0@pci:0000:c1:00.0: now 0-127, plan 56,120"));
    // Masks spanning both nodes: the irq check warns too.
    EXPECT_EQ(run(check_irq, unplaced).at(0).status, Status::kWarn);
    EXPECT_EQ(run(check_irq, placed).at(0).status, Status::kPass);
}

TEST_F(DoctorChecks, PinPlanNeedsTopologyForRecordedTree)
{
    Context ctx = load(fixture("healthy"));
    Finding f   = run(check_pinplan, ctx).at(0);
    EXPECT_EQ(f.status, Status::kWarn);
    EXPECT_NE(f.fix.find("--topology"), std::string::npos);
}

TEST_F(DoctorChecks, ThermalCoolNicPasses)
{
    Context ctx = load(fixture("healthy"));
    Report  r   = run(check_thermal, ctx);
    EXPECT_EQ(find(r, "0000:01:00.0 (mlx5_0)").status, Status::kPass);
    EXPECT_EQ(find(r, "0000:01:00.1 (mlx5_1)").status, Status::kPass);
    // The NVIDIA driver exports no hwmon: said plainly, with where to look instead.
    const Finding &gpu = find(r, "0000:0b:00.0 (GPU)");
    EXPECT_EQ(gpu.status, Status::kWarn);
    EXPECT_NE(gpu.fix.find("nvidia-smi"), std::string::npos);
}

TEST_F(DoctorChecks, ThermalHotNicFailsNearThresholdWarns)
{
    Context        ctx = load(fixture("degraded"));
    Report         r   = run(check_thermal, ctx);
    const Finding &hot = find(r, "8b76:00:02.0 (mlx5_0)");
    EXPECT_EQ(hot.status, Status::kFail);
    EXPECT_NE(hot.summary.find("106.0 C (threshold 105.0 C)"), std::string::npos);
    EXPECT_EQ(find(r, "83a4:00:02.0 (mlx5_1)").status, Status::kWarn);
}

TEST_F(DoctorChecks, CongestionConsistentCountersPass)
{
    Context ctx = load(fixture("healthy"), fixture("healthy-later"), 1000);
    Report  r   = run(check_congestion, ctx);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].status, Status::kPass);
    EXPECT_TRUE(evidence_has(r[0], "np_ecn_marked_roce_packets: 4220 (10/s)"));
}

TEST_F(DoctorChecks, CongestionControlOffFails)
{
    Context ctx = load(fixture("degraded"), fixture("degraded-later"), 1000);
    Report  r   = run(check_congestion, ctx);
    EXPECT_EQ(find(r, "mlx5_0 port 1").status, Status::kFail);
    EXPECT_NE(find(r, "mlx5_0 port 1").summary.find("notification point"), std::string::npos);
    EXPECT_EQ(find(r, "mlx5_1 port 1").status, Status::kFail);
    EXPECT_NE(find(r, "mlx5_1 port 1").summary.find("reaction point"), std::string::npos);
}

TEST_F(DoctorChecks, CongestionHighMarkRateWarns)
{
    Context ctx   = load(fixture("healthy"));
    ctx.window_ms = 500;
    ctx.after["mlx5_0/1/np_ecn_marked_roce_packets"] += 5000;
    ctx.after["mlx5_0/1/np_cnp_sent"] += 5000;
    Report r = run(check_congestion, ctx);
    EXPECT_EQ(find(r, "mlx5_0 port 1").status, Status::kWarn);
    EXPECT_NE(find(r, "mlx5_0 port 1").summary.find("10000/s ECN marks"), std::string::npos);
    EXPECT_EQ(find(r, "mlx5_1 port 1").status, Status::kPass);
}

TEST_F(DoctorChecks, CongestionNotApplicableOnInfiniBand)
{
    Context ctx                         = load(fixture("healthy"));
    ctx.inv.rdma[0].ports[0].link_layer = "InfiniBand";
    Report r                            = run(check_congestion, ctx);
    EXPECT_EQ(find(r, "mlx5_0 port 1").status, Status::kPass);
    EXPECT_NE(find(r, "mlx5_0 port 1").summary.find("do not apply"), std::string::npos);
}

TEST_F(DoctorChecks, RetransmitQuietWindowPasses)
{
    Context ctx = load(fixture("healthy"), fixture("healthy-later"), 1000);
    Report  r   = run(check_retransmit, ctx);
    ASSERT_EQ(r.size(), 3u);
    for (const Finding &f : r)
        EXPECT_EQ(f.status, Status::kPass) << f.subject << ": " << f.summary;
}

TEST_F(DoctorChecks, RetransmitTimeoutsInWindowFail)
{
    Context        ctx      = load(fixture("degraded"), fixture("degraded-later"), 1000);
    Report         r        = run(check_retransmit, ctx);
    const Finding &timeouts = find(r, "mlx5_0 port 1");
    EXPECT_EQ(timeouts.status, Status::kFail);
    EXPECT_NE(timeouts.summary.find("12 transport timeouts"), std::string::npos);
    EXPECT_EQ(find(r, "mlx5_1 port 1").status, Status::kWarn);
    const Finding &tcp = find(r, "tcp");
    EXPECT_EQ(tcp.status, Status::kWarn);
    EXPECT_NE(tcp.summary.find("100 of 1000 segments retransmitted (10.00 %) in the window"),
              std::string::npos);
}

TEST_F(DoctorChecks, RetransmitTotalsWithoutWindowWarn)
{
    Context ctx = load(fixture("degraded"));
    Report  r   = run(check_retransmit, ctx);
    EXPECT_EQ(find(r, "mlx5_0 port 1").status, Status::kWarn);
    EXPECT_NE(find(r, "mlx5_0 port 1").summary.find("no window"), std::string::npos);
}

// Missing attribute files are warnings that name the file and the reason.
TEST_F(DoctorChecks, SparseTreeWarnsWithReasons)
{
    Context ctx = load(fixture("sparse"));
    for (size_t i = 0; i < kNumChecks; i++) {
        Report r = run(kChecks[i].run, ctx);
        ASSERT_FALSE(r.empty()) << kChecks[i].name;
        for (const Finding &f : r) {
            if (f.check == "gpudirect" &&
                (f.subject == "peer memory" || f.subject == "nvidia_uvm")) {
                // /sys/module is recorded: nvidia present, nvidia_peermem and nvidia_uvm absent.
                EXPECT_EQ(f.status, Status::kFail);
                EXPECT_TRUE(evidence_has(f, "absent (/proc/modules: No such file or directory)"));
                continue;
            }
            if (f.check == "pinplan") { // a recorded tree without --topology
                EXPECT_EQ(f.status, Status::kWarn);
                EXPECT_TRUE(evidence_has(f, "without --topology"));
                continue;
            }
            if (f.check == "irqbalance") {
                EXPECT_EQ(f.status, Status::kPass);
                continue;
            }
            EXPECT_EQ(f.status, Status::kWarn) << f.check << " " << f.subject << ": " << f.summary;
            EXPECT_TRUE(evidence_has(f, "No such file or directory") || evidence_has(f, "absent"))
                << f.check << " " << f.subject;
            EXPECT_FALSE(f.fix.empty()) << f.check << " " << f.subject;
        }
    }
}

// Junk where numbers belong: every check still answers, none crashes.
TEST_F(DoctorChecks, GarbageValuesNeverCrash)
{
    TempTree    t;
    std::string junk = "\xff\xfe-99999999999999999999999 0x 1-0,,";
    junk += junk + "\n" + junk;
    t.link("/sys/class/infiniband/mlx5_0/device", "../../../bus/pci/devices/0000:01:00.0");
    for (const char *f :
         {"fw_ver", "hca_type", "ports/1/state", "ports/1/phys_state", "ports/1/rate",
          "ports/1/link_layer", "ports/1/hw_counters/np_ecn_marked_roce_packets",
          "ports/1/hw_counters/np_cnp_sent", "ports/1/hw_counters/rp_cnp_handled",
          "ports/1/hw_counters/local_ack_timeout_err"})
        t.put(std::string("/sys/class/infiniband/mlx5_0/") + f, junk);
    t.put("/sys/class/infiniband/mlx5_0/ports/1/link_layer", "Ethernet");
    for (const char *dev : {"0000:01:00.0", "0000:02:00.0"})
        for (const char *f : {"current_link_speed", "max_link_speed", "current_link_width",
                              "max_link_width", "resource", "local_cpulist", "numa_node",
                              "hwmon/hwmon0/temp1_input", "hwmon/hwmon0/temp1_crit", "msi_irqs/12"})
            t.put(std::string("/sys/bus/pci/devices/") + dev + "/" + f, junk);
    t.put("/sys/bus/pci/devices/0000:02:00.0/vendor", "0x10de");
    t.put("/sys/bus/pci/devices/0000:02:00.0/class", "0x030200");
    for (const char *f :
         {"/proc/interrupts", "/proc/modules", "/proc/net/snmp", "/proc/driver/nvidia/params",
          "/proc/irq/12/smp_affinity_list", "/proc/1/comm", "/etc/default/irqbalance"})
        t.put(f, junk);
    t.put("/proc/net/snmp", "Tcp: OutSegs RetransSegs\nTcp: 0 18446744073709551615");
    Context ctx = load(t.root());
    for (size_t i = 0; i < kNumChecks; i++) {
        Report r = run(kChecks[i].run, ctx);
        EXPECT_FALSE(r.empty()) << kChecks[i].name;
        for (const Finding &f : r)
            EXPECT_TRUE(json_valid(render_json(ctx, {f}))) << f.check;
    }
}

TEST_F(DoctorChecks, EmptyTreeNeverFails)
{
    TempTree t;
    Context  ctx = load(t.root());
    EXPECT_EQ(ctx.host, "unknown-host");
    for (size_t i = 0; i < kNumChecks; i++) {
        Report r = run(kChecks[i].run, ctx);
        ASSERT_FALSE(r.empty()) << kChecks[i].name;
        for (const Finding &f : r) {
            EXPECT_EQ(f.status, Status::kWarn) << f.check << " " << f.subject << ": " << f.summary;
            EXPECT_FALSE(f.evidence.empty()) << f.check;
        }
    }
}

} // namespace
} // namespace doorbell::doctor::testing
