// verify: read back and compare; never changes anything.
#include "pinning/verify.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "pinning/cpu_list.h"

namespace doorbell::pin {

std::vector<IrqCheck> check_irqs(const Plan &plan, const std::string &root)
{
    std::vector<IrqCheck> out;
    for (const NicPlan &n : plan.nics) {
        for (const IrqAssignment &a : n.irqs) {
            IrqCheck c;
            c.irq            = a.irq;
            c.name           = a.name;
            c.planned        = a.cpus;
            std::string path = (std::filesystem::path(root) / "proc/irq" / std::to_string(a.irq) /
                                "smp_affinity_list")
                                   .string();
            std::ifstream     f(path);
            std::stringstream ss;
            if (!f) {
                c.error = "cannot read " + path;
            } else {
                ss << f.rdbuf();
                Result<std::vector<int>> cur = parse_cpu_list(ss.str());
                if (cur.ok())
                    c.current = *cur;
                else
                    c.error = path + ": " + cur.error();
            }
            out.push_back(std::move(c));
        }
    }
    return out;
}

Result<BindingCheck> check_binding(const RankPlan &rank)
{
    BindingCheck c;
    c.planned_pus                 = rank.pus;
    c.planned_numa                = rank.numa;
    Result<std::vector<int>> cpus = current_cpus();
    if (!cpus.ok())
        return Error{cpus.error()};
    c.current_pus          = *cpus;
    Result<MemBinding> mem = current_memory();
    if (mem.ok())
        c.memory = *mem;
    else
        c.memory_error = mem.error();
    return c;
}

} // namespace doorbell::pin
