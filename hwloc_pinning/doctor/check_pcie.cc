// PCIe link of every NIC and GPU: current vs maximum speed and width. A link
// trained narrower or slower than the device supports halves bandwidth with
// no error anywhere. GPUs lower their link speed when idle to save power, so
// a slow GPU link is a WARN (re-check under load); a narrow link, or a slow
// NIC link, is a FAIL.
#include "doctor.h"

namespace doorbell::doctor {

// "16.0 GT/s PCIe" or "8 GT/s" -> 16.0 / 8.0; nullopt for "Unknown".
static std::optional<double> speed_gts(const std::string &s)
{
    double v       = 0;
    char   unit[8] = {0};
    if (std::sscanf(s.c_str(), "%lf %7s", &v, unit) != 2 || std::string(unit) != "GT/s" || v <= 0)
        return std::nullopt;
    return v;
}

static void check_link(Context &ctx, const PciFunction &fn, bool gpu, Report &out)
{
    std::string base    = "/sys/bus/pci/devices/" + fn.bdf;
    std::string subject = fn.bdf + (gpu ? " (GPU)" : " (NIC)");
    for (const RdmaDevice &d : ctx.inv.rdma)
        if (d.bdf == fn.bdf)
            subject = fn.bdf + " (" + d.name + ")";
    ReadResult cs                  = ctx.fs.read(base + "/current_link_speed"),
               ms                  = ctx.fs.read(base + "/max_link_speed");
    ReadResult cw                  = ctx.fs.read(base + "/current_link_width"),
               mw                  = ctx.fs.read(base + "/max_link_width");
    std::vector<std::string> ev    = {evidence_line(base + "/current_link_speed", cs),
                                      evidence_line(base + "/max_link_speed", ms),
                                      evidence_line(base + "/current_link_width", cw),
                                      evidence_line(base + "/max_link_width", mw)};
    auto                     cur_s = speed_gts(cs.value), max_s = speed_gts(ms.value);
    auto                     cur_w = parse_u64(cw.value), max_w = parse_u64(mw.value);
    Finding                 *f;
    if (!cs.ok || !ms.ok || !cw.ok || !mw.ok || !cur_s || !max_s || !cur_w || !max_w ||
        *max_w == 0) {
        f = &add_finding(
            out, "pcie", subject, Status::kWarn,
            "link speed/width unreadable (no PCIe capability exposed, e.g. a virtual function)",
            "read the link with `lspci -vv -s " + fn.bdf + "` (LnkSta vs LnkCap)");
    } else {
        char summary[160];
        std::snprintf(summary, sizeof(summary), "x%llu @ %g GT/s of x%llu @ %g GT/s",
                      (unsigned long long)*cur_w, *cur_s, (unsigned long long)*max_w, *max_s);
        if (*cur_w < *max_w) {
            f = &add_finding(out, "pcie", subject, Status::kFail,
                             std::string(summary) + ": link trained narrow",
                             "reseat the card in an electrically x" + std::to_string(*max_w) +
                                 " slot; check the riser and the BIOS bifurcation setting");
        } else if (*cur_s < *max_s) {
            if (gpu)
                f = &add_finding(
                    out, "pcie", subject, Status::kWarn,
                    std::string(summary) + ": link slow (GPUs downclock the link when idle)",
                    "re-run while the GPU is busy; if still slow, check the slot generation and BIOS PCIe speed");
            else
                f = &add_finding(
                    out, "pcie", subject, Status::kFail,
                    std::string(summary) + ": link trained slow",
                    "check the slot generation and the BIOS PCIe speed setting; reseat the card");
        } else {
            f = &add_finding(out, "pcie", subject, Status::kPass,
                             std::string(summary) + ": full link");
        }
    }
    f->evidence = ev;
}

void check_pcie(Context &ctx, Report &out)
{
    if (ctx.inv.nics.empty() && ctx.inv.gpus.empty()) {
        warn_host(
            out, "pcie", "no RDMA NIC and no NVIDIA GPU on PCI: no link to check",
            "nothing to fix unless this node should have them (check `lspci -d 15b3:` and `lspci -d 10de:`)",
            no_nic_or_gpu(ctx.inv));
        return;
    }
    for (const PciFunction &n : ctx.inv.nics)
        check_link(ctx, n, false, out);
    for (const PciFunction &g : ctx.inv.gpus)
        check_link(ctx, g, true, out);
}

} // namespace doorbell::doctor
