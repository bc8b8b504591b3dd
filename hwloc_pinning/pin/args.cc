// Command line. Every option is accepted by every command; a bad value is an
// error naming the option.
#include <charconv>
#include <cstring>

#include "context.h"

namespace doorbell::pin {

static constexpr const char *kUsage =
    "usage: doorbell-pin <command> [options]\n"
    "commands:\n"
    "  show                 topology, RDMA NICs, their locality and interrupts\n"
    "  plan [--json]        interrupt cores and rank placement\n"
    "  apply-irqs [--dry-run]  write the plan to /proc/irq/<N>/smp_affinity_list (root)\n"
    "  exec -- CMD [ARGS]   bind this local rank (from mpirun/srun) and run CMD\n"
    "  verify               compare interrupt affinities and this process's binding with the plan\n"
    "options:\n"
    "  --topology FILE.xml  a recorded hwloc topology instead of this machine\n"
    "  --nic NAME[,NAME]    IB device or netdev (default: every RDMA NIC)\n"
    "  --root DIR           procfs/sysfs root (default /)\n"
    "  --ranks N            local ranks to place (default: launcher's local size, else one per free core)\n"
    "  --irq-cores N        interrupt cores per NIC (default: from vectors and cores)\n"
    "  --local-rank N       this process's local rank (default: launcher variables)\n";

static int parse_count(Context &ctx, const std::string &opt, const char *v, int min)
{
    int n;
    if (v == nullptr)
        Fatal(ctx) << opt << " needs a value";
    auto [p, ec] = std::from_chars(v, v + strlen(v), n);
    if (ec != std::errc() || p != v + strlen(v) || n < min || n > 1 << 20)
        Fatal(ctx) << opt << " '" << v << "': expected a whole number >= " << min;
    return n;
}

void parse_args(Context &ctx, int argc, char **argv)
{
    Args &a = ctx.args;
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        std::cout << kUsage;
        std::exit(argc < 2 ? 2 : 0);
    }
    a.command = argv[1];
    if (a.command != "show" && a.command != "plan" && a.command != "apply-irqs" &&
        a.command != "exec" && a.command != "verify")
        Fatal(ctx) << "unknown command '" << a.command
                   << "' (show, plan, apply-irqs, exec, verify)";
    for (int i = 2; i < argc; i++) {
        std::string o     = argv[i];
        const char *v     = i + 1 < argc ? argv[i + 1] : nullptr;
        auto        value = [&]() -> std::string {
            if (v == nullptr || v[0] == '\0')
                Fatal(ctx) << o << " needs a value";
            i++;
            return v;
        };
        if (o == "--") {
            if (a.command != "exec")
                Fatal(ctx) << "'--' is only for exec";
            for (i++; i < argc; i++)
                a.argv.push_back(argv[i]);
            break;
        } else if (o == "--topology") {
            a.topology = value();
        } else if (o == "--nic") {
            std::string s = value();
            size_t      b = 0;
            while (b <= s.size()) {
                size_t      c = s.find(',', b);
                std::string n = s.substr(b, c == std::string::npos ? std::string::npos : c - b);
                if (n.empty())
                    Fatal(ctx) << "--nic '" << s << "': empty NIC name";
                a.nics.push_back(n);
                if (c == std::string::npos)
                    break;
                b = c + 1;
            }
        } else if (o == "--root") {
            a.root       = value();
            a.root_given = true;
        } else if (o == "--ranks") {
            a.ranks = parse_count(ctx, o, v, 1);
            i++;
        } else if (o == "--irq-cores") {
            a.irq_cores = parse_count(ctx, o, v, 1);
            i++;
        } else if (o == "--local-rank") {
            a.local_rank = parse_count(ctx, o, v, 0);
            i++;
        } else if (o == "--json") {
            a.json = true;
        } else if (o == "--dry-run") {
            a.dry_run = true;
        } else if (o == "-h" || o == "--help") {
            std::cout << kUsage;
            std::exit(0);
        } else {
            Fatal(ctx) << "unknown option '" << o << "' for " << a.command << " (see --help)";
        }
    }
    if (a.command == "exec" && a.argv.empty())
        Fatal(ctx) << "exec needs a program: doorbell-pin exec [options] -- CMD [ARGS]";
}

} // namespace doorbell::pin
