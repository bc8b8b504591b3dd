// The five commands, each a short sequence over the prepared Context.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "context.h"
#include "pinning/apply.h"
#include "pinning/binding.h"
#include "pinning/cpu_list.h"
#include "pinning/nic_port.h"
#include "pinning/report.h"
#include "pinning/verify.h"

namespace doorbell::pin {

static void print_irqbalance(Context &ctx)
{
    std::string advice = irqbalance_advice(ctx.irqbalance, ctx.plan.irq_cpus(),
                                           ctx.plan.irq_numbers());
    if (!advice.empty())
        std::cout << advice << "\n";
}

// The local rank for exec and verify: --local-rank, else the launcher's.
static std::optional<int> this_local_rank(Context &ctx)
{
    if (ctx.args.local_rank >= 0)
        return ctx.args.local_rank;
    if (ctx.launcher)
        return ctx.launcher->rank;
    return std::nullopt;
}

static const RankPlan &this_rank_plan(Context &ctx, int rank)
{
    const RankPlan *rp = ctx.plan.rank(rank);
    if (rp == nullptr)
        Fatal(ctx) << "local rank " << rank << " is outside the plan's " << ctx.plan.ranks.size()
                   << " ranks (set --ranks to the number of ranks per node)";
    return *rp;
}

void cmd_show(Context &ctx)
{
    std::cout << format_machine(ctx.machine);
    for (const NicInput &in : ctx.nics) {
        if (ctx.irqs_read)
            std::cout << format_nic_irqs(in.nic.name, in.irqs);
        else
            std::cout << "interrupts of " << in.nic.name
                      << ": not read (recorded topology; pass --root DIR with its procfs/sysfs)\n";
    }
    if (ctx.irqbalance.running())
        std::cout << "irqbalance is running (it rewrites interrupt affinities every 10 s)\n";
}

void cmd_plan(Context &ctx)
{
    if (ctx.args.json) {
        std::cout << format_plan_json(ctx.machine, ctx.plan);
        return;
    }
    std::cout << format_plan_table(ctx.machine, ctx.plan);
    print_irqbalance(ctx);
}

int cmd_apply_irqs(Context &ctx)
{
    if (ctx.nics.empty())
        Fatal(ctx) << "no RDMA NIC found in " << ctx.machine.source << ": no interrupts to place";
    if (!ctx.irqs_read)
        Fatal(ctx) << "apply-irqs on a recorded topology needs --root DIR (its procfs/sysfs)";
    std::error_code ec;
    if (!ctx.args.dry_run && std::filesystem::equivalent(ctx.args.root, "/", ec) && geteuid() != 0)
        Fatal(ctx) << "apply-irqs writes /proc/irq/<N>/smp_affinity_list and needs root; run it as "
                      "root or add --dry-run";
    if (ctx.plan.irq_numbers().empty())
        Fatal(ctx) << "no interrupts found for the selected NIC(s) under " << ctx.args.root
                   << " (proc/interrupts, sys/bus/pci/devices/<bdf>/msi_irqs)";
    ApplyResult r = apply_irqs(ctx.plan, ctx.args.root, ctx.args.dry_run);
    for (const std::string &l : r.done)
        std::cout << l << "\n";
    for (const std::string &e : r.errors)
        std::cerr << "doorbell-pin: error: " << e << "\n";
    print_irqbalance(ctx);
    return r.ok() ? 0 : 1;
}

int cmd_exec(Context &ctx)
{
    std::optional<int> rank = this_local_rank(ctx);
    if (!rank)
        Fatal(ctx)
            << "exec: no local rank (OMPI_COMM_WORLD_LOCAL_RANK, PMIX_LOCAL_RANK and "
               "SLURM_LOCALID are unset: not started by mpirun or srun?); pass --local-rank N";
    const RankPlan &rp = this_rank_plan(ctx, *rank);

    // CPU binding first: it is the one that matters, so it must succeed.
    if (Status s = bind_cpus(rp.pus); !s.ok())
        Fatal(ctx) << "local rank " << *rank << ": " << s.error();
    // Memory policy: refused in some containers (seccomp); run anyway and say so.
    std::string mem = "memory on NUMA node " + std::to_string(rp.numa);
    if (Status s = bind_memory(rp.numa); !s.ok())
        mem = "memory NOT bound (" + s.error() + ")";

    // Tell the program (and UCX) which NIC this rank should use.
    setenv("DOORBELL_PIN_CORE", std::to_string(ctx.machine.cores[rp.core].index).c_str(), 1);
    setenv("DOORBELL_PIN_NUMA", std::to_string(rp.numa).c_str(), 1);
    if (!rp.nic.empty()) {
        setenv("DOORBELL_PIN_NIC", rp.nic.c_str(), 1);
        if (getenv("UCX_NET_DEVICES") == nullptr) {
            NicPort port = ucx_port_for(ctx.args.root, rp.nic);
            setenv("UCX_NET_DEVICES", (rp.nic + ":" + std::to_string(port.port)).c_str(), 0);
        }
    }
    std::cerr << "doorbell-pin: local rank " << *rank << " ("
              << (ctx.args.local_rank >= 0 ? std::string("--local-rank") : ctx.launcher->source)
              << ") -> core L#" << ctx.machine.cores[rp.core].index << " PUs "
              << format_cpu_list(rp.pus) << ", " << mem << ", NIC "
              << (rp.nic.empty() ? std::string("none") : rp.nic)
              << (rp.shares_irq_core ? " (shares an interrupt core)" : "") << std::endl;

    std::vector<char *> argv;
    for (std::string &a : ctx.args.argv)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    Fatal(ctx) << "cannot run '" << ctx.args.argv[0] << "': " << strerror(errno);
}

int cmd_verify(Context &ctx)
{
    int bad = 0;
    if (ctx.nics.empty())
        std::cout << "no RDMA NIC found: no interrupt affinities to check\n";
    else if (!ctx.irqs_read)
        std::cout << "interrupts not checked: recorded topology without --root\n";
    for (const IrqCheck &c : check_irqs(ctx.plan, ctx.args.root)) {
        std::cout << "IRQ " << c.irq << " (" << (c.name.empty() ? "unnamed" : c.name)
                  << "): planned " << format_cpu_list(c.planned) << ", ";
        if (!c.error.empty())
            std::cout << "UNREADABLE: " << c.error << "\n";
        else
            std::cout << "current " << format_cpu_list(c.current) << (c.ok() ? ": ok" : ": DRIFTED")
                      << "\n";
        bad += !c.ok();
    }

    std::optional<int> rank = this_local_rank(ctx);
    if (!rank) {
        std::cout
            << "binding not checked: no local rank (not under mpirun/srun; use --local-rank N)\n";
    } else {
        const RankPlan      &rp = this_rank_plan(ctx, *rank);
        Result<BindingCheck> b  = check_binding(rp);
        if (!b.ok())
            Fatal(ctx) << b.error();
        std::cout << "local rank " << *rank << ": CPUs planned " << format_cpu_list(b->planned_pus)
                  << " (core L#" << ctx.machine.cores[rp.core].index << "), current "
                  << format_cpu_list(b->current_pus) << (b->cpus_ok() ? ": ok" : ": NOT AS PLANNED")
                  << "\n";
        std::cout << "local rank " << *rank << ": memory planned bind to NUMA " << b->planned_numa
                  << ", current ";
        if (!b->memory_error.empty())
            std::cout << "UNREADABLE: " << b->memory_error << "\n";
        else
            std::cout << b->memory.policy << " " << format_cpu_list(b->memory.nodes)
                      << (b->memory_ok() ? ": ok" : ": NOT AS PLANNED") << "\n";
        bad += !b->cpus_ok() + !b->memory_ok();
    }
    print_irqbalance(ctx);
    std::cout << (bad == 0 ? "verify: as planned" :
                             "verify: " + std::to_string(bad) + " mismatch(es)")
              << "\n";
    return bad == 0 ? 0 : 1;
}

} // namespace doorbell::pin
