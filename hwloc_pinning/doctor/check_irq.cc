// Interrupt placement of each RDMA NIC. A completion interrupt served by a
// CPU on another NUMA node costs a cross-socket wake-up on every completion;
// all of a NIC's interrupts on one CPU (the kernel default on many VMs)
// serialise the whole NIC behind one core. For every completion vector (found
// by doorbell_pinning's /proc/interrupts and msi_irqs parser) this compares
// its affinity (effective_affinity_list, else smp_affinity_list) and where its
// interrupts actually fired (/proc/interrupts counts) with the NIC's
// local_cpulist.
#include "doctor.h"

#include "pinning/cpu_list.h"
#include "pinning/interrupts.h"
#include "pinning/nic_irqs.h"

#include <algorithm>
#include <map>
#include <set>

namespace doorbell::doctor {

static constexpr double kRemoteFailShare =
    0.5; ///< more than half of the NIC's interrupts fired off-node
static constexpr double   kRemoteWarnShare = 0.1;
static constexpr double   kPiledShare    = 0.9;  ///< one CPU took 90 % of all completion interrupts
static constexpr uint64_t kPiledMinCount = 1000; ///< too few interrupts to judge below this
static constexpr size_t   kMaxIrqLines   = 16;

std::string pin_root(const Context &ctx)
{
    return ctx.opt.root.empty() ? "/" : ctx.opt.root;
}

pin::Result<pin::NicIrqs> find_rdma_irqs(const Context &ctx, const RdmaDevice &dev)
{
    pin::Nic nic;
    nic.name       = dev.name;
    nic.ib_devices = {dev.name};
    nic.bdf        = dev.bdf;
    return pin::find_nic_irqs(pin_root(ctx), nic);
}

// The CPUs an IRQ may fire on: effective_affinity_list when the kernel has it.
static std::optional<std::vector<int>> irq_affinity(const Fs &fs, int irq, std::string &ev)
{
    for (const char *file : {"effective_affinity_list", "smp_affinity_list"}) {
        std::string path = "/proc/irq/" + std::to_string(irq) + "/" + file;
        ReadResult  r    = fs.read(path);
        if (!r.ok)
            continue;
        auto cpus = pin::parse_cpu_list(r.value);
        if (!cpus.ok())
            continue;
        ev = std::string(file == std::string("smp_affinity_list") ? "affinity " :
                                                                    "effective affinity ") +
             r.value;
        return *cpus;
    }
    ev = "affinity unreadable (/proc/irq/" + std::to_string(irq) + ")";
    return std::nullopt;
}

static void check_nic(Context &ctx, const RdmaDevice &dev, const pin::InterruptsTable *table,
                      Report &out)
{
    std::string subject                 = dev.name + (dev.bdf.empty() ? "" : " (" + dev.bdf + ")");
    std::string pci                     = "/sys/bus/pci/devices/" + dev.bdf;
    ReadResult  local_r                 = ctx.fs.read(pci + "/local_cpulist"),
               numa_r                   = ctx.fs.read(pci + "/numa_node");
    std::vector<std::string> ev         = {evidence_line(pci + "/numa_node", numa_r),
                                           evidence_line(pci + "/local_cpulist", local_r)};
    auto                     local_list = pin::parse_cpu_list(local_r.value);
    if (dev.bdf.empty() || !local_r.ok || !local_list.ok() || local_list->empty()) {
        Finding &f = add_finding(
            out, "irq", subject, Status::kWarn,
            "NIC locality unknown: cannot judge interrupt placement",
            "check " + pci + "/local_cpulist; `doorbell-pin show` reads the locality from hwloc");
        f.evidence = ev;
        return;
    }
    std::set<int> local(local_list->begin(), local_list->end());
    std::string   node = numa_r.ok && numa_r.value != "-1" ? "NUMA node " + numa_r.value :
                                                             "the NIC's CPUs";

    pin::Result<pin::NicIrqs>        irqs = find_rdma_irqs(ctx, dev);
    std::vector<const pin::NicIrq *> comp;
    if (irqs.ok())
        for (const pin::NicIrq &i : irqs->irqs)
            if (i.kind == pin::IrqKind::completion)
                comp.push_back(&i);
    if (!irqs.ok() || comp.empty()) {
        Finding &f = add_finding(
            out, "irq", subject, Status::kWarn, "no completion interrupts found for the NIC",
            "check that mlx5_core is bound and /proc/interrupts lists mlx5_comp*@pci:" + dev.bdf);
        f.evidence = ev;
        f.evidence.push_back(irqs.ok() ? "/proc/interrupts, " + pci + "/msi_irqs: none named for " +
                                             dev.bdf :
                                         irqs.error());
        return;
    }

    // Counts per CPU column, for where the interrupts actually fired.
    std::map<int, const pin::IrqLine *> rows;
    if (table)
        for (const pin::IrqLine &l : table->irqs)
            rows[l.irq] = &l;
    int                      remote_masks = 0, mixed_masks = 0;
    uint64_t                 fired_local = 0, fired_remote = 0;
    std::map<int, uint64_t>  per_cpu;
    std::vector<std::string> irq_lines;
    for (const pin::NicIrq *i : comp) {
        std::string aff_ev;
        auto        aff = irq_affinity(ctx.fs, i->irq, aff_ev);
        if (aff) {
            size_t in = std::count_if(aff->begin(), aff->end(),
                                      [&](int c) { return local.count(c) > 0; });
            if (in == 0)
                remote_masks++;
            else if (in < aff->size())
                mixed_masks++;
        }
        std::string fired;
        if (auto it = rows.find(i->irq); it != rows.end() && table) {
            const pin::IrqLine &l = *it->second;
            for (size_t c = 0; c < l.counts.size() && c < table->cpus.size(); c++) {
                int cpu = table->cpus[c];
                (local.count(cpu) ? fired_local : fired_remote) += l.counts[c];
                per_cpu[cpu] += l.counts[c];
            }
        }
        if (irq_lines.size() < kMaxIrqLines)
            irq_lines.push_back("IRQ " + std::to_string(i->irq) + " " + i->name + ": " + aff_ev);
    }
    uint64_t fired        = fired_local + fired_remote;
    double   remote_share = fired ? double(fired_remote) / double(fired) : 0.0;
    auto     top          = std::max_element(per_cpu.begin(), per_cpu.end(),
                                             [](const auto &a, const auto &b) { return a.second < b.second; });
    double   top_share = fired && top != per_cpu.end() ? double(top->second) / double(fired) : 0.0;

    char counts[200];
    std::snprintf(counts, sizeof(counts),
                  "/proc/interrupts: %llu of %llu completion interrupts fired on %s (%.0f %%)",
                  (unsigned long long)fired_local, (unsigned long long)fired,
                  ("CPUs " + pin::format_cpu_list(*local_list)).c_str(),
                  fired ? 100.0 * double(fired_local) / double(fired) : 0.0);
    ev.push_back(counts);
    if (top != per_cpu.end() && fired) {
        char buf[120];
        std::snprintf(buf, sizeof(buf), "busiest CPU %d: %.0f %% of them", top->first,
                      100.0 * top_share);
        ev.push_back(buf);
    }
    ev.insert(ev.end(), irq_lines.begin(), irq_lines.end());
    if (comp.size() > irq_lines.size())
        ev.push_back("... and " + std::to_string(comp.size() - irq_lines.size()) +
                     " more completion IRQs");

    std::string n   = std::to_string(comp.size());
    std::string fix = "place them with doorbell-pin: `doorbell-pin plan --nic " + dev.name +
                      "`, then `doorbell-pin apply-irqs --nic " + dev.name +
                      "` as root (and keep irqbalance off them)";
    Finding *f;
    if (remote_masks > 0 || remote_share > kRemoteFailShare) {
        f = &add_finding(out, "irq", subject, Status::kFail,
                         std::to_string(remote_masks) + " of " + n + " completion IRQs point off " +
                             node + "; " + std::to_string(int(remote_share * 100 + 0.5)) +
                             " % of their interrupts fired remotely",
                         fix);
    } else if (mixed_masks > 0 || remote_share > kRemoteWarnShare) {
        f = &add_finding(out, "irq", subject, Status::kWarn,
                         std::to_string(mixed_masks) + " of " + n +
                             " completion IRQs may fire off " + node + "; " +
                             std::to_string(int(remote_share * 100 + 0.5)) + " % fired remotely",
                         fix);
    } else if (comp.size() > 1 && fired >= kPiledMinCount && top_share >= kPiledShare) {
        f = &add_finding(out, "irq", subject, Status::kWarn,
                         "all " + n + " completion IRQs fire on CPU " + std::to_string(top->first) +
                             ": one core serves the whole NIC",
                         fix);
    } else {
        f = &add_finding(out, "irq", subject, Status::kPass,
                         n + " completion IRQs on " + node + "'s CPUs");
    }
    f->evidence = ev;
}

void check_irq(Context &ctx, Report &out)
{
    if (warn_no_rdma_nic(ctx, out, "irq", "no NIC interrupts to place"))
        return;
    ReadResult                                       text = ctx.fs.read("/proc/interrupts");
    std::optional<pin::Result<pin::InterruptsTable>> table;
    if (text.ok)
        table.emplace(pin::parse_interrupts(text.value));
    const pin::InterruptsTable *t = table && table->ok() ? &table->value() : nullptr;
    for (const RdmaDevice &dev : ctx.inv.rdma)
        check_nic(ctx, dev, t, out);
}

} // namespace doorbell::doctor
