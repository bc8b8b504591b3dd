#!/usr/bin/python3
"""scripts/report/mpi_report.py on a canned results folder, and the option
errors of scripts/run.sh and scripts/osu.sh.

canned/ holds 5 rounds of plain, ucx and doorbell at 8 B, 1 KiB and 1 MiB;
doorbell's round 3 failed after the bandwidths (no allreduce). The expected
numbers below are worked out by hand from those files.

    python3 tests/report/mpi_report_test.py [-v]
"""
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
REPORT = os.path.join(SOURCE, "scripts", "report", "mpi_report.py")
CANNED = os.path.join(HERE, "canned")
sys.path.insert(0, os.path.dirname(REPORT))
import mpi_report  # noqa: E402


def set_env(folder, **changes):
    """Rewrites key=value lines of folder/env.txt."""
    path = os.path.join(folder, "env.txt")
    with open(path) as f:
        lines = f.read().splitlines()
    out = []
    for line in lines:
        key = line.split("=", 1)[0]
        out.append("%s=%s" % (key, changes.pop(key)) if key in changes else line)
    out += ["%s=%s" % kv for kv in changes.items()]
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


class Canned(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mpi-report-test-")
        self.dir = os.path.join(self.tmp, "results")
        shutil.copytree(CANNED, self.dir)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def run_report(self, plots=False):
        args = [self.dir] if plots else ["--no-plots", self.dir]
        p = subprocess.run([sys.executable, REPORT] + args, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def read(self, name):
        with open(os.path.join(self.dir, name)) as f:
            return f.read()

    def row(self, bench, size):
        """The cells of one table.md row."""
        for line in self.read("table.md").splitlines():
            cells = [c.strip() for c in line.strip("|").split("|")]
            if cells[0] == bench and cells[1] == size:
                return cells
        self.fail("no row %s %s in table.md" % (bench, size))

    def checks(self):
        return self.read("checks.txt").splitlines()

    def rename_benches(self, names, drop=()):
        """Rewrites every round's csv: benchmarks renamed by `names`, those
        in `drop` left out."""
        for name in os.listdir(self.dir):
            if name.endswith(".csv"):
                path = os.path.join(self.dir, name)
                with open(path) as f:
                    lines = [x for x in f if x.partition(",")[0] not in drop]
                with open(path, "w") as f:
                    for line in lines:
                        bench, sep, rest = line.partition(",")
                        f.write(names.get(bench, bench) + sep + rest)


class Numbers(Canned):
    def test_medians_min_max_and_rounds(self):
        a = mpi_report.Analysis(self.dir)
        self.assertEqual(a.stacks, ["plain", "ucx", "doorbell"])
        self.assertEqual(a.rounds, 5)
        c = a.cell("plain", "latency", 8)  # 2.0 2.2 2.1 9.0 2.3: the 9.0 moves no median
        self.assertEqual((c.median, c.min, c.max, c.n), (2.2, 2.0, 9.0, 5))
        c = a.cell("doorbell", "latency", 8)  # 2.0 2.1 2.2 2.0 30.0
        self.assertEqual((c.median, c.min, c.max, c.n), (2.1, 2.0, 30.0, 5))
        self.assertEqual(a.cell("doorbell", "allreduce", 8).n, 4)  # round 3 stopped before it
        self.assertEqual(a.state("doorbell"), "partial in 1 of 5 rounds")
        self.assertEqual(a.state("plain"), "ok")

    def test_speed_is_above_one_when_doorbell_is_faster_for_times_and_rates(self):
        a = mpi_report.Analysis(self.dir)
        self.assertAlmostEqual(a.speed_vs("latency", 8, "plain"), 2.2 / 2.1)
        self.assertAlmostEqual(a.speed_vs("bandwidth", 1024, "plain"), 940 / 1000)
        self.assertAlmostEqual(a.speed_vs("allreduce", 8, "plain"), 20 / 10)

    def test_best_stock_is_the_lowest_time_or_the_highest_rate(self):
        a = mpi_report.Analysis(self.dir)
        self.assertEqual(mpi_report.best_stock(a.cells, a.stock, "latency", 1 << 20), ("ucx", 90))
        self.assertEqual(mpi_report.best_stock(a.cells, a.stock, "latency", 8), ("plain", 2.2))
        self.assertEqual(mpi_report.best_stock(a.cells, a.stock, "bandwidth", 8), ("ucx", 12))
        self.assertEqual(mpi_report.best_stock(a.cells, a.stock, "bandwidth", 1024), ("plain", 1000))
        self.assertAlmostEqual(a.speed_vs_best("latency", 1 << 20), 90 / 95)
        self.assertAlmostEqual(a.speed_vs_best("bandwidth", 8), 11 / 12)

    def test_beyond_spread_needs_every_round_behind(self):
        a = mpi_report.Analysis(self.dir)
        # 95 us in every round against ucx's 90 in every round
        self.assertTrue(mpi_report.beyond_spread(a, "latency", 1 << 20, None))
        # doorbell's rounds 2.0-30.0 against ucx's 3.0-3.4: they meet
        self.assertFalse(mpi_report.beyond_spread(a, "latency", 8, "ucx"))
        # a rate: 11 MB/s in every round against ucx's 12
        self.assertTrue(mpi_report.beyond_spread(a, "bandwidth", 8, None))
        # ahead is never beyond: 7000 against 6000 MB/s
        self.assertFalse(mpi_report.beyond_spread(a, "bandwidth", 1 << 20, None))

    def test_geomean(self):
        self.assertAlmostEqual(mpi_report.geomean([2.0, 4 / 3, 1.25]), (2.0 * 4 / 3 * 1.25) ** (1 / 3))
        self.assertIsNone(mpi_report.geomean([]))


class Outputs(Canned):
    def test_table_shows_median_min_max_best_stock_and_speeds(self):
        self.run_report()
        self.assertEqual(self.row("latency (us)", "8 B"),
                         ["latency (us)", "8 B", "2.20 [2.00-9.00]", "3.20 [3.00-3.40]", "2.10 [2.00-30.0]",
                          "plain mpirun", "1.05x", "1.05x"])
        self.assertEqual(self.row("latency (us)", "1 MiB")[5:], ["ucx sm,tcp", "1.05x", "0.95x"])
        self.assertEqual(self.row("bandwidth (MB/s)", "1 KiB")[2:],
                         ["1000 [1000-1000]", "900.0 [900.0-900.0]", "940.0 [940.0-940.0]",
                          "plain mpirun", "0.94x", "0.94x"])
        self.assertEqual(self.row("allreduce (us)", "1 KiB")[4:], ["30.0 [30.0-30.0] (4 of 5)", "ucx sm,tcp", "1.33x", "1.00x"])

    def test_one_host_checks(self):
        self.run_report()
        self.assertEqual(self.checks(), [
            "PASS  one host: latency at least 0.95x of plain mpirun at every size 8 B-1 MiB "
            "(lowest 0.98x at 1 KiB)",
            "FAIL  one host: bandwidth at least 0.95x of plain mpirun at every size 8 B-1 MiB "
            "(lowest 0.94x at 1 KiB; 1 of 3 sizes below, 1 of them beyond the rounds' min-max)",
            "PASS  one host: allreduce at least 0.95x of plain mpirun at every size 8 B-1 MiB "
            "(lowest 1.25x at 1 MiB)",
            # (2 * 40/30 * 1000/800) ** (1/3) = 1.494
            "PASS  one host: allreduce geometric mean over 8 B-1 MiB at least 1.30x of plain mpirun "
            "(1.49x over 3 sizes)",
        ])

    def test_fabric_2x2_checks_compare_with_the_best_stock_stack(self):
        set_env(self.dir, mode="fabric", layout="2x2", layout_text="2 hosts x 2 ranks, one host per leaf")
        self.run_report()
        self.assertEqual(self.checks(), [
            "PASS  fabric 2x2: allreduce at least 1.00x of the best stock stack at every size 8 B-1 MiB "
            "(lowest 1.00x at 1 KiB)",
            # (2 * 30/30 * 1000/800) ** (1/3) = 1.357
            "PASS  fabric 2x2: allreduce geometric mean over 8 B-1 MiB at least 1.30x of the best stock stack "
            "(1.36x over 3 sizes)",
            "FAIL  fabric 2x2, across the spine: latency at least 1.00x of the best stock stack at every size "
            "8 B-1 MiB (lowest 0.95x at 1 MiB; 2 of 3 sizes below, 2 of them beyond the rounds' min-max)",
            "FAIL  fabric 2x2, across the spine: bandwidth at least 1.00x of the best stock stack at every size "
            "8 B-1 MiB (lowest 0.92x at 8 B; 2 of 3 sizes below, 2 of them beyond the rounds' min-max)",
        ])

    def test_fabric_4x1_checks_every_size_against_the_best_stock_stack(self):
        set_env(self.dir, mode="fabric", layout="4x1")
        self.run_report()
        self.assertEqual(self.checks(), [
            "PASS  fabric 4x1: allreduce at least 1.00x of the best stock stack at every size 8 B-1 MiB "
            "(lowest 1.00x at 1 KiB)",
            "FAIL  fabric 4x1, across the spine: latency at least 1.00x of the best stock stack at every size "
            "8 B-1 MiB (lowest 0.95x at 1 MiB; 2 of 3 sizes below, 2 of them beyond the rounds' min-max)",
            "FAIL  fabric 4x1, across the spine: bandwidth at least 1.00x of the best stock stack at every size "
            "8 B-1 MiB (lowest 0.92x at 8 B; 2 of 3 sizes below, 2 of them beyond the rounds' min-max)",
        ])

    def test_other_layouts_name_no_check(self):
        set_env(self.dir, mode="fabric", layout="2x3")
        self.run_report()
        self.assertEqual(self.checks(), ["No checks are named for this run (fabric, layout 2x3)."])

    def test_osu_bidirectional_and_multi_pair_bandwidth_are_checked_across_the_spine(self):
        # the canned bandwidth as osu_bibw, and its latency figures as
        # osu_mbw_mr's rates, where the higher is the better: the best stock
        # stack is then ucx at 8 B and 1 KiB, plain at 1 MiB, and doorbell's
        # speeds 2.1/3.2 = 0.66x, 4.1/5.0 = 0.82x and 95/100 = 0.95x; at 8 B
        # doorbell's rounds reach 30 against ucx's 3.0-3.4, so only 1 KiB and
        # 1 MiB, where every round is the same, are beyond the rounds' spread
        self.rename_benches({"bandwidth": "bibw", "latency": "mbw_mr"}, drop=("allreduce",))
        set_env(self.dir, mode="fabric", layout="2x2", suite="osu")
        self.run_report()
        where = "fabric 2x2, across the spine: "
        self.assertEqual(self.checks(), [
            "FAIL  " + where + "osu_bibw at least 1.00x of the best stock stack at every size "
            "8 B-1 MiB (lowest 0.92x at 8 B; 2 of 3 sizes below, 2 of them beyond the rounds' min-max)",
            "FAIL  " + where + "osu_mbw_mr at least 1.00x of the best stock stack at every size "
            "8 B-1 MiB (lowest 0.66x at 8 B; 3 of 3 sizes below, 2 of them beyond the rounds' min-max)",
        ])

    def test_a_one_sided_run_checks_its_own_benchmarks_only(self):
        # the canned latency, bandwidth and allreduce as put latency, get
        # bandwidth and accumulate latency (the same directions)
        self.rename_benches({"latency": "put_latency", "bandwidth": "get_bw", "allreduce": "acc_latency"})
        set_env(self.dir, mode="fabric", layout="4x1", suite="osu")
        self.run_report()
        where = "fabric 4x1, one-sided across hosts: "
        self.assertEqual(self.checks(), [
            "FAIL  " + where + "osu_put_latency at least 1.00x of the best stock stack at every size "
            "8 B-1 MiB (lowest 0.95x at 1 MiB; 2 of 3 sizes below, 2 of them beyond the rounds' min-max)",
            "FAIL  " + where + "osu_get_bw at least 1.00x of the best stock stack at every size "
            "8 B-1 MiB (lowest 0.92x at 8 B; 2 of 3 sizes below, 2 of them beyond the rounds' min-max)",
            "PASS  " + where + "osu_acc_latency -c at least 1.00x of the best stock stack at every size "
            "8 B-1 MiB (lowest 1.00x at 1 KiB)",
        ])

    def test_geomean_table_and_load_in_the_report(self):
        out = self.run_report()
        self.assertIn("| allreduce (us) | 8 B-1 MiB | 1.49x | 1.36x | 1.00x at 1 KiB |", out)
        report = self.read("report.md")
        self.assertIn("| 1 | 1.00/2.00/3.00 | 1.25/2.00/3.00 | plain: 3, ucx: 4, doorbell: 5 |", report)
        self.assertIn("| 3 | 3.00/2.00/3.00 | 3.25/2.00/3.00 | doorbell: 3 (failed), plain: 4, ucx: 5 |", report)
        self.assertIn("- doorbell: partial in 1 of 5 rounds (logs: doorbell.r*.log)", report)
        # cores=2; 1-minute loads 1.00-5.25: above 2 in 5 readings of round 2 (2.00 is not) and all 18 of rounds 3-5
        self.assertIn("exceeded the 2 cores at 23 of 30 readings (up to 5.25)", report)
        self.assertIn("5 alternating rounds", report)

    def test_the_jobs_own_ranks_are_not_other_work(self):
        # 4 ranks on 2 cores load the machine to 4 by themselves: only the 11
        # readings above 4 (rounds 4 and 5 but 4.00) say that other work ran
        set_env(self.dir, ranks="4")
        self.run_report()
        report = self.read("report.md")
        self.assertIn("exceeded 4, the job's own 4 ranks on 2 cores, at 11 of 30 readings (up to 5.25)", report)
        set_env(self.dir, ranks="2")
        self.run_report()
        self.assertIn("exceeded the 2 cores at 23 of 30 readings", self.read("report.md"))

    def test_plots_when_matplotlib_is_there(self):
        if importlib.util.find_spec("matplotlib") is None:
            self.skipTest("matplotlib is not installed (python3-matplotlib): no plots to check")
        self.run_report(plots=True)
        for bench in ("latency", "bandwidth", "allreduce"):
            path = os.path.join(self.dir, bench + ".png")
            self.assertTrue(os.path.getsize(path) > 1000, path)
            self.assertIn("](%s.png)" % bench, self.read("report.md"))


class Coverage(Canned):
    def test_a_short_run_says_what_it_did_not_measure(self):
        for name in os.listdir(self.dir):
            if name.endswith(".csv"):
                path = os.path.join(self.dir, name)
                with open(path) as f:
                    lines = [x for x in f if ",1048576," not in x]
                with open(path, "w") as f:
                    f.writelines(lines)
        for r in (4, 5):
            for s in ("plain", "ucx", "doorbell"):
                os.remove(os.path.join(self.dir, "%s.r%d.csv" % (s, r)))
        self.run_report()
        self.assertEqual(self.checks()[0],
                         "PASS  one host: latency at least 0.95x of plain mpirun at every size 8 B-1 MiB "
                         "(lowest 0.98x at 1 KiB; measured 8 B-1 KiB only; 3 rounds (the checks want 5))")

    def test_without_doorbell_every_check_fails_and_says_why(self):
        for r in range(1, 6):
            with open(os.path.join(self.dir, "doorbell.r%d.csv" % r), "w") as f:
                f.write("# not built\n")
        self.run_report()
        self.assertEqual(self.row("latency (us)", "8 B")[4], "not built")
        for line in self.checks():
            self.assertTrue(line.startswith("FAIL "), line)
            self.assertTrue(line.endswith("(no doorbell results (not built))"), line)

    def test_a_benchmark_that_failed_alone(self):
        for r in range(1, 6):
            path = os.path.join(self.dir, "doorbell.r%d.csv" % r)
            with open(path) as f:
                lines = [x for x in f if not x.startswith("bandwidth,")]
            with open(path, "w") as f:
                f.writelines(lines + ["# failed bandwidth\n"])
        self.run_report()
        self.assertEqual(self.row("bandwidth (MB/s)", "8 B")[4:], ["failed", "ucx sm,tcp", "—", "—"])
        self.assertEqual(self.row("latency (us)", "8 B")[4], "2.10 [2.00-30.0]")
        self.assertEqual(self.checks()[1],
                         "FAIL  one host: bandwidth at least 0.95x of plain mpirun at every size 8 B-1 MiB "
                         "(no doorbell results (partial in 1 of 5 rounds, bandwidth failed in 5 of 5 rounds))")

    def test_a_stock_stack_that_never_ran(self):
        for r in range(1, 6):
            os.remove(os.path.join(self.dir, "plain.r%d.csv" % r))
        self.run_report()
        self.assertTrue(self.checks()[0].endswith("(no plain mpirun results (not run))"), self.checks()[0])
        self.assertNotIn("doorbell vs plain", self.read("table.md"))

    def test_a_single_csv_per_stack_is_one_round(self):
        for s in ("plain", "ucx", "doorbell"):
            os.rename(os.path.join(self.dir, "%s.r1.csv" % s), os.path.join(self.dir, "%s.csv" % s))
            for r in range(2, 6):
                os.remove(os.path.join(self.dir, "%s.r%d.csv" % (s, r)))
        self.run_report()
        self.assertEqual(self.row("latency (us)", "8 B")[2], "2.00 [2.00-2.00]")

    def test_osu_runs_name_the_osu_programs(self):
        set_env(self.dir, suite="osu")
        self.run_report()
        self.assertEqual(self.row("osu_allreduce -c (us)", "8 B")[5:], ["plain mpirun", "2.00x", "2.00x"])
        self.assertTrue(self.checks()[0].startswith("PASS  one host: osu_latency at least 0.95x"), self.checks()[0])

    def test_bad_arguments(self):
        p = subprocess.run([sys.executable, REPORT], stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("usage", p.stderr)
        p = subprocess.run([sys.executable, REPORT, os.path.join(self.tmp, "nothing")],
                           stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("is not a folder", p.stderr)


class ScriptOptions(unittest.TestCase):
    """Option errors stop the scripts at once (exit 2), naming the option;
    nothing is built, launched or written."""

    def fails(self, script, args, message, env=None):
        e = dict(os.environ, DOORBELL_INSTALL=os.path.join(SOURCE, "no-such-install"))
        e.pop("OMB_DIR", None)
        e.update(env or {})
        p = subprocess.run(["bash", os.path.join(SOURCE, "scripts", script)] + args, env=e, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
        self.assertEqual(p.returncode, 2, "%s %s: %s" % (script, args, p.stderr))
        self.assertIn(message, p.stderr)
        self.assertEqual(p.stdout, "")

    def test_run_sh(self):
        self.fails("run.sh", ["--rounds", "0"], "--rounds takes a whole number from 1 to 100, not '0'")
        self.fails("run.sh", ["--rounds", "five"], "--rounds takes a whole number")
        self.fails("run.sh", ["--rounds"], "--rounds needs a value")
        self.fails("run.sh", ["--max", "4k"], "--max takes a number of bytes")
        self.fails("run.sh", ["--budget-ms", "0"], "--budget-ms takes a positive number")
        self.fails("run.sh", ["--layout", "2x2"], "--layout applies to --fabric only")
        self.fails("run.sh", ["--stacks", "plain,ob2"], "unknown stack 'ob2' (known: plain ucx doorbell ob1_tcp ucx_tcp pt2pt_tcp ucx_osc doorbell_osc_rdma)")
        self.fails("run.sh", ["--frabic"], "unknown option '--frabic'")
        if os.geteuid() == 0:
            self.fails("run.sh", ["--fabric", "--layout", "3x3", "--no-setup"], "unknown layout '3x3' (2x2, 4x1, 2x3 or 3x2)")

    def test_osu_sh(self):
        self.fails("osu.sh", ["--benches", "latency,osu_bw"], "unknown benchmark 'osu_bw'")
        self.fails("osu.sh", ["--iters", "-1"], "--iters takes a whole number from 1")
        self.fails("osu.sh", ["--small-iters", "0"], "--small-iters takes a whole number from 1")
        self.fails("osu.sh", ["--rounds", "0"], "--rounds takes a whole number")
        self.fails("osu.sh", ["--stacks", "mvapich"], "unknown stack 'mvapich'")
        self.fails("osu.sh", [], "OMB_DIR is not set")
        self.fails("osu.sh", [], "is incomplete: osu_latency", env={"OMB_DIR": HERE})


if __name__ == "__main__":
    unittest.main()
