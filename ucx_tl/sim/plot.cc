// PNG plot of one or more runs: their time series and slowdowns go as text
// records into Debian's matplotlib (python3-matplotlib, /usr/bin/python3 so
// that a user's python3 without it does not shadow the system one).
//   S,<run>,t_us,util,queue_kib,rate0_gbps,mean_rate_gbps,joiner_gbps
//   F,<run>,size_bytes,slowdown
//   L,<run>,label[,join_us,fair_gbps]
#include <csignal>
#include <cstdio>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "sim.h"

namespace doorbell::sim {

namespace {

const char *kScript = R"PY(
import sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out, title = sys.argv[1], sys.argv[2]
runs, fct, label, join = {}, {}, {}, {}
for line in sys.stdin:
    f = line.rstrip("\n").split(",")
    if f[0] == "L":
        label[f[1]] = f[2]
        if len(f) > 4:
            join[f[1]] = (float(f[3]), float(f[4]))
    elif f[0] == "S":
        runs.setdefault(f[1], []).append([float(x) for x in f[2:]])
    elif f[0] == "F":
        fct.setdefault(f[1], []).append((float(f[2]), float(f[3])))
panels = 3 + (1 if join else 0) + (1 if fct else 0)
fig, ax = plt.subplots(panels, 1, figsize=(10, 2.6 * panels))
k = 5  # a 1 us step holds ~12 segments at 400 Gb/s: smooth over 5 steps
def smooth(v):
    return [sum(v[max(0, i - k + 1):i + 1]) / len(v[max(0, i - k + 1):i + 1]) for i in range(len(v))]
for run, rows in runs.items():
    t = [r[0] for r in rows]
    ax[0].plot(t, [r[4] for r in rows], lw=0.8, label=label[run])
    ax[1].plot(t, smooth([100 * r[1] for r in rows]), lw=0.6, label=label[run])
    ax[2].plot(t, [r[2] for r in rows], lw=0.6, label=label[run])
ax[0].set_ylabel("mean allowed rate\n(Gb/s)"); ax[0].legend(loc="upper right", fontsize=7, ncol=2)
ax[1].set_ylabel("goodput\n(% of capacity)")
ax[2].set_ylabel("bottleneck queue\n(KiB)"); ax[2].set_xlabel("time (us)")
p = 3
if join:
    for run, (j, fair) in join.items():
        rows = [r for r in runs[run] if r[0] >= j]
        ax[p].plot([r[0] - j for r in rows], smooth([r[5] / fair for r in rows]), lw=0.7,
                   label=label[run])
    ax[p].axhspan(0.9, 1.1, color="0.85")
    ax[p].set_ylabel("new flow's rate\n/ fair share"); ax[p].set_xlabel("time since it joined (us)")
    ax[p].set_yscale("log"); ax[p].legend(loc="upper right", fontsize=7, ncol=2)
    p += 1
if fct:
    for run, pts in fct.items():
        pts.sort()
        # p99 of the slowdown per size bin (a decade split in 4)
        import math
        bins = {}
        for s, d in pts:
            bins.setdefault(round(4 * math.log10(max(s, 1))), []).append(d)
        xs, ys = [], []
        for b in sorted(bins):
            v = sorted(bins[b]); xs.append(10 ** (b / 4)); ys.append(v[min(len(v) - 1, int(0.99 * len(v)))])
        ax[p].plot(xs, ys, marker="o", ms=3, lw=0.8, label=label[run])
    ax[p].set_xscale("log"); ax[p].set_yscale("log")
    ax[p].set_xlabel("flow size (bytes)"); ax[p].set_ylabel("p99 FCT slowdown")
    ax[p].legend(loc="upper right", fontsize=7, ncol=2)
fig.suptitle(title); fig.tight_layout(); fig.savefig(out, dpi=110)
)PY";

} // namespace

bool write_plot(const std::vector<SimResult> &rows, const std::string &png, std::string *error_p)
{
    const char      *py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    char             title[200];
    const SimResult &r0 = rows.front();
    std::snprintf(title, sizeof title, "%u flows, base RTT %.2f us, derived IBRC gain %.4g 1/s",
                  r0.flows, r0.base_rtt_ns * 1e-3, r0.derived_gain);
    int fds[2];
    if (pipe(fds) != 0) {
        *error_p = "pipe() failed for the plot";
        return false;
    }
    pid_t pid = fork();
    if (pid < 0) {
        *error_p = "fork() failed for the plot";
        return false;
    }
    if (pid == 0) {
        dup2(fds[0], 0);
        close(fds[0]);
        close(fds[1]);
        execlp(py, py, "-c", kScript, png.c_str(), title, (char *)nullptr);
        _exit(127);
    }
    close(fds[0]);
    std::signal(SIGPIPE, SIG_IGN); // a failed plotter must not kill the run
    FILE *f = fdopen(fds[1], "w");
    for (size_t i = 0; i < rows.size(); i++) {
        const SimResult &r = rows[i];
        std::fprintf(f, "L,%zu,%s %s", i, r.policy.c_str(), r.credit ? "credit" : "lossy");
        if (r.join_us > 0)
            std::fprintf(f, ",%.3f,%.6f", r.join_us, r.fair_share_Bps * 8e-9);
        std::fprintf(f, "\n");
        for (const Sample &s : r.series)
            std::fprintf(f, "S,%zu,%.3f,%.4f,%.2f,%.4f,%.4f,%.4f\n", i, s.t_ns * 1e-3, s.util,
                         s.queue_bytes / 1024.0, s.rate0_Bps * 8e-9, s.mean_rate_Bps * 8e-9,
                         s.joiner_Bps * 8e-9);
        for (size_t j = 0; j < r.slowdowns.size(); j++)
            std::fprintf(f, "F,%zu,%.0f,%.4f\n", i, r.sizes[j], r.slowdowns[j]);
    }
    fclose(f);
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        *error_p = std::string("plotting with ") + py +
                   " failed (needs python3-matplotlib: scripts/packages.d/pacing.txt)";
        return false;
    }
    return true;
}

} // namespace doorbell::sim
