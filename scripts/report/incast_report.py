#!/usr/bin/python3
"""Table of one scripts/fabric/incast.sh run.

    incast_report.py RESULTS_DIR BOTTLENECK_BPS [--json FILE]

Reads RESULTS_DIR/modes.txt (one line per mode: "<mode> ran k=v..." or
"<mode> not_built"), the ping probes <mode>.ping.txt and the ucx_perftest
outputs <mode>.{client,server}N.txt, which for the doorbell modes hold the
counter dump of UCX_DOORBELL_STATS=y ("<iface> <counter> <value>" lines),
summed over every process and iface: retransmits / tx_packets give the
retransmit %, ce_marks the CE marks the receivers saw.
Writes incast.md (and FILE as JSON) and prints the table.
"""
import json
import os
import re
import sys

def percentile(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def rtts(path):
    vals = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                m = re.search(r"time=([0-9.]+) ms", line)
                if m:
                    vals.append(float(m.group(1)) * 1000.0)  # us
    return vals


DUMP_LINE = re.compile(r"^(\S+)\s+([a-z][a-z0-9_]*)\s+(\d+)\s*$")   # "<iface> <counter> <value>"


def doorbell_counters(out, mode):
    """Sums the UCX_DOORBELL_STATS dump ("<iface> <counter> <value>" lines)
    over every process and iface of a mode."""
    sums = {}
    for fn in sorted(os.listdir(out)):
        if not fn.startswith(mode + ".") or not re.search(r"\.(client|server)\d\.txt$", fn):
            continue
        with open(os.path.join(out, fn), errors="replace") as f:
            for line in f:
                m = DUMP_LINE.match(line.strip())
                if m:
                    sums[m.group(2)] = sums.get(m.group(2), 0) + int(m.group(3))
    return sums


CHATTER = 16 << 10   # bytes: connection set-up, probes, teardown


def transfer_window(path):
    """(seconds, bytes) the bottleneck port carried the transfer, from its
    byte counter sampled every few ms ("<monotonic s> <tx_bytes>" lines):
    from the last sample before it moved by more than CHATTER bytes to the
    first sample within CHATTER bytes of its final count. None without
    samples."""
    pts = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) == 2:
                    try:
                        pts.append((float(p[0]), int(p[1])))
                    except ValueError:
                        pass
    if len(pts) < 3:
        return None
    base, final = pts[0][1], pts[-1][1]
    if final - base <= 2 * CHATTER:
        return None
    start = next(i for i, (_, b) in enumerate(pts) if b - base > CHATTER)
    end = next(i for i, (_, b) in enumerate(pts) if b >= final - CHATTER)
    first = pts[max(start - 1, 0)]
    return pts[end][0] - first[0], pts[end][1] - first[1]


def pick(sums, pred):
    vals = [v for k, v in sums.items() if pred(k)]
    return sum(vals) if vals else None


def client_mbs(out, mode):
    """Sum of the clients' overall bandwidth (MB/s) from ucx_perftest -f."""
    total, n = 0.0, 0
    for s in (1, 2, 3):
        p = os.path.join(out, "%s.client%d.txt" % (mode, s))
        if not os.path.exists(p):
            continue
        with open(p, errors="replace") as f:
            for line in f:
                nums = line.split()
                if len(nums) == 8 and all(re.match(r"^[0-9.]+$", x) for x in nums):
                    total += float(nums[5])
                    n += 1
    return total if n == 3 else None


def main():
    args = sys.argv[1:]
    jpath = None
    if "--json" in args:
        i = args.index("--json")
        jpath = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit("usage: incast_report.py RESULTS_DIR BOTTLENECK_BPS [--json FILE]")
    out, bps = args[0], float(args[1])
    rows = []
    with open(os.path.join(out, "modes.txt")) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            mode, state = parts[0], parts[1]
            r = {"mode": mode, "state": state}
            if state == "ran":
                kv = dict(p.split("=", 1) for p in parts[2:])
                wall, nbytes = float(kv["seconds"]), int(kv["bytes"])
                r["ok"] = kv["ok"] == "1"
                r["wall_s"] = wall
                window = transfer_window(os.path.join(out, mode + ".port.txt"))
                r["transfer_s"] = window[0] if window else None
                # rates over the transfer (the port's busy span); without
                # samples over the wall time, set-up included
                secs = min(window[0], wall) if window else wall
                r["seconds"] = secs
                r["goodput_mbps"] = nbytes * 8 / secs / 1e6
                r["bottleneck_share"] = nbytes * 8 / secs / bps
                r["wall_share"] = nbytes * 8 / wall / bps
                mbs = client_mbs(out, mode)
                r["client_sum_mbps"] = mbs * 8 * 1.048576 if mbs is not None else None  # MiB/s -> Mb/s
                r["port_drops"] = int(kv["port_drops"])
                r["port_marks"] = int(kv["port_marks"])
                # what the bottleneck port sent (frames: headers, retransmits
                # and probes included) over the same time
                if window:
                    r["link_busy"] = window[1] * 8 / secs / bps
                else:
                    r["link_busy"] = int(kv["port_bytes"]) * 8 / secs / bps if "port_bytes" in kv else None
                rt = rtts(os.path.join(out, mode + ".ping.txt"))
                r["rtt_p50_us"], r["rtt_p99_us"], r["rtt_samples"] = percentile(rt, 50), percentile(rt, 99), len(rt)
                if mode == "tcp":
                    segs, retr = int(kv["tcp_segs"]), int(kv["tcp_retrans"])
                    r["retransmit_pct"] = 100.0 * retr / segs if segs else None
                    r["ce_marks"] = None
                    r["retransmit_source"] = "kernel TCP (/proc/net/snmp)"
                else:
                    c = doorbell_counters(out, mode)
                    r["counters"] = c
                    retr = pick(c, lambda k: k == "retransmits")
                    tx = pick(c, lambda k: k == "tx_packets")
                    r["retransmit_pct"] = 100.0 * retr / tx if retr is not None and tx else None
                    r["ce_marks"] = pick(c, lambda k: k == "ce_marks")
                    r["retransmit_source"] = "UCX_DOORBELL_STATS" if c else "no counter dump found"
            rows.append(r)

    def f(v, fmt):
        return fmt % v if v is not None else "—"

    head = ["mode", "goodput (Mb/s)", "of bottleneck", "link busy", "retransmit %", "CE marks (stats)",
            "marks at port", "drops at port", "RTT p50 (us)", "RTT p99 (us)", "transfer / wall (s)"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for r in rows:
        if r["state"] != "ran":
            lines.append("| %s | not built | | | | | | | | | |" % r["mode"])
            continue
        lines.append("| %s%s | %s | %s | %s | %s | %s | %d | %d | %s | %s | %s / %.2f |" % (
            r["mode"], "" if r["ok"] else " (failed)", f(r["goodput_mbps"], "%.1f"),
            f(100 * r["bottleneck_share"], "%.0f %%"),
            f(100 * r["link_busy"] if r["link_busy"] is not None else None, "%.0f %%"),
            f(r["retransmit_pct"], "%.2f"),
            f(r["ce_marks"], "%d"), r["port_marks"], r["port_drops"],
            f(r["rtt_p50_us"], "%.0f"), f(r["rtt_p99_us"], "%.0f"),
            f(r["transfer_s"], "%.2f"), r["wall_s"]))
    table = "\n".join(lines) + "\n"
    print(table)
    with open(os.path.join(out, "incast.md"), "w") as fo:
        fo.write("# Incast 3 -> 1 across the spine (bottleneck %.0f Mb/s)\n\n" % (bps / 1e6))
        fo.write(table)
        fo.write("\nGoodput: bytes delivered / the transfer's time at the bottleneck port (its byte counter "
                 "sampled every 5 ms: from the last sample before it moved by more than 16 KiB to the first "
                 "within 16 KiB of its final count; process start-up, connection set-up and teardown are "
                 "outside). Link busy: bytes the bottleneck port sent (Ethernet frames: headers, retransmits, "
                 "probes) over the same time. Wall: start of the senders to the exit of the last. "
                 "RTT: 200-Hz ping probes h1 -> h4 through the bottleneck queue. Retransmit %%: doorbell "
                 "counters (UCX_DOORBELL_STATS=y) for the doorbell modes, kernel TCP counters for tcp.\n")
    if jpath:
        with open(jpath, "w") as fo:
            json.dump({"bottleneck_bps": bps, "modes": rows}, fo, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
