#!/usr/bin/env bash
# The OSU Micro-Benchmarks of a build you supply, on the stacks of the main
# job (scripts/fabric/stacks.sh: plain mpirun, pml ucx with sm,tcp, and
# doorbell's tune file), in the same layouts and alternating rounds, with the
# same table (medians [min-max] over the rounds, doorbell's speed against
# plain mpirun and the best stock stack), checks, plots and report in
# results/osu-<timestamp>/ (scripts/report/mpi_report.py).
#
# Benchmarks (--benches, default all):
#   latency (osu_latency), bandwidth (osu_bw), bibw (osu_bibw)     2 ranks
#   mbw_mr (osu_mbw_mr, 2 pairs), allreduce (osu_allreduce -c)    4 ranks
#   put_latency (osu_put_latency), get_bw (osu_get_bw),
#   acc_latency (osu_acc_latency -c): one-sided, OSU's defaults   2 ranks
# The 2-rank benchmarks run on two ranks of this host, or on the fabric on
# the first and the last host (under different leaves: across the spine).
# A benchmark that fails on a stack is marked failed in its cells and the
# round goes on: between hosts, Debian's Open MPI has no one-sided component
# by default (osc rdma needs a btl with RDMA and atomics, and
# /etc/openmpi/openmpi-mca-params.conf turns off osc ucx and pt2pt), so the
# one-sided benchmarks fail on the fabric for any stack that selects none:
# plain mpirun and ucx sm,tcp; the stacks pt2pt_tcp and ucx_osc are what a
# user can select instead; the tune file runs a window across hosts on osc
# pt2pt over the doorbell btl (doorbell_osc_rdma: on osc rdma over it).
#
#   OMB_DIR=/path/to/omb scripts/osu.sh            on this host
#   OMB_DIR=/path/to/omb scripts/osu.sh --fabric   across the emulated fabric (root)
# options:
#   --layout L      with --fabric: 2x2 (default: 2 hosts x 2 ranks, one
#                   host per leaf), 4x1 (4 hosts x 1 rank, two hosts per
#                   leaf), 2x3 (2 hosts x 3 ranks, one host per leaf) or
#                   3x2 (3 leaves, one host of 2 ranks each)
#   --rounds N      rounds of every stack (default 5; the checks want 5 or more)
#   --stacks LIST   stacks, comma-separated (default plain,ucx,doorbell; also
#                   ob1_tcp, ucx_tcp, pt2pt_tcp, ucx_osc, doorbell_osc_rdma)
#   --benches LIST  benchmarks, comma-separated (names above)
#   --max BYTES     largest message (default 1048576)
#   --iters N       iterations per size above 16 KiB (default 100 here, 10 on
#                   the fabric: a 1 MiB window crosses the 200 Mb/s spine in
#                   0.7 s)
#   --small-iters N iterations per size up to 16 KiB (default 1000 here, 200
#                   on the fabric: ten iterations of an 8-byte message are a
#                   hundred microseconds, and a single descheduled slice or a
#                   connection's start decided the size's figure)
#   --out DIR       results folder
#
# OMB_DIR is an OSU Micro-Benchmarks build or install tree (7.0 or later),
# built against this Open MPI (./configure CC=mpicc CXX=mpicxx && make).
# doorbell ships no OSU code.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$SECONDS harness_tag=osu
# shellcheck source=scripts/fabric/harness.sh
source "$root/scripts/fabric/harness.sh"

# bench -> "program ranks": every benchmark this script knows.
declare -A bench_prog=(
  [latency]="osu_latency 2" [bandwidth]="osu_bw 2" [bibw]="osu_bibw 2"
  [mbw_mr]="osu_mbw_mr 4" [allreduce]="osu_allreduce 4"
  [put_latency]="osu_put_latency 2" [get_bw]="osu_get_bw 2" [acc_latency]="osu_acc_latency 2"
)
bench_order=(latency bandwidth bibw mbw_mr allreduce put_latency get_bw acc_latency)

fabric=0 max=1048576 iters="" small_iters="" out="" layout="" rounds=5 stack_list="" bench_list=""
while (($#)); do
  case $1 in
    --fabric) fabric=1; shift ;;
    --layout|--rounds|--stacks|--benches|--max|--iters|--small-iters|--out)
      need_value "$@"
      case $1 in
        --layout) layout=$2 ;;
        --rounds) rounds=$2 ;;
        --stacks) stack_list=$2 ;;
        --benches) bench_list=$2 ;;
        --max) max=$2 ;;
        --iters) iters=$2 ;;
        --small-iters) small_iters=$2 ;;
        --out) out=$2 ;;
      esac
      shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
harness_check
[[ -z $iters ]] || in_range "$iters" 1 100000000 || die "--iters takes a whole number from 1 to 100000000, not '$iters'"
[[ -z $small_iters ]] || in_range "$small_iters" 1 100000000 \
  || die "--small-iters takes a whole number from 1 to 100000000, not '$small_iters'"
benches=("${bench_order[@]}")
if [[ -n $bench_list ]]; then
  IFS=, read -r -a benches <<<"$bench_list"
  for b in "${benches[@]}"; do
    [[ -n ${bench_prog[$b]:-} ]] || die "--benches: unknown benchmark '$b' (known: ${bench_order[*]})"
  done
fi

# 1. The stacks and the layout.
install=${DOORBELL_INSTALL:-$root/install}
fabric_tool=$install/bin/doorbell-fabric
[[ -x $fabric_tool ]] || fabric_tool=$root/scripts/bin/doorbell-fabric
fabric_name=${DOORBELL_FABRIC_NAME:-dbosu}
# shellcheck source=scripts/fabric/stacks.sh
source "$root/scripts/fabric/stacks.sh"
if [[ -n $stack_list ]]; then stacks_select "$stack_list" || die "--stacks: $stacks_error"; fi
layout_select || die "--layout: $stacks_error"
mode=$([[ $fabric == 1 ]] && echo fabric || echo local)

# 2. The user's OSU build.
[[ -n ${OMB_DIR:-} ]] || die "OMB_DIR is not set: point it at an OSU Micro-Benchmarks build
    (download it from https://mvapich.cse.ohio-state.edu/benchmarks/, then
     ./configure CC=mpicc CXX=mpicxx && make, and OMB_DIR=<that folder>)"
[[ -d $OMB_DIR ]] || die "OMB_DIR=$OMB_DIR is not a folder"
declare -A omb
missing=()
for b in "${benches[@]}"; do
  prog=${bench_prog[$b]% *}
  p=$(find -L "$OMB_DIR" -maxdepth 7 -type f -name "$prog" -perm -u+x 2>/dev/null | head -1)
  if [[ -n $p ]]; then omb[$b]=$p; else missing+=("$prog"); fi
done
((${#missing[@]} == 0)) || die "OMB_DIR=$OMB_DIR is incomplete: ${missing[*]} not found (build c/mpi/pt2pt, c/mpi/one-sided and c/mpi/collective)"
declare -A bench_opts
window=$([[ $fabric == 1 ]] && echo 16 || echo 64)
for b in bandwidth bibw mbw_mr get_bw; do bench_opts[$b]="-W $window"; done
if [[ -n ${omb[allreduce]:-} ]]; then
  allreduce_help=$("${omb[allreduce]}" --help 2>&1 || true)
  grep -q -- '--validation' <<<"$allreduce_help" \
    || die "${omb[allreduce]} has no -c (validation): use OSU Micro-Benchmarks 7.0 or later"
  # Validate on MPI_INT: OSU's check of an MPI_CHAR sum (its default type)
  # overflows a char with 4 ranks and expects it to wrap; Open MPI's op/avx
  # saturates it, so the stock stacks report Fail (docs/coll.md).
  bench_opts[allreduce]="-c"
  grep -q -- '--type' <<<"$allreduce_help" && bench_opts[allreduce]+=" -T mpi_int"
fi
if [[ -n ${omb[acc_latency]:-} ]]; then
  # validated: every accumulated value is checked (on MPI_INT, as allreduce)
  "${omb[acc_latency]}" --help 2>&1 | grep -q -- '--validation' \
    || die "${omb[acc_latency]} has no -c (validation): use OSU Micro-Benchmarks 7.0 or later"
  bench_opts[acc_latency]="-c -T mpi_int"
fi
iters=${iters:-$([[ $fabric == 1 ]] && echo 10 || echo 100)}
warmup=$(((iters + 9) / 10))
small_iters=${small_iters:-$([[ $fabric == 1 ]] && echo 200 || echo 1000)}
small_warmup=$(((small_iters + 9) / 10))
small_max=$((max < 16384 ? max : 16384))  # sizes up to this take small_iters

out=${out:-results/osu-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
{
  echo "suite=osu"
  harness_env
  most=0
  for b in "${benches[@]}"; do n=${bench_prog[$b]#* }; ((n > most)) && most=$n; done
  echo "ranks=$most"
  echo "commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "omb=$OMB_DIR"
  echo "iters=$iters"
  echo "warmup=$warmup"
  echo "small_iters=$small_iters (up to $small_max bytes)"
  echo "small_warmup=$small_warmup"
  echo "window=$window"
  echo "max=$max"
  echo "benches=$(IFS=,; echo "${benches[*]}")"
  stacks_env
} > "$out/env.txt"

cleanup() { if ((fabric)); then "$fabric_tool" --name "$fabric_name" -q down || true; fi; }
trap cleanup EXIT
trap 'exit 130' INT TERM
pair=()
if ((fabric)); then
  log "fabric: $layout_text, 2 spines, 200 Mb/s spine links"
  "$fabric_tool" --name "$fabric_name" up "${layout_up[@]}" --spines 2 >&2
  mapfile -t hosts < <("$fabric_tool" --name "$fabric_name" hosts)
  pair=(--host "${hosts[0]},${hosts[-1]}")   # leaf 1 to leaf 2: across the spine
fi

# One OSU run; its data lines become "<bench>,<bytes>,<value>" in the
# round's CSV, or a failure "# failed <bench>" (the sizes it finished are
# kept). Validation (-c) adds a column: any "Fail"/"failed" fails the benchmark.
osu_run() {   # stack round bench
  local s=$1 r=$2 b=$3 np=${bench_prog[$3]#* } where=() why=""
  local raw=$out/$s.r$r.$b.txt csv=$out/$s.r$r.csv
  ((np == 2)) && where=("${pair[@]}")
  # two runs: the small sizes with small_iters, the rest with iters (OSU
  # takes one count for every size)
  : > "$raw"
  local -a parts=("8:$small_max $small_iters $small_warmup")
  ((max > small_max)) && parts+=("$((small_max * 2)):$max $iters $warmup")
  local part sizes n w
  for part in "${parts[@]}"; do
    read -r sizes n w <<<"$part"
    # shellcheck disable=SC2046,SC2086
    if ! timeout -k 10 600 "${launch[@]}" -np "$np" "${common[@]}" $(stack_args "$s") "${where[@]}" "${omb[$b]}" \
        -m "$sizes" -i "$n" -x "$w" ${bench_opts[$b]:-} >> "$raw" 2>> "$out/$s.r$r.$b.log"; then
      why="failed (see $out/$s.r$r.$b.log)"
      break
    fi
  done
  if [[ -z $why ]] && grep -qi fail "$raw"; then
    why="validation FAILED (see $raw)"
  fi
  awk -v b="$b" '/^[0-9]/ && !/[Ff]ail/ { printf "%s,%s,%s\n", b, $1, $2 }' "$raw" >> "$csv"
  [[ -z $why ]] && return 0
  log "    $s $b: $why"
  echo "# failed $b" >> "$csv"
  return 1
}

n=${#stacks[@]}
for ((r = 1; r <= rounds; r++)); do
  log "round $r/$rounds ($layout_text), load $(loadavg)"
  for ((j = 0; j < n; j++)); do
    s=${stacks[$(((j + r - 1) % n))]}
    csv=$out/$s.r$r.csv
    : > "$csv"
    if [[ $s == doorbell && $doorbell_state != present ]]; then
      ((r > 1)) || log "  $s: $doorbell_state"
      echo "# not built" > "$csv"
      continue
    fi
    log "  round $r/$rounds, $s ($(stack_label "$s")), $layout_text: ${benches[*]}"
    before=$(loadavg) t0=$SECONDS failed=()
    for b in "${benches[@]}"; do osu_run "$s" "$r" "$b" || failed+=("$b"); done
    status=ok
    ((${#failed[@]} == 0)) || status=failed:$(IFS=,; echo "${failed[*]}")
    echo "round=$r stack=$s status=$status seconds=$((SECONDS - t0)) load_before=$before load_after=$(loadavg)" >> "$out/rounds.txt"
  done
done

py=/usr/bin/python3
[[ -x $py ]] || py=python3
"$py" scripts/report/mpi_report.py "$out"
log "results in $out"
