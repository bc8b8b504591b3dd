// irqbalance rewrites /proc/irq/*/smp_affinity every 10 s, undoing any
// interrupt placement (doorbell-pin apply-irqs, set_irq_affinity.sh). It must
// either not run, or be told to keep off the CPUs that serve the NIC's
// interrupts (IRQBALANCE_BANNED_CPULIST in /etc/default/irqbalance on Debian,
// /etc/sysconfig/irqbalance on RHEL; the older IRQBALANCE_BANNED_CPUS is a hex
// mask).
#include "doctor.h"

#include <set>
#include <sstream>

namespace doorbell::doctor {

static const char *const kConfigFiles[] = {"/etc/default/irqbalance", "/etc/sysconfig/irqbalance"};

// PIDs whose /proc/<pid>/comm is "irqbalance".
static std::vector<std::string> irqbalance_pids(const Fs &fs) {
  std::vector<std::string> pids;
  if (auto entries = fs.list("/proc"))
    for (const std::string &e : *entries)
      if (!e.empty() && e.find_first_not_of("0123456789") == std::string::npos)
        if (ReadResult r = fs.read("/proc/" + e + "/comm"); r.ok && r.value == "irqbalance")
          pids.push_back(e);
  return pids;
}

// VALUE of an uncommented `NAME=VALUE` / `NAME="VALUE"` line.
static std::optional<std::string> shell_var(const std::string &text, const std::string &name) {
  std::istringstream in(text);
  std::optional<std::string> value;
  for (std::string line; std::getline(in, line);) {
    size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line[i] == '#' || line.compare(i, name.size() + 1, name + "=") != 0)
      continue;
    std::string v = line.substr(i + name.size() + 1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\r'))
      v.pop_back();
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
      v = v.substr(1, v.size() - 2);
    value = v; // the last assignment wins, as in the shell
  }
  return value;
}

// "ff00" or "00000000,0000ff00" (most significant word first) -> CPU ids.
static std::optional<std::vector<int>> parse_cpumask(const std::string &text) {
  std::string hex;
  for (char c : text)
    if (c != ',')
      hex += c;
  if (hex.empty() || hex.size() > 4096)
    return std::nullopt;
  std::vector<int> cpus;
  for (size_t i = 0; i < hex.size(); i++) {
    char c = hex[hex.size() - 1 - i];
    int nib = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (nib < 0)
      return std::nullopt;
    for (int b = 0; b < 4; b++)
      if (nib & (1 << b))
        cpus.push_back(int(i) * 4 + b);
  }
  return cpus;
}

void check_irqbalance(Context &ctx, Report &out) {
  if (!ctx.fs.is_dir("/proc/1")) {
    add_finding(out, "irqbalance", "host", Status::kWarn, "cannot list processes: irqbalance state unknown",
                "mount /proc and re-run")
        .evidence.push_back(evidence_line("/proc/1/comm", ctx.fs.read("/proc/1/comm")));
    return;
  }
  std::vector<std::string> pids = irqbalance_pids(ctx.fs);
  if (pids.empty()) {
    add_finding(out, "irqbalance", "host", Status::kPass, "irqbalance not running: interrupt affinity stays where it is set")
        .evidence.push_back("/proc/*/comm: no irqbalance process");
    return;
  }
  std::vector<std::string> ev = {"/proc/" + pids.front() + "/comm: irqbalance (running)"};

  std::optional<std::vector<int>> banned;
  for (const char *path : kConfigFiles) {
    ReadResult r = ctx.fs.read(path);
    if (!r.ok) {
      ev.push_back(evidence_line(path, r));
      continue;
    }
    if (auto list = shell_var(r.value, "IRQBALANCE_BANNED_CPULIST")) {
      ev.push_back(std::string(path) + ": IRQBALANCE_BANNED_CPULIST=" + *list);
      banned = parse_cpulist(*list);
    } else if (auto mask = shell_var(r.value, "IRQBALANCE_BANNED_CPUS")) {
      ev.push_back(std::string(path) + ": IRQBALANCE_BANNED_CPUS=" + *mask);
      banned = parse_cpumask(*mask);
    } else {
      ev.push_back(std::string(path) + ": no IRQBALANCE_BANNED_CPULIST");
    }
  }

  // CPUs local to the RDMA NICs: where their interrupts belong.
  std::set<int> local;
  for (const RdmaDevice &d : ctx.inv.rdma)
    if (!d.bdf.empty())
      if (ReadResult r = ctx.fs.read("/sys/bus/pci/devices/" + d.bdf + "/local_cpulist"); r.ok)
        if (auto cpus = parse_cpulist(r.value))
          local.insert(cpus->begin(), cpus->end());

  static const std::string kFix =
      "stop it (systemctl disable --now irqbalance) or set IRQBALANCE_BANNED_CPULIST to the CPUs of the "
      "doorbell-pin plan (doorbell-pin plan) in /etc/default/irqbalance and restart it";
  Finding *f;
  if (!banned || banned->empty()) {
    f = &add_finding(out, "irqbalance", "host", Status::kWarn,
                     "irqbalance running with no banned CPUs: it will move NIC interrupts off their placement", kFix);
  } else {
    std::vector<int> hit;
    for (int c : *banned)
      if (local.count(c))
        hit.push_back(c);
    if (!local.empty() && hit.empty())
      f = &add_finding(out, "irqbalance", "host", Status::kWarn,
                       "irqbalance bans CPUs " + format_cpulist(*banned) + ", none of them local to the RDMA NICs (" +
                           format_cpulist({local.begin(), local.end()}) + ")",
                       kFix);
    else
      f = &add_finding(out, "irqbalance", "host", Status::kPass,
                       "irqbalance running but keeps off CPUs " + format_cpulist(*banned));
  }
  f->evidence = ev;
}

} // namespace doorbell::doctor
