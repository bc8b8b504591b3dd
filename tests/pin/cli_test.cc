// doorbell-pin as a user runs it: this machine (no NIC here), the recorded
// machines with their fake roots, and bad input.
#include <gtest/gtest.h>

#include "pin_test_util.h"

using namespace pin_test;

namespace {

// Runs doorbell-pin with no launcher variables, so it behaves as outside mpirun.
RunResult pin(const std::string &args)
{
    return run("env -u OMPI_COMM_WORLD_LOCAL_RANK -u OMPI_COMM_WORLD_LOCAL_SIZE -u PMIX_LOCAL_RANK "
               "-u SLURM_LOCALID " DOORBELL_PIN_BIN " " +
               args);
}

bool has(const RunResult &r, const std::string &s)
{
    return r.out.find(s) != std::string::npos;
}

} // namespace

TEST(PinCli, ShowOnThisMachineSaysPlainlyNoNic)
{
    RunResult r = pin("show");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(has(r, "topology: this machine")) << r.out;
    EXPECT_TRUE(has(r, "NUMA node")) << r.out;
    if (has(r, "NIC ") && !has(r, "no RDMA NIC found"))
        GTEST_SKIP() << "this machine has an RDMA NIC";
    EXPECT_TRUE(has(r, "no RDMA NIC found")) << r.out;
}

TEST(PinCli, PlanTableAndJsonOnRecordedMachine)
{
    std::string f = own_fixtures();
    RunResult   t = pin("plan --topology " + f + "/2pkg-2nic.xml --root " + f +
                        "/root-2nic --ranks 4");
    ASSERT_EQ(t.rc, 0) << t.out;
    EXPECT_TRUE(has(t, "NIC mlx5_0 (PCI 0000:17:00.0, NUMA 0): interrupt cores L#3 = PUs 3,11"))
        << t.out;
    EXPECT_TRUE(has(t, "interrupts and ranks on separate cores")) << t.out;
    RunResult j = pin("plan --json --topology " + f + "/2pkg-2nic.xml --root " + f +
                      "/root-2nic --ranks 4");
    ASSERT_EQ(j.rc, 0) << j.out;
    EXPECT_TRUE(has(j, "\"separated\": true")) << j.out;
    EXPECT_TRUE(has(j, "{\"irq\": 131, \"name\": \"mlx5_comp0@pci:0000:17:00.0\", \"kind\": "
                       "\"completion\", \"core\": 3, \"cpus\": [3,11]}"))
        << j.out;
    EXPECT_TRUE(
        has(j,
            "{\"local_rank\": 3, \"nic\": \"mlx5_1\", \"core\": 5, \"pus\": [5,13], \"numa\": 1"))
        << j.out;
}

TEST(PinCli, IrqbalanceAdviceInThePlan)
{
    std::string f = own_fixtures();
    RunResult   r = pin("plan --topology " + f + "/machine-nic.xml --root " + f +
                        "/root-machine-nic");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(has(r, "irqbalance is running (pid 1234)")) << r.out;
    EXPECT_TRUE(has(r, "IRQBALANCE_BANNED_CPULIST=3,11")) << r.out;
    EXPECT_TRUE(has(r, "hangs off Machine")) << r.out;
}

TEST(PinCli, ApplyThenVerifyThenDrift)
{
    ScratchDir  dir;
    std::string root   = dir.copy_root("root-2nic");
    std::string common = " --topology " + own_fixtures() + "/2pkg-2nic.xml --root " + root +
                         " --ranks 4";
    RunResult dry = pin("apply-irqs --dry-run" + common);
    ASSERT_EQ(dry.rc, 0) << dry.out;
    EXPECT_TRUE(has(dry, "would write IRQ 131 (mlx5_comp0@pci:0000:17:00.0) -> 3,11")) << dry.out;
    EXPECT_EQ(read_file(fs::path(root) / "proc/irq/131/smp_affinity_list"), "0-15\n");

    RunResult a = pin("apply-irqs" + common);
    ASSERT_EQ(a.rc, 0) << a.out;
    EXPECT_EQ(read_file(fs::path(root) / "proc/irq/131/smp_affinity_list"), "3,11\n");
    EXPECT_EQ(read_file(fs::path(root) / "proc/irq/141/smp_affinity_list"), "7,15\n");

    RunResult v = pin("verify" + common);
    EXPECT_EQ(v.rc, 0) << v.out;
    EXPECT_TRUE(has(v, "verify: as planned")) << v.out;
    EXPECT_TRUE(has(v, "binding not checked: no local rank")) << v.out;

    write_file(fs::path(root) / "proc/irq/137/smp_affinity_list", "0-15\n");
    RunResult d = pin("verify" + common);
    EXPECT_EQ(d.rc, 1) << d.out;
    EXPECT_TRUE(has(d, "IRQ 137 (mlx5_comp6@pci:0000:17:00.0): planned 3,11, current 0-15: DRIFTED"))
        << d.out;
    EXPECT_TRUE(has(d, "verify: 1 mismatch(es)")) << d.out;
}

TEST(PinCli, ApplyOnThisMachineWithoutRootIsRefused)
{
    // As root, observe it as user nobody (setpriv from util-linux).
    std::string as_user;
    if (geteuid() == 0) {
        if (run("command -v setpriv").rc != 0)
            GTEST_SKIP() << "running as root and setpriv is missing: cannot drop to a normal user";
        as_user = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
    }
    RunResult r = run(as_user + DOORBELL_PIN_BIN " apply-irqs --topology " + own_fixtures() +
                      "/2pkg-2nic.xml --root /");
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_TRUE(has(r, "needs root; run it as root or add --dry-run")) << r.out;
}

TEST(PinCli, BadInputGivesClearErrors)
{
    struct Case {
        std::string args, message;
    } cases[] = {
        {"", "usage: doorbell-pin"},
        {"frobnicate", "unknown command 'frobnicate'"},
        {"plan --ranks abc", "--ranks 'abc': expected a whole number >= 1"},
        {"plan --ranks 0", "--ranks '0'"},
        {"plan --ranks", "--ranks needs a value"},
        {"plan --bogus", "unknown option '--bogus'"},
        {"plan --topology /nonexistent.xml", "cannot read topology /nonexistent.xml"},
        {"plan --topology " + own_fixtures() + "/2pkg-2nic.xml --nic mlx9_0",
         "no RDMA NIC named 'mlx9_0'"},
        {"plan --nic ,", "empty NIC name"},
        {"show --topology " + own_fixtures() + "/2pkg-2nic.xml --root /nonexistent",
         "mlx5_0: cannot read /nonexistent/proc/interrupts"},
        {"exec", "exec needs a program"},
        {"exec -- true", "exec: no local rank"},
        {"apply-irqs --topology " + own_fixtures() + "/2pkg-2nic.xml", "needs --root"},
        {"plan -- x", "'--' is only for exec"},
    };
    for (const Case &c : cases) {
        RunResult r = pin(c.args);
        EXPECT_EQ(r.rc, 2) << c.args << "\n" << r.out;
        EXPECT_TRUE(has(r, c.message)) << c.args << "\n" << r.out;
    }
    RunResult r = run("OMPI_COMM_WORLD_LOCAL_RANK=zz " DOORBELL_PIN_BIN " plan");
    EXPECT_EQ(r.rc, 2);
    EXPECT_TRUE(has(r, "OMPI_COMM_WORLD_LOCAL_RANK='zz' is not a local rank")) << r.out;
}

TEST(PinCli, ExecBindsAndVerifyConfirmsOneRank)
{
    // Local rank 0 of 1: core L#0 of this machine; verify in the child sees it.
    RunResult r = pin("exec --ranks 1 --local-rank 0 -- " DOORBELL_PIN_BIN
                      " verify --ranks 1 --local-rank 0");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(has(r, "doorbell-pin: local rank 0 (--local-rank) -> core L#0")) << r.out;
    EXPECT_TRUE(has(r, "local rank 0: CPUs planned")) << r.out;
    EXPECT_TRUE(has(r, "verify: as planned")) << r.out;
    RunResult missing = pin("exec --local-rank 0 -- /nonexistent/program");
    EXPECT_EQ(missing.rc, 2);
    EXPECT_TRUE(has(missing, "cannot run '/nonexistent/program'")) << missing.out;
}
