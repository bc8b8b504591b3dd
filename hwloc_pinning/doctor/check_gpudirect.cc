// GPUDirect RDMA prerequisites: the NIC can DMA into GPU memory only when
//  - a peer-memory provider exists: nvidia_peermem (or the legacy
//    nv_peer_mem), or dmabuf (open kernel module on Linux >= 5.12);
//  - nvidia_uvm is loaded (CUDA needs it for any context);
//  - the driver allows peer mappings (RegistryDwords PeerMappingOverride=1,
//    required behind some PCIe switches and on platforms the driver does not
//    trust for P2P);
//  - the GPU's BAR1 is large ("Above 4G decoding" / resizable BAR on): with
//    a 256 MiB BAR1 at most 256 MiB of GPU memory can be registered at once,
//    and libraries silently fall back to staging through host memory.
#include "doctor.h"

#include <sstream>

namespace doorbell::doctor {

static constexpr uint64_t kLargeBar1Bytes =
    1ull << 30; ///< below this, registration of GPU buffers runs out quickly
static constexpr uint64_t k4GiB = 1ull << 32;

// Loaded per /proc/modules, or /sys/module/<name> when /proc/modules is unreadable.
static bool module_loaded(const Fs &fs, const ReadResult &modules, const std::string &name,
                          std::string &ev)
{
    if (modules.ok) {
        std::istringstream in(modules.value);
        std::string        line;
        while (std::getline(in, line))
            if (line.rfind(name + " ", 0) == 0) {
                ev = "/proc/modules: " + line.substr(0, line.find(' ', name.size() + 1));
                return true;
            }
        ev = "/proc/modules: no line for " + name;
        return false;
    }
    bool there = fs.is_dir("/sys/module/" + name);
    ev         = "/sys/module/" + name + (there ? ": present" : ": absent") +
         " (/proc/modules: " + modules.error + ")";
    return there;
}

// Linux release "6.1.0-18-amd64" -> {6,1}.
static std::pair<int, int> kernel_version(const std::string &release)
{
    int major = 0, minor = 0;
    std::sscanf(release.c_str(), "%d.%d", &major, &minor);
    return {major, minor};
}

static void check_modules(Context &ctx, Report &out)
{
    ReadResult modules = ctx.fs.read("/proc/modules");
    if (!modules.ok && !ctx.fs.is_dir("/sys/module")) {
        Finding &f = add_finding(out, "gpudirect", "modules", Status::kWarn,
                                 "cannot tell which kernel modules are loaded",
                                 "mount /proc and /sys, then re-run");
        f.evidence = {evidence_line("/proc/modules", modules), "/sys/module: absent"};
        return;
    }
    std::string ev;
    if (!module_loaded(ctx.fs, modules, "nvidia", ev)) {
        Finding &f = add_finding(out, "gpudirect", "nvidia", Status::kFail,
                                 "NVIDIA kernel driver not loaded",
                                 "install and load the NVIDIA driver (modprobe nvidia)");
        f.evidence.push_back(ev);
        return;
    }

    std::string ev_peermem, ev_legacy;
    bool        peermem = module_loaded(ctx.fs, modules, "nvidia_peermem", ev_peermem);
    bool        legacy  = !peermem && module_loaded(ctx.fs, modules, "nv_peer_mem", ev_legacy);
    ReadResult  version = ctx.fs.read("/proc/driver/nvidia/version");
    ReadResult  release = ctx.fs.read("/proc/sys/kernel/osrelease");
    auto [kmaj, kmin]   = kernel_version(release.value);
    bool open_module = version.ok && version.value.find("Open Kernel Module") != std::string::npos;
    bool dmabuf      = open_module && (kmaj > 5 || (kmaj == 5 && kmin >= 12));
    if (peermem || legacy) {
        Finding &f = add_finding(out, "gpudirect", "peer memory", Status::kPass,
                                 peermem ? "nvidia_peermem loaded" : "nv_peer_mem (legacy) loaded");
        f.evidence.push_back(peermem ? ev_peermem : ev_legacy);
    } else if (dmabuf) {
        Finding &f = add_finding(
            out, "gpudirect", "peer memory", Status::kPass,
            "no nvidia_peermem, but dmabuf is available (open kernel module, Linux >= 5.12)");
        f.evidence = {ev_peermem, evidence_line("/proc/driver/nvidia/version", version),
                      evidence_line("/proc/sys/kernel/osrelease", release)};
    } else {
        Finding &f = add_finding(
            out, "gpudirect", "peer memory", Status::kFail,
            "no peer-memory provider: GPU buffers cannot be registered with the NIC",
            "modprobe nvidia_peermem (and add it to /etc/modules-load.d/), or use the open "
            "kernel module on Linux >= 5.12 for dmabuf");
        f.evidence = {ev_peermem, evidence_line("/proc/driver/nvidia/version", version),
                      evidence_line("/proc/sys/kernel/osrelease", release)};
    }

    std::string ev_uvm;
    bool        uvm = module_loaded(ctx.fs, modules, "nvidia_uvm", ev_uvm);
    Finding    &f = add_finding(out, "gpudirect", "nvidia_uvm", uvm ? Status::kPass : Status::kFail,
                             uvm ? "nvidia_uvm loaded" :
                                      "nvidia_uvm not loaded: CUDA contexts fail to start",
                             uvm ? "" : "modprobe nvidia_uvm (or nvidia-modprobe -u -c=0)");
    f.evidence.push_back(ev_uvm);
}

static void check_peer_mapping(Context &ctx, Report &out)
{
    static const std::string kPath = "/proc/driver/nvidia/params";
    static const std::string kFix =
        "add `options nvidia NVreg_RegistryDwords=\"PeerMappingOverride=1;\"` to /etc/modprobe.d/nvidia.conf, "
        "update the initramfs and reboot";
    ReadResult params = ctx.fs.read(kPath);
    if (!params.ok) {
        Finding &f = add_finding(out, "gpudirect", "peer mapping", Status::kWarn,
                                 "cannot read the driver parameters", kFix);
        f.evidence.push_back(evidence_line(kPath, params));
        return;
    }
    std::string        line = "RegistryDwords: <absent>";
    std::istringstream in(params.value);
    for (std::string l; std::getline(in, l);)
        if (l.rfind("RegistryDwords:", 0) == 0)
            line = l;
    bool     on = line.find("PeerMappingOverride=1") != std::string::npos;
    Finding &f =
        add_finding(out, "gpudirect", "peer mapping", on ? Status::kPass : Status::kWarn,
                    on ? "PeerMappingOverride=1 set" :
                         "PeerMappingOverride not set: P2P may be refused behind PCIe switches",
                    on ? "" : kFix);
    f.evidence.push_back(kPath + ": " + line);
}

// BAR1 from the `resource` table: line i is "start end flags" of BAR i.
static void check_bar1(Context &ctx, const PciFunction &gpu, Report &out)
{
    std::string        path = "/sys/bus/pci/devices/" + gpu.bdf + "/resource";
    ReadResult         r    = ctx.fs.read(path);
    std::istringstream in(r.value);
    std::string        line;
    std::getline(in, line); // BAR0: registers
    std::getline(in, line); // BAR1: the framebuffer aperture
    std::istringstream fields(line);
    std::string        s_start, s_end;
    fields >> s_start >> s_end;
    auto start = parse_u64(s_start), end = parse_u64(s_end);
    if (!r.ok || !start || !end || *end < *start || (*start == 0 && *end == 0)) {
        Finding &f = add_finding(out, "gpudirect", gpu.bdf + " BAR1", Status::kWarn,
                                 "BAR1 size unknown",
                                 "check `lspci -vv -s " + gpu.bdf + "` for Region 1");
        f.evidence.push_back(r.ok ? path + ": line 2 is `" + line + "`" : evidence_line(path, r));
        return;
    }
    uint64_t size = *end - *start + 1;
    char     summary[160];
    std::snprintf(summary, sizeof(summary), "BAR1 %llu MiB at 0x%llx",
                  (unsigned long long)(size >> 20), (unsigned long long)*start);
    Status      s = Status::kPass;
    std::string fix;
    if (size < kLargeBar1Bytes) {
        // Placed below 4 GiB and small: the firmware did not enable 64-bit decoding.
        s = *start < k4GiB ? Status::kFail : Status::kWarn;
        fix =
            "enable \"Above 4G decoding\" and \"Resizable BAR\" in the system firmware (BIOS), or use a GPU with a large BAR1";
    }
    Finding &f = add_finding(out, "gpudirect", gpu.bdf + " BAR1", s,
                             std::string(summary) +
                                 (s == Status::kPass ? " (large BAR)" : " (small BAR)"),
                             fix);
    f.evidence.push_back(path + " line 2: " + line);
}

void check_gpudirect(Context &ctx, Report &out)
{
    if (ctx.inv.gpus.empty()) {
        warn_host(out, "gpudirect", "no NVIDIA GPU on this host: GPUDirect checks skipped",
                  "nothing to fix unless this node should have a GPU (check `lspci -d 10de:`)",
                  ctx.inv.pci_absent_reason.empty() ?
                      "/sys/bus/pci/devices: no function with vendor 0x10de and class 0x03xxxx" :
                      ctx.inv.pci_absent_reason);
        return;
    }
    check_modules(ctx, out);
    check_peer_mapping(ctx, out);
    for (const PciFunction &gpu : ctx.inv.gpus)
        check_bar1(ctx, gpu, out);
}

} // namespace doorbell::doctor
