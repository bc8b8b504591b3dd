#!/usr/bin/python3
"""Table, checks, plots and markdown report of one scripts/run.sh or scripts/osu.sh run.

    mpi_report.py [--no-plots] RESULTS_DIR

Reads RESULTS_DIR/<stack>.r<round>.csv (lines "bench,bytes,value[,...]"; a
first line "# not built" or "# failed" marks a run that did not happen or
stopped part-way; a plain <stack>.csv counts as round 1), env.txt (key=value
lines), rounds.txt (the load average around every run) and the optional
bench-p2p.txt. Every cell is the median of its rounds with their min-max.
doorbell's speed is its median against plain mpirun's and against the best
stock stack's of that cell (the lowest time or the highest rate), as "how many
times as fast": above 1 doorbell is faster, for times and rates alike. Writes
table.md, checks.txt (the checks of issue 18, PASS/FAIL lines), report.md and
one PNG per benchmark (medians with min-max error bars, and the speeds), and
prints the checks and the table.
"""
import math
import os
import re
import statistics
import sys

# key -> label, in the table's order; the stock stacks are every stack but
# doorbell's (doorbell and its variants, doorbell_*).
STACKS = [
    ("plain", "plain mpirun"),
    ("ucx", "ucx sm,tcp"),
    ("ob1_tcp", "ob1 / tcp"),
    ("ucx_tcp", "ucx / tcp"),
    ("pt2pt_tcp", "osc pt2pt, ob1 / tcp"),
    ("ucx_osc", "osc ucx, ucx sm,tcp"),
    ("doorbell", "doorbell"),
    ("doorbell_osc_rdma", "doorbell, osc rdma"),
]
DOORBELL = "doorbell"
PLAIN = "plain"
# bench -> (unit, better, title, OSU program)
BENCHES = {
    "latency": ("us", "lower", "Point-to-point latency (one way)", "osu_latency"),
    "bandwidth": ("MB/s", "higher", "Point-to-point bandwidth", "osu_bw"),
    "bibw": ("MB/s", "higher", "Bidirectional bandwidth", "osu_bibw"),
    "mbw_mr": ("MB/s", "higher", "Multi-pair bandwidth, 2 pairs", "osu_mbw_mr"),
    "allreduce": ("us", "lower", "MPI_Allreduce (sum)", "osu_allreduce -c"),
    "put_latency": ("us", "lower", "MPI_Put latency", "osu_put_latency"),
    "get_bw": ("MB/s", "higher", "MPI_Get bandwidth", "osu_get_bw"),
    "acc_latency": ("us", "lower", "MPI_Accumulate latency", "osu_acc_latency -c"),
}
# The sizes the checks name, and the rounds they want.
CHECK_MIN, CHECK_MAX = 8, 1 << 20
CHECK_ROUNDS = 5


# ---------------------------------------------------------------- reading


def read_csv(path):
    """Returns (state, {bench: {bytes: value}}, failed benches); state: ok, not
    built, failed (the run stopped before any result), partial (it stopped
    part-way). "# failed BENCH" marks one benchmark of a run that failed alone."""
    data, state, failed = {}, "ok", set()
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            if line.startswith("#"):
                words = line[1:].split()
                if words[:1] == ["failed"] and len(words) > 1:
                    failed.add(words[1])
                elif words:
                    state = " ".join(words)
                continue
            parts = line.split(",")
            if len(parts) < 3:
                continue
            try:
                size, value = int(parts[1]), float(parts[2])
            except ValueError:
                continue
            if math.isfinite(value) and value > 0:
                data.setdefault(parts[0], {})[size] = value
    if state == "failed" and data:
        state = "partial"
    return state, data, failed


def read_runs(out):
    """Returns {stack: {round: (state, data, failed benches)}} for every stack with a file."""
    runs = {}
    names = sorted(os.listdir(out))
    for key, _ in STACKS:
        for name in names:
            m = re.fullmatch(re.escape(key) + r"\.r(\d+)\.csv", name)
            if m:
                runs.setdefault(key, {})[int(m.group(1))] = read_csv(os.path.join(out, name))
        legacy = os.path.join(out, key + ".csv")
        if key not in runs and os.path.exists(legacy):
            runs[key] = {1: read_csv(legacy)}
    return runs


def read_env(out):
    """key=value lines of env.txt (the first '=' splits), plus "_raw"."""
    env = {}
    path = os.path.join(out, "env.txt")
    if os.path.exists(path):
        with open(path) as f:
            raw = f.read()
        env["_raw"] = raw
        for line in raw.splitlines():
            m = re.match(r"([A-Za-z_][A-Za-z0-9_.]*)=(.*)$", line)
            if m:
                env[m.group(1)] = m.group(2)
    return env


def read_rounds(out):
    """rounds.txt: one line of key=value tokens per run, as a list of dicts."""
    path = os.path.join(out, "rounds.txt")
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                row = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
                if row:
                    rows.append(row)
    return rows


# ---------------------------------------------------------------- numbers


class Cell:
    """One stack, benchmark and size over the rounds."""

    def __init__(self, values):
        self.values = sorted(values)
        self.median = statistics.median(self.values)
        self.min = self.values[0]
        self.max = self.values[-1]
        self.n = len(self.values)


def cells_of(runs):
    """{stack: {bench: {size: Cell}}} from the runs (partial runs' sizes count)."""
    cells = {}
    for key, rounds in runs.items():
        values = {}
        for _, data, _ in rounds.values():
            for bench, series in data.items():
                for size, v in series.items():
                    values.setdefault(bench, {}).setdefault(size, []).append(v)
        cells[key] = {b: {s: Cell(v) for s, v in sz.items()} for b, sz in values.items()}
    return cells


def better_of(bench):
    return BENCHES.get(bench, ("", "lower", "", ""))[1]


def speed(bench, mine, ref):
    """How many times as fast `mine` is as `ref` (medians): above 1 is faster."""
    if mine is None or ref is None or mine <= 0 or ref <= 0:
        return None
    return ref / mine if better_of(bench) == "lower" else mine / ref


def best_stock(cells, stock, bench, size):
    """(stack, median) of the stock stack best at this cell, or (None, None)."""
    best = (None, None)
    for key in stock:
        c = cells.get(key, {}).get(bench, {}).get(size)
        if c is None:
            continue
        if best[1] is None or (c.median < best[1] if better_of(bench) == "lower" else c.median > best[1]):
            best = (key, c.median)
    return best


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


class Analysis:
    """Everything the table, the checks and the plots need."""

    def __init__(self, out):
        self.out = out
        self.env = read_env(out)
        self.runs = read_runs(out)
        self.cells = cells_of(self.runs)
        self.stacks = [k for k, _ in STACKS if k in self.runs]
        self.stock = [k for k in self.stacks if not k.startswith(DOORBELL)]
        self.rounds = max((len(r) for r in self.runs.values()), default=0)
        measured = {b for k in self.stacks for b in self.cells[k]}
        measured |= {b for rounds in self.runs.values() for run in rounds.values() for b in run[2]}
        known = [b for b in BENCHES if b in measured]
        other = sorted(measured - set(known))
        self.benches = known + other

    def sizes(self, bench):
        return sorted({s for k in self.stacks for s in self.cells[k].get(bench, {})})

    def cell(self, key, bench, size):
        return self.cells.get(key, {}).get(bench, {}).get(size)

    def median(self, key, bench, size):
        c = self.cell(key, bench, size)
        return c.median if c else None

    def speed_vs(self, bench, size, ref_key):
        return speed(bench, self.median(DOORBELL, bench, size), self.median(ref_key, bench, size))

    def speed_vs_best(self, bench, size):
        _, ref = best_stock(self.cells, self.stock, bench, size)
        return speed(bench, self.median(DOORBELL, bench, size), ref)

    def checked_sizes(self, bench):
        return [s for s in self.sizes(bench) if CHECK_MIN <= s <= CHECK_MAX]

    def state(self, key):
        """ok, or what went wrong in how many rounds."""
        runs = list(self.runs.get(key, {}).values())
        if not runs:
            return "not run"
        states = [run[0] for run in runs]
        if all(st == "not built" for st in states):
            return "not built"
        bad = [st for st in states if st != "ok"]
        what = ["%s in %d of %d rounds" % (st, bad.count(st), len(runs)) for st in sorted(set(bad))]
        failed = [b for run in runs for b in run[2]]
        what += ["%s failed in %d of %d rounds" % (bench_name(self, b), failed.count(b), len(runs))
                 for b in sorted(set(failed))]
        return ", ".join(what) or "ok"

    def failed_rounds(self, key, bench):
        """Rounds in which this stack's benchmark failed on its own."""
        return sum(1 for run in self.runs.get(key, {}).values() if bench in run[2])


# ---------------------------------------------------------------- formatting


def human(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n


def fmt(v):
    if v is None:
        return "—"
    return "%.0f" % v if v >= 1000 else "%.2f" % v if v < 10 else "%.1f" % v


def fmt_cell(c, rounds):
    if c is None:
        return "—"
    text = "%s [%s-%s]" % (fmt(c.median), fmt(c.min), fmt(c.max))
    if c.n < rounds:
        text += " (%d of %d)" % (c.n, rounds)
    return text


def fmt_speed(x):
    return "%.2fx" % x if x else "—"


def stack_label(key):
    return dict(STACKS).get(key, key)


def bench_name(a, bench):
    """The OSU program in an OSU run, else the benchmark's key."""
    return BENCHES.get(bench, ("", "", "", bench))[3] if a.env.get("suite") == "osu" else bench


def bench_label(a, bench):
    unit = BENCHES.get(bench, ("",))[0]
    return "%s (%s)" % (bench_name(a, bench), unit) if unit else bench_name(a, bench)


def table(a):
    head = ["benchmark", "size"] + [stack_label(k) for k in a.stacks]
    with_plain = DOORBELL in a.stacks and PLAIN in a.stacks
    with_best = DOORBELL in a.stacks and a.stock
    if with_best:
        head.append("best stock")
    if with_plain:
        head.append("doorbell vs plain")
    if with_best:
        head.append("doorbell vs best")
    align = ["---"] * 2 + ["---:"] * len(a.stacks) + ["---"] * bool(with_best) + ["---:"] * (len(head) - 2 - len(a.stacks) - bool(with_best))
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    for bench in a.benches:
        for size in a.sizes(bench):
            row = [bench_label(a, bench), human(size)]
            for key in a.stacks:
                c = a.cell(key, bench, size)
                if c is None and a.state(key) == "not built":
                    row.append("not built")
                elif c is None and a.failed_rounds(key, bench):
                    row.append("failed")
                else:
                    row.append(fmt_cell(c, a.rounds))
            if with_best:
                best = best_stock(a.cells, a.stock, bench, size)[0]
                row.append(stack_label(best) if best else "—")
            if with_plain:
                row.append(fmt_speed(a.speed_vs(bench, size, PLAIN)))
            if with_best:
                row.append(fmt_speed(a.speed_vs_best(bench, size)))
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def geomean_table(a):
    if DOORBELL not in a.stacks or not a.stock:
        return ""
    lines = [
        "| benchmark | sizes | doorbell vs plain | doorbell vs best stock | slowest vs best stock |",
        "|---|---|---:|---:|---:|",
    ]
    for bench in a.benches:
        sizes = a.checked_sizes(bench)
        if not sizes:
            continue
        vs_best = {s: a.speed_vs_best(bench, s) for s in sizes}
        known = {s: v for s, v in vs_best.items() if v}
        worst = min(known, key=known.get) if known else None
        lines.append(
            "| %s | %s-%s | %s | %s | %s |"
            % (
                bench_label(a, bench),
                human(sizes[0]),
                human(sizes[-1]),
                fmt_speed(geomean([a.speed_vs(bench, s, PLAIN) for s in sizes])) if PLAIN in a.stacks else "—",
                fmt_speed(geomean(list(vs_best.values()))),
                "%s at %s" % (fmt_speed(known[worst]), human(worst)) if worst else "—",
            )
        )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- checks


def beyond_spread(a, bench, size, ref):
    """Whether every round of doorbell's was behind every round of the stack
    compared (`ref`, or the best stock stack at this size): the two cells'
    min-max ranges do not meet. Below that, a median behind may be the
    rounds' noise (this host is shared and has 2 cores)."""
    key = ref if ref else best_stock(a.cells, a.stock, bench, size)[0]
    mine, other = a.cell(DOORBELL, bench, size), a.cell(key, bench, size) if key else None
    if mine is None or other is None:
        return False
    if better_of(bench) == "lower":
        return mine.min > other.max
    return mine.max < other.min


def check_every_size(a, bench, ref, floor, what):
    """PASS when doorbell is at least `floor` times as fast as `ref` (a stack,
    or None: the best stock stack) at every size CHECK_MIN..CHECK_MAX."""
    ref_name = "plain mpirun" if ref == PLAIN else "the best stock stack"
    text = "%s: %s at least %.2fx of %s at every size %s-%s" % (
        what, bench_name(a, bench), floor, ref_name, human(CHECK_MIN), human(CHECK_MAX))
    sizes = a.checked_sizes(bench)
    missing = missing_input(a, bench, ref)
    if missing:
        return "FAIL", text, missing
    speeds = {s: (a.speed_vs(bench, s, ref) if ref else a.speed_vs_best(bench, s)) for s in sizes}
    lacking = [s for s, v in speeds.items() if v is None]
    below = [s for s, v in speeds.items() if v is not None and v < floor]
    known = {s: v for s, v in speeds.items() if v is not None}
    if not known:
        return "FAIL", text, "no size measured by doorbell and %s" % ref_name
    worst = min(known, key=known.get)
    notes = ["lowest %s at %s" % (fmt_speed(known[worst]), human(worst))]
    if below:
        apart = sum(1 for s in below if beyond_spread(a, bench, s, ref))
        notes.append("%d of %d sizes below, %s of them beyond the rounds' min-max" % (
            len(below), len(sizes), apart if apart else "none"))
    if lacking:
        notes.append("no doorbell result at %s" % ", ".join(human(s) for s in lacking))
    notes += coverage_notes(a, sizes)
    return ("FAIL" if below or lacking else "PASS"), text, "; ".join(notes)


def check_geomean(a, bench, ref, floor, what):
    ref_name = "plain mpirun" if ref == PLAIN else "the best stock stack"
    text = "%s: %s geometric mean over %s-%s at least %.2fx of %s" % (
        what, bench_name(a, bench), human(CHECK_MIN), human(CHECK_MAX), floor, ref_name)
    missing = missing_input(a, bench, ref)
    if missing:
        return "FAIL", text, missing
    sizes = a.checked_sizes(bench)
    g = geomean([a.speed_vs(bench, s, ref) if ref else a.speed_vs_best(bench, s) for s in sizes])
    notes = ["%s over %d sizes" % (fmt_speed(g), len(sizes))] + coverage_notes(a, sizes)
    return ("PASS" if g and g >= floor else "FAIL"), text, "; ".join(notes)


def missing_input(a, bench, ref):
    """Why the check cannot be computed, or None."""
    if DOORBELL not in a.stacks or not a.cells.get(DOORBELL, {}).get(bench):
        return "no doorbell results (%s)" % a.state(DOORBELL)
    if ref and not a.cells.get(ref, {}).get(bench):
        return "no %s results (%s)" % (stack_label(ref), a.state(ref))
    if not ref and not any(a.cells.get(k, {}).get(bench) for k in a.stock):
        return "no stock stack ran"
    if not a.checked_sizes(bench):
        return "no size between %s and %s" % (human(CHECK_MIN), human(CHECK_MAX))
    return None


def coverage_notes(a, sizes):
    notes = []
    if sizes and (sizes[0] > CHECK_MIN or sizes[-1] < CHECK_MAX):
        notes.append("measured %s-%s only" % (human(sizes[0]), human(sizes[-1])))
    if a.rounds < CHECK_ROUNDS:
        notes.append("%d round%s (the checks want %d)" % (a.rounds, "" if a.rounds == 1 else "s", CHECK_ROUNDS))
    return notes


def checks(a):
    """[(verdict, what, detail)]: the checks of issues 18, 19 and 21 for this
    run's mode and layout, for the benchmarks it ran (one that no stack ran,
    such as allreduce in a one-sided OSU run, is not checked; one that doorbell
    alone lacks fails)."""
    mode, layout = a.env.get("mode"), a.env.get("layout", "")
    todo = []
    if mode == "local":
        where = "one host"
        todo = [
            (check_every_size, "latency", PLAIN, 0.95, where),
            (check_every_size, "bandwidth", PLAIN, 0.95, where),
            (check_every_size, "allreduce", PLAIN, 0.95, where),
            (check_geomean, "allreduce", PLAIN, 1.3, where),
        ]
    if mode == "fabric" and layout in ("2x2", "4x1"):
        # Issues 18 (2 x 2) and 19 (both): every size at least as fast as the
        # best stock stack, OSU's bidirectional and multi-pair bandwidth
        # included; the geometric-mean floor is issue 18's, on 2 x 2 only.
        where = "fabric " + layout
        todo = [(check_every_size, "allreduce", None, 1.0, where)]
        if layout == "2x2":
            todo.append((check_geomean, "allreduce", None, 1.3, where))
        todo += [(check_every_size, b, None, 1.0, where + ", across the spine")
                 for b in ("latency", "bandwidth", "bibw", "mbw_mr")]
    if mode == "fabric":
        # Issue 21: plain mpirun has no one-sided component across hosts on
        # Debian, so the reference is the best of osc pt2pt and osc ucx.
        where = "fabric %s, one-sided across hosts" % layout
        todo += [(check_every_size, b, None, 1.0, where) for b in ("put_latency", "get_bw", "acc_latency")]
    ran = lambda bench: any(a.cells.get(k, {}).get(bench) for k in a.stacks)
    return [check(a, bench, ref, floor, where) for check, bench, ref, floor, where in todo if ran(bench)]


def checks_text(a, results):
    if not results:
        return "No checks are named for this run (%s, layout %s).\n" % (
            a.env.get("mode", "?"), a.env.get("layout", "?"))
    return "".join("%-4s  %s (%s)\n" % r for r in results)


# ---------------------------------------------------------------- load


def load_table(a):
    rows = read_rounds(a.out)
    if not rows:
        return ""
    lines = [
        "| round | load before (1/5/15 min) | load after | runs (stack: seconds) |",
        "|---:|---|---|---|",
    ]
    by_round = {}
    for row in rows:
        by_round.setdefault(row.get("round", "?"), []).append(row)
    for r in sorted(by_round, key=lambda x: int(x) if x.isdigit() else 0):
        runs = by_round[r]
        desc = ", ".join(
            "%s: %s%s" % (x.get("stack", "?"), x.get("seconds", "?"),
                          "" if x.get("status", "ok") == "ok" else " (%s)" % x.get("status"))
            for x in runs)
        lines.append("| %s | %s | %s | %s |" % (r, runs[0].get("load_before", "?"),
                                              runs[-1].get("load_after", "?"), desc))
    return "\n".join(lines) + "\n"


def busy_note(a):
    """A warning when the machine had more runnable work than the run itself
    explains: the job's ranks run on this machine (the fabric's hosts too)
    and count in the load, so the bar is the larger of the cores and the
    ranks (env "ranks", when the run recorded it)."""
    try:
        cores = int(a.env.get("cores", ""))
        ranks = int(a.env.get("ranks", "0") or 0)
        loads = [float(r[k].split("/")[0]) for r in read_rounds(a.out) for k in ("load_before", "load_after") if k in r]
    except ValueError:
        return ""
    bar = max(cores, ranks)
    busy = [x for x in loads if x > bar]
    if not busy:
        return ""
    what = "the %d cores" % cores if bar == cores else "%d, the job's own %d ranks on %d cores," % (bar, ranks, cores)
    return ("**The 1-minute load average exceeded %s at %d of %d readings (up to %.2f): other work "
            "shared the machine, so the numbers are noisy; final tables belong to a quiet machine.**"
            % (what, len(busy), len(loads), max(busy)))


# ---------------------------------------------------------------- plots


def plot(a):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not found (apt-get install python3-matplotlib): no plots", file=sys.stderr)
        return []
    made = []
    for bench in a.benches:
        unit, better, title, osu = BENCHES.get(bench, ("", "lower", bench, bench))
        sizes = a.sizes(bench)
        if not sizes:
            continue
        with_speed = DOORBELL in a.stacks and a.stock
        fig, axes = plt.subplots(2 if with_speed else 1, 1, figsize=(6.4, 6.4 if with_speed else 4.2), dpi=110,
                                 sharex=True, squeeze=False, gridspec_kw={"height_ratios": [2, 1]} if with_speed else None)
        ax = axes[0][0]
        for key in a.stacks:
            series = a.cells[key].get(bench)
            if not series:
                continue
            xs = sorted(series)
            med = [series[x].median for x in xs]
            err = [[series[x].median - series[x].min for x in xs], [series[x].max - series[x].median for x in xs]]
            ax.errorbar(xs, med, yerr=err, marker="o", markersize=3, capsize=2, label=stack_label(key))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_ylabel("%s (%s is better)" % (unit, better))
        ax.set_title("%s\n%s; median [min-max] of %d round%s" % (
            osu if a.env.get("suite") == "osu" else title, a.env.get("layout_text", a.env.get("mode", "")),
            a.rounds, "" if a.rounds == 1 else "s"), fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        if with_speed:
            sp = axes[1][0]
            xs = [s for s in sizes if a.speed_vs_best(bench, s)]
            sp.plot(xs, [a.speed_vs_best(bench, s) for s in xs], color="black", marker="o", markersize=3,
                    label="doorbell vs best stock")
            if PLAIN in a.stacks:
                xp = [s for s in sizes if a.speed_vs(bench, s, PLAIN)]
                sp.plot(xp, [a.speed_vs(bench, s, PLAIN) for s in xp], color="grey", linestyle="--", marker="s",
                        markersize=3, label="doorbell vs plain mpirun")
            sp.axhline(1.0, color="grey", linewidth=0.8)
            sp.set_yscale("log")
            sp.set_ylabel("speed (x, above 1: faster)")
            sp.grid(True, which="both", alpha=0.3)
            sp.legend(fontsize=8)
        axes[-1][0].set_xlabel("message size (bytes)")
        fig.tight_layout()
        name = bench + ".png"
        fig.savefig(os.path.join(a.out, name))
        plt.close(fig)
        made.append(name)
    return made


# ---------------------------------------------------------------- report


def main(argv):
    args = argv[1:]
    with_plots = "--no-plots" not in args
    args = [x for x in args if x != "--no-plots"]
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: mpi_report.py [--no-plots] RESULTS_DIR", file=sys.stderr)
        return 2
    out = args[0]
    if not os.path.isdir(out):
        print("mpi_report.py: %s is not a folder" % out, file=sys.stderr)
        return 2
    a = Analysis(out)
    if not a.stacks:
        print("mpi_report.py: no <stack>.r<round>.csv in %s" % out, file=sys.stderr)
        return 1
    tab = table(a)
    geo = geomean_table(a)
    results = checks(a)
    chk = checks_text(a, results)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(tab)
    with open(os.path.join(out, "checks.txt"), "w") as f:
        f.write(chk)
    print(tab)
    if geo:
        print(geo)
    print(chk, end="")

    plots = plot(a) if with_plots else []
    env = a.env
    suite = "OSU Micro-Benchmarks" if env.get("suite") == "osu" else "doorbell-mpi-bench"
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("# doorbell vs stock Open MPI: %s, %s\n\n" % (suite, env.get("layout_text", env.get("mode", "?"))))
        f.write("```\n%s```\n\n" % env.get("_raw", ""))
        f.write("Stacks (scripts/fabric/stacks.sh): **plain mpirun** = Open MPI's defaults (pml ob1: vader "
                "inside a host, tcp between hosts); **ucx sm,tcp** = `--mca pml ucx` with "
                "`UCX_TLS=sm,tcp,self`; **doorbell** = `mpirun --tune install/share/doorbell/doorbell.tune`. "
                "The mpirun arguments of each are in the lines above.\n\n")
        for key in a.stacks:
            st = a.state(key)
            if st != "ok":
                f.write("- %s: %s (logs: %s.r*.log)\n" % (stack_label(key), st, key))
        f.write("\nThe stacks ran in %d alternating rounds (every stack once per round, the order rotating). "
                "Each cell is the **median of its rounds [min-max]** (\"(3 of 5)\": rounds that measured "
                "it). *doorbell vs ...* is how many times as fast doorbell's median is: the other's time "
                "over doorbell's for latencies and allreduce, doorbell's rate over the other's for "
                "bandwidths; above 1 doorbell is faster. *best stock* is the stock stack with the best "
                "median in that cell.\n\n" % a.rounds)
        f.write("## Checks\n\n```\n%s```\n\n" % chk)
        if geo:
            f.write("## Geometric means of doorbell's speed (%s-%s)\n\n%s\n" % (human(CHECK_MIN), human(CHECK_MAX), geo))
        f.write("## Every size\n\n%s\n" % tab)
        for p in plots:
            f.write("![%s](%s)\n\n" % (os.path.splitext(p)[0], p))
        load = load_table(a)
        if load:
            f.write("## Load average around every round\n\n%s\n" % load)
            busy = busy_note(a)
            if busy:
                f.write(busy + "\n\n")
        p2p = os.path.join(out, "bench-p2p.txt")
        if os.path.exists(p2p):
            with open(p2p) as g:
                f.write("## scripts/bench-p2p.sh\n\n```\n%s```\n" % g.read())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
