// The placement policy on every recorded topology (shared and own), for
// several rank counts: interrupt cores on the NIC's NUMA node, whole cores
// only (SMT siblings never split), no overlap while cores suffice, and a
// statement whenever they do not.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "pin_test_util.h"
#include "pinning/cpu_list.h"
#include "pinning/nic_irqs.h"
#include "pinning/plan.h"
#include "pinning/topology.h"

using namespace doorbell::pin;
using namespace pin_test;

namespace {

std::vector<std::string> all_topologies()
{
    std::vector<std::string> out;
    for (const std::string &dir : {shared_fixtures() + "/hwloc", own_fixtures()}) {
        std::error_code ec;
        for (const fs::directory_entry &e : fs::directory_iterator(dir, ec))
            if (e.path().extension() == ".xml")
                out.push_back(e.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<NicInput> every_nic(const Machine &m)
{
    std::vector<NicInput> in;
    for (const Nic &n : m.nics)
        in.push_back(NicInput{n, {}});
    return in;
}

// Checks every invariant of a plan; `what` names the case.
void check_plan(const Machine &m, const std::vector<NicInput> &nics, const Plan &p, int ranks,
                const std::string &what)
{
    SCOPED_TRACE(what);
    std::set<int> irq_cores, irq_pus;
    for (const NicPlan &n : p.nics) {
        ASSERT_FALSE(n.irq_cores.empty());
        for (int c : n.irq_cores) {
            irq_cores.insert(c);
            irq_pus.insert(m.cores[c].pus.begin(), m.cores[c].pus.end());
        }
        // Interrupt cores on the NIC's NUMA node while that node has room.
        const Nic *nic = m.find_nic(n.nic);
        ASSERT_NE(nic, nullptr);
        EXPECT_NE(std::find(nic->numa_nodes.begin(), nic->numa_nodes.end(), n.numa),
                  nic->numa_nodes.end());
        for (int c : n.irq_cores)
            if (m.cores[c].numa != n.numa) {
                EXPECT_FALSE(p.notes.empty()) << "interrupt core off the NIC's node without a note";
            }
        // Every interrupt is affine to a whole interrupt core.
        for (const IrqAssignment &a : n.irqs) {
            EXPECT_EQ(a.cpus, m.cores[a.core].pus);
            EXPECT_TRUE(irq_cores.count(a.core));
        }
    }
    ASSERT_EQ(static_cast<int>(p.ranks.size()), ranks);
    std::set<int> rank_cores;
    bool          overlap = false, shared = false;
    for (const RankPlan &r : p.ranks) {
        // Whole cores: a rank gets every SMT sibling of its core and no other PU.
        EXPECT_EQ(r.pus, m.cores[r.core].pus);
        EXPECT_EQ(r.numa, m.cores[r.core].numa);
        // SMT siblings are never split: a core's PUs are all interrupt PUs or none.
        size_t in_irq = std::count_if(r.pus.begin(), r.pus.end(),
                                      [&](int pu) { return irq_pus.count(pu); });
        EXPECT_TRUE(in_irq == 0 || in_irq == r.pus.size());
        overlap |= irq_cores.count(r.core) > 0;
        shared |= !rank_cores.insert(r.core).second;
        EXPECT_EQ(r.shares_irq_core, irq_cores.count(r.core) > 0);
    }
    int ncores = static_cast<int>(m.cores.size());
    if (ranks + static_cast<int>(nics.size()) <= ncores) {
        EXPECT_FALSE(overlap) << "interrupt and rank cores overlap although cores suffice";
        EXPECT_TRUE(p.separated);
    }
    if (ranks <= ncores) {
        EXPECT_FALSE(shared) << "two ranks on one core although cores suffice";
    }
    if (overlap) {
        EXPECT_FALSE(p.separated);
        bool said = std::any_of(p.notes.begin(), p.notes.end(), [](const std::string &n) {
            return n.find("share a core with NIC interrupts") != std::string::npos;
        });
        EXPECT_TRUE(said) << "overlap without a statement";
    }
    if (shared) {
        EXPECT_TRUE(std::any_of(p.notes.begin(), p.notes.end(), [](const std::string &n) {
            return n.find("more ranks than cores") != std::string::npos;
        }));
    }
    // A rank goes near its NIC: no free core nearer than the one it got was
    // left unused.
    if (!overlap && !shared)
        for (const RankPlan &r : p.ranks) {
            if (r.nic.empty())
                continue;
            for (const NicPlan &n : p.nics)
                if (n.nic == r.nic && m.cores[r.core].numa != n.numa) {
                    // Then every core of the NIC's node is taken.
                    int pos = m.numa_position(n.numa);
                    for (int c : m.numa_nodes[pos].cores)
                        EXPECT_TRUE(irq_cores.count(c) || rank_cores.count(c))
                            << "rank " << r.local_rank << " placed off node " << n.numa
                            << " while core L#" << m.cores[c].index << " was free";
                }
        }
}

} // namespace

class PinPlanOnTopology : public ::testing::TestWithParam<std::string> {};

TEST_P(PinPlanOnTopology, InvariantsHoldForEveryRankCount)
{
    Result<Machine> m = load_machine(GetParam());
    ASSERT_TRUE(m.ok()) << m.error();
    ASSERT_FALSE(m->nics.empty()) << "every recorded topology here has an RDMA NIC";
    std::vector<NicInput> nics   = every_nic(*m);
    int                   ncores = static_cast<int>(m->cores.size());
    for (int ranks :
         {1, 2, ncores / 2, ncores - static_cast<int>(nics.size()), ncores, ncores + 3}) {
        if (ranks < 1)
            continue;
        PlanOptions opt;
        opt.ranks = ranks;
        check_plan(*m, nics, make_plan(*m, nics, opt), ranks,
                   GetParam() + " ranks=" + std::to_string(ranks));
    }
    // One NIC at a time too.
    for (const Nic &n : m->nics) {
        std::vector<NicInput> one{NicInput{n, {}}};
        PlanOptions           opt;
        opt.ranks = 4;
        check_plan(*m, one, make_plan(*m, one, opt), 4, GetParam() + " nic=" + n.name);
    }
}

INSTANTIATE_TEST_SUITE_P(Recorded, PinPlanOnTopology, ::testing::ValuesIn(all_topologies()),
                         [](const ::testing::TestParamInfo<std::string> &i) {
                             std::string s = fs::path(i.param).stem().string();
                             for (char &c : s)
                                 if (!isalnum(static_cast<unsigned char>(c)))
                                     c = '_';
                             return s;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PinPlanOnTopology);

TEST(PinTopology, DuplicatedBusIdIsResolvedByName)
{
    std::string f = shared_fixtures() + "/hwloc/32em64t-2n8c2t-pci-normalio.xml";
    if (!fs::exists(f))
        GTEST_SKIP() << "shared fixtures absent at " << shared_fixtures();
    Result<Machine> m = load_machine(f);
    ASSERT_TRUE(m.ok()) << m.error();
    ASSERT_EQ(m->nics.size(), 1u); // the SAS controller at the same address is no NIC
    const Nic *n = m->find_nic("mlx5_0");
    ASSERT_NE(n, m->find_nic("nope"));
    EXPECT_EQ(n, m->find_nic("ib0"));
    EXPECT_EQ(n->bdf, "0000:04:00.0");
    EXPECT_EQ(n->numa_nodes, std::vector<int>{1});
    EXPECT_EQ(n->package, 1);
    EXPECT_EQ(n->local_pus,
              (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}));
    EXPECT_EQ(m->cores.size(), 16u);
    EXPECT_EQ(m->cores[0].pus, (std::vector<int>{0, 16}));
}

TEST(PinTopology, NicOnMachineHasNoPackage)
{
    std::string f = shared_fixtures() + "/hwloc/8em64t-2p2ca2co-nonodesets.v1tov2.xml";
    if (!fs::exists(f))
        GTEST_SKIP() << "shared fixtures absent at " << shared_fixtures();
    Result<Machine> m = load_machine(f);
    ASSERT_TRUE(m.ok()) << m.error();
    const Nic *n = m->find_nic("mlx4_0");
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->attached_to, "Machine");
    EXPECT_EQ(n->package, -1);
    EXPECT_EQ(static_cast<int>(n->local_pus.size()), m->pu_count());
    EXPECT_EQ(m->find_nic("ib1"), n);
    Plan p = make_plan(*m, every_nic(*m), PlanOptions{});
    EXPECT_TRUE(std::any_of(p.notes.begin(), p.notes.end(), [](const std::string &s) {
        return s.find("hangs off Machine") != std::string::npos;
    }));
}

TEST(PinPlan, OwnMachineNicFixtureSaysWhereInterruptsWent)
{
    Result<Machine> m = load_machine(own_fixtures() + "/machine-nic.xml");
    ASSERT_TRUE(m.ok()) << m.error();
    const Nic *n = m->find_nic("mlx4_0");
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->numa_nodes, (std::vector<int>{0, 1}));
    EXPECT_EQ(n->package, -1);
    Plan p = make_plan(*m, every_nic(*m), PlanOptions{});
    ASSERT_EQ(p.nics.size(), 1u);
    EXPECT_EQ(p.nics[0].numa, 0);
    ASSERT_FALSE(p.notes.empty());
    EXPECT_NE(p.notes[0].find("spans nodes 0,1"), std::string::npos) << p.notes[0];
}

TEST(PinPlan, TwoNicsOnTwoPackagesEachRankNearItsNic)
{
    Result<Machine> m = load_machine(own_fixtures() + "/2pkg-2nic.xml");
    ASSERT_TRUE(m.ok()) << m.error();
    std::vector<NicInput> nics;
    for (const char *name : {"mlx5_0", "mlx5_1"}) {
        const Nic *n = m->find_nic(name);
        ASSERT_NE(n, nullptr);
        Result<NicIrqs> irqs = find_nic_irqs(own_fixtures() + "/root-2nic", *n);
        ASSERT_TRUE(irqs.ok()) << irqs.error();
        nics.push_back(NicInput{*n, *irqs});
    }
    PlanOptions opt;
    opt.ranks     = 6;
    opt.irq_cores = 1;
    Plan p        = make_plan(*m, nics, opt);
    check_plan(*m, nics, p, 6, "2pkg-2nic ranks=6");
    ASSERT_EQ(p.nics.size(), 2u);
    EXPECT_EQ(p.nics[0].numa, 0);
    EXPECT_EQ(p.nics[1].numa, 1);
    // Interrupt cores: the last core of each package, both SMT siblings.
    EXPECT_EQ(m->cores[p.nics[0].irq_cores[0]].pus, (std::vector<int>{3, 11}));
    EXPECT_EQ(m->cores[p.nics[1].irq_cores[0]].pus, (std::vector<int>{7, 15}));
    // Ranks 0-2 use mlx5_0 on package 0, ranks 3-5 mlx5_1 on package 1.
    for (const RankPlan &r : p.ranks) {
        bool first = r.local_rank < 3;
        EXPECT_EQ(r.nic, first ? "mlx5_0" : "mlx5_1");
        EXPECT_EQ(r.numa, first ? 0 : 1);
    }
    EXPECT_TRUE(p.separated);
    EXPECT_TRUE(p.notes.empty());
}

TEST(PinPlan, CompletionVectorsOnePerCoreRoundRobin)
{
    Result<Machine> m = load_machine(own_fixtures() + "/2pkg-2nic.xml");
    ASSERT_TRUE(m.ok()) << m.error();
    const Nic      *n    = m->find_nic("mlx5_0");
    Result<NicIrqs> irqs = find_nic_irqs(own_fixtures() + "/root-2nic", *n);
    ASSERT_TRUE(irqs.ok()) << irqs.error();
    PlanOptions opt;
    opt.irq_cores = 3;
    opt.ranks     = 1;
    Plan p        = make_plan(*m, {NicInput{*n, *irqs}}, opt);
    ASSERT_EQ(p.nics[0].irq_cores.size(), 3u);
    const std::vector<int> &cores = p.nics[0].irq_cores;
    int                     comp  = 0;
    for (const IrqAssignment &a : p.nics[0].irqs) {
        if (a.kind == IrqKind::completion)
            EXPECT_EQ(a.core, cores[comp++ % 3]) << "IRQ " << a.irq;
        else
            EXPECT_EQ(a.core, cores[0]);
    }
    EXPECT_EQ(comp, 8);
    for (int c : cores)
        EXPECT_EQ(m->cores[c].numa, 0);
}

TEST(PinPlan, DefaultInterruptCoresFollowVectorsAndCores)
{
    Machine m;
    for (int i = 0; i < 16; i++)
        m.cores.push_back(Core{i, {i}, 0, 0});
    m.numa_nodes.push_back(NumaNode{0, 0, {}});
    for (int i = 0; i < 16; i++)
        m.numa_nodes[0].cores.push_back(i);
    Nic nic;
    nic.name       = "mlx5_0";
    nic.ib_devices = {"mlx5_0"};
    nic.numa_nodes = {0};
    NicInput in{nic, {}};
    // Unknown vectors: a quarter of the node's cores.
    EXPECT_EQ(make_plan(m, {in}, PlanOptions{}).nics[0].irq_cores.size(), 4u);
    // Two vectors: two cores.
    in.irqs.irqs = {NicIrq{10, "a", IrqKind::completion, 0},
                    NicIrq{11, "b", IrqKind::completion, 1}};
    EXPECT_EQ(make_plan(m, {in}, PlanOptions{}).nics[0].irq_cores.size(), 2u);
    // 15 ranks requested: interrupt cores shrink to one, and that is said.
    PlanOptions many;
    many.ranks = 15;
    Plan p     = make_plan(m, {in}, many);
    EXPECT_EQ(p.nics[0].irq_cores.size(), 1u);
    EXPECT_TRUE(p.separated);
    ASSERT_FALSE(p.notes.empty());
    EXPECT_NE(p.notes[0].find("reduced from 2 to 1"), std::string::npos) << p.notes[0];
}

TEST(PinPlan, SingleCoreCannotSeparateAndSaysSo)
{
    Machine m;
    m.cores.push_back(Core{0, {0, 1}, 0, 0});
    m.numa_nodes.push_back(NumaNode{0, 0, {0}});
    Nic nic;
    nic.name       = "mlx5_0";
    nic.numa_nodes = {0};
    PlanOptions opt;
    opt.ranks = 2;
    Plan p    = make_plan(m, {NicInput{nic, {}}}, opt);
    EXPECT_FALSE(p.separated);
    ASSERT_EQ(p.ranks.size(), 2u);
    EXPECT_TRUE(p.ranks[0].shares_irq_core);
    EXPECT_EQ(p.ranks[1].sharing, 2);
    EXPECT_EQ(p.notes.size(), 2u); // shares interrupts; more ranks than cores
}

TEST(PinPlan, NoNicRanksInCoreOrder)
{
    Result<Machine> m = load_machine(own_fixtures() + "/2pkg-2nic.xml");
    ASSERT_TRUE(m.ok());
    PlanOptions opt;
    opt.ranks = 3;
    Plan p    = make_plan(*m, {}, opt);
    EXPECT_TRUE(p.nics.empty());
    ASSERT_EQ(p.ranks.size(), 3u);
    for (int r = 0; r < 3; r++) {
        EXPECT_EQ(p.ranks[r].core, r);
        EXPECT_EQ(p.ranks[r].pus, (std::vector<int>{r, r + 8}));
    }
    EXPECT_NE(p.notes.at(0).find("no RDMA NIC"), std::string::npos);
}

TEST(PinPlan, NumaDistancesOrderTheSpill)
{
    std::string f = shared_fixtures() + "/hwloc/topo.jwb0004.xml";
    if (!fs::exists(f))
        GTEST_SKIP() << "shared fixtures absent at " << shared_fixtures();
    Result<Machine> m = load_machine(f);
    ASSERT_TRUE(m.ok()) << m.error();
    ASSERT_EQ(m->distances.size(), 8u);
    const Nic *n = m->find_nic("mlx5_0");
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->numa_nodes, std::vector<int>{3});
    EXPECT_EQ(format_cpu_list(n->local_pus), "18-23,66-71");
    PlanOptions opt;
    opt.ranks = 10;
    Plan p    = make_plan(*m, {NicInput{*n, {}}}, opt);
    check_plan(*m, {NicInput{*n, {}}}, p, 10, "jwb0004 mlx5_0 ranks=10");
    // 5 ranks fill node 3 beside the interrupt core; the rest go to the
    // nearest nodes by latency (12, same package), never across (32).
    for (const RankPlan &r : p.ranks) {
        int d = m->distances[m->numa_position(3)][m->numa_position(r.numa)];
        EXPECT_EQ(d, r.local_rank < 5 ? 10 : 12)
            << "rank " << r.local_rank << " on node " << r.numa;
    }
}
