// What the machine has: RDMA devices and their ports from
// /sys/class/infiniband, NICs and NVIDIA GPUs from /sys/bus/pci/devices.
// Every check works from this one list, so they agree on what exists.
#include "doctor.h"

namespace doorbell::doctor {

static constexpr uint32_t kVendorMellanox = 0x15b3;
static constexpr uint32_t kVendorNvidia   = 0x10de;

static std::string read_or_empty(const Fs &fs, const std::string &path)
{
    ReadResult r = fs.read(path);
    return r.ok ? r.value : "";
}

static RdmaDevice read_rdma_device(const Fs &fs, const std::string &name)
{
    RdmaDevice dev;
    dev.name         = name;
    std::string base = "/sys/class/infiniband/" + name;
    if (auto bdf = fs.link_basename(base + "/device"))
        dev.bdf = *bdf;
    dev.fw_ver   = read_or_empty(fs, base + "/fw_ver");
    dev.hca_type = read_or_empty(fs, base + "/hca_type");
    dev.board_id = read_or_empty(fs, base + "/board_id");
    if (auto ports = fs.list(base + "/ports")) {
        for (const std::string &p : *ports) {
            auto num = parse_u64(p);
            if (!num || *num > 255)
                continue;
            RdmaPort port;
            port.num        = int(*num);
            std::string pb  = base + "/ports/" + p;
            port.state      = read_or_empty(fs, pb + "/state");
            port.phys_state = read_or_empty(fs, pb + "/phys_state");
            port.rate       = read_or_empty(fs, pb + "/rate");
            port.link_layer = read_or_empty(fs, pb + "/link_layer");
            dev.ports.push_back(port);
        }
    }
    return dev;
}

Inventory take_inventory(const Fs &fs)
{
    Inventory inv;
    if (auto names = fs.list("/sys/class/infiniband")) {
        for (const std::string &n : *names)
            inv.rdma.push_back(read_rdma_device(fs, n));
        if (names->empty())
            inv.rdma_absent_reason = "/sys/class/infiniband is empty (no RDMA driver bound)";
    } else {
        inv.rdma_absent_reason = "/sys/class/infiniband: " + fs.read("/sys/class/infiniband").error;
    }

    auto bdfs = fs.list("/sys/bus/pci/devices");
    if (!bdfs) {
        inv.pci_absent_reason = "/sys/bus/pci/devices: " + fs.read("/sys/bus/pci/devices").error;
        return inv;
    }
    for (const std::string &bdf : *bdfs) {
        std::string base = "/sys/bus/pci/devices/" + bdf;
        PciFunction f;
        f.bdf        = bdf;
        f.vendor     = uint32_t(parse_u64(read_or_empty(fs, base + "/vendor")).value_or(0));
        f.class_code = uint32_t(parse_u64(read_or_empty(fs, base + "/class")).value_or(0));
        bool is_rdma = false;
        for (const RdmaDevice &d : inv.rdma)
            is_rdma |= d.bdf == bdf;
        if (f.vendor == kVendorNvidia && (f.class_code >> 16) == 0x03)
            inv.gpus.push_back(f);
        else if (is_rdma || (f.vendor == kVendorMellanox && (f.class_code >> 16) == 0x02))
            inv.nics.push_back(f);
    }
    return inv;
}

std::string read_hostname(const Fs &fs)
{
    ReadResult r = fs.read("/proc/sys/kernel/hostname");
    return r.ok && !r.value.empty() ? r.value : "unknown-host";
}

const char *status_name(Status s)
{
    switch (s) {
    case Status::kPass:
        return "PASS";
    case Status::kWarn:
        return "WARN";
    case Status::kFail:
        return "FAIL";
    }
    return "?";
}

Status worst(const Report &report)
{
    Status w = Status::kPass;
    for (const Finding &f : report)
        if (f.status > w)
            w = f.status;
    return w;
}

Finding &add_finding(Report &out, const std::string &check, const std::string &subject,
                     Status status, const std::string &summary, const std::string &fix)
{
    out.push_back(Finding{check, subject, status, summary, {}, fix});
    return out.back();
}

std::string no_nic_or_gpu(const Inventory &inv)
{
    return inv.pci_absent_reason.empty() ?
               "/sys/bus/pci/devices: no Mellanox network function, no RDMA device, no NVIDIA GPU" :
               inv.pci_absent_reason;
}

Finding &warn_host(Report &out, const std::string &check, const std::string &summary,
                   const std::string &fix, const std::string &evidence)
{
    Finding &f = add_finding(out, check, "host", Status::kWarn, summary, fix);
    f.evidence.push_back(evidence);
    return f;
}

bool warn_no_rdma_nic(const Context &ctx, Report &out, const std::string &check,
                      const std::string &what)
{
    if (!ctx.inv.rdma.empty())
        return false;
    warn_host(out, check, "no RDMA NIC: " + what,
              "nothing to fix unless this node should have an RDMA NIC",
              ctx.inv.rdma_absent_reason);
    return true;
}

std::string evidence_line(const std::string &path, const ReadResult &r)
{
    return path + ": " + (r.ok ? r.value : "<" + r.error + ">");
}

} // namespace doorbell::doctor
