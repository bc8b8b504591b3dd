#!/usr/bin/python3
"""Table, plots and markdown report of one scripts/run.sh or scripts/osu.sh run.

    mpi_report.py RESULTS_DIR

Reads RESULTS_DIR/<stack>.csv (lines "bench,bytes,value"; a first line
"# not built" or "# failed" marks a stack that did not run), env.txt and the
optional bench-p2p.txt. Writes table.md, report.md and one PNG per benchmark
(latency.png, bandwidth.png, allreduce.png, and whatever else the CSVs hold),
and prints the table.
"""
import os
import sys

STACKS = [("ob1_tcp", "ob1 / tcp"), ("ucx_tcp", "ucx / tcp"), ("doorbell", "doorbell")]
# bench -> (unit, better) ; better: "lower" or "higher"
BENCHES = {
    "latency": ("us", "lower", "Point-to-point latency (one way)"),
    "bandwidth": ("MB/s", "higher", "Point-to-point bandwidth"),
    "allreduce": ("us", "lower", "MPI_Allreduce (sum of doubles)"),
    "mbw_mr": ("MB/s", "higher", "Multi-pair bandwidth (osu_mbw_mr)"),
}
# Ratios: (numerator, denominator)
RATIOS = [("doorbell", "ob1_tcp"), ("doorbell", "ucx_tcp"), ("ucx_tcp", "ob1_tcp")]


def read_stack(path):
    """Returns (state, {bench: {bytes: value}}); state is ok, not built or failed."""
    if not os.path.exists(path):
        return "not run", {}
    data, state = {}, "ok"
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            if line.startswith("#"):
                state = line[1:].strip() or state
                continue
            parts = line.split(",")
            if len(parts) != 3:
                continue
            try:
                data.setdefault(parts[0], {})[int(parts[1])] = float(parts[2])
            except ValueError:
                continue
    if state == "failed" and data:
        state = "partial"
    return state, data


def human(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n


def fmt(v):
    if v is None:
        return "—"
    return "%.0f" % v if v >= 1000 else "%.2f" % v if v < 10 else "%.1f" % v


def read_env(out):
    env = {}
    p = os.path.join(out, "env.txt")
    if os.path.exists(p):
        with open(p) as f:
            for line in f:
                for tok in line.split():
                    if "=" in tok:
                        k, v = tok.split("=", 1)
                        env[k] = v
        with open(p) as f:
            env["_raw"] = f.read()
    return env


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: mpi_report.py RESULTS_DIR")
    out = sys.argv[1]
    env = read_env(out)
    states, data = {}, {}
    for key, _ in STACKS:
        states[key], data[key] = read_stack(os.path.join(out, key + ".csv"))

    benches = [b for b in BENCHES if any(b in data[k] for k, _ in STACKS)]
    benches += sorted({b for k, _ in STACKS for b in data[k]} - set(benches))

    def col(key, label):
        st = states[key]
        if st == "partial":
            return "%s (failed part-way)" % label
        return label if st == "ok" else "%s (%s)" % (label, st)

    head = ["benchmark", "size"] + [col(k, l) for k, l in STACKS] + ["%s/%s" % (a.split("_")[0], b.split("_")[0]) for a, b in RATIOS]
    rows = []
    for b in benches:
        unit = BENCHES.get(b, ("", "", ""))[0]
        sizes = sorted({s for k, _ in STACKS for s in data[k].get(b, {})})
        for s in sizes:
            vals = {k: data[k].get(b, {}).get(s) for k, _ in STACKS}
            cells = [("%s (%s)" % (b, unit)) if unit else b, human(s)]
            for k, _ in STACKS:
                v = vals[k]
                cells.append(fmt(v) if v is not None else ("not built" if states[k] == "not built" else "—"))
            for a, c in RATIOS:
                va, vc = vals[a], vals[c]
                cells.append("%.2fx" % (va / vc) if va is not None and vc else "—")
            rows.append(cells)

    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * 2 + ["---:"] * (len(head) - 2)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    table = "\n".join(lines) + "\n"
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table)
    print(table)

    plots = plot(out, benches, data, states)

    mode = env.get("mode", "?")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("# doorbell vs stock Open MPI — %s run\n\n" % mode)
        f.write("```\n%s```\n\n" % env.get("_raw", ""))
        f.write("Stacks: **ob1 / tcp** = `--mca pml ob1 --mca btl self,tcp`; **ucx / tcp** = "
                "`--mca pml ucx` with `UCX_TLS=tcp,self`; **doorbell** = `mpirun --tune "
                "install/share/doorbell/doorbell.tune` (pml ucx on the doorbell transport).\n\n")
        for key, label in STACKS:
            if states[key] != "ok":
                why = "failed part-way (see %s.log); the sizes it finished are shown" % key if states[key] == "partial" else states[key]
                f.write("- %s: %s\n" % (label, why))
        f.write("\nRatios divide the first stack's value by the second's: below 1 is better for "
                "latency and allreduce (time), above 1 for bandwidth.\n\n")
        f.write(table + "\n")
        for p in plots:
            f.write("![%s](%s)\n\n" % (os.path.splitext(p)[0], p))
        p2p = os.path.join(out, "bench-p2p.txt")
        if os.path.exists(p2p):
            with open(p2p) as g:
                f.write("## scripts/bench-p2p.sh\n\n```\n%s```\n" % g.read())
    return 0


def plot(out, benches, data, states):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not found (apt-get install python3-matplotlib): no plots", file=sys.stderr)
        return []
    made = []
    for b in benches:
        unit, better, title = BENCHES.get(b, ("", "", b))
        fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
        drawn = 0
        for key, label in STACKS:
            series = data[key].get(b)
            if not series:
                continue
            xs = sorted(series)
            ax.plot(xs, [series[x] for x in xs], marker="o", markersize=3, label=label)
            drawn += 1
        if not drawn:
            plt.close(fig)
            continue
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("%s (%s is better)" % (unit, better))
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        name = b + ".png"
        fig.savefig(os.path.join(out, name))
        plt.close(fig)
        made.append(name)
    return made


if __name__ == "__main__":
    sys.exit(main())
