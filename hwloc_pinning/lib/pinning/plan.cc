// The placement policy (see plan.h). Works in whole cores throughout, which
// is what keeps SMT siblings together: a core is either an interrupt core, a
// rank core, or (only when cores run out, and then said so) both.
#include "pinning/plan.h"

#include <algorithm>
#include <numeric>

#include "pinning/cpu_list.h"

namespace doorbell::pin {

namespace {

static constexpr int kCoresPerIrqCore = 4; ///< auto: at most 1 in 4 of a node's cores take IRQs

// Relative distance between two NUMA nodes (OS indexes): the topology's
// latency matrix when present, else same node < same package < elsewhere.
uint64_t numa_distance(const Machine &m, int a, int b)
{
    int pa = m.numa_position(a), pb = m.numa_position(b);
    if (pa < 0 || pb < 0)
        return 1000;
    if (!m.distances.empty())
        return m.distances[pa][pb];
    if (a == b)
        return 10;
    int ka = m.numa_nodes[pa].package, kb = m.numa_nodes[pb].package;
    return ka >= 0 && ka == kb ? 20 : 30;
}

// Cores by distance from NUMA node `home`, then by core index.
std::vector<int> cores_near(const Machine &m, int home)
{
    std::vector<int> order(m.cores.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
        return numa_distance(m, home, m.cores[x].numa) < numa_distance(m, home, m.cores[y].numa);
    });
    return order;
}

int home_node(const Machine &m, const Nic &nic, std::vector<std::string> *notes)
{
    if (nic.numa_nodes.size() == 1) {
        if (nic.attached_to == "Machine")
            notes->push_back(nic.name +
                             " hangs off Machine: the topology gives it no package; its "
                             "NUMA node is the machine's only one (" +
                             std::to_string(nic.numa_nodes[0]) + ")");
        return nic.numa_nodes[0];
    }
    int home = nic.numa_nodes.empty() ? m.numa_nodes[0].os_index : nic.numa_nodes[0];
    if (nic.numa_nodes.size() > 1) {
        std::vector<int> nodes = nic.numa_nodes;
        std::string      list;
        for (int n : nodes)
            list += (list.empty() ? "" : ",") + std::to_string(n);
        notes->push_back(
            nic.name + " hangs off " + nic.attached_to +
            ", so the topology gives it no single NUMA node (its locality spans nodes " + list +
            "); its interrupt cores are taken from node " + std::to_string(home) +
            " and its ranks start there");
    }
    return home;
}

} // namespace

std::vector<int> Plan::irq_cpus() const
{
    std::vector<int> out;
    for (const NicPlan &n : nics)
        for (const IrqAssignment &a : n.irqs)
            out.insert(out.end(), a.cpus.begin(), a.cpus.end());
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::vector<int> Plan::irq_numbers() const
{
    std::vector<int> out;
    for (const NicPlan &n : nics)
        for (const IrqAssignment &a : n.irqs)
            out.push_back(a.irq);
    std::sort(out.begin(), out.end());
    return out;
}

const RankPlan *Plan::rank(int local_rank) const
{
    for (const RankPlan &r : ranks)
        if (r.local_rank == local_rank)
            return &r;
    return nullptr;
}

Plan make_plan(const Machine &m, const std::vector<NicInput> &nics, const PlanOptions &opt)
{
    Plan      p;
    const int ncores = static_cast<int>(m.cores.size());
    const int k      = static_cast<int>(nics.size());

    // 1. Each NIC's home NUMA node.
    std::vector<int> home(k);
    for (int i = 0; i < k; i++)
        home[i] = home_node(m, nics[i].nic, &p.notes);

    // 2. How many interrupt cores each NIC wants.
    std::vector<int> want(k);
    for (int i = 0; i < k; i++) {
        if (opt.irq_cores > 0) {
            want[i] = opt.irq_cores;
            continue;
        }
        int pos          = m.numa_position(home[i]);
        int node_cores   = pos < 0 ? ncores : static_cast<int>(m.numa_nodes[pos].cores.size());
        int sharing_nics = static_cast<int>(std::count(home.begin(), home.end(), home[i]));
        want[i]          = std::max(1, node_cores / (kCoresPerIrqCore * sharing_nics));
        int vectors      = nics[i].irqs.completion_count();
        if (vectors > 0)
            want[i] = std::min(want[i], vectors);
    }

    // 3. Fewer interrupt cores when the requested ranks would not fit.
    auto total = [&] { return std::accumulate(want.begin(), want.end(), 0); };
    if (opt.ranks > 0 && ncores - total() < opt.ranks) {
        int before = total();
        while (ncores - total() < opt.ranks) {
            auto big = std::max_element(want.begin(), want.end());
            if (big == want.end() || *big <= 1)
                break;
            (*big)--;
        }
        if (total() < before)
            p.notes.push_back("interrupt cores reduced from " + std::to_string(before) + " to " +
                              std::to_string(total()) + " to make room for " +
                              std::to_string(opt.ranks) + " ranks fit on " +
                              std::to_string(ncores) + " cores");
    }

    // 4. Pick the interrupt cores: from the end of the home node (ranks fill
    //    from the front), then the nearest nodes if the home node runs out.
    std::vector<int> irq_owner(ncores, -1);
    for (int i = 0; i < k; i++) {
        NicPlan np;
        np.nic                 = nics[i].nic.name;
        np.bdf                 = nics[i].irqs.bdf.empty() ? nics[i].nic.bdf : nics[i].irqs.bdf;
        np.numa                = home[i];
        std::vector<int> order = cores_near(m, home[i]);
        // Within equal distance take the last cores first.
        std::vector<int> rev;
        for (size_t a = 0; a < order.size();) {
            size_t   b = a;
            uint64_t d = numa_distance(m, home[i], m.cores[order[a]].numa);
            while (b < order.size() && numa_distance(m, home[i], m.cores[order[b]].numa) == d)
                b++;
            for (size_t c = b; c > a; c--)
                rev.push_back(order[c - 1]);
            a = b;
        }
        for (int c : rev) {
            if (static_cast<int>(np.irq_cores.size()) == want[i])
                break;
            if (irq_owner[c] >= 0)
                continue;
            irq_owner[c] = i;
            np.irq_cores.push_back(c);
            if (m.cores[c].numa != home[i])
                p.notes.push_back(np.nic + ": NUMA node " + std::to_string(home[i]) +
                                  " has no free core left, interrupt core L#" +
                                  std::to_string(m.cores[c].index) + " is on node " +
                                  std::to_string(m.cores[c].numa));
        }
        if (np.irq_cores.empty()) {
            // Every core already takes another NIC's interrupts: share the first.
            int c = rev.front();
            np.irq_cores.push_back(c);
            p.separated = false;
            p.notes.push_back(np.nic + ": no core left for its interrupts; they share core L#" +
                              std::to_string(m.cores[c].index) + " with another NIC's");
        }
        std::sort(np.irq_cores.begin(), np.irq_cores.end(),
                  [&](int x, int y) { return m.cores[x].index < m.cores[y].index; });

        // 5. Completion vectors one per core round-robin; async on the first.
        size_t next = 0;
        for (const NicIrq &irq : nics[i].irqs.irqs) {
            IrqAssignment a;
            a.irq  = irq.irq;
            a.name = irq.name;
            a.kind = irq.kind;
            a.core = irq.kind == IrqKind::async ? np.irq_cores.front() :
                                                  np.irq_cores[next++ % np.irq_cores.size()];
            a.cpus = m.cores[a.core].pus;
            np.irqs.push_back(a);
        }
        p.nics.push_back(std::move(np));
    }

    // 6. Ranks: block-distributed over the NICs, each on the free core nearest
    //    its NIC; then interrupt cores; then shared cores.
    int free_cores = static_cast<int>(std::count(irq_owner.begin(), irq_owner.end(), -1));
    int nranks     = opt.ranks >= 0 ? opt.ranks : std::max(1, free_cores);
    std::vector<int> load(ncores, 0);
    std::vector<int> on_irq, shared;
    for (int r = 0; r < nranks; r++) {
        RankPlan rp;
        rp.local_rank = r;
        int nic       = k == 0 ? -1 : static_cast<int>(static_cast<long>(r) * k / nranks);
        int from      = nic < 0 ? m.cores[0].numa : home[nic];
        if (nic >= 0)
            rp.nic = nics[nic].nic.name;
        std::vector<int> order = nic < 0 ? std::vector<int>() : cores_near(m, from);
        if (nic < 0) {
            order.resize(ncores);
            std::iota(order.begin(), order.end(), 0);
        }
        int pick = -1;
        for (int c : order)
            if (irq_owner[c] < 0 && load[c] == 0) {
                pick = c;
                break;
            }
        if (pick < 0)
            for (int c : order)
                if (load[c] == 0) {
                    pick               = c;
                    rp.shares_irq_core = true;
                    break;
                }
        if (pick < 0) {
            pick = order[0];
            for (int c : order)
                if (load[c] < load[pick])
                    pick = c;
            shared.push_back(r);
        }
        if (rp.shares_irq_core || irq_owner[pick] >= 0) {
            rp.shares_irq_core = true;
            on_irq.push_back(r);
        }
        load[pick]++;
        rp.core = pick;
        rp.pus  = m.cores[pick].pus;
        rp.numa = m.cores[pick].numa;
        p.ranks.push_back(rp);
    }
    for (RankPlan &rp : p.ranks)
        rp.sharing = load[rp.core];

    auto rank_list = [](const std::vector<int> &v) {
        std::string s;
        for (int r : v)
            s += (s.empty() ? "" : ",") + std::to_string(r);
        return s;
    };
    if (k == 0)
        p.notes.push_back("no RDMA NIC in use: no interrupt cores; ranks placed in core order");
    if (!on_irq.empty()) {
        p.separated = false;
        p.notes.push_back("not enough cores to keep interrupts and ranks apart (" +
                          std::to_string(ncores) + " cores, " +
                          std::to_string(ncores - free_cores) + " for interrupts, " +
                          std::to_string(nranks) + " ranks): local rank(s) " + rank_list(on_irq) +
                          " share a core with NIC interrupts");
    }
    if (!shared.empty())
        p.notes.push_back("more ranks than cores: local rank(s) " + rank_list(shared) +
                          " share a core with another rank");
    return p;
}

} // namespace doorbell::pin
