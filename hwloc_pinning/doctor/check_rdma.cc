// RDMA devices and ports: every port must be ACTIVE with the physical link up,
// and no port may run slower than the fastest port of the same HCA type (a
// 4X link that trained at 1X, or a 200G port negotiated down to 100G, is the
// usual sign of a bad cable or a mis-set switch port).
#include "doctor.h"

#include <map>

namespace doorbell::doctor {

// "200 Gb/sec (4X HDR)" -> 200; nullopt when unparsable.
static std::optional<double> rate_gbps(const std::string &rate)
{
    size_t end = rate.find(' ');
    if (end == std::string::npos || end == 0)
        return std::nullopt;
    try {
        size_t used = 0;
        double v    = std::stod(rate.substr(0, end), &used);
        if (used != end || v < 0)
            return std::nullopt;
        return v;
    } catch (...) {
        return std::nullopt;
    }
}

void check_rdma(Context &ctx, Report &out)
{
    const Inventory &inv = ctx.inv;
    if (inv.rdma.empty()) {
        if (!inv.nics.empty()) {
            Finding &f = add_finding(
                out, "rdma", "host", Status::kFail,
                "Mellanox PCI function present but no RDMA device registered",
                "load the RDMA driver: modprobe mlx5_ib (package rdma-core), then check `ibv_devices`");
            for (const PciFunction &n : inv.nics)
                f.evidence.push_back("/sys/bus/pci/devices/" + n.bdf +
                                     ": vendor 0x15b3 network function");
            f.evidence.push_back(inv.rdma_absent_reason);
            return;
        }
        warn_host(
            out, "rdma", "no RDMA NIC on this host",
            "install an RDMA NIC and its driver (mlx5_ib), or run doorbell over the udp device",
            inv.rdma_absent_reason);
        return;
    }

    // Fastest port per HCA type: the yardstick for a degraded port.
    std::map<std::string, double> best;
    for (const RdmaDevice &dev : inv.rdma)
        for (const RdmaPort &p : dev.ports)
            if (auto g = rate_gbps(p.rate); g && p.state.find("ACTIVE") != std::string::npos)
                best[dev.hca_type] = std::max(best[dev.hca_type], *g);

    for (const RdmaDevice &dev : inv.rdma) {
        std::string base = "/sys/class/infiniband/" + dev.name;
        if (dev.ports.empty()) {
            Finding &f = add_finding(out, "rdma", dev.name, Status::kWarn, "no ports readable",
                                     "check the driver: dmesg | grep " + dev.name);
            f.evidence.push_back(
                evidence_line(base + "/ports", ReadResult{false, "", "no numbered entries"}));
            continue;
        }
        for (const RdmaPort &p : dev.ports) {
            std::string              subject = dev.name + " port " + std::to_string(p.num);
            std::string              pb      = base + "/ports/" + std::to_string(p.num);
            std::vector<std::string> ev;
            for (const char *attr : {"/state", "/phys_state", "/rate", "/link_layer"})
                ev.push_back(evidence_line(pb + attr, ctx.fs.read(pb + attr)));
            Finding *f;
            bool     active  = p.state.find("ACTIVE") != std::string::npos;
            bool     link_up = p.phys_state.find("LinkUp") != std::string::npos;
            if (p.state.empty()) {
                f = &add_finding(out, "rdma", subject, Status::kWarn, "port state unreadable",
                                 "check " + pb + " and the driver log (dmesg)");
            } else if (!link_up) {
                f = &add_finding(
                    out, "rdma", subject, Status::kFail,
                    "physical link down (" + p.phys_state + ")",
                    "check the cable and the switch port; `Polling` means no peer answers");
            } else if (!active) {
                bool ib = p.link_layer == "InfiniBand";
                f       = &add_finding(
                          out, "rdma", subject, Status::kFail,
                          "link up but port not ACTIVE (" + p.state + ")",
                    ib ?
                              "no subnet manager has configured the port: start opensm or check the fabric SM" :
                              "bring the netdev up (ip link set <if> up) and check its configuration");
            } else if (auto g = rate_gbps(p.rate);
                       g && best.count(dev.hca_type) && *g < best[dev.hca_type]) {
                char buf[160];
                std::snprintf(buf, sizeof(buf),
                              "ACTIVE but at %g Gb/s, below %g Gb/s of another %s port", *g,
                              best[dev.hca_type],
                              dev.hca_type.empty() ? "same-type" : dev.hca_type.c_str());
                f = &add_finding(
                    out, "rdma", subject, Status::kWarn, buf,
                    "reseat or replace the cable; check the switch port speed and `ibstat` width");
            } else {
                f = &add_finding(out, "rdma", subject, Status::kPass,
                                 "ACTIVE, " + (p.rate.empty() ? "rate unknown" : p.rate));
            }
            f->evidence = ev;
        }
    }
}

} // namespace doorbell::doctor
