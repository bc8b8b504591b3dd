#!/usr/bin/env bash
# The OSU Micro-Benchmarks of a build you supply, side by side on the stock
# Open MPI stacks (pml ob1 / btl tcp, pml ucx / UCX tcp) and on doorbell:
# osu_latency, osu_bw (2 ranks), osu_mbw_mr (4 ranks, 2 pairs) and
# osu_allreduce -c (4 ranks, results validated). One table with ratios,
# plots and a report in results/osu-<timestamp>/ (scripts/report).
#
#   OMB_DIR=/path/to/omb scripts/osu.sh            on this host (loopback)
#   OMB_DIR=/path/to/omb scripts/osu.sh --fabric   across the emulated fabric
#                                                  (pairs cross the spine)
# options:
#   --layout 2x2|4x1  on the fabric: 2 hosts x 2 ranks, one host per leaf
#                   (default), or 4 hosts x 1 rank, two per leaf
#   --max BYTES     largest message (default 1048576)
#   --iters N       iterations per size (default 200 here, 10 on the fabric)
#   --out DIR       results folder
#
# OMB_DIR is an OSU Micro-Benchmarks build or install tree, built against
# this Open MPI (./configure CC=mpicc CXX=mpicxx && make). doorbell ships no
# OSU code.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
log() { printf '[osu] %s\n' "$*" >&2; }
die() { printf '[osu] error: %s\n' "$*" >&2; exit 1; }

fabric=0 max=1048576 iters="" out="" layout=2x2
while (($#)); do
  case $1 in
    --fabric) fabric=1; shift ;;
    --layout) layout=$2; shift 2 ;;
    --max) max=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

# 1. The user's OSU build.
[[ -n ${OMB_DIR:-} ]] || die "OMB_DIR is not set: point it at an OSU Micro-Benchmarks build
    (download it from https://mvapich.cse.ohio-state.edu/benchmarks/, then
     ./configure CC=mpicc CXX=mpicxx && make, and OMB_DIR=<that folder>)"
[[ -d $OMB_DIR ]] || die "OMB_DIR=$OMB_DIR is not a folder"
declare -A omb
missing=()
for b in osu_latency osu_bw osu_mbw_mr osu_allreduce; do
  p=$(find -L "$OMB_DIR" -maxdepth 7 -type f -name "$b" -perm -u+x 2>/dev/null | head -1)
  if [[ -n $p ]]; then omb[$b]=$p; else missing+=("$b"); fi
done
((${#missing[@]} == 0)) || die "OMB_DIR=$OMB_DIR is incomplete: ${missing[*]} not found (build c/mpi/pt2pt and c/mpi/collective)"
allreduce_help=$("${omb[osu_allreduce]}" --help 2>&1 || true)
grep -q -- '--validation' <<<"$allreduce_help" \
  || die "${omb[osu_allreduce]} has no -c (validation): use OSU Micro-Benchmarks 7.0 or later"
# Validate on MPI_INT: OSU's check of an MPI_CHAR sum (its default type)
# overflows a char with 4 ranks and reports Fail on the stock stacks too.
allreduce_opts=(-c)
grep -q -- '--type' <<<"$allreduce_help" && allreduce_opts+=(-T mpi_int)

install=${DOORBELL_INSTALL:-$root/install}
fabric_tool=$install/bin/doorbell-fabric
[[ -x $fabric_tool ]] || fabric_tool=$root/scripts/bin/doorbell-fabric
fabric_name=dbosu
# shellcheck source=fabric/stacks.sh
source "$root/scripts/fabric/stacks.sh"
mode=$([[ $fabric == 1 ]] && echo fabric || echo local)
iters=${iters:-$([[ $fabric == 1 ]] && echo 10 || echo 200)}
warmup=$(((iters + 9) / 10))
window=$([[ $fabric == 1 ]] && echo 16 || echo 64)

out=${out:-results/osu-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
{
  echo "mode=$mode"
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host=$(hostname) cores=$(nproc) kernel=$(uname -r)"
  echo "openmpi=$(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}')"
  echo "omb=$OMB_DIR iters=$iters warmup=$warmup window=$window max=$max"
  ((fabric)) && echo "layout=$layout ($layout_text)"
  stacks_env
} > "$out/env.txt"

cleanup() { if ((fabric)); then "$fabric_tool" --name "$fabric_name" -q down || true; fi; }
trap cleanup EXIT
trap 'exit 130' INT TERM
pair=()
if ((fabric)); then
  [[ $(id -u) == 0 ]] || die "--fabric needs root (network namespaces)"
  log "fabric: $layout_text, 2 spines, 200 Mb/s spine links"
  "$fabric_tool" --name "$fabric_name" up "${layout_up[@]}" --spines 2 >&2
  mapfile -t hosts < <("$fabric_tool" --name "$fabric_name" hosts)
  pair=(--host "${hosts[0]},${hosts[-1]}")   # leaf 1 to leaf 2: across the spine
fi

# One OSU run; its data lines become "<bench>,<bytes>,<value>". osu_allreduce
# -c adds a validation column: any "Fail" fails the run.
osu_run() {   # stack bench np binary args...
  local s=$1 bench=$2 np=$3 bin=$4; shift 4
  local raw=$out/$s.$bench.txt
  # shellcheck disable=SC2046
  if ! timeout -k 10 600 "${launch[@]}" -np "$np" "${common[@]}" $(stack_args "$s") "$@" "$bin" \
      -m "8:$max" -i "$iters" -x "$warmup" "${osu_extra[@]}" > "$raw" 2> "$out/$s.$bench.log"; then
    log "  $s $bench failed (see $out/$s.$bench.log)"
    return 1
  fi
  if grep -q Fail "$raw"; then
    log "  $s $bench: validation FAILED (see $raw)"
    return 1
  fi
  awk -v b="$bench" '/^[0-9]/ { printf "%s,%s,%s\n", b, $1, $2 }' "$raw" >> "$out/$s.csv"
  log "  $s $bench: $(awk '/^[0-9]/ {n++} END {print n+0}' "$raw") sizes"
}

i=0
for s in "${stacks[@]}"; do
  i=$((i + 1))
  : > "$out/$s.csv"
  if [[ $s == doorbell && $doorbell_state != present ]]; then
    log "[$i/${#stacks[@]}] $s: $doorbell_state"
    echo "# not built" > "$out/$s.csv"
    continue
  fi
  log "[$i/${#stacks[@]}] $s on $mode"
  ok=1
  osu_extra=();             osu_run "$s" latency 2 "${omb[osu_latency]}" "${pair[@]}" || ok=0
  osu_extra=(-W "$window"); osu_run "$s" bandwidth 2 "${omb[osu_bw]}" "${pair[@]}" || ok=0
  osu_extra=(-W "$window"); osu_run "$s" mbw_mr 4 "${omb[osu_mbw_mr]}" || ok=0
  osu_extra=("${allreduce_opts[@]}"); osu_run "$s" allreduce 4 "${omb[osu_allreduce]}" || ok=0
  if ((!ok)); then
    { echo "# failed"; cat "$out/$s.csv"; } > "$out/$s.csv.tmp" && mv "$out/$s.csv.tmp" "$out/$s.csv"
  fi
done

py=/usr/bin/python3
[[ -x $py ]] || py=python3
"$py" scripts/report/mpi_report.py "$out"
log "results in $out"
