// Text and JSON formatting. JSON is written by hand (strings escaped) to keep
// the library free of dependencies.
#include "pinning/report.h"

#include <cstdio>
#include <sstream>

#include "pinning/cpu_list.h"

namespace doorbell::pin {

namespace {

std::string json_string(const std::string &s)
{
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += static_cast<char>(c);
        } else if (c < 0x20) {
            char buf[8];
            snprintf(buf, sizeof(buf), "\\u%04x", c);
            o += buf;
        } else {
            o += static_cast<char>(c);
        }
    }
    return o + "\"";
}

std::string json_ints(const std::vector<int> &v)
{
    std::string o = "[";
    for (size_t i = 0; i < v.size(); i++)
        o += (i ? "," : "") + std::to_string(v[i]);
    return o + "]";
}

std::string join(const std::vector<std::string> &v, const char *sep)
{
    std::string o;
    for (const std::string &s : v)
        o += (o.empty() ? "" : sep) + s;
    return o;
}

std::string core_label(const Machine &m, int core)
{
    return "L#" + std::to_string(m.cores[core].index);
}

} // namespace

std::string format_machine(const Machine &m)
{
    std::ostringstream o;
    o << "topology: " << m.source << "\n";
    o << "  " << m.packages << " package(s), " << m.numa_nodes.size() << " NUMA node(s), "
      << m.cores.size() << " core(s), " << m.pu_count() << " PU(s)"
      << (m.pu_count() > static_cast<int>(m.cores.size()) ? " (SMT)" : "") << "\n";
    for (const NumaNode &n : m.numa_nodes) {
        std::vector<int> pus;
        std::string      cores;
        for (int c : n.cores) {
            pus.insert(pus.end(), m.cores[c].pus.begin(), m.cores[c].pus.end());
            cores += (cores.empty() ? "" : " ") + core_label(m, c) + "(" +
                     format_cpu_list(m.cores[c].pus) + ")";
        }
        o << "  NUMA node " << n.os_index << " (package "
          << (n.package >= 0 ? std::to_string(n.package) : std::string("-")) << "): PUs "
          << format_cpu_list(pus) << "\n    cores " << cores << "\n";
    }
    if (m.nics.empty()) {
        o << "no RDMA NIC found: the topology has no InfiniBand/RoCE (OpenFabrics) device, so there "
             "are no NIC interrupts to place; ranks can still be bound\n";
        return o.str();
    }
    for (const Nic &n : m.nics) {
        o << "NIC " << n.name << ": PCI " << n.bdf << ", IB " << join(n.ib_devices, ",")
          << ", netdev " << (n.netdevs.empty() ? "-" : join(n.netdevs, ",")) << "\n";
        std::vector<std::string> nodes;
        for (int x : n.numa_nodes)
            nodes.push_back(std::to_string(x));
        o << "  attached to " << n.attached_to << ", package "
          << (n.package >= 0 ? std::to_string(n.package) : std::string("- (spans packages)"))
          << ", NUMA " << join(nodes, ",") << ", local PUs " << format_cpu_list(n.local_pus)
          << "\n";
    }
    return o.str();
}

std::string format_nic_irqs(const std::string &nic, const NicIrqs &irqs)
{
    std::ostringstream o;
    o << "interrupts of " << nic << " (PCI " << irqs.bdf << ", msi_irqs " << irqs.msi_layout
      << "): " << irqs.completion_count() << " completion, "
      << irqs.irqs.size() - irqs.completion_count() << " async\n";
    for (const NicIrq &i : irqs.irqs)
        o << "  IRQ " << i.irq << "  " << (i.kind == IrqKind::completion ? "completion" : "async")
          << (i.vector >= 0 ? " " + std::to_string(i.vector) : std::string()) << "  "
          << (i.name.empty() ? "(unnamed)" : i.name) << "\n";
    for (const std::string &n : irqs.notes)
        o << "  note: " << n << "\n";
    return o.str();
}

std::string format_plan_table(const Machine &m, const Plan &p)
{
    std::ostringstream o;
    char               line[256];
    for (const NicPlan &n : p.nics) {
        std::vector<int> pus;
        std::string      cores;
        for (int c : n.irq_cores) {
            pus.insert(pus.end(), m.cores[c].pus.begin(), m.cores[c].pus.end());
            cores += (cores.empty() ? "" : ",") + core_label(m, c);
        }
        o << "NIC " << n.nic << " (PCI " << n.bdf << ", NUMA " << n.numa << "): interrupt cores "
          << cores << " = PUs " << format_cpu_list(pus) << "\n";
        if (n.irqs.empty())
            o << "  no interrupts known for this NIC (none found, or not read): the cores are reserved\n";
        else {
            snprintf(line, sizeof(line), "  %6s  %-10s  %-6s  %-12s  %s\n", "IRQ", "kind", "core",
                     "affinity", "name");
            o << line;
        }
        for (const IrqAssignment &a : n.irqs) {
            snprintf(line, sizeof(line), "  %6d  %-10s  %-6s  %-12s  %s\n", a.irq,
                     a.kind == IrqKind::completion ? "completion" : "async",
                     core_label(m, a.core).c_str(), format_cpu_list(a.cpus).c_str(),
                     a.name.empty() ? "(unnamed)" : a.name.c_str());
            o << line;
        }
    }
    snprintf(line, sizeof(line), "%-10s  %-10s  %-6s  %-12s  %-4s  %s\n", "local rank", "NIC",
             "core", "PUs", "NUMA", "memory");
    o << line;
    for (const RankPlan &r : p.ranks) {
        std::string flag = r.shares_irq_core ? "  (shares an interrupt core)" : "";
        if (r.sharing > 1)
            flag += "  (" + std::to_string(r.sharing) + " ranks on this core)";
        snprintf(line, sizeof(line), "%-10d  %-10s  %-6s  %-12s  %-4d  bind to node %d%s\n",
                 r.local_rank, r.nic.empty() ? "-" : r.nic.c_str(), core_label(m, r.core).c_str(),
                 format_cpu_list(r.pus).c_str(), r.numa, r.numa, flag.c_str());
        o << line;
    }
    o << (p.separated ? "interrupts and ranks on separate cores\n" :
                        "interrupts and ranks NOT fully separated (see notes)\n");
    for (const std::string &n : p.notes)
        o << "note: " << n << "\n";
    return o.str();
}

std::string format_plan_json(const Machine &m, const Plan &p)
{
    std::ostringstream o;
    o << "{\n  \"topology\": " << json_string(m.source)
      << ",\n  \"separated\": " << (p.separated ? "true" : "false") << ",\n  \"nics\": [";
    for (size_t i = 0; i < p.nics.size(); i++) {
        const NicPlan   &n = p.nics[i];
        std::vector<int> cores, pus;
        for (int c : n.irq_cores) {
            cores.push_back(m.cores[c].index);
            pus.insert(pus.end(), m.cores[c].pus.begin(), m.cores[c].pus.end());
        }
        o << (i ? "," : "") << "\n    {\"name\": " << json_string(n.nic)
          << ", \"pci\": " << json_string(n.bdf) << ", \"numa\": " << n.numa
          << ", \"irq_cores\": " << json_ints(cores) << ", \"irq_pus\": " << json_ints(pus)
          << ", \"irqs\": [";
        for (size_t j = 0; j < n.irqs.size(); j++) {
            const IrqAssignment &a = n.irqs[j];
            o << (j ? "," : "") << "\n      {\"irq\": " << a.irq
              << ", \"name\": " << json_string(a.name) << ", \"kind\": \""
              << (a.kind == IrqKind::completion ? "completion" : "async")
              << "\", \"core\": " << m.cores[a.core].index << ", \"cpus\": " << json_ints(a.cpus)
              << "}";
        }
        o << (n.irqs.empty() ? "]}" : "\n    ]}");
    }
    o << (p.nics.empty() ? "],\n" : "\n  ],\n") << "  \"ranks\": [";
    for (size_t i = 0; i < p.ranks.size(); i++) {
        const RankPlan &r = p.ranks[i];
        o << (i ? "," : "") << "\n    {\"local_rank\": " << r.local_rank
          << ", \"nic\": " << json_string(r.nic) << ", \"core\": " << m.cores[r.core].index
          << ", \"pus\": " << json_ints(r.pus) << ", \"numa\": " << r.numa
          << ", \"shares_irq_core\": " << (r.shares_irq_core ? "true" : "false")
          << ", \"ranks_on_core\": " << r.sharing << "}";
    }
    o << (p.ranks.empty() ? "],\n" : "\n  ],\n") << "  \"notes\": [";
    for (size_t i = 0; i < p.notes.size(); i++)
        o << (i ? ", " : "") << json_string(p.notes[i]);
    o << "]\n}\n";
    return o.str();
}

} // namespace doorbell::pin
