// irqbalance rewrites /proc/irq/*/smp_affinity every 10 s, undoing any
// interrupt placement (doorbell-pin apply-irqs, set_irq_affinity.sh). It must
// either not run or leave the NIC's interrupts alone. Banning CPUs
// (IRQBALANCE_BANNED_CPULIST, or the older hex mask IRQBALANCE_BANNED_CPUS)
// is not enough on its own: irqbalance moves every IRQ it balances *off*
// banned CPUs, the NIC's included, so the NIC's IRQs must also be excluded
// with --banirq in IRQBALANCE_ARGS. Config: /etc/default/irqbalance (Debian),
// /etc/sysconfig/irqbalance (RHEL).
#include "doctor.h"

#include "pinning/cpu_list.h"
#include "pinning/irqbalance.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace doorbell::doctor {

static const char *const kConfigFiles[] = {"/etc/default/irqbalance", "/etc/sysconfig/irqbalance"};
static constexpr size_t  kMaxListedIrqs = 12;

// VALUE of an uncommented `NAME=VALUE` / `NAME="VALUE"` line; the last wins, as in the shell.
static std::optional<std::string> shell_var(const std::string &text, const std::string &name)
{
    std::istringstream         in(text);
    std::optional<std::string> value;
    for (std::string line; std::getline(in, line);) {
        size_t i = line.find_first_not_of(" \t");
        if (i == std::string::npos || line[i] == '#' ||
            line.compare(i, name.size() + 1, name + "=") != 0)
            continue;
        std::string v = line.substr(i + name.size() + 1);
        while (!v.empty() && (v.back() == ' ' || v.back() == '\r'))
            v.pop_back();
        if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
            v = v.substr(1, v.size() - 2);
        value = v;
    }
    return value;
}

// "ff00" or "00000000,0000ff00" (most significant word first) -> CPU ids.
static std::optional<std::vector<int>> parse_cpumask(const std::string &text)
{
    std::string hex;
    for (char c : text)
        if (c != ',')
            hex += c;
    if (hex.empty() || hex.size() > 4096)
        return std::nullopt;
    std::vector<int> cpus;
    for (size_t i = 0; i < hex.size(); i++) {
        char c   = hex[hex.size() - 1 - i];
        int  nib = c >= '0' && c <= '9' ? c - '0' :
                   c >= 'a' && c <= 'f' ? c - 'a' + 10 :
                   c >= 'A' && c <= 'F' ? c - 'A' + 10 :
                                          -1;
        if (nib < 0)
            return std::nullopt;
        for (int b = 0; b < 4; b++)
            if (nib & (1 << b))
                cpus.push_back(int(i) * 4 + b);
    }
    return cpus;
}

// IRQ numbers given as --banirq=N, --banirq N or -i N.
static std::set<int> banned_irqs(const std::string &args)
{
    std::set<int>      irqs;
    std::istringstream in(args);
    std::string        tok, prev;
    while (in >> tok) {
        std::string num;
        if (tok.rfind("--banirq=", 0) == 0)
            num = tok.substr(9);
        else if (prev == "--banirq" || prev == "-i")
            num = tok;
        if (auto v = parse_u64(num); v && *v < (1u << 24))
            irqs.insert(int(*v));
        prev = tok;
    }
    return irqs;
}

void check_irqbalance(Context &ctx, Report &out)
{
    if (!ctx.fs.is_dir("/proc/1")) {
        warn_host(out, "irqbalance", "cannot list processes: irqbalance state unknown",
                  "mount /proc and re-run",
                  evidence_line("/proc/1/comm", ctx.fs.read("/proc/1/comm")));
        return;
    }
    pin::IrqbalanceState state = pin::detect_irqbalance(pin_root(ctx));
    if (!state.running()) {
        add_finding(out, "irqbalance", "host", Status::kPass,
                    "irqbalance not running: interrupt affinity stays where it is set")
            .evidence.push_back("/proc/*/comm: no irqbalance process");
        return;
    }
    std::vector<std::string> ev = {"/proc/" + std::to_string(state.pids.front()) +
                                   "/comm: irqbalance (running)"};

    std::vector<int> banned_cpus;
    std::set<int>    banned;
    for (const char *path : kConfigFiles) {
        ReadResult r = ctx.fs.read(path);
        if (!r.ok) {
            ev.push_back(evidence_line(path, r));
            continue;
        }
        if (auto list = shell_var(r.value, "IRQBALANCE_BANNED_CPULIST")) {
            ev.push_back(std::string(path) + ": IRQBALANCE_BANNED_CPULIST=" + *list);
            if (auto cpus = pin::parse_cpu_list(*list); cpus.ok())
                banned_cpus = *cpus;
        } else if (auto mask = shell_var(r.value, "IRQBALANCE_BANNED_CPUS")) {
            ev.push_back(std::string(path) + ": IRQBALANCE_BANNED_CPUS=" + *mask);
            banned_cpus = parse_cpumask(*mask).value_or(std::vector<int>{});
        } else {
            ev.push_back(std::string(path) + ": no IRQBALANCE_BANNED_CPULIST");
        }
        if (auto args = shell_var(r.value, "IRQBALANCE_ARGS")) {
            ev.push_back(std::string(path) + ": IRQBALANCE_ARGS=" + *args);
            std::set<int> b = banned_irqs(*args);
            banned.insert(b.begin(), b.end());
        }
    }

    // The RDMA NICs' interrupts: the ones irqbalance must leave alone.
    std::vector<int> nic_irqs;
    for (const RdmaDevice &dev : ctx.inv.rdma)
        if (auto irqs = find_rdma_irqs(ctx, dev); irqs.ok())
            for (const pin::NicIrq &i : irqs->irqs)
                nic_irqs.push_back(i.irq);
    std::vector<int> loose;
    for (int irq : nic_irqs)
        if (!banned.count(irq))
            loose.push_back(irq);
    std::sort(loose.begin(), loose.end());

    std::string banirq;
    for (size_t i = 0; i < loose.size() && i < kMaxListedIrqs; i++)
        banirq += (i ? " " : "") + std::string("--banirq=") + std::to_string(loose[i]);
    if (loose.size() > kMaxListedIrqs)
        banirq += " ...";
    std::string fix =
        "stop it (systemctl disable --now irqbalance), or add IRQBALANCE_ARGS=\"" + banirq +
        "\" (and IRQBALANCE_BANNED_CPULIST=<the plan's interrupt CPUs>) to /etc/default/irqbalance "
        "or /etc/sysconfig/irqbalance, restart it and re-run doorbell-pin apply-irqs";
    Finding *f;
    if (ctx.inv.rdma.empty()) {
        f = &add_finding(out, "irqbalance", "host", Status::kPass,
                         "irqbalance running; no RDMA NIC interrupts to protect");
    } else if (nic_irqs.empty()) {
        f = &add_finding(
            out, "irqbalance", "host", Status::kWarn,
            "irqbalance running and the NICs' interrupts are unknown: cannot tell whether it leaves them alone",
            "stop it (systemctl disable --now irqbalance), or exclude the NIC's IRQs with --banirq");
    } else if (loose.empty()) {
        f = &add_finding(out, "irqbalance", "host", Status::kPass,
                         "irqbalance running but leaves all " + std::to_string(nic_irqs.size()) +
                             " NIC IRQs alone (--banirq)");
    } else if (!banned_cpus.empty()) {
        f = &add_finding(out, "irqbalance", "host", Status::kWarn,
                         "irqbalance bans CPUs " + pin::format_cpu_list(banned_cpus) +
                             " but balances " + std::to_string(loose.size()) + " of " +
                             std::to_string(nic_irqs.size()) +
                             " NIC IRQs: it moves them off banned CPUs too",
                         fix);
    } else {
        f = &add_finding(out, "irqbalance", "host", Status::kWarn,
                         "irqbalance running with no bans: it will move " +
                             std::to_string(loose.size()) + " NIC IRQs off their placement",
                         fix);
    }
    f->evidence = ev;
}

} // namespace doorbell::doctor
