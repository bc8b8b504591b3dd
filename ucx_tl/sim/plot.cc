// PNG plot of a run: the time series goes as CSV into Debian's matplotlib
// (python3-matplotlib, /usr/bin/python3 so that a user's python3 without it
// does not shadow the system one).
#include <cstdio>
#include <string>
#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include "sim.h"

namespace doorbell::sim {

namespace {

const char *kScript = R"PY(
import sys, csv
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out, title = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(sys.stdin))
t = [float(r["t_us"]) for r in rows]
fig, ax = plt.subplots(3, 1, sharex=True, figsize=(9, 7))
ax[0].plot(t, [float(r["rate0_gbps"]) for r in rows], label="flow 0")
ax[0].plot(t, [float(r["mean_rate_gbps"]) for r in rows], label="mean of flows")
ax[0].set_ylabel("pacer rate (Gb/s)"); ax[0].legend(loc="upper right")
u = [100 * float(r["util"]) for r in rows]
k = 5  # a 1 us step holds ~12 segments at 400 Gb/s: smooth over 5 steps
sm = [sum(u[max(0, i - k + 1):i + 1]) / len(u[max(0, i - k + 1):i + 1]) for i in range(len(u))]
ax[1].plot(t, sm, lw=0.8)
ax[1].set_ylabel("goodput (% of capacity)")
ax[2].plot(t, [float(r["queue_kib"]) for r in rows], lw=0.6, color="C3")
ax[2].set_ylabel("bottleneck queue (KiB)"); ax[2].set_xlabel("time (us)")
fig.suptitle(title); fig.tight_layout(); fig.savefig(out, dpi=110)
)PY";

} // namespace

bool write_plot(const SimResult &r, const std::string &png, std::string *error_p)
{
    const char *py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    char        title[160];
    std::snprintf(title, sizeof title,
                  "%s, gain %.4g 1/s (derived %.4g), %u flows, base RTT %.2f us", r.policy.c_str(),
                  r.gain, r.derived_gain, r.flows, r.base_rtt_ns * 1e-3);
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
    std::string csv = format_csv(r);
    FILE       *f   = fdopen(fds[1], "w");
    fwrite(csv.data(), 1, csv.size(), f);
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
