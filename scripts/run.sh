#!/usr/bin/env bash
# The main job: what a user compares. MPI point-to-point latency/bandwidth
# and MPI_Allreduce from 8 B to 1 MiB through `mpirun --tune doorbell.tune`,
# against plain `mpirun` (Open MPI's defaults: ob1, vader inside a host, tcp
# between hosts) and pml ucx with UCX_TLS=sm,tcp,self (scripts/fabric/stacks.sh).
# The stacks run in alternating rounds (each stack once per round, the order
# rotating); the table shows every cell's median over the rounds with its
# min-max, doorbell's speed against plain mpirun and against the best stock
# stack, geometric means, plots, and the checks of issues 18 and 19 as
# PASS/FAIL lines, in results/<timestamp>/ (scripts/report/mpi_report.py).
#
#   scripts/run.sh                4 ranks on this host; the point-to-point
#                                 pair is two ranks of this host
#   scripts/run.sh --fabric       across an emulated leaf-spine fabric (root):
#                                 2 hosts x 2 ranks; the pair crosses the spine
# options:
#   --layout L        with --fabric: 2x2 (default: 2 hosts x 2 ranks, one
#                     host per leaf), 4x1 (4 hosts x 1 rank, two hosts per
#                     leaf), 2x3 (2 hosts x 3 ranks, one host per leaf) or
#                     3x2 (3 leaves, one host of 2 ranks each)
#   --rounds N        rounds of every stack (default 5; the checks want 5 or more)
#   --stacks LIST     stacks, comma-separated (default plain,ucx,doorbell; also
#                     ob1_tcp, ucx_tcp: tcp only)
#   --max BYTES       largest message (default 1048576)
#   --budget-ms MS    timed part of each size and benchmark, per round (default
#                     50; the warm-up adds up to 40 %)
#   --out DIR         results folder (default results/<UTC timestamp>)
#   --keep-fabric     leave the fabric up afterwards (doorbell-fabric --name dbrun,
#                     or $DOORBELL_FABRIC_NAME; its state under $DOORBELL_FABRIC_STATE)
#   --no-setup        do not call scripts/setup.sh first
#   --no-bench-p2p    skip scripts/bench-p2p.sh (UCX-level, loopback)
# A full default run takes about 1.5 minutes on one host (2 cores; plus
# bench-p2p.sh), about 5 with --fabric. env: DOORBELL_INSTALL (default ./install).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

start=$SECONDS harness_tag=run
# shellcheck source=scripts/fabric/harness.sh
source "$root/scripts/fabric/harness.sh"

fabric=0 max=1048576 budget=50 out="" keep=0 setup=1 p2p=1 layout="" rounds=5 stack_list=""
while (($#)); do
  case $1 in
    --fabric) fabric=1; shift ;;
    --layout|--rounds|--stacks|--max|--budget-ms|--out)
      need_value "$@"
      case $1 in
        --layout) layout=$2 ;;
        --rounds) rounds=$2 ;;
        --stacks) stack_list=$2 ;;
        --max) max=$2 ;;
        --budget-ms) budget=$2 ;;
        --out) out=$2 ;;
      esac
      shift 2 ;;
    --keep-fabric) keep=1; shift ;;
    --no-setup) setup=0; shift ;;
    --no-bench-p2p) p2p=0; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $budget =~ ^[0-9]*[.]?[0-9]+$ && ! $budget =~ ^[0.]+$ ]] \
  || die "--budget-ms takes a positive number of milliseconds, not '$budget'"
((keep == 0 || fabric == 1)) || die "--keep-fabric applies to --fabric only"
harness_check

# 1. The stacks and the layout (checked before anything runs).
install=${DOORBELL_INSTALL:-$root/install}
fabric_tool=$install/bin/doorbell-fabric
[[ -x $fabric_tool ]] || fabric_tool=$root/scripts/bin/doorbell-fabric
fabric_name=${DOORBELL_FABRIC_NAME:-dbrun}
# shellcheck source=scripts/fabric/stacks.sh
source "$root/scripts/fabric/stacks.sh"
if [[ -n $stack_list ]]; then stacks_select "$stack_list" || die "--stacks: $stacks_error"; fi
layout_select || die "--layout: $stacks_error"
mode=$([[ $fabric == 1 ]] && echo fabric || echo local)

# 2. Set up as needed: packages, build, install (idempotent).
if ((setup)); then
  log "set-up (scripts/setup.sh; idempotent)"
  bash scripts/setup.sh >&2
fi
bench=$install/bin/doorbell-mpi-bench
[[ -x $bench ]] || bench=$root/build/tests/fabric/doorbell-mpi-bench
[[ -x $bench ]] || die "doorbell-mpi-bench is not built (run scripts/setup.sh)"

out=${out:-results/$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
{
  echo "suite=mpi-bench"
  harness_env
  echo "ranks=$layout_ranks"
  echo "ucx=$(ucx_info -v 2>/dev/null | sed -n 's/^# Version \([^ ]*\).*/\1/p' | head -1)"
  echo "commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "max=$max"
  echo "budget_ms=$budget"
  stacks_env
} > "$out/env.txt"

# 3. The fabric, torn down on exit and on Ctrl-C.
cleanup() {
  if ((fabric && !keep)); then "$fabric_tool" --name "$fabric_name" -q down || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if ((fabric)); then
  log "fabric: $layout_text, 2 spines, 200 Mb/s spine links"
  "$fabric_tool" --name "$fabric_name" up "${layout_up[@]}" --spines 2 >&2
  "$fabric_tool" --name "$fabric_name" status > "$out/fabric-before.txt" || true
fi

# 4. The measurements: round after round, one mpirun per stack, the order
# rotating so that no stack always follows the same one. rounds.txt keeps the
# load average before and after every run.
n=${#stacks[@]}
for ((r = 1; r <= rounds; r++)); do
  log "round $r/$rounds ($layout_text), load $(loadavg)"
  for ((j = 0; j < n; j++)); do
    s=${stacks[$(((j + r - 1) % n))]}
    csv=$out/$s.r$r.csv
    if [[ $s == doorbell && $doorbell_state != present ]]; then
      ((r > 1)) || log "  $s: $doorbell_state (install/lib/ucx/libuct_doorbell.so and the tune file are needed)"
      echo "# not built" > "$csv"
      continue
    fi
    log "  round $r/$rounds, $s ($(stack_label "$s")), $layout_text: latency, bandwidth, allreduce, 8 B..$max B"
    before=$(loadavg) t0=$SECONDS status=ok
    # shellcheck disable=SC2046
    if ! timeout -k 10 600 "${launch[@]}" -np "$layout_ranks" "${common[@]}" $(stack_args "$s") \
        "$bench" --max "$max" --budget-ms "$budget" \
        > "$csv" 2> >(tee "$out/$s.r$r.log" | sed -u "s/^/[run]     /" >&2); then
      status=failed
      log "  $s failed in round $r (see $out/$s.r$r.log)"
      { echo "# failed"; cat "$csv"; } > "$csv.tmp" && mv "$csv.tmp" "$csv"
    fi
    echo "round=$r stack=$s status=$status seconds=$((SECONDS - t0)) load_before=$before load_after=$(loadavg)" >> "$out/rounds.txt"
  done
done
if ((fabric)); then "$fabric_tool" --name "$fabric_name" status > "$out/fabric-after.txt" || true; fi

# 5. The transport's own point-to-point benchmark, when present.
# Shorter than its own defaults (one repeat) to keep the main job to minutes;
# the BENCH_* variables still override.
if [[ -f scripts/bench-p2p.sh ]] && ((p2p)); then
  log "scripts/bench-p2p.sh (UCX-level doorbell vs tcp on loopback)"
  BENCH_LAT_ITERS=${BENCH_LAT_ITERS:-5000} BENCH_BW_ITERS=${BENCH_BW_ITERS:-200} BENCH_REPEAT=${BENCH_REPEAT:-1} \
    timeout -k 10 600 bash scripts/bench-p2p.sh > "$out/bench-p2p.txt" 2>&1 || log "bench-p2p.sh failed (see $out/bench-p2p.txt)"
  sed 's/^/[run]   /' "$out/bench-p2p.txt" >&2
fi

# 6. Table, checks, plots, report.
log "report"
py=/usr/bin/python3
[[ -x $py ]] || py=python3
"$py" scripts/report/mpi_report.py "$out"
log "results in $out (report.md, table.md, checks.txt, latency.png, bandwidth.png, allreduce.png)"
