// Firmware per HCA (fw_ver) and its consistency: on this host, and with --mpi
// across every node of the job. HCAs of one type (hca_type) must run one
// version; even a patch-level difference is a FAIL, because such a mismatch
// silently broke GPUDirect RDMA between nodes in the field.
#include "doctor.h"

#include <map>
#include <set>
#include <sstream>

namespace doorbell::doctor {

static constexpr size_t kMaxEvidence = 16; ///< keeps a 1000-node report readable

// One whitespace-free token per field, so lines split back exactly.
static std::string or_dash(const std::string &s)
{
    if (s.empty())
        return "-";
    std::string t = s;
    for (char &c : t)
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
            c = '_';
    return t;
}

std::string firmware_line(const std::string &host, const RdmaDevice &dev)
{
    return or_dash(host) + " " + or_dash(dev.name) + " " + or_dash(dev.hca_type) + " " +
           or_dash(dev.fw_ver);
}

// "28.39.1002" vs "28.39.1010" -> "patch"; names the first differing field.
static std::string difference_level(const std::string &a, const std::string &b)
{
    static const char *const kLevel[] = {"major", "minor", "patch"};
    std::istringstream       x(a), y(b);
    std::string              p, q;
    for (int i = 0; std::getline(x, p, '.'); i++) {
        if (!std::getline(y, q, '.') || p != q)
            return i < 3 ? kLevel[i] : "build";
    }
    return std::getline(y, q, '.') ? "build" : "same";
}

void compare_firmware(const std::vector<std::string> &lines, const std::string &scope, Report &out)
{
    struct Entry {
        std::string host, dev, fw;
    };
    std::map<std::string, std::vector<Entry>> by_type;
    for (const std::string &line : lines) {
        std::istringstream in(line);
        std::string        host, dev, type, fw;
        if (!(in >> host >> dev >> type >> fw))
            continue;
        by_type[type].push_back({host, dev, fw});
    }
    for (const auto &[type, entries] : by_type) {
        std::map<std::string, std::vector<const Entry *>> by_fw;
        std::set<std::string>                             hosts;
        for (const Entry &e : entries) {
            by_fw[e.fw].push_back(&e);
            hosts.insert(e.host);
        }
        std::string subject = "HCA type " + type;
        if (by_fw.size() == 1) {
            Finding &f = add_finding(out, "firmware", subject, Status::kPass,
                                     std::to_string(entries.size()) + " HCA(s) on " +
                                         std::to_string(hosts.size()) + " host(s) " + scope +
                                         " all run " + by_fw.begin()->first);
            for (size_t i = 0; i < entries.size() && i < kMaxEvidence; i++)
                f.evidence.push_back(entries[i].host + " " + entries[i].dev + " fw_ver " +
                                     entries[i].fw);
            continue;
        }
        // The majority version is the reference; name every HCA that differs.
        auto ref = by_fw.begin();
        for (auto it = by_fw.begin(); it != by_fw.end(); ++it)
            if (it->second.size() > ref->second.size())
                ref = it;
        std::string level;
        for (const auto &[fw, _] : by_fw)
            if (fw != ref->first)
                level = difference_level(ref->first, fw);
        Finding &f = add_finding(
            out, "firmware", subject, Status::kFail,
            std::to_string(by_fw.size()) + " firmware versions " + scope + " (" + level +
                "-level difference; most run " + ref->first + ")",
            "flash every " + type +
                " to one version (mlxfwmanager -u or mstflint), then reboot or mlxfwreset");
        // Differing HCAs first, then the majority, up to kMaxEvidence lines.
        size_t shown = 0, hidden = 0;
        auto   show = [&](const std::vector<const Entry *> &list, const std::string &fw) {
            for (const Entry *e : list) {
                if (shown < kMaxEvidence) {
                    f.evidence.push_back(e->host + " " + e->dev + " fw_ver " + fw +
                                           (fw == ref->first ? "" : "  <- differs"));
                    shown++;
                } else {
                    hidden++;
                }
            }
        };
        for (const auto &[fw, list] : by_fw)
            if (fw != ref->first)
                show(list, fw);
        show(ref->second, ref->first);
        if (hidden)
            f.evidence.push_back("... and " + std::to_string(hidden) + " more HCA(s)");
    }
}

void check_firmware(Context &ctx, Report &out)
{
    if (ctx.inv.rdma.empty()) {
        warn_host(out, "firmware", "no RDMA NIC: no firmware to check",
                  "install the HCA driver (mlx5_ib) so fw_ver appears under /sys/class/infiniband",
                  ctx.inv.rdma_absent_reason);
    }
    std::vector<std::string> lines;
    for (const RdmaDevice &dev : ctx.inv.rdma) {
        std::string path = "/sys/class/infiniband/" + dev.name + "/fw_ver";
        if (dev.fw_ver.empty()) {
            Finding &f = add_finding(out, "firmware", dev.name, Status::kWarn, "fw_ver unreadable",
                                     "check the driver (dmesg | grep " + dev.name +
                                         "); read it with `mstflint -d " +
                                         (dev.bdf.empty() ? dev.name : dev.bdf) + " q`");
            f.evidence.push_back(evidence_line(path, ctx.fs.read(path)));
            continue;
        }
        lines.push_back(firmware_line(ctx.host, dev));
    }
    compare_firmware(lines, "on " + ctx.host, out);

    if (!ctx.opt.mpi)
        return;
    if (!ctx.job_exchanged) {
        Finding &f = add_finding(
            out, "firmware", "job", Status::kWarn, "job-wide firmware comparison not done",
            "run `mpirun --map-by ppr:1:node doorbell-doctor --mpi` from a build with MPI");
        f.evidence.push_back(ctx.job_error);
        return;
    }
    if (ctx.job_firmware.empty()) {
        add_finding(out, "firmware", "job", Status::kWarn, "no rank reported an RDMA device",
                    "check that the job's nodes have RDMA NICs");
        return;
    }
    compare_firmware(ctx.job_firmware, "across the job", out);
}

} // namespace doorbell::doctor
