// The doorbell-pin plan against what is in place: the plan (doorbell_pinning's
// make_plan over the hwloc topology) gives each NIC completion vector a whole
// core on the NIC's NUMA node; every IRQ whose smp_affinity_list differs from
// it is listed. The live topology is used on a live node; a recorded tree
// needs its topology as hwloc XML (--topology FILE.xml).
#include "doctor.h"

#include "pinning/cpu_list.h"
#include "pinning/plan.h"
#include "pinning/topology.h"
#include "pinning/verify.h"

namespace doorbell::doctor {

static constexpr size_t kMaxListed = 12;

void check_pinplan(Context &ctx, Report &out)
{
    if (warn_no_rdma_nic(ctx, out, "pinplan", "no interrupt plan to compare"))
        return;
    if (!ctx.opt.root.empty() && ctx.opt.topology.empty()) {
        warn_host(
            out, "pinplan", "recorded tree without a topology: plan not computed",
            "record it with `lstopo-no-graphics --of xml topo.xml` and pass --topology topo.xml",
            "--root " + ctx.opt.root + " given without --topology");
        return;
    }
    pin::Result<pin::Machine> machine = pin::load_machine(ctx.opt.topology);
    if (!machine.ok()) {
        add_finding(out, "pinplan", "host", Status::kWarn,
                    "cannot load the topology: plan not computed",
                    "check hwloc (lstopo-no-graphics) and the --topology file")
            .evidence.push_back(machine.error());
        return;
    }

    std::vector<pin::NicInput> inputs;
    std::vector<std::string>   ev;
    for (const RdmaDevice &dev : ctx.inv.rdma) {
        const pin::Nic *nic = machine->find_nic(dev.name);
        if (!nic) {
            ev.push_back(machine->source + ": no NIC named " + dev.name);
            continue;
        }
        pin::Result<pin::NicIrqs> irqs = pin::find_nic_irqs(pin_root(ctx), *nic);
        if (!irqs.ok()) {
            ev.push_back(irqs.error());
            continue;
        }
        inputs.push_back(pin::NicInput{*nic, std::move(*irqs)});
    }
    if (inputs.empty()) {
        Finding &f = add_finding(out, "pinplan", "host", Status::kWarn,
                                 "no NIC of this node found in the topology",
                                 "give the topology of this very node (--topology)");
        f.evidence = ev;
        return;
    }

    pin::Plan plan  = pin::make_plan(*machine, inputs, pin::PlanOptions{});
    size_t    total = 0, differ = 0;
    for (const pin::IrqCheck &c : pin::check_irqs(plan, pin_root(ctx))) {
        total++;
        if (c.ok())
            continue;
        differ++;
        if (ev.size() < kMaxListed)
            ev.push_back("IRQ " + std::to_string(c.irq) + " " + c.name + ": " +
                         (c.error.empty() ? "now " + pin::format_cpu_list(c.current) : c.error) +
                         ", plan " + pin::format_cpu_list(c.planned));
    }
    for (const pin::NicPlan &n : plan.nics) {
        std::vector<int> pus;
        for (int core : n.irq_cores)
            if (core >= 0 && size_t(core) < machine->cores.size())
                pus.insert(pus.end(), machine->cores[size_t(core)].pus.begin(),
                           machine->cores[size_t(core)].pus.end());
        ev.push_back("plan: " + n.nic + " interrupts on NUMA node " + std::to_string(n.numa) +
                     ", CPUs " + pin::format_cpu_list(pus));
    }
    for (const std::string &note : plan.notes)
        ev.push_back("plan note: " + note);
    Finding *f;
    if (total == 0)
        f = &add_finding(out, "pinplan", "host", Status::kWarn,
                         "the plan places no interrupts (none found for the NICs)",
                         "check /proc/interrupts for the NICs' mlx5_comp* lines");
    else if (differ)
        f = &add_finding(out, "pinplan", "host", Status::kWarn,
                         std::to_string(differ) + " of " + std::to_string(total) +
                             " NIC IRQs differ from the doorbell-pin plan",
                         "apply it as root: doorbell-pin apply-irqs (doorbell-pin plan shows it)");
    else
        f = &add_finding(out, "pinplan", "host", Status::kPass,
                         "all " + std::to_string(total) +
                             " NIC IRQs are where the doorbell-pin plan puts them");
    f->evidence = ev;
}

} // namespace doorbell::doctor
