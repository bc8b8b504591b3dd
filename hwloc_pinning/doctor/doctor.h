// doorbell-doctor: checks that find the slow paths RDMA jobs fall into without
// an error (firmware mismatch, missing GPUDirect modules, degraded PCIe links,
// remote interrupts, heat, congestion) by reading sysfs and procfs only.
//
// Each check appends Findings to a Report; a Finding is PASS, WARN or FAIL
// with the evidence read and one line saying how to fix it. A file that is
// missing or unreadable is a WARN naming the path and the errno text, never a
// crash: the doctor runs on broken machines.
#pragma once

#include "fs.h"
#include "pinning/nic_irqs.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace doorbell::doctor {

enum class Status {
    kPass = 0,
    kWarn = 1,
    kFail = 2
}; ///< ordered: worst is max

const char *status_name(Status s); // "PASS", "WARN", "FAIL"

struct Finding {
    std::string              check;   ///< check name ("pcie")
    std::string              subject; ///< what was examined ("mlx5_0 port 1", "0000:c1:00.0")
    Status                   status = Status::kPass;
    std::string              summary;  ///< one line
    std::vector<std::string> evidence; ///< "path: value" lines actually read
    std::string              fix;      ///< how to fix it; empty on PASS
};

using Report = std::vector<Finding>;

// Appends a Finding and returns it so evidence can be added.
Finding &add_finding(Report &out, const std::string &check, const std::string &subject,
                     Status status, const std::string &summary, const std::string &fix = "");
// A warning about the host as a whole: what a check has nothing to look at
// (no NIC, no GPU) or could not read, with the evidence line that says so.
struct Inventory;

// Why no RDMA NIC and no NVIDIA GPU is on PCI: the inventory's reason, or
// what the PCI tree showed.
std::string no_nic_or_gpu(const Inventory &inv);
Finding    &warn_host(Report &out, const std::string &check, const std::string &summary,
                      const std::string &fix, const std::string &evidence);
// "path: value" or "path: <error>" for one read.
std::string evidence_line(const std::string &path, const ReadResult &r);

Status worst(const Report &report); // kPass for an empty report

// One InfiniBand/RoCE port: /sys/class/infiniband/<dev>/ports/<n>/*.
struct RdmaPort {
    int         num = 0;
    std::string state;      ///< "4: ACTIVE"
    std::string phys_state; ///< "5: LinkUp"
    std::string rate;       ///< "200 Gb/sec (4X HDR)"
    std::string link_layer; ///< "InfiniBand" or "Ethernet"
};

// One RDMA device (HCA function) and the PCI function behind it.
struct RdmaDevice {
    std::string           name;     ///< "mlx5_0"
    std::string           bdf;      ///< "0000:01:00.0"; empty when `device` is no PCI link
    std::string           fw_ver;   ///< "28.39.1002"; empty when unreadable
    std::string           hca_type; ///< "MT4129"
    std::string           board_id; ///< "MT_0000000838"
    std::vector<RdmaPort> ports;
};

// A PCI function we care about (NICs and NVIDIA GPUs).
struct PciFunction {
    std::string bdf;
    uint32_t    vendor     = 0; ///< 0x15b3 Mellanox, 0x10de NVIDIA
    uint32_t    class_code = 0; ///< 24-bit, e.g. 0x030200 3D controller
};

// What exists on this machine (or in the recorded tree).
struct Inventory {
    std::vector<RdmaDevice> rdma;
    std::string
        rdma_absent_reason; ///< why rdma is empty ("/sys/class/infiniband: No such file or directory")
    std::vector<PciFunction> gpus;
    std::vector<PciFunction>
                nics; ///< PCI functions of RDMA devices plus other Mellanox network functions
    std::string pci_absent_reason;
};

// Counters read at one instant: "mlx5_0/1/np_cnp_sent" -> value,
// "tcp/RetransSegs" -> value.
using CounterSnapshot = std::map<std::string, uint64_t>;

struct Options {
    std::string root;       ///< --root: a recorded tree; empty = live
    std::string later_root; ///< --later: the same tree recorded interval_ms later
    std::string topology;   ///< --topology: hwloc XML of the recorded node (pinplan)
    std::string record;     ///< --record: copy what is read into this folder (and <record>.later)
    int         interval_ms = -1;  ///< --interval; -1 = default (200 live, 0 recorded)
    std::vector<std::string> only; ///< --check NAME (repeatable)
    bool                     json = false;
    bool                     mpi  = false;
};

struct Context {
    Options                  opt;
    Fs                       fs;       ///< reads opt.root
    Fs                       later_fs; ///< the end-of-window snapshot (live, or --later)
    Inventory                inv;
    CounterSnapshot          before;        ///< counters at the start of the window
    CounterSnapshot          after;         ///< counters at its end (== before when no window)
    int                      window_ms = 0; ///< 0 = no window: rates unknown, totals only
    std::string              host; ///< hostname (live) or proc/sys/kernel/hostname of the tree
    std::vector<std::string> job_firmware; ///< --mpi: "host dev hca_type fw_ver" of every rank
    std::string              job_error;    ///< --mpi: why the job-wide exchange did not happen
    bool                     job_exchanged = false;
};

// Inventory and counters (inventory.cc, counters.cc).
Inventory       take_inventory(const Fs &fs);
CounterSnapshot read_counters(const Fs &fs, const Inventory &inv);
std::string     read_hostname(const Fs &fs);

// No RDMA NIC on this host: a warning that says what cannot be checked
// ("no RDMA NIC: <what>"), and true; false when there is one.
bool warn_no_rdma_nic(const Context &ctx, Report &out, const std::string &check,
                      const std::string &what);

// The checks, one per file. Each appends at least one Finding.
void check_rdma(Context &ctx, Report &out);
void check_firmware(Context &ctx, Report &out);
void check_gpudirect(Context &ctx, Report &out);
void check_pcie(Context &ctx, Report &out);
void check_irq(Context &ctx, Report &out);
void check_irqbalance(Context &ctx, Report &out);
void check_pinplan(Context &ctx, Report &out);
void check_thermal(Context &ctx, Report &out);
void check_congestion(Context &ctx, Report &out);
void check_retransmit(Context &ctx, Report &out);

// A NIC's interrupts through doorbell_pinning (its /proc/interrupts and
// msi_irqs parser), under the context's root ("/" when live).
std::string               pin_root(const Context &ctx);
pin::Result<pin::NicIrqs> find_rdma_irqs(const Context &ctx, const RdmaDevice &dev);

struct CheckInfo {
    const char *name;
    const char *what;
    void (*run)(Context &, Report &);
    bool needs_counters;
};
extern const CheckInfo kChecks[];
extern const size_t    kNumChecks;
const CheckInfo       *find_check(const std::string &name);

// Firmware consistency over "host dev hca_type fw_ver" lines: every HCA of one
// type must run the same version; any difference is a FAIL (a patch-level
// mismatch broke GPUDirect in the field). Appends one Finding per HCA type.
void compare_firmware(const std::vector<std::string> &lines, const std::string &scope, Report &out);
std::string firmware_line(const std::string &host, const RdmaDevice &dev);

// Job-wide exchange under mpirun (job_exchange_*.cc): fills ctx.job_firmware
// with every rank's firmware_line()s. Returns false with ctx.job_error set when
// this build has no MPI or the exchange failed.
bool job_exchange_firmware(Context &ctx);
// Gathers every rank's rendered report at rank 0 and the worst status
// everywhere. Returns the text to print on this rank (empty off rank 0).
std::string job_gather_reports(Context &ctx, const std::string &mine, bool json,
                               Status &worst_inout);
/// MPI_Finalize, once this rank has printed what it prints (main.cc).
void job_finalize();
bool job_available();

// Output (report.cc).
std::string render_text(const Context &ctx, const Report &report);
std::string render_json(const Context &ctx, const Report &report);
std::string json_escape(const std::string &s);

// Per-second rate of a counter over the window; nullopt without a window or
// when the counter is missing or went backwards (reset).
std::optional<double>   counter_rate(const Context &ctx, const std::string &key);
std::optional<uint64_t> counter_delta(const Context &ctx, const std::string &key);

} // namespace doorbell::doctor
