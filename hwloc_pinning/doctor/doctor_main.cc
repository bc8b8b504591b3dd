// The doctor's pipeline, mold-style: a linear list of passes over one Context.
// main.cc only forwards argv and prints; tests call doctor_main() directly.
#include "doctor_main.h"

#include <cstdlib>
#include <ctime>
#include <set>
#include <sstream>
#include <unistd.h>

namespace doorbell::doctor {

static constexpr int kDefaultLiveIntervalMs =
    200; ///< long enough to see a congested fabric, short enough to run everywhere
static constexpr int kMaxIntervalMs = 60000;

static const char kSynopsis[] =
    "usage: doorbell-doctor [--check NAME]... [--json] [--interval MS]\n"
    "                       [--root DIR [--later DIR] [--topology FILE.xml] | --record DIR] [--mpi]\n";
static const char kUsage[] =
    "  --check NAME   run only this check (repeatable, or comma-separated)\n"
    "  --json         print JSON instead of text\n"
    "  --interval MS  sampling window for counter rates (default 200 live, 0 on a recorded tree)\n"
    "  --root DIR     read a recorded sysfs/procfs tree (DIR/sys, DIR/proc, DIR/etc) instead of this host\n"
    "  --later DIR    the same tree recorded MS later (needs --root and --interval): rates from two snapshots\n"
    "  --topology XML hwloc XML of the recorded node, for the pinplan check (live: this machine's)\n"
    "  --record DIR   copy every file read on this machine into DIR (and the window's end into DIR.later)\n"
    "                 for replay with --root; DIR must not exist yet\n"
    "  --mpi          under mpirun: compare HCA firmware across all ranks, print every rank's report on rank 0\n"
    "exit status: 0 all pass, 1 worst is a warning, 2 worst is a failure, 3 usage error\n";

std::string usage_text()
{
    std::string u = std::string(kSynopsis) + kUsage;
    u += "checks:\n";
    for (size_t i = 0; i < kNumChecks; i++) {
        char line[160];
        std::snprintf(line, sizeof(line), "  %-11s %s\n", kChecks[i].name, kChecks[i].what);
        u += line;
    }
    return u;
}

ParseResult parse_options(const std::vector<std::string> &args, Options &opt, std::string &error)
{
    /* the options that take a path */
    const std::pair<const char *, std::string *> paths[] = {{"--root", &opt.root},
                                                            {"--later", &opt.later_root},
                                                            {"--topology", &opt.topology},
                                                            {"--record", &opt.record}};
    auto path_option = [&](const std::string &a) -> std::string * {
        for (const auto &[flag, path] : paths)
            if (a == flag)
                return path;
        return nullptr;
    };
    for (size_t i = 0; i < args.size(); i++) {
        const std::string &a     = args[i];
        auto               value = [&](std::string &out) {
            if (i + 1 >= args.size() || args[i + 1].empty()) {
                error = a + " needs a value";
                return false;
            }
            out = args[++i];
            return true;
        };
        std::string v;
        if (a == "-h" || a == "--help") {
            return ParseResult::kHelp;
        } else if (a == "--json") {
            opt.json = true;
        } else if (a == "--mpi") {
            opt.mpi = true;
        } else if (std::string *path = path_option(a)) {
            if (!value(*path))
                return ParseResult::kError;
        } else if (a == "--interval") {
            if (!value(v))
                return ParseResult::kError;
            auto ms = parse_u64(v);
            if (!ms || v.find_first_not_of("0123456789") != std::string::npos ||
                *ms > uint64_t(kMaxIntervalMs)) {
                error = "--interval " + v + ": expected milliseconds, 0 to " +
                        std::to_string(kMaxIntervalMs);
                return ParseResult::kError;
            }
            opt.interval_ms = int(*ms);
        } else if (a == "--check") {
            if (!value(v))
                return ParseResult::kError;
            std::istringstream in(v);
            for (std::string name; std::getline(in, name, ',');) {
                if (!find_check(name)) {
                    error = "--check " + name + ": unknown check (known:";
                    for (size_t c = 0; c < kNumChecks; c++)
                        error += std::string(" ") + kChecks[c].name;
                    error += ")";
                    return ParseResult::kError;
                }
                opt.only.push_back(name);
            }
        } else {
            error = "unknown argument `" + a + "`";
            return ParseResult::kError;
        }
    }
    if (!opt.later_root.empty() && opt.root.empty()) {
        error = "--later needs --root (the earlier recording)";
        return ParseResult::kError;
    }
    if (!opt.later_root.empty() && opt.interval_ms <= 0) {
        error = "--later needs --interval MS: the time between the two recordings";
        return ParseResult::kError;
    }
    if (!opt.root.empty() && opt.later_root.empty() && opt.interval_ms > 0) {
        error = "a recorded tree cannot be sampled over time: give --later DIR, or --interval 0";
        return ParseResult::kError;
    }
    if (!opt.record.empty() && !opt.root.empty()) {
        error = "--record copies the live machine; it cannot be combined with --root";
        return ParseResult::kError;
    }
    if (!opt.record.empty() && (Fs().exists(opt.record) || Fs().exists(opt.record + ".later"))) {
        error = "--record " + opt.record + ": already exists; give a new folder";
        return ParseResult::kError;
    }
    if (!opt.topology.empty() && opt.root.empty()) {
        error =
            "--topology describes a recorded node: it needs --root (a live run loads this machine's)";
        return ParseResult::kError;
    }
    if (!opt.topology.empty() && !Fs().exists(opt.topology)) {
        error = "--topology " + opt.topology + ": no such file";
        return ParseResult::kError;
    }
    if (!opt.root.empty() && !Fs().is_dir(opt.root)) {
        error = "--root " + opt.root + ": not a directory";
        return ParseResult::kError;
    }
    if (!opt.later_root.empty() && !Fs().is_dir(opt.later_root)) {
        error = "--later " + opt.later_root + ": not a directory";
        return ParseResult::kError;
    }
    return ParseResult::kOk;
}

static std::string live_hostname()
{
    char buf[256] = {0};
    if (gethostname(buf, sizeof(buf) - 1) != 0 || !buf[0])
        return "unknown-host";
    return buf;
}

static void sleep_ms(int ms)
{
    timespec ts{ms / 1000, long(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int doctor_main(const std::vector<std::string> &args, std::string &out, std::string &err)
{
    Context ctx;

    // Parse the command line. Usage errors exit 3 before anything is read.
    std::string error;
    switch (parse_options(args, ctx.opt, error)) {
    case ParseResult::kHelp:
        out = usage_text();
        return 0;
    case ParseResult::kError:
        err = "doorbell-doctor: " + error + "\n" + kSynopsis +
              "(doorbell-doctor --help lists the options and checks)\n";
        return kExitUsage;
    case ParseResult::kOk:
        break;
    }
    ctx.fs       = Fs(ctx.opt.root);
    ctx.later_fs = Fs(ctx.opt.later_root.empty() ? ctx.opt.root : ctx.opt.later_root);
    if (!ctx.opt.record.empty()) {
        ctx.fs.record_into(ctx.opt.record);
        ctx.later_fs.record_into(ctx.opt.record + ".later");
        read_hostname(ctx.fs); // the replay names the host from the copy
    }
    ctx.host = ctx.opt.root.empty() ? live_hostname() : read_hostname(ctx.fs);

    // Which checks run: all, or those named with --check (in table order).
    std::set<std::string>          only(ctx.opt.only.begin(), ctx.opt.only.end());
    std::vector<const CheckInfo *> selected;
    bool                           need_counters = false;
    for (size_t i = 0; i < kNumChecks; i++)
        if (only.empty() || only.count(kChecks[i].name)) {
            selected.push_back(&kChecks[i]);
            need_counters |= kChecks[i].needs_counters;
        }

    // What exists: RDMA devices, NICs, GPUs. Every check works from this list.
    ctx.inv = take_inventory(ctx.fs);

    // Counter snapshots at both ends of one sampling window, taken once for all
    // counter checks. A recorded tree gets its second snapshot from --later.
    if (need_counters) {
        ctx.before    = read_counters(ctx.fs, ctx.inv);
        ctx.window_ms = ctx.opt.interval_ms >= 0 ?
                            ctx.opt.interval_ms :
                            (ctx.opt.root.empty() ? kDefaultLiveIntervalMs : 0);
        if (!ctx.opt.later_root.empty()) {
            ctx.after = read_counters(ctx.later_fs, ctx.inv);
        } else if (ctx.window_ms > 0) {
            sleep_ms(ctx.window_ms);
            ctx.after = read_counters(ctx.later_fs, ctx.inv);
        } else {
            ctx.after = ctx.before;
        }
    }

    // Under mpirun, every rank's firmware list goes to every rank before the
    // checks run, so the firmware check can compare the whole job.
    if (ctx.opt.mpi)
        ctx.job_exchanged = job_exchange_firmware(ctx);

    // The checks themselves.
    Report report;
    for (const CheckInfo *c : selected)
        c->run(ctx, report);

    // With --record, add what doorbell_pinning read directly (msi_irqs, the
    // irqbalance process) so that the copy replays to the same report.
    if (!ctx.opt.record.empty()) {
        ctx.fs.record_path("/proc/1/comm");
        for (const RdmaDevice &dev : ctx.inv.rdma)
            if (!dev.bdf.empty())
                ctx.fs.record_path("/sys/bus/pci/devices/" + dev.bdf + "/msi_irqs");
        if (auto procs = ctx.fs.list("/proc"))
            for (const std::string &pid : *procs)
                if (pid.find_first_not_of("0123456789") == std::string::npos)
                    if (ReadResult r = Fs().read("/proc/" + pid + "/comm");
                        r.ok && r.value == "irqbalance")
                        ctx.fs.record_path("/proc/" + pid + "/comm");
        err += "doorbell-doctor: recorded into " + ctx.opt.record +
               "; replay: doorbell-doctor --root " + ctx.opt.record +
               (ctx.window_ms > 0 ? " --later " + ctx.opt.record + ".later --interval " +
                                        std::to_string(ctx.window_ms) :
                                    "") +
               "\n";
    }

    // Render; with --mpi rank 0 prints every rank's report.
    Status      w    = worst(report);
    std::string mine = ctx.opt.json ? render_json(ctx, report) : render_text(ctx, report);
    if (ctx.opt.mpi && ctx.job_exchanged)
        out = job_gather_reports(ctx, mine, ctx.opt.json, w);
    else
        out = mine;
    return int(w); /* with --mpi the caller prints, then job_finalize() */
}

} // namespace doorbell::doctor
