// irqbalance detection and the configuration that makes it cooperate.
// IRQBALANCE_BANNED_CPULIST alone is not enough: irqbalance moves every IRQ
// it balances *off* banned CPUs, the NIC's included, so the NIC's IRQs must
// also be excluded with --banirq.
#include "pinning/irqbalance.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "pinning/cpu_list.h"

namespace doorbell::pin {

namespace fs = std::filesystem;

IrqbalanceState detect_irqbalance(const std::string &root)
{
    IrqbalanceState st;
    std::error_code ec;
    for (const fs::directory_entry &e : fs::directory_iterator(fs::path(root) / "proc", ec)) {
        std::string name = e.path().filename().string();
        if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) {
                return std::isdigit(static_cast<unsigned char>(c));
            }))
            continue;
        std::ifstream f(e.path() / "comm");
        std::string   comm;
        if (f && std::getline(f, comm) && comm == "irqbalance")
            st.pids.push_back(std::stoi(name));
    }
    std::sort(st.pids.begin(), st.pids.end());
    return st;
}

std::string irqbalance_advice(const IrqbalanceState &state, const std::vector<int> &irq_cpus,
                              const std::vector<int> &irqs)
{
    if (!state.running() || (irq_cpus.empty() && irqs.empty()))
        return "";
    std::string pids;
    for (int p : state.pids)
        pids += (pids.empty() ? "" : ",") + std::to_string(p);
    std::string args;
    for (int i : irqs)
        args += (args.empty() ? "" : " ") + std::string("--banirq=") + std::to_string(i);
    std::string s = "irqbalance is running (pid " + pids +
                    ") and would move these interrupts within 10 s. Instead of fighting it, add to "
                    "/etc/default/irqbalance (Debian) or /etc/sysconfig/irqbalance (RHEL):\n";
    if (!irq_cpus.empty())
        s += "  IRQBALANCE_BANNED_CPULIST=" + format_cpu_list(irq_cpus) + "\n";
    if (!args.empty())
        s += "  IRQBALANCE_ARGS=\"" + args + "\"\n";
    s += "then `systemctl restart irqbalance` and run apply-irqs again.";
    return s;
}

} // namespace doorbell::pin
