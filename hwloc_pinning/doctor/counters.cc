// Counter snapshots for the congestion and retransmit checks. Both read the
// same two snapshots (start and end of one sampling window), so a live run
// waits once, and a recorded tree supplies its second snapshot with --later.
#include "doctor.h"

#include <sstream>

namespace doorbell::doctor {

// mlx5 hw_counters the checks interpret (Documentation/infiniband and the
// mlx5 counter descriptions); other files in hw_counters are ignored.
// clang-format off
static const char *const kHwCounters[] = {
    "np_ecn_marked_roce_packets", "np_cnp_sent",     "rp_cnp_handled",
    "rp_cnp_ignored",             "packet_seq_err",  "out_of_sequence",
    "local_ack_timeout_err",      "implied_nak_seq_err",
};
// clang-format on

// /proc/net/snmp holds pairs of lines: "Tcp: Name Name ..." then "Tcp: 1 2 ...".
static void read_snmp_tcp(const Fs &fs, CounterSnapshot &snap)
{
    ReadResult r = fs.read("/proc/net/snmp");
    if (!r.ok)
        return;
    std::istringstream in(r.value);
    std::string        names, values;
    while (std::getline(in, names)) {
        if (names.rfind("Tcp:", 0) != 0)
            continue;
        if (!std::getline(in, values) || values.rfind("Tcp:", 0) != 0)
            return;
        std::istringstream n(names.substr(4)), v(values.substr(4));
        std::string        name, value;
        while (n >> name && v >> value)
            if (auto x = parse_u64(value))
                snap["tcp/" + name] = *x;
        return;
    }
}

CounterSnapshot read_counters(const Fs &fs, const Inventory &inv)
{
    CounterSnapshot snap;
    for (const RdmaDevice &dev : inv.rdma) {
        for (const RdmaPort &port : dev.ports) {
            std::string dir = "/sys/class/infiniband/" + dev.name + "/ports/" +
                              std::to_string(port.num) + "/hw_counters/";
            for (const char *c : kHwCounters) {
                ReadResult r = fs.read(dir + c);
                if (!r.ok)
                    continue;
                if (auto v = parse_u64(r.value))
                    snap[dev.name + "/" + std::to_string(port.num) + "/" + c] = *v;
            }
        }
    }
    read_snmp_tcp(fs, snap);
    return snap;
}

std::optional<uint64_t> counter_delta(const Context &ctx, const std::string &key)
{
    if (ctx.window_ms <= 0)
        return std::nullopt;
    auto b = ctx.before.find(key);
    auto a = ctx.after.find(key);
    if (b == ctx.before.end() || a == ctx.after.end() || a->second < b->second)
        return std::nullopt;
    return a->second - b->second;
}

std::optional<double> counter_rate(const Context &ctx, const std::string &key)
{
    auto d = counter_delta(ctx, key);
    if (!d)
        return std::nullopt;
    return double(*d) * 1000.0 / double(ctx.window_ms);
}

} // namespace doorbell::doctor
