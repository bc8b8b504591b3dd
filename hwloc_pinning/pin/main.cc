// doorbell-pin: place an RDMA NIC's interrupts and the local MPI ranks by
// hwloc topology. Every command runs the same passes in order, so `plan`,
// `apply-irqs`, `exec` and `verify` always agree on one plan.
#include <cstdlib>

#include "context.h"
#include "pinning/nic_irqs.h"
#include "pinning/topology.h"

using namespace doorbell::pin;

int main(int argc, char **argv)
{
    Context ctx;

    // Read the command line; exec keeps everything after `--` as its program.
    parse_args(ctx, argc, argv);

    // Load the machine: this one, or a recorded hwloc XML file.
    Result<Machine> m = load_machine(ctx.args.topology);
    if (!m.ok())
        Fatal(ctx) << m.error();
    ctx.machine = std::move(*m);

    // Select NICs: the ones named with --nic, else every RDMA NIC. A name is
    // looked up among IB devices and netdevs, never by bus id (recorded
    // topologies can carry one bus id twice).
    for (const std::string &name : ctx.args.nics) {
        const Nic *nic = ctx.machine.find_nic(name);
        if (nic == nullptr) {
            std::string known;
            for (const Nic &n : ctx.machine.nics)
                for (const std::string &d : n.ib_devices)
                    known += (known.empty() ? "" : ", ") + d;
            Fatal(ctx) << "no RDMA NIC named '" << name << "' in " << ctx.machine.source << " ("
                       << (known.empty() ? "it has no RDMA NIC" : "it has " + known) << ")";
        }
        ctx.nics.push_back(NicInput{*nic, {}});
    }
    if (ctx.args.nics.empty())
        for (const Nic &n : ctx.machine.nics)
            ctx.nics.push_back(NicInput{n, {}});

    // Read each NIC's interrupts under --root. A recorded topology describes
    // another machine, so this machine's /proc is only used for it when
    // --root says so.
    ctx.irqs_read = ctx.args.topology.empty() || ctx.args.root_given;
    if (ctx.irqs_read) {
        for (NicInput &in : ctx.nics) {
            Result<NicIrqs> irqs = find_nic_irqs(ctx.args.root, in.nic);
            if (!irqs.ok())
                Fatal(ctx) << irqs.error();
            in.irqs = std::move(*irqs);
        }
        ctx.irqbalance = detect_irqbalance(ctx.args.root);
    }

    // This process's place among the local ranks (mpirun, PMIx, srun).
    Result<std::optional<LocalRank>> lr = local_rank_from_env(
        [](const char *n) { return getenv(n); });
    if (!lr.ok())
        Fatal(ctx) << lr.error();
    ctx.launcher = *lr;

    // Plan: ranks from --ranks, else the launcher's local size, else one per
    // core left after interrupts.
    PlanOptions opt;
    opt.ranks     = ctx.args.ranks > 0 ?
                        ctx.args.ranks :
                        (ctx.launcher && ctx.launcher->size > 0 ? ctx.launcher->size : -1);
    opt.irq_cores = ctx.args.irq_cores;
    ctx.plan      = make_plan(ctx.machine, ctx.nics, opt);

    // Run the command.
    const std::string &c = ctx.args.command;
    if (c == "show")
        cmd_show(ctx);
    else if (c == "plan")
        cmd_plan(ctx);
    else if (c == "apply-irqs")
        return cmd_apply_irqs(ctx);
    else if (c == "exec")
        return cmd_exec(ctx);
    else if (c == "verify")
        return cmd_verify(ctx);
    return 0;
}
