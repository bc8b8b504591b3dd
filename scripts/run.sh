#!/usr/bin/env bash
# The main job: MPI point-to-point latency/bandwidth and MPI_Allreduce from
# 8 B to 1 MiB, doorbell against the stock Open MPI stacks (pml ucx over tcp,
# pml ob1 over btl tcp), with one table of ratios, plots and a markdown report
# in results/<timestamp>/.
#
#   scripts/run.sh                4 ranks on this host (loopback)
#   scripts/run.sh --fabric       4 ranks on an emulated 2-leaf, 2-spine fabric
#                                 (doorbell-fabric; needs root)
# options:
#   --layout 2x2|4x1  on the fabric: 2 hosts x 2 ranks, one host per leaf
#                     (default), or 4 hosts x 1 rank, two per leaf
#   --max BYTES       largest message (default 1048576)
#   --budget-ms MS    time per size and benchmark (default 50)
#   --out DIR         results folder (default results/<UTC timestamp>)
#   --keep-fabric     leave the fabric up afterwards (doorbell-fabric --name dbrun)
#   --no-setup        do not call scripts/setup.sh first
#   --no-bench-p2p    skip scripts/bench-p2p.sh (UCX-level, loopback)
# environment: DOORBELL_INSTALL (default ./install).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

start=$SECONDS
log() { printf '[run %3ds] %s\n' "$((SECONDS - start))" "$*" >&2; }
die() { printf '[run] error: %s\n' "$*" >&2; exit 1; }

fabric=0 max=1048576 budget=50 out="" keep=0 setup=1 p2p=1 layout=2x2
while (($#)); do
  case $1 in
    --fabric) fabric=1; shift ;;
    --layout) layout=$2; shift 2 ;;
    --max) max=$2; shift 2 ;;
    --budget-ms) budget=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --keep-fabric) keep=1; shift ;;
    --no-setup) setup=0; shift ;;
    --no-bench-p2p) p2p=0; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

# 1. Set up as needed: packages, build, install (idempotent).
install=${DOORBELL_INSTALL:-$root/install}
if ((setup)); then
  log "set-up (scripts/setup.sh; idempotent)"
  bash scripts/setup.sh >&2
fi
bench=$install/bin/doorbell-mpi-bench
[[ -x $bench ]] || bench=$root/build/tests/fabric/doorbell-mpi-bench
[[ -x $bench ]] || die "doorbell-mpi-bench is not built (run scripts/setup.sh)"
fabric_tool=$install/bin/doorbell-fabric
[[ -x $fabric_tool ]] || fabric_tool=$root/scripts/bin/doorbell-fabric

out=${out:-results/$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
mode=$([[ $fabric == 1 ]] && echo fabric || echo local)

# 2. The stacks; what is installed decides the doorbell column.
fabric_name=dbrun
# shellcheck source=fabric/stacks.sh
source "$root/scripts/fabric/stacks.sh"
{
  echo "mode=$mode"
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host=$(hostname) cores=$(nproc) kernel=$(uname -r)"
  echo "openmpi=$(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}') ucx=$(ucx_info -v 2>/dev/null | sed -n 's/^# Version \([^ ]*\).*/\1/p' | head -1)"
  stacks_env
  ((fabric)) && echo "layout=$layout ($layout_text)"
  echo "max=$max budget_ms=$budget"
} > "$out/env.txt"

# 3. The fabric, torn down on exit and on Ctrl-C.
cleanup() {
  if ((fabric && !keep)); then "$fabric_tool" --name "$fabric_name" -q down || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if ((fabric)); then
  [[ $(id -u) == 0 ]] || die "--fabric needs root (network namespaces)"
  log "fabric: $layout_text, 2 spines, 200 Mb/s spine links"
  "$fabric_tool" --name "$fabric_name" up "${layout_up[@]}" --spines 2 >&2
  "$fabric_tool" --name "$fabric_name" status > "$out/fabric-before.txt" || true
fi

# 4. The measurements, one mpirun per stack.
i=0
for s in "${stacks[@]}"; do
  i=$((i + 1))
  if [[ $s == doorbell && $doorbell_state != present ]]; then
    log "[$i/${#stacks[@]}] $s: $doorbell_state (install/lib/ucx/libuct_doorbell.so and the tune file are needed)"
    echo "# not built" > "$out/$s.csv"
    continue
  fi
  log "[$i/${#stacks[@]}] $s on $mode: latency, bandwidth, allreduce, 8 B..$max B"
  # shellcheck disable=SC2086
  if ! timeout -k 10 600 "${launch[@]}" -np 4 "${common[@]}" $(stack_args "$s") "$bench" --max "$max" --budget-ms "$budget" \
      > "$out/$s.csv" 2> >(tee "$out/$s.log" | sed -u "s/^/[run]   /" >&2); then
    log "$s failed (see $out/$s.log)"
    { echo "# failed"; cat "$out/$s.csv"; } > "$out/$s.csv.tmp" && mv "$out/$s.csv.tmp" "$out/$s.csv"
  fi
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

# 6. Table, plots, report.
log "report"
py=/usr/bin/python3
[[ -x $py ]] || py=python3
"$py" scripts/report/mpi_report.py "$out"
log "results in $out (report.md, table.md, latency.png, bandwidth.png, allreduce.png)"
