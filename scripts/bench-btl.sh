#!/usr/bin/env bash
# Point-to-point benchmark of the doorbell btl on lo (a benchmark, not a test:
# it prints numbers). Two ranks on this host, doorbell-btl-bench latency
# (ping-pong, one way) and bandwidth (a window of 16 non-blocking sends, one
# acknowledgement), 8 B .. 1 MiB, each the median over its iterations, three
# stacks:
#   doorbell   the tune file, btls narrowed to self,doorbell over lo
#              (btl_doorbell_local 1): ob1 over the doorbell btl
#   ob1_tcp    pml ob1 over btl self,tcp on lo (plain mpirun between hosts)
#   ucx_tcp    pml ucx with UCX_TLS=tcp,self on lo
# The stacks take turns within every round (the first one rotates), so a burst
# of load on a shared host hits all of them; each cell is the median over the
# rounds with its min-max.
#   scripts/bench-btl.sh
#   BENCH_ROUNDS=N (5)  BENCH_ITERS=N (1000 ping-pongs per size; a quarter as
#   many windows, a quarter of both above 64 KiB)  DOORBELL_PREFIX=dir
# Run it under the machine-wide lock on a shared host:
#   flock /tmp/doorbell-heavy.lock scripts/bench-btl.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${DOORBELL_PREFIX:-$root/install}
rounds=${BENCH_ROUNDS:-5}
iters=${BENCH_ITERS:-1000}
tune=$prefix/share/doorbell/doorbell.tune
bench=$prefix/bin/doorbell-btl-bench
log() { printf '[bench-btl] %s\n' "$*" >&2; }
die() { printf '[bench-btl] error: %s\n' "$*" >&2; exit 1; }

[[ -f $tune && -x $bench && -f $prefix/lib/openmpi/mca_btl_doorbell.so ]] ||
  die "no installation with the btl in $prefix (run scripts/setup.sh)"

stacks=(doorbell ob1_tcp ucx_tcp)
stack_args() {
  case $1 in
    doorbell) echo "--tune $tune --mca btl self,doorbell --mca btl_doorbell_local 1 --mca btl_doorbell_if_include lo -x UCX_NET_DEVICES=lo" ;;
    ob1_tcp) echo "--mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo" ;;
    ucx_tcp) echo "--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca osc ^ucx -x UCX_TLS=tcp,self -x UCX_NET_DEVICES=lo" ;;
  esac
}

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 0; r < rounds; r++)); do
  for ((k = 0; k < ${#stacks[@]}; k++)); do
    s=${stacks[$(((r + k) % ${#stacks[@]}))]}
    log "round $((r + 1))/$rounds: $s"
    for what in latency bandwidth; do
      # shellcheck disable=SC2046
      timeout 600 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        mpirun -np 2 $(stack_args "$s") "$bench" --only "$what" --iters "$iters" \
        2>/dev/null | sed "s/^/$s,/" >> "$out/results.csv" ||
        die "$s $what failed"
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$out/results.csv" "$rounds" <<'EOF'
import collections, statistics, sys
cells = collections.defaultdict(list)
for line in open(sys.argv[1]):
    stack, what, size, value = line.strip().split(',')[:4]
    cells[(what, int(size), stack)].append(float(value))
stacks = ['doorbell', 'ob1_tcp', 'ucx_tcp']
for what, unit, better in (('latency', 'us, one way', min), ('bandwidth', 'MB/s', max)):
    print(f'\n{what} ({unit}): median of {sys.argv[2]} rounds [min-max] of each run\'s median')
    print(f'{"size":>8} ' + ' '.join(f'{s:>22}' for s in stacks) + f' {"doorbell/best other":>20}')
    for size in sorted({k[1] for k in cells if k[0] == what}):
        meds = {}
        row = f'{size:>8} '
        for s in stacks:
            v = cells.get((what, size, s), [])
            if not v:
                row += f'{"-":>22} '
                continue
            meds[s] = statistics.median(v)
            row += f'{meds[s]:>9.2f} [{min(v):.1f}-{max(v):.1f}]'.rjust(22) + ' '
        others = [meds[s] for s in stacks[1:] if s in meds]
        if 'doorbell' in meds and others:
            best = better(others)
            ratio = meds['doorbell'] / best if what == 'bandwidth' else best / meds['doorbell']
            row += f'{ratio:>19.2f}x'
        print(row)
print('\nratio: doorbell against the best other stack, > 1 = doorbell faster')
EOF
printf 'load average %s before, %s after (%s cores)\n' "$load_before" "$load_after" "$(nproc)"
